"""``lucid.sparse``, as ``torch.sparse``: sparse COO tensors on the CPU (see
``lucid.sparse_coo_tensor`` for the subset there is)."""

from __future__ import annotations

from ._ops.sparse import SparseTensor, sparse_coo_tensor, spmm
from ._types import float32


def mm(mat1, mat2):
    """``mat1 @ mat2`` for a sparse ``mat1`` and a dense ``mat2``: a dense result."""
    return spmm(mat1, mat2)


def FloatTensor(indices, values, size=None):
    """PyTorch's legacy ``torch.sparse.FloatTensor(indices, values, size)``: a float32 sparse COO
    tensor."""
    return sparse_coo_tensor(indices, values, size, dtype=float32)


__all__ = ["SparseTensor", "sparse_coo_tensor", "mm", "FloatTensor"]
