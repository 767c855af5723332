"""Embedding."""

from __future__ import annotations


from .. import _grad_mode
from .._ops import creation as _creation
from .._types import check_dtype, float32
from . import functional as F
from .module import Module
from .parameter import Parameter
from .._types import as_index


class Embedding(Module):
    """A lookup table of ``num_embeddings`` vectors of size ``embedding_dim``, drawn from N(0, 1);
    the ``padding_idx`` row starts at zero and receives no gradient."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, device="cpu", dtype=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = as_index(num_embeddings), as_index(embedding_dim)
        if padding_idx is not None:
            padding_idx = as_index(padding_idx)
            if not -self.num_embeddings <= padding_idx < self.num_embeddings:
                raise ValueError(f"padding_idx {padding_idx} must be within num_embeddings ({num_embeddings})")
            padding_idx %= self.num_embeddings
        self.padding_idx = padding_idx
        w = _creation.randn(self.num_embeddings, self.embedding_dim)
        if padding_idx is not None:
            with _grad_mode.no_grad():
                rows = _creation.arange(self.num_embeddings).reshape(-1, 1)
                w = w.masked_fill(rows == padding_idx, 0.0)
        self.weight = Parameter(w.to(float32 if dtype is None else check_dtype(dtype)).to(device))

    def forward(self, x):
        return F.embedding(x, self.weight, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")
