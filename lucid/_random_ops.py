"""Random integers and sampling (``randint``, ``multinomial``), and ``tril``/``triu``.

The random draws come from numpy generators seeded from the engine's stream, so
``lucid.manual_seed`` makes them reproducible like every other lucid random op.
"""

from __future__ import annotations

import numpy as np

from . import _creation
from ._functions import where
from ._tensor import Tensor
from ._types import as_index, check_dtype, int64


def _numpy_rng():
    high, low = (_creation.rand(2) * float(1 << 24)).numpy().astype(np.int64)
    return np.random.default_rng((int(high) << 24) | int(low))


def randint(low=0, high=None, size=None, *, dtype=None, device="cpu", requires_grad=False) -> Tensor:
    """Integers drawn uniformly from [low, high), as ``torch.randint(low, high, size)`` (or
    ``randint(high, size)``)."""
    if size is None:
        if high is None or not isinstance(high, (tuple, list)):
            raise TypeError("randint() needs a size: randint(high, size) or randint(low, high, size)")
        low, high, size = 0, low, high
    elif high is None:
        raise TypeError("randint() needs high")
    low, high = as_index(low), as_index(high)
    if high <= low:
        raise ValueError(f"randint(): high ({high}) must be greater than low ({low})")
    shape = tuple(as_index(s) for s in (size if isinstance(size, (tuple, list)) else (size,)))
    values = _numpy_rng().integers(low, high, size=shape, dtype=np.int64)
    return _creation.tensor(values, dtype=int64 if dtype is None else check_dtype(dtype), device=device,
                            requires_grad=requires_grad)


def multinomial(input: Tensor, num_samples: int, replacement: bool = False) -> Tensor:
    """Indices drawn from the categories weighted by each row of `input` ([n] or [rows, n],
    non-negative, not necessarily summing to 1), as ``torch.multinomial``."""
    if not isinstance(input, Tensor):
        raise TypeError(f"multinomial(): input must be a lucid.Tensor, got {type(input).__name__}")
    if input.ndim not in (1, 2):
        raise ValueError(f"multinomial(): expected a 1-D or 2-D input, got shape {tuple(input.shape)}")
    n = as_index(num_samples)
    weights = input.float().numpy().astype(np.float64)
    rows = weights.reshape(-1, weights.shape[-1])
    if n <= 0 or (not replacement and n > rows.shape[1]):
        raise ValueError(f"multinomial(): cannot draw {num_samples} samples from {rows.shape[1]} categories"
                         f"{'' if replacement else ' without replacement'}")
    if not np.isfinite(rows).all() or (rows < 0).any():
        raise ValueError("multinomial(): probabilities must be finite and non-negative")
    totals = rows.sum(1)
    if (totals <= 0).any():
        raise ValueError("multinomial(): every row needs a positive total")
    rng = _numpy_rng()
    drawn = np.stack([rng.choice(rows.shape[1], size=n, replace=replacement, p=r / t) for r, t in zip(rows, totals)])
    return _creation.tensor(drawn.reshape(weights.shape[:-1] + (n,)), dtype=int64, device=input.device)


def _band(input: Tensor, diagonal: int, lower: bool, fn: str) -> Tensor:
    if not isinstance(input, Tensor):
        raise TypeError(f"{fn}(): input must be a lucid.Tensor, got {type(input).__name__}")
    if input.ndim < 2:
        raise ValueError(f"{fn}(): expected a tensor of at least 2 dimensions, got shape {tuple(input.shape)}")
    rows, cols = input.shape[-2], input.shape[-1]
    r = _creation.arange(rows, device=input.device).reshape(rows, 1)
    c = _creation.arange(cols, device=input.device).reshape(1, cols)
    keep = (c - r) <= as_index(diagonal) if lower else (c - r) >= as_index(diagonal)
    return where(keep, input, 0)


def tril(input: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two dimensions (on and below `diagonal`), zeros above."""
    return _band(input, diagonal, True, "tril")


def triu(input: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two dimensions (on and above `diagonal`), zeros below."""
    return _band(input, diagonal, False, "triu")

__all__ = ["randint", "multinomial", "tril", "triu"]
