"""Indexing: subscripts (read and written), gather and index_select, and the index writes
(index_put, scatter, scatter_add) in both forms, with `IndexingMethods`."""

from __future__ import annotations

import numpy as np

from .. import _C, _core
from .._core import TensorBase, result, scalar, tensor_arg
from .._types import as_index, int64
from . import writes
from .creation import arange, tensor
from .shape import view
from .writes import encode, has_tensor, operand, returned


def getitem(input, key):
    """``input[key]``: ints, slices, None and ``...`` give a view; integer and bool tensors (or
    lists) a copy."""
    keep = []
    return result(_C.index(input._h, encode(key, input.device, keep)))


def setitem(input, key, value):
    """``input[key] = value``: any subscript ``input[key]`` takes, a value broadcast to its shape
    and converted to input's dtype, written into input's storage (its views see it)."""
    kt = type(key)
    s = None if isinstance(value, TensorBase) else scalar(value)
    # One element from ints, where autograd records nothing: written with no view made.
    if s is not None and (kt is int or (kt is tuple and len(key) <= 4 and all(type(i) is int for i in key))):
        items = key if kt is tuple else (key,)
        _, _, ndim, grad = input._info()
        if not grad and _core.rewrites:
            grad = input.requires_grad
        if len(items) == ndim and not (grad and _C.is_grad_enabled()):
            _C.set_element(input._h, items, *s)
            return
    keep = []
    encoded = encode(key, input.device, keep)
    if has_tensor(encoded):
        writes.index_put(input, encoded, operand(input, value, "__setitem__"), False, "__setitem__")
        return
    writes.write_at(input, encoded, None if s is not None else operand(input, value, "__setitem__"), s,
                    "__setitem__")


def _encoded_indices(t, indices, op, keep):
    """index_put's `indices` (a tuple) in the engine's encoding; tensors made here go in `keep`."""
    if not isinstance(indices, tuple):
        raise TypeError(f"{op}: indices must be a tuple, got {type(indices).__name__}")
    return encode(indices, t.device, keep)


def index_put_(input, indices, values, accumulate=False, *, op="index_put_"):
    """Writes `values` at ``input[indices]`` (adds them there with `accumulate`, repeated
    positions adding up), in place."""
    keep = []
    encoded = _encoded_indices(input, indices, op, keep)
    src = operand(input, values, op)
    if not accumulate and not has_tensor(encoded):
        return writes.write_at(input, encoded, src, None, op)
    return writes.index_put(input, encoded, src, accumulate, op)


def index_put(input, indices, values, accumulate=False):
    """A new tensor: `input` with `values` written at ``input[indices]`` (added there with
    `accumulate`), as ``index_put_`` on a copy; gradients flow to both."""
    tensor_arg(input, "index_put")
    keep = []
    encoded = _encoded_indices(input, indices, "index_put", keep)
    src = operand(input, values, "index_put")
    return result(_C.index_put(input._h, encoded, src._h, bool(accumulate)))


def _scatter_args(t, dim, index, src, value, op):
    """(indices, values) for index_put_ from scatter's arguments."""
    if src is None:
        src = value
    elif value is not None:
        raise TypeError(f"{op}: give src or value, not both")
    if src is None:
        raise TypeError(f"{op}: src (a tensor or a number) is required")
    index = tensor_arg(index, op, "index")
    if index.dtype != int64:
        raise TypeError(f"{op}: index must be int64, got {index.dtype}")
    d = t._wrap_dim(dim, op)
    if index.ndim != t.ndim:
        raise ValueError(f"{op}: index has {index.ndim} dimensions, self has {t.ndim}")
    for k, n in enumerate(index.shape):
        if k != d and n > t.shape[k]:
            raise ValueError(f"{op}: index is larger than self in dimension {k} ({n} > {t.shape[k]})")
    if isinstance(src, TensorBase):
        if src.ndim != t.ndim or any(n > m for n, m in zip(index.shape, src.shape)):
            raise ValueError(f"{op}: index of shape {tuple(index.shape)} is larger than src of shape "
                             f"{tuple(src.shape)}")
        src = src[tuple(slice(0, n) for n in index.shape)]
    positions = tuple(index if k == d else
                      view(arange(n, device=t.device), *(n if j == k else 1 for j in range(t.ndim)))
                      for k, n in enumerate(index.shape))
    return positions, src


def scatter_(input, dim, index, src=None, *, value=None, reduce=None):
    """Writes `src` (a tensor, or a number: also given as `value`) at the positions `index`
    names along `dim`: ``self[i][index[i][j][k]][k] = src[i][j][k]`` for dim 1. `index` is
    int64 with self's number of dimensions and no larger than self in any dimension but `dim`
    (nor than `src` in any); ``reduce="add"`` adds instead (repeated positions add up). Which
    of several writes to one position wins is undefined, as in PyTorch."""
    if reduce not in (None, "add"):
        raise ValueError(f"scatter_: reduce must be None or 'add', got {reduce!r}")
    return index_put_(input, *_scatter_args(input, dim, index, src, value, "scatter_"), accumulate=reduce == "add",
                      op="scatter_")


def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    """`scatter_` on a copy (differentiable in input and src)."""
    return scatter_(tensor_arg(input, "scatter").clone(), dim, index, src, value=value, reduce=reduce)


def scatter_add_(input, dim, index, src):
    """Adds `src` at the positions `index` names along `dim`, repeated positions adding up."""
    return index_put_(input, *_scatter_args(input, dim, index, src, None, "scatter_add_"), accumulate=True,
                      op="scatter_add_")


def scatter_add(input, dim, index, src):
    """`scatter_add_` on a copy (differentiable in input and src)."""
    return scatter_add_(tensor_arg(input, "scatter_add").clone(), dim, index, src)


def select(input, dim, index):
    """The view of the slice at `index` along `dim`, which goes away (``x[:, i]`` for dim 1)."""
    d = tensor_arg(input, "select")._wrap_dim(dim, "select")
    return getitem(input, (slice(None),) * d + (as_index(index),))


def index_select(input, dim, index, *, out=None):
    """Slices along `dim` at the positions in a 1-D integer tensor."""
    r = result(_C.index_select(tensor_arg(input, "index_select")._h, as_index(dim),
                               tensor_arg(index, "index_select", "index")._h))
    return returned(r, out, "index_select")


def gather(input, dim, index, *, out=None):
    """Values along `dim` at the positions in an index tensor of the output's shape."""
    r = result(_C.gather(tensor_arg(input, "gather")._h, as_index(dim), tensor_arg(index, "gather", "index")._h))
    return returned(r, out, "gather")


def nonzero(input, *, as_tuple=False):
    """The positions of the non-zero elements: an int64 ``[count, ndim]`` tensor, or with
    `as_tuple` one 1-D tensor per dimension."""
    t = tensor_arg(input, "nonzero")
    where_ = np.nonzero(t.numpy().reshape(t.shape or (1,)))
    if as_tuple:
        return tuple(tensor(w.astype(np.int64), device=t.device) for w in where_)
    return tensor(np.stack(where_, axis=1).astype(np.int64).reshape(-1, max(t.ndim, 1)), device=t.device)


def index_add_(input, dim, index, source, *, alpha=1):
    """Adds ``alpha * source`` at the positions `index` names along `dim` (repeated positions add
    up), in place: ``self[:, index[i]] += alpha * source[:, i]`` for dim 1."""
    t = tensor_arg(input, "index_add_")
    d = t._wrap_dim(dim, "index_add_")
    index = tensor_arg(index, "index_add_", "index")
    if index.ndim != 1 or index.dtype.is_floating_point:
        raise TypeError(f"index_add_: index must be a 1-D integer tensor, got {index.dtype} of shape "
                        f"{tuple(index.shape)}")
    src = operand(t, source, "index_add_")
    if alpha != 1:
        src = src * alpha
    # t[:, index] for dim 1: one tensor index keeps its dimension in place.
    return index_put_(t, (slice(None),) * d + (index,), src, accumulate=True, op="index_add_")


def index_add(input, dim, index, source, *, alpha=1):
    """`index_add_` on a copy (differentiable in input and source)."""
    return index_add_(tensor_arg(input, "index_add").clone(), dim, index, source, alpha=alpha)


class IndexingMethods:
    """Tensor's subscripts and index methods."""

    __slots__ = ()

    __getitem__, __setitem__ = getitem, setitem
    index_put_, index_put, scatter_, scatter, scatter_add_, scatter_add = (index_put_, index_put, scatter_, scatter,
                                                                           scatter_add_, scatter_add)
    select, index_select, gather, nonzero, index_add_, index_add = (select, index_select, gather, nonzero, index_add_,
                                                                    index_add)

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (getitem(self, i) for i in range(self.shape[0]))


__all__ = ["index_put", "scatter", "scatter_add", "select", "index_select", "gather", "nonzero", "index_add"]
