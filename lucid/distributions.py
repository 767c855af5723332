"""``lucid.distributions``, as ``torch.distributions``: the categorical distribution that
policy-gradient programs sample actions from."""

from __future__ import annotations

from ._core import TensorBase
from ._ops.composed import multinomial
from ._tensor import Tensor


class Categorical:
    """A categorical distribution over the last dimension's categories, given `probs`
    (non-negative, normalised here) or `logits` (unnormalised log-probabilities), batched over
    the other dimensions. ``log_prob`` and ``entropy`` are differentiable in them."""

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Categorical: give exactly one of probs and logits")
        given = probs if probs is not None else logits
        if not isinstance(given, TensorBase) or given.ndim < 1 or not given.dtype.is_floating_point:
            raise TypeError(
                f"Categorical: {'probs' if probs is not None else 'logits'} must be a floating tensor of "
                "at least one dimension"
            )
        if probs is not None:
            self.probs = probs / probs.sum(-1, keepdim=True)
            self.logits = self.probs.log()
        else:
            self.logits = logits.log_softmax(-1)
            self.probs = self.logits.exp()

    @property
    def batch_shape(self) -> tuple:
        return tuple(self.probs.shape[:-1])

    def sample(self, sample_shape=()) -> Tensor:
        """Category indices (int64) of shape ``sample_shape + batch_shape``."""
        sample_shape = tuple(sample_shape)
        n = 1
        for s in sample_shape:
            n *= s
        rows = self.probs.detach().reshape(-1, self.probs.shape[-1])
        drawn = multinomial(rows, n, replacement=True)  # [batch, n]
        return drawn.T.reshape(*(sample_shape + self.batch_shape))

    def log_prob(self, value) -> Tensor:
        """The log-probability of each category index in `value` (broadcast with the batch)."""
        if not isinstance(value, TensorBase) or value.dtype.is_floating_point:
            raise TypeError("Categorical.log_prob: value must be an integer tensor of category indices")
        logits = self.logits.expand(*(tuple(value.shape) + (self.logits.shape[-1],))) if value.ndim else self.logits
        return logits.gather(-1, value.unsqueeze(-1)).squeeze(-1)

    def entropy(self) -> Tensor:
        """``-sum(p * log p)`` over the categories (0 log 0 counted as 0)."""
        plogp = (self.probs * self.logits).masked_fill(self.probs == 0, 0.0)
        return -plogp.sum(-1)


__all__ = ["Categorical"]
