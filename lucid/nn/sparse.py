"""Embedding and EmbeddingBag."""

from __future__ import annotations


from .. import _grad_mode
from .._ops import creation as _creation
from .._types import check_dtype, float32
from . import functional as F
from .module import Module
from .parameter import Parameter
from .._types import as_index


class Embedding(Module):
    """A lookup table of ``num_embeddings`` vectors of size ``embedding_dim``, drawn from N(0, 1)
    (or ``_weight``); the ``padding_idx`` row starts at zero and receives no gradient. See
    ``functional.embedding`` for ``max_norm``, ``norm_type`` and ``scale_grad_by_freq``;
    ``_freeze`` makes the weight not require grad."""

    def __init__(
        self,
        num_embeddings,
        embedding_dim,
        padding_idx=None,
        max_norm=None,
        norm_type=2.0,
        scale_grad_by_freq=False,
        sparse=False,
        _weight=None,
        _freeze=False,
        device="cpu",
        dtype=None,
    ):
        super().__init__()
        self.num_embeddings, self.embedding_dim = as_index(num_embeddings), as_index(embedding_dim)
        if padding_idx is not None:
            padding_idx = as_index(padding_idx)
            if not -self.num_embeddings <= padding_idx < self.num_embeddings:
                raise ValueError(f"padding_idx {padding_idx} must be within num_embeddings ({num_embeddings})")
            padding_idx %= self.num_embeddings
        if sparse:
            raise NotImplementedError("Embedding: sparse=True (sparse gradients) is not supported")
        self.padding_idx = padding_idx
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = bool(scale_grad_by_freq), False
        if _weight is not None:
            if tuple(_weight.shape) != (self.num_embeddings, self.embedding_dim):
                raise ValueError(
                    f"Embedding: _weight must have shape ({self.num_embeddings}, "
                    f"{self.embedding_dim}), got {tuple(_weight.shape)}"
                )
            self.weight = Parameter(_weight.detach(), requires_grad=not _freeze)
            return
        w = _creation.randn(self.num_embeddings, self.embedding_dim)
        if padding_idx is not None:
            with _grad_mode.no_grad():
                rows = _creation.arange(self.num_embeddings).reshape(-1, 1)
                w = w.masked_fill(rows == padding_idx, 0.0)
        self.weight = Parameter(
            w.to(float32 if dtype is None else check_dtype(dtype)).to(device or "cpu"), requires_grad=not _freeze
        )

    def forward(self, x):
        return F.embedding(x, self.weight, self.padding_idx, self.max_norm, self.norm_type, self.scale_grad_by_freq)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        s += f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        s += f", max_norm={self.max_norm}" if self.max_norm is not None else ""
        return s + (", scale_grad_by_freq=True" if self.scale_grad_by_freq else "")


class EmbeddingBag(Module):
    """A lookup table of ``num_embeddings`` vectors of size ``embedding_dim`` (drawn from
    N(0, 1)) whose forward reduces each bag of looked-up rows with ``mode`` "sum", "mean" or
    "max" (see ``functional.embedding_bag``): ``forward(input, offsets=None,
    per_sample_weights=None)``. ``sparse=True`` is not supported."""

    def __init__(
        self,
        num_embeddings,
        embedding_dim,
        max_norm=None,
        norm_type=2.0,
        scale_grad_by_freq=False,
        mode="mean",
        sparse=False,
        _weight=None,
        include_last_offset=False,
        padding_idx=None,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.num_embeddings, self.embedding_dim = as_index(num_embeddings), as_index(embedding_dim)
        if mode not in ("sum", "mean", "max"):
            raise ValueError(f"EmbeddingBag: mode must be 'sum', 'mean' or 'max', got {mode!r}")
        if sparse:
            raise NotImplementedError("EmbeddingBag: sparse=True (sparse gradients) is not supported")
        if padding_idx is not None:
            padding_idx = as_index(padding_idx)
            if not -self.num_embeddings <= padding_idx < self.num_embeddings:
                raise ValueError(f"padding_idx {padding_idx} must be within num_embeddings ({num_embeddings})")
            padding_idx %= self.num_embeddings
        self.mode, self.include_last_offset, self.padding_idx = mode, bool(include_last_offset), padding_idx
        self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse = (
            max_norm,
            norm_type,
            bool(scale_grad_by_freq),
            False,
        )
        if _weight is not None:
            if tuple(_weight.shape) != (self.num_embeddings, self.embedding_dim):
                raise ValueError(
                    f"EmbeddingBag: _weight must have shape ({self.num_embeddings}, "
                    f"{self.embedding_dim}), got {tuple(_weight.shape)}"
                )
            self.weight = Parameter(_weight.detach())
            return
        w = _creation.randn(self.num_embeddings, self.embedding_dim)
        if padding_idx is not None:
            with _grad_mode.no_grad():
                rows = _creation.arange(self.num_embeddings).reshape(-1, 1)
                w = w.masked_fill(rows == padding_idx, 0.0)
        self.weight = Parameter(w.to(float32 if dtype is None else check_dtype(dtype)).to(device or "cpu"))

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(
            input,
            self.weight,
            offsets,
            self.max_norm,
            self.norm_type,
            self.scale_grad_by_freq,
            mode=self.mode,
            per_sample_weights=per_sample_weights,
            include_last_offset=self.include_last_offset,
            padding_idx=self.padding_idx,
        )

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}, mode={self.mode!r}"
        return s + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")
