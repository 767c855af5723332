"""Sparse COO tensors on the CPU: the narrow subset graph networks use.

A `SparseTensor` is a pair of dense tensors, the int64 ``indices`` (``[ndim, nnz]``) and the
``values`` (``[nnz]``), with a shape. It is made with ``sparse_coo_tensor`` or
``Tensor.to_sparse``, turned dense with ``to_dense``, summed over repeated positions with
``coalesce``, and multiplied into a dense matrix with ``spmm`` / ``mm`` / ``@``. Gradients
flow to the values and to the dense operand (PyTorch gives the sparse operand a sparse
gradient; here it reaches the ``values`` tensor, which is what a model learns). There is no
sparse autograd, no sparse-sparse arithmetic and no ``"metal"`` sparse tensor.
"""

from __future__ import annotations

import numpy as np

from .._core import TensorBase, int_tuple, tensor_arg
from .._types import as_device, check_dtype, int64
from .creation import tensor, zeros
from .indexing import getitem, index_put, index_select
from .shape import stack


def _cpu_only(device, fn):
    if as_device(device).type != "cpu":
        raise TypeError(
            f"{fn}: sparse tensors are CPU-only in lucid; make it on 'cpu' (the dense operands of spmm "
            "may not be on 'metal' either)"
        )


class SparseTensor:
    """A sparse COO matrix or tensor (see the module's notes)."""

    __slots__ = ("_indices", "_values", "_shape", "_coalesced")
    is_sparse = True
    layout = "sparse_coo"

    def __init__(self, indices, values, shape, coalesced=False):
        self._indices, self._values, self._shape, self._coalesced = indices, values, shape, coalesced

    # ---- what it is ---------------------------------------------------------------------------

    @property
    def shape(self) -> tuple:
        return self._shape

    def size(self, dim=None):
        return self._shape if dim is None else self._shape[dim]

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def dim(self) -> int:
        return self.ndim

    @property
    def dtype(self):
        return self._values.dtype

    @property
    def device(self):
        return self._values.device

    @property
    def is_cuda(self) -> bool:
        return False

    @property
    def requires_grad(self) -> bool:
        return self._values.requires_grad

    def indices(self):
        """The ``[ndim, nnz]`` int64 positions (of a coalesced tensor, as PyTorch requires)."""
        if not self._coalesced:
            raise RuntimeError("indices(): call coalesce() first, or use _indices() for the positions as given")
        return self._indices

    def values(self):
        """The ``[nnz]`` values (of a coalesced tensor, as PyTorch requires)."""
        if not self._coalesced:
            raise RuntimeError("values(): call coalesce() first, or use _values() for the values as given")
        return self._values

    def _nnz(self) -> int:
        return self._values.shape[0]

    def is_coalesced(self) -> bool:
        return self._coalesced

    def __repr__(self):
        return (
            f"sparse_coo_tensor(indices={self._indices.tolist()}, values={self._values!r}, size={self._shape}, "
            f"nnz={self._nnz()})"
        )

    # ---- conversions ------------------------------------------------------------------------------

    def coalesce(self):
        """The same tensor with its positions sorted and each one once (repeated ones summed)."""
        if self._coalesced:
            return self
        flat = np.ravel_multi_index(tuple(self._indices.numpy()), self._shape) if self._nnz() else np.zeros(0, np.int64)
        unique, slot = np.unique(flat, return_inverse=True)
        positions = tensor(np.stack(np.unravel_index(unique, self._shape)).astype(np.int64).reshape(self.ndim, -1))
        summed = index_put(
            zeros(len(unique), dtype=self.dtype), (tensor(slot.astype(np.int64)),), self._values, accumulate=True
        )
        return SparseTensor(positions, summed, self._shape, coalesced=True)

    def to_dense(self):
        """The dense tensor (repeated positions add up); differentiable in the values."""
        dense = zeros(*self._shape, dtype=self.dtype)
        positions = tuple(getitem(self._indices, d) for d in range(self.ndim))
        return index_put(dense, positions, self._values, accumulate=True)

    def t(self):
        """The transpose of a sparse matrix."""
        if self.ndim != 2:
            raise RuntimeError(f"t() expects a sparse matrix, got {self.ndim} dimensions")
        swapped = stack([getitem(self._indices, 1), getitem(self._indices, 0)])
        return SparseTensor(swapped, self._values, (self._shape[1], self._shape[0]))

    # ---- products -----------------------------------------------------------------------------------

    def __matmul__(self, other):
        if not isinstance(other, TensorBase):
            return NotImplemented
        return spmm(self, other)

    def __rmatmul__(self, other):
        if not isinstance(other, TensorBase):
            return NotImplemented
        if other.ndim != 2:
            raise RuntimeError(f"dense @ sparse: expected a matrix, got shape {tuple(other.shape)}")
        return spmm(self.t(), other.t()).t()

    def mm(self, other):
        return spmm(self, other)


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, requires_grad=False):
    """A sparse COO tensor with `values` at `indices` (``[ndim, nnz]`` integers); `size` defaults
    to the smallest that holds them."""
    _cpu_only(device, "sparse_coo_tensor")
    idx = indices if isinstance(indices, TensorBase) else tensor(indices)
    if idx.dtype.is_floating_point or idx.ndim != 2:
        raise TypeError(
            f"sparse_coo_tensor: indices must be integers of shape [ndim, nnz], got {idx.dtype} of shape "
            f"{tuple(idx.shape)}"
        )
    idx = idx.to(int64)
    vals = values if isinstance(values, TensorBase) else tensor(values)
    if dtype is not None:
        vals = vals.to(check_dtype(dtype))
    _cpu_only(vals.device, "sparse_coo_tensor")
    if vals.ndim != 1 or vals.shape[0] != idx.shape[1]:
        raise ValueError(
            f"sparse_coo_tensor: values must be 1-D with one value per position ({idx.shape[1]}), got "
            f"shape {tuple(vals.shape)}"
        )
    positions = idx.numpy()
    if (positions < 0).any():
        raise ValueError("sparse_coo_tensor: indices must be non-negative")
    if size is None:
        size = tuple(int(m) + 1 for m in positions.max(1)) if positions.size else (0,) * idx.shape[0]
    size = int_tuple(size, "sparse_coo_tensor: size")
    if len(size) != idx.shape[0]:
        raise ValueError(f"sparse_coo_tensor: {idx.shape[0]} index rows for a size of {len(size)} dimensions")
    if positions.size and (positions.max(1) >= np.array(size)).any():
        raise ValueError(f"sparse_coo_tensor: an index is out of bounds for size {size}")
    if requires_grad:
        vals = vals.detach().requires_grad_(True)
    return SparseTensor(idx, vals, size)


def to_sparse(input, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    """The sparse COO tensor of a dense one's non-zero elements (differentiable in its values).
    Every dimension is sparse: ``sparse_dim`` (or ``dense_dim``) asking for a hybrid tensor with
    dense trailing dimensions, and layouts other than COO, raise NotImplementedError."""
    t = tensor_arg(input, "to_sparse")
    if layout not in (None, "sparse_coo") or blocksize is not None:
        raise NotImplementedError(
            f"to_sparse: lucid has sparse COO tensors only, got layout={layout!r}"
            f"{'' if blocksize is None else f', blocksize={blocksize!r}'}"
        )
    sparse = t.ndim if sparse_dim is None else int_tuple((sparse_dim,), "to_sparse: sparse_dim")[0]
    if dense_dim not in (None, 0) or sparse != t.ndim:
        raise NotImplementedError(
            f"to_sparse: lucid's sparse tensors have every dimension sparse (sparse_dim "
            f"{t.ndim} for shape {tuple(t.shape)}); got sparse_dim={sparse_dim!r}, "
            f"dense_dim={dense_dim!r}"
        )
    _cpu_only(t.device, "to_sparse")
    positions = np.stack(np.nonzero(t.numpy())).astype(np.int64).reshape(t.ndim, -1)
    idx = tensor(positions)
    values = getitem(t, tuple(getitem(idx, d) for d in range(t.ndim)))
    return SparseTensor(idx, values, tuple(t.shape), coalesced=True)


def spmm(sparse, dense):
    """``sparse @ dense`` for a sparse ``[n, m]`` matrix and a dense ``[m]`` or ``[m, k]`` tensor:
    a dense result, differentiable in the values and in `dense`."""
    if not isinstance(sparse, SparseTensor):
        raise TypeError(f"spmm(): expected a sparse matrix first, got {type(sparse).__name__}")
    tensor_arg(dense, "spmm", "dense")
    _cpu_only(dense.device, "spmm")
    if sparse.ndim != 2 or dense.ndim not in (1, 2) or dense.shape[0] != sparse.shape[1]:
        raise RuntimeError(f"spmm(): cannot multiply a sparse {sparse.shape} by a dense {tuple(dense.shape)}")
    rows, cols = getitem(sparse._indices, 0), getitem(sparse._indices, 1)
    picked = index_select(dense, 0, cols)  # [nnz, k]
    weights = sparse._values if dense.ndim == 1 else sparse._values.view(-1, 1)
    out = zeros(*((sparse.shape[0],) + tuple(dense.shape[1:])), dtype=picked.dtype)
    return index_put(out, (rows,), picked * weights, accumulate=True)


class SparseMethods:
    """Tensor's conversion to sparse."""

    __slots__ = ()

    to_sparse = to_sparse


__all__ = ["sparse_coo_tensor", "spmm"]
