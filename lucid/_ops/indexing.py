"""Indexing: subscripts (read and written), gather and index_select, and the index writes
(index_put, scatter, scatter_add) in both forms, with `IndexingMethods`."""

from __future__ import annotations

import builtins

import numpy as np

from .. import _C, _core
from .._core import TensorBase, int_tuple, result, scalar, tensor_arg
from .._types import as_index, bool_, int64
from . import writes
from .creation import arange, full, tensor
from .elementwise import masked_fill as _masked_fill, where
from .reduce import amax as _amax, amin as _amin, sum as _sum
from .shape import broadcast_shapes, cat, expand, narrow, reshape, view
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
    writes.write_at(input, encoded, None if s is not None else operand(input, value, "__setitem__"), s, "__setitem__")


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


def _long_index(index, op, what="index"):
    """`index` as int64 (int32 is taken too, as in PyTorch); TypeError for other dtypes."""
    index = tensor_arg(index, op, what)
    if index.dtype.is_floating_point or index.dtype is bool_:
        raise TypeError(f"{op}: {what} must be an int64 or int32 tensor, got {index.dtype}")
    return index if index.dtype is int64 else index.to(int64)


def _scatter_args(t, dim, index, src, value, op):
    """(indices, values) for index_put_ from scatter's arguments."""
    if src is None:
        src = value
    elif value is not None:
        raise TypeError(f"{op}: give src or value, not both")
    if src is None:
        raise TypeError(f"{op}: src (a tensor or a number) is required")
    index = _long_index(index, op)
    d = t._wrap_dim(dim, op)
    if index.ndim != t.ndim:
        raise ValueError(f"{op}: index has {index.ndim} dimensions, self has {t.ndim}")
    for k, n in enumerate(index.shape):
        if k != d and n > t.shape[k]:
            raise ValueError(f"{op}: index is larger than self in dimension {k} ({n} > {t.shape[k]})")
    if isinstance(src, TensorBase):
        if src.ndim != t.ndim or any(n > m for n, m in zip(index.shape, src.shape)):
            raise ValueError(
                f"{op}: index of shape {tuple(index.shape)} is larger than src of shape {tuple(src.shape)}"
            )
        src = src[tuple(slice(0, n) for n in index.shape)]
    positions = tuple(
        index if k == d else view(arange(n, device=t.device), *(n if j == k else 1 for j in range(t.ndim)))
        for k, n in enumerate(index.shape)
    )
    return positions, src


def scatter_(input, dim, index, src=None, *, value=None, reduce=None):
    """Writes `src` (a tensor, or a number: also given as `value`) at the positions `index`
    names along `dim`: ``self[i][index[i][j][k]][k] = src[i][j][k]`` for dim 1. `index` is
    an integer tensor with self's number of dimensions and no larger than self in any dimension
    but `dim` (nor than `src` in any); ``reduce="add"`` adds instead (repeated positions add
    up), ``reduce="multiply"`` multiplies. Which of several writes to one position wins is
    undefined, as in PyTorch."""
    if reduce not in (None, "add", "multiply"):
        raise ValueError(f"scatter_: reduce must be None, 'add' or 'multiply', got {reduce!r}")
    if reduce == "multiply":
        t = tensor_arg(input, "scatter_")
        idx = _long_index(index, "scatter_")
        _, values = _scatter_args(t, dim, idx, src, value, "scatter_")
        values = operand(t, values, "scatter_")
        if values.ndim == 0:
            values = expand(values, tuple(idx.shape))
        out = _scatter_reduce(writes.source(t, values), dim, idx, values, "prod", True, "scatter_")
        return writes.assign(t, out, "scatter_", result=True)
    return index_put_(
        input, *_scatter_args(input, dim, index, src, value, "scatter_"), accumulate=reduce == "add", op="scatter_"
    )


def scatter(input, dim, index, src=None, *, value=None, reduce=None, out=None):
    """`scatter_` on a copy (differentiable in input and src)."""
    r = scatter_(tensor_arg(input, "scatter").clone(), dim, index, src, value=value, reduce=reduce)
    return returned(r, out, "scatter")


def scatter_add_(input, dim, index, src):
    """Adds `src` at the positions `index` names along `dim`, repeated positions adding up."""
    return index_put_(
        input, *_scatter_args(input, dim, index, src, None, "scatter_add_"), accumulate=True, op="scatter_add_"
    )


def scatter_add(input, dim, index, src):
    """`scatter_add_` on a copy (differentiable in input and src)."""
    return scatter_add_(tensor_arg(input, "scatter_add").clone(), dim, index, src)


def select(input, dim, index):
    """The view of the slice at `index` along `dim`, which goes away (``x[:, i]`` for dim 1)."""
    d = tensor_arg(input, "select")._wrap_dim(dim, "select")
    return getitem(input, (slice(None),) * d + (as_index(index),))


def index_select(input, dim, index, *, out=None):
    """Slices along `dim` at the positions in a 1-D integer tensor."""
    r = result(
        _C.index_select(
            tensor_arg(input, "index_select")._h, as_index(dim), tensor_arg(index, "index_select", "index")._h
        )
    )
    return returned(r, out, "index_select")


def gather(input, dim, index, *, out=None):
    """Values along `dim` at the positions in an index tensor of the output's shape. An empty
    index gives an empty result of its shape whatever its number of dimensions (PyTorch checks
    the index's shape against the input's only when it has entries)."""
    index = _long_index(index, "gather")
    t = tensor_arg(input, "gather")
    if index.numel() == 0:
        d, nd = as_index(dim), builtins.max(t.ndim, 1)
        if not -nd <= d < nd:
            raise IndexError(f"gather: dim {dim} is out of range for a tensor of {t.ndim} dimensions")
        # An empty slice of the input: in its graph, with a (zero) gradient.
        return returned(reshape(narrow(reshape(t, -1), 0, 0, 0), *index.shape), out, "gather")
    r = result(_C.gather(t._h, as_index(dim), index._h))
    return returned(r, out, "gather")


def _nonzero_rows(t):
    """The positions of t's non-zero elements as an int64 ``(count, ndim)`` array (a 0-d
    tensor has one position with no coordinates when it is non-zero)."""
    a = t.numpy()
    if t.ndim == 0:
        return np.zeros((int(a != 0), 0), dtype=np.int64)
    return np.stack(np.nonzero(a), axis=1).astype(np.int64).reshape(-1, t.ndim)


def nonzero(input, *, out=None, as_tuple=False):
    """The positions of the non-zero elements: an int64 ``(count, ndim)`` tensor (``(1, 0)`` or
    ``(0, 0)`` for a 0-d tensor), or with `as_tuple` one 1-D tensor per dimension (one for a
    0-d tensor)."""
    t = tensor_arg(input, "nonzero")
    if as_tuple:
        if out is not None:
            raise TypeError("nonzero(): out= is not supported with as_tuple=True")
        where_ = np.nonzero(t.numpy().reshape(t.shape or (1,)))
        return tuple(tensor(w.astype(np.int64), device=t.device) for w in where_)
    return returned(tensor(_nonzero_rows(t), device=t.device), out, "nonzero")


def argwhere(input):
    """The positions of the non-zero elements, as an int64 ``(count, ndim)`` tensor."""
    return nonzero(tensor_arg(input, "argwhere"))


def nonzero_static(input, *, size, fill_value=-1):
    """``nonzero(input)`` of exactly `size` rows: the first ones, padded with `fill_value`."""
    t = tensor_arg(input, "nonzero_static")
    size = as_index(size)
    if size < 0:
        raise RuntimeError(f"nonzero_static: size must be non-negative, got {size}")
    rows = _nonzero_rows(t)[:size]
    padded = np.full((size, t.ndim), as_index(fill_value), dtype=np.int64)
    padded[: len(rows)] = rows
    return tensor(padded, device=t.device)


def _index_args(t, dim, index, op):
    """(dim wrapped, int64 1-D index) of the index_* ops; a 0-d `t` counts as of one dimension."""
    d = _C.wrap_dim(as_index(dim), max(t.ndim, 1), op)
    index = _long_index(index, op)
    if index.ndim > 1:
        raise IndexError(f"{op}: index must be a 1-D (or 0-d) tensor, got shape {tuple(index.shape)}")
    return d, reshape(index, -1)


def _as_1d(t):
    return view(t, 1) if t.ndim == 0 else t


def _check_source(t, d, index, source, op):
    shape = list(_as_1d(t).shape)
    shape[d] = index.shape[0]
    got = list(_as_1d(source).shape)
    if got != shape:
        raise RuntimeError(
            f"{op}: source of shape {tuple(source.shape)} where the index of {index.shape[0]} "
            f"entries along dimension {d} of self {tuple(t.shape)} needs shape {tuple(shape)}"
        )


def index_add_(input, dim, index, source, *, alpha=1):
    """Adds ``alpha * source`` at the positions `index` names along `dim` (repeated positions add
    up), in place: ``self[:, index[i]] += alpha * source[:, i]`` for dim 1."""
    t = tensor_arg(input, "index_add_")
    d, index = _index_args(t, dim, index, "index_add_")
    src = operand(t, source, "index_add_")
    _check_source(t, d, index, src, "index_add_")
    if alpha != 1:
        src = src * alpha
    # t[:, index] for dim 1: one tensor index keeps its dimension in place.
    index_put_(_as_1d(t), (slice(None),) * d + (index,), _as_1d(src), accumulate=True, op="index_add_")
    return t


def index_add(input, dim, index, source, *, alpha=1, out=None):
    """`index_add_` on a copy (differentiable in input and source)."""
    r = index_add_(tensor_arg(input, "index_add").clone(), dim, index, source, alpha=alpha)
    return returned(r, out, "index_add")


def index_copy_(input, dim, index, source):
    """Writes the slices of `source` at the positions `index` names along `dim`, in place:
    ``self[:, index[i]] = source[:, i]`` for dim 1 (of repeated positions, one write wins)."""
    t = tensor_arg(input, "index_copy_")
    d, index = _index_args(t, dim, index, "index_copy_")
    src = operand(t, source, "index_copy_")
    _check_source(t, d, index, src, "index_copy_")
    index_put_(_as_1d(t), (slice(None),) * d + (index,), _as_1d(src), op="index_copy_")
    return t


def index_copy(input, dim, index, source, *, out=None):
    """`index_copy_` on a copy (differentiable in input and source)."""
    return returned(index_copy_(tensor_arg(input, "index_copy").clone(), dim, index, source), out, "index_copy")


def index_fill_(input, dim, index, value):
    """Sets the slices at the positions `index` names along `dim` to `value` (a number or a 0-d
    tensor), in place."""
    t = tensor_arg(input, "index_fill_")
    d, index = _index_args(t, dim, index, "index_fill_")
    if isinstance(value, TensorBase) and value.ndim != 0:
        raise RuntimeError(f"index_fill_: value must be a number or a 0-d tensor, got shape {tuple(value.shape)}")
    v = operand(t, value, "index_fill_")
    index_put_(_as_1d(t), (slice(None),) * d + (index,), v, op="index_fill_")
    return t


def index_fill(input, dim, index, value):
    """`index_fill_` on a copy (differentiable in input, and in value when it is a tensor)."""
    return index_fill_(tensor_arg(input, "index_fill").clone(), dim, index, value)


_REDUCES = ("sum", "prod", "mean", "amax", "amin")


def _scatter_reduce(t, dim, index, src, reduce, include_self, op):
    """A new tensor: `t` with the elements of `src` reduced into the positions `index` names
    along `dim` (index and src as for scatter; include_self: t's own value takes part).

    Each position's contributions are laid out in a row of a dense (positions, k) tensor, padded
    with the reduction's identity, by one differentiable index_put; reducing the rows then gives
    every reduction its own gradient, ties of amax/amin split evenly as in PyTorch."""
    if reduce not in _REDUCES:
        raise ValueError(f"{op}: reduce must be one of {', '.join(_REDUCES)}, got {reduce!r}")
    if not isinstance(src, TensorBase):
        raise TypeError(f"{op}: src must be a lucid.Tensor, got {type(src).__name__}")
    if src.dtype != t.dtype:
        raise RuntimeError(f"{op}: expected self and src to have the same dtype, got {t.dtype} and {src.dtype}")
    base, index, src = _as_1d(t), (view(index, 1) if index.ndim == 0 else index), _as_1d(src)
    positions, values = _scatter_args(base, dim, index, src, None, op)
    idx = index.numpy()
    d = base._wrap_dim(dim, op)
    n = base.shape[d]
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise IndexError(
            f"{op}: index {int(idx.max() if idx.max() >= n else idx.min())} is out of bounds for "
            f"dimension {d} with size {n}"
        )
    if idx.size == 0:
        return t.clone()
    coords = list(np.indices(idx.shape))
    coords[d] = idx % n
    target = np.ravel_multi_index(coords, base.shape).reshape(-1).astype(np.int64)
    count = base.numel()
    order = np.argsort(target, kind="stable")
    ranked = target[order]
    slot = np.empty_like(target)
    slot[order] = np.arange(len(ranked)) - np.searchsorted(ranked, ranked, side="left")
    hits = np.bincount(target, minlength=count)
    floating = t.dtype.is_floating_point
    info = None if floating else np.iinfo(t.dtype.numpy)
    pad = {
        "sum": 0,
        "mean": 0,
        "prod": 1,
        "amax": -np.inf if floating else int(info.min),
        "amin": np.inf if floating else int(info.max),
    }[reduce]
    dense = full((count, int(slot.max()) + 1), pad, dtype=t.dtype, device=t.device)
    rows, cols = tensor(target, device=t.device), tensor(slot, device=t.device)
    dense = index_put(dense, (rows, cols), reshape(values, -1))
    own = reshape(base, count, 1)
    if include_self:
        dense = cat([own, dense], 1)
    if reduce in ("sum", "mean"):
        reduced = _sum(dense, 1)
        if reduce == "mean":
            divisor = tensor(np.maximum(hits + bool(include_self), 1), device=t.device)
            # integers divide rounding down, as PyTorch's (they carry no gradient)
            reduced = (
                reduced / divisor
                if floating
                else tensor(
                    np.floor_divide(reduced.numpy(), divisor.numpy()).astype(reduced.dtype.numpy), device=t.device
                )
            )
    elif reduce == "prod":
        columns = [narrow(dense, 1, k, 1) for k in range(dense.shape[1])]
        reduced = columns[0]
        for c in columns[1:]:
            reduced = reduced * c
        reduced = reshape(reduced, count)
    else:
        reduced = (_amax if reduce == "amax" else _amin)(dense, 1)
    reached = tensor(hits > 0, device=t.device)
    return reshape(where(reached, reduced, reshape(base, count)), *t.shape)


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True, out=None):
    """A new tensor: `input` with the elements of `src` reduced into the positions `index` names
    along `dim` (as scatter places them), by ``reduce`` ("sum", "prod", "mean", "amax" or
    "amin"); with ``include_self`` the value already there takes part. Positions nothing is
    scattered to keep input's value. Differentiable in input and src."""
    t = tensor_arg(input, "scatter_reduce")
    r = _scatter_reduce(t, dim, _long_index(index, "scatter_reduce"), src, reduce, include_self, "scatter_reduce")
    return returned(r, out, "scatter_reduce")


def scatter_reduce_(input, dim, index, src, reduce, *, include_self=True):
    """`scatter_reduce`, written into `input`."""
    t = tensor_arg(input, "scatter_reduce_")
    r = _scatter_reduce(
        writes.source(t, src), dim, _long_index(index, "scatter_reduce_"), src, reduce, include_self, "scatter_reduce_"
    )
    return writes.assign(t, r, "scatter_reduce_", result=True)


def index_reduce(input, dim, index, source, reduce, *, include_self=True, out=None):
    """A new tensor: `input` with the slices of `source` reduced into the slices `index` names
    along `dim` (``self[:, index[i]] ∘= source[:, i]`` for dim 1), by ``reduce`` ("prod",
    "mean", "amax" or "amin"); with ``include_self`` the slice already there takes part."""
    t = tensor_arg(input, "index_reduce")
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise ValueError(f"index_reduce: reduce must be one of prod, mean, amax, amin, got {reduce!r}")
    d, index = _index_args(t, dim, index, "index_reduce")
    src = tensor_arg(source, "index_reduce", "source")
    _check_source(t, d, index, src, "index_reduce")
    src1 = _as_1d(src)
    spread = expand(reshape(index, *[index.shape[0] if k == d else 1 for k in range(src1.ndim)]), tuple(src1.shape))
    r = _scatter_reduce(t, d, spread, src, reduce, include_self, "index_reduce")
    return returned(r, out, "index_reduce")


def index_reduce_(input, dim, index, source, reduce, *, include_self=True):
    """`index_reduce`, written into `input`."""
    t = tensor_arg(input, "index_reduce_")
    r = index_reduce(writes.source(t, source), dim, index, source, reduce, include_self=include_self)
    return writes.assign(t, r, "index_reduce_", result=True)


def masked_fill(input, mask, value):
    """A new tensor: `input` with `value` (a number or a 0-d tensor) where the bool `mask`
    is true (both broadcast); differentiable in input and a tensor value."""
    t = tensor_arg(input, "masked_fill")
    mask = tensor_arg(mask, "masked_fill", "mask")
    if mask.dtype is not bool_:
        raise TypeError(f"masked_fill: mask must be a bool tensor, got {mask.dtype}")
    if isinstance(value, TensorBase) and value.ndim != 0:
        raise RuntimeError(f"masked_fill: value must be a number or a 0-d tensor, got shape {tuple(value.shape)}")
    if isinstance(value, TensorBase) and value.dtype != t.dtype:
        value = value.to(t.dtype)
    return _masked_fill(t, mask, value)


def _broadcast_pair(t, mask, op):
    mask = tensor_arg(mask, op, "mask")
    if mask.dtype is not bool_:
        raise TypeError(f"{op}: mask must be a bool tensor, got {mask.dtype}")
    try:
        shape = broadcast_shapes(t.shape, mask.shape)
    except RuntimeError:
        raise RuntimeError(
            f"{op}: mask of shape {tuple(mask.shape)} does not broadcast with self of shape {tuple(t.shape)}"
        ) from None
    return expand(t, shape), expand(mask, shape)


def masked_scatter(input, mask, source):
    """A new tensor: `input` (broadcast with the bool `mask`) with the first elements of
    `source`, in row-major order, written where `mask` is true. Differentiable in both."""
    t = tensor_arg(input, "masked_scatter")
    src = tensor_arg(source, "masked_scatter", "source")
    if src.dtype != t.dtype:
        raise RuntimeError(f"masked_scatter: expected source of dtype {t.dtype}, got {src.dtype}")
    te, me = _broadcast_pair(t, mask, "masked_scatter")
    count = int(me.numpy().sum())
    if count > src.numel():
        raise RuntimeError(f"masked_scatter: the mask has {count} true elements but source only {src.numel()}")
    values = narrow(reshape(src, -1), 0, 0, count)
    return index_put(te, (me,), values)


def masked_scatter_(input, mask, source):
    """`masked_scatter`, written into `input` (whose shape the mask must broadcast to)."""
    t = tensor_arg(input, "masked_scatter_")
    r = masked_scatter(writes.source(t, source), mask, source)
    if tuple(r.shape) != tuple(t.shape):
        raise RuntimeError(
            f"masked_scatter_: mask of shape {tuple(mask.shape)} broadcasts self of shape "
            f"{tuple(t.shape)} to {tuple(r.shape)}"
        )
    return writes.assign(t, r, "masked_scatter_", result=True)


def masked_select(input, mask, *, out=None):
    """The elements of `input` (broadcast with the bool `mask`) where `mask` is true, as a
    1-D tensor in row-major order."""
    t = tensor_arg(input, "masked_select")
    te, me = _broadcast_pair(t, mask, "masked_select")
    if te.ndim == 0:
        te, me = view(te, 1), view(me, 1)
    return returned(getitem(te, me), out, "masked_select")


def take(input, index, *, out=None):
    """The elements of `input`, seen as 1-D in row-major order, at the positions in `index`
    (negative ones count from the end), in index's shape."""
    t = tensor_arg(input, "take")
    index = _long_index(index, "take")
    flat = reshape(t, -1)
    n = flat.shape[0]
    i = reshape(index, -1)
    if i.numel():
        a = i.numpy()
        if a.min() < -n or a.max() >= n:
            raise IndexError(
                f"take(): index {int(a.max() if a.max() >= n else a.min())} is out of range for a tensor "
                f"of {n} elements"
            )
    return returned(reshape(getitem(flat, i), *index.shape), out, "take")


def take_along_dim(input, indices, dim=None, *, out=None):
    """Values of `input` at the positions `indices` names along `dim` (both broadcast in the
    other dimensions; negative positions count from the end), as gather; without `dim`, of the
    flattened input."""
    t = tensor_arg(input, "take_along_dim")
    idx = _long_index(indices, "take_along_dim", "indices")
    if dim is None:
        return returned(take(t, reshape(idx, -1)), out, "take_along_dim")
    if t.ndim != idx.ndim:
        raise RuntimeError(
            f"take_along_dim: input ({t.ndim} dimensions) and indices ({idx.ndim}) should have the "
            "same number of dimensions"
        )
    d = t._wrap_dim(dim, "take_along_dim")
    one = lambda s: tuple(1 if k == d else n for k, n in enumerate(s))  # noqa: E731
    shape = list(broadcast_shapes(one(t.shape), one(idx.shape)))
    te = expand(t, tuple(t.shape[d] if k == d else n for k, n in enumerate(shape)))
    idx = where(idx < 0, idx + t.shape[d], idx)  # negative positions count from the end, as in PyTorch
    ie = expand(idx, tuple(idx.shape[d] if k == d else n for k, n in enumerate(shape)))
    return returned(gather(te, d, ie), out, "take_along_dim")


def put_(input, index, source, accumulate=False):
    """Writes `source`'s elements at the positions in `index` of `input` seen as 1-D (negative
    ones count from the end), or adds them there with `accumulate`, in place."""
    t = tensor_arg(input, "put_")
    index = _long_index(index, "put_")
    src = operand(t, source, "put_")
    if index.numel() != src.numel():
        raise RuntimeError(f"put_: index has {index.numel()} elements but source {src.numel()}")
    at = (reshape(index, -1),)
    if t.is_contiguous():  # its 1-D view shares its storage: the write goes straight in
        index_put_(reshape(t, -1), at, reshape(src, -1), accumulate=accumulate, op="put_")
        return t
    flat = index_put(reshape(writes.source(t, src), -1), at, reshape(src, -1), accumulate)
    return writes.assign(t, reshape(flat, *t.shape), "put_", result=True)


def put(input, index, source, accumulate=False):
    """`put_` on a copy (differentiable in input and source)."""
    return put_(tensor_arg(input, "put").clone(), index, source, accumulate)


def unravel_index(indices, shape):
    """The coordinates in a tensor of `shape` of the flat positions `indices`, one int64 tensor
    per dimension (positions wrap around, as in PyTorch)."""
    idx = tensor_arg(indices, "unravel_index", "indices")
    if idx.dtype.is_floating_point or idx.dtype is bool_:
        raise TypeError(f"unravel_index: expected 'indices' to be an integer tensor, got {idx.dtype}")
    dims = int_tuple((shape,) if isinstance(shape, int) else shape, "unravel_index: shape")
    if any(n < 0 for n in dims):
        raise ValueError(f"unravel_index: 'shape' cannot have negative values, got {dims}")
    total = 1
    for n in dims:
        total *= n
    if total >= 1 << 63:
        raise RuntimeError(f"unravel_index: the product of 'shape' {dims} does not fit in int64")
    a = idx.numpy().astype(np.int64)
    coords = []
    for n in reversed(dims):
        if n == 0:
            raise RuntimeError("unravel_index: a dimension of size 0 holds no position")
        coords.append(np.mod(a, n))
        a = np.floor_divide(a, n)
    return tuple(tensor(c, device=idx.device) for c in reversed(coords))


def _clamped_indices(t, indices, op):
    """Integer index tensors for the leading dimensions of `t`, clamped into range (their
    out-of-range entries are those the mask hides)."""
    if not isinstance(indices, (list, tuple)) or len(indices) > t.ndim:
        raise TypeError(f"{op}: indices must be a list of at most {t.ndim} integer tensors")
    out = []
    for k, i in enumerate(indices):
        i = _long_index(i, op, f"indices[{k}]")
        n = t.shape[k]
        out.append(tensor(np.clip(i.numpy(), -n, max(n - 1, 0)), device=t.device))
    return tuple(out)


def _unsafe_masked_index(input, mask, indices, fill):
    """``input[indices]`` where the bool `mask` holds and `fill` elsewhere; indices under a false
    mask may be out of range (PyTorch's torch._unsafe_masked_index)."""
    t = tensor_arg(input, "_unsafe_masked_index")
    mask = tensor_arg(mask, "_unsafe_masked_index", "mask")
    if mask.dtype is not bool_:
        raise TypeError(f"_unsafe_masked_index: mask must be a bool tensor, got {mask.dtype}")
    picked = getitem(t, _clamped_indices(t, indices, "_unsafe_masked_index"))
    return where(mask, picked, fill)


def _unsafe_masked_index_put_accumulate(input, mask, indices, values):
    """`input` with `values` added at ``input[indices]`` where the bool `mask` holds (PyTorch's
    torch._unsafe_masked_index_put_accumulate); indices under a false mask may be out of range."""
    t = tensor_arg(input, "_unsafe_masked_index_put_accumulate")
    mask = tensor_arg(mask, "_unsafe_masked_index_put_accumulate", "mask")
    if mask.dtype is not bool_:
        raise TypeError(f"_unsafe_masked_index_put_accumulate: mask must be a bool tensor, got {mask.dtype}")
    held = where(mask, values, 0)
    return index_put(t, _clamped_indices(t, indices, "_unsafe_masked_index_put_accumulate"), held, accumulate=True)


def fill(input, value):
    """A new tensor of `input`'s shape and dtype holding `value` (a number or a 0-d tensor)
    everywhere; input's gradient is zero."""
    return tensor_arg(input, "fill").clone().fill_(value)


def zero_(input):
    """Sets every element of `input` to zero, in place."""
    return tensor_arg(input, "zero_").zero_()


class IndexingMethods:
    """Tensor's subscripts and index methods."""

    __slots__ = ()

    __getitem__, __setitem__ = getitem, setitem
    index_put_, index_put, scatter_, scatter, scatter_add_, scatter_add = (
        index_put_,
        index_put,
        scatter_,
        scatter,
        scatter_add_,
        scatter_add,
    )
    select, index_select, gather, nonzero, index_add_, index_add = (
        select,
        index_select,
        gather,
        nonzero,
        index_add_,
        index_add,
    )
    index_copy_, index_copy, index_fill_, index_fill, index_reduce_, index_reduce = (
        index_copy_,
        index_copy,
        index_fill_,
        index_fill,
        index_reduce_,
        index_reduce,
    )
    scatter_reduce_, scatter_reduce, masked_scatter_, masked_scatter, masked_select = (
        scatter_reduce_,
        scatter_reduce,
        masked_scatter_,
        masked_scatter,
        masked_select,
    )
    masked_fill = masked_fill
    take, take_along_dim, put_, put = take, take_along_dim, put_, put
    argwhere, nonzero_static = argwhere, nonzero_static

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (getitem(self, i) for i in range(self.shape[0]))


__all__ = [
    "index_put",
    "scatter",
    "scatter_add",
    "select",
    "index_select",
    "gather",
    "nonzero",
    "index_add",
    "argwhere",
    "nonzero_static",
    "index_copy",
    "index_fill",
    "index_reduce",
    "scatter_reduce",
    "masked_fill",
    "masked_scatter",
    "masked_select",
    "take",
    "take_along_dim",
    "put",
    "unravel_index",
    "fill",
    "zero_",
    "_unsafe_masked_index",
    "_unsafe_masked_index_put_accumulate",
]
