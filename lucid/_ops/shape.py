"""Shape ops: views (reshape, transpose, narrow, split …), joins (cat, stack) and the
triangles, with `ShapeMethods`. Views take no ``out=``, as in PyTorch."""

from __future__ import annotations

import numpy as np

from .. import _C
from .._core import TensorBase, dims_arg, int_tuple, result, shape_args, tensor_arg, wrap
from .._types import as_index
from .creation import arange, tensor
from .elementwise import where
from .writes import returned


def reshape(input, *shape):
    """A view of the given shape when the strides allow one, else a copy (as in PyTorch)."""
    return result(_C.reshape(tensor_arg(input, "reshape")._h, shape_args(shape), False))


def view(input, *shape):
    """The view of the given shape (one size may be -1); RuntimeError when the strides allow none."""
    return result(_C.reshape(tensor_arg(input, "view")._h, shape_args(shape), True))


def flatten(input, start_dim=0, end_dim=-1):
    """Merges dimensions start_dim..end_dim (a view when the strides allow)."""
    return result(_C.flatten(tensor_arg(input, "flatten")._h, as_index(start_dim), as_index(end_dim)))


def unflatten(input, dim, sizes):
    """The view splitting dimension `dim` into `sizes` (one of them may be -1)."""
    t = tensor_arg(input, "unflatten")
    d = t._wrap_dim(dim, "unflatten")
    sizes = int_tuple(sizes, "unflatten: sizes")
    if not sizes:
        raise ValueError("unflatten: sizes must not be empty")
    if sizes.count(-1) > 1:
        raise ValueError("unflatten: only one size can be -1")
    shape = t.shape
    known = 1
    for n in sizes:
        if n != -1:
            known *= n
    if (known != shape[d]) if -1 not in sizes else (known == 0 or shape[d] % known):
        raise RuntimeError(f"unflatten: sizes {sizes} don't multiply up to the size of dimension {d} ({shape[d]})")
    return view(t, *(shape[:d] + sizes + shape[d + 1:]))


def squeeze(input, dim=None):
    """Drops size-1 dimensions (all of them, or those in `dim`)."""
    return result(_C.squeeze(tensor_arg(input, "squeeze")._h, dims_arg(dim)))


def unsqueeze(input, dim):
    """Inserts a size-1 dimension at `dim`."""
    return result(_C.unsqueeze(tensor_arg(input, "unsqueeze")._h, as_index(dim)))


def expand(input, *sizes):
    """A broadcast view at ``sizes`` (-1 keeps a dimension)."""
    return result(_C.expand(tensor_arg(input, "expand")._h, shape_args(sizes, "sizes")))


def transpose(input, dim0, dim1):
    """Swaps two dimensions (a view)."""
    return result(_C.transpose(tensor_arg(input, "transpose")._h, as_index(dim0), as_index(dim1)))


swapaxes = transpose


def permute(input, *dims):
    """Reorders dimensions (a view)."""
    return result(_C.permute(tensor_arg(input, "permute")._h, shape_args(dims, "dims")))


def t(input):
    """The transpose of a tensor of at most 2 dimensions."""
    tensor_arg(input, "t")
    if input.ndim > 2:
        raise ValueError(f"t() expects a tensor with at most 2 dimensions, got {input.ndim}")
    return permute(input, *reversed(range(input.ndim)))


def narrow(input, dim, start, length):
    """The view of `length` entries of `dim` from `start`."""
    return result(_C.narrow(tensor_arg(input, "narrow")._h, as_index(dim), as_index(start), as_index(length)))


def diagonal(input, offset=0, dim1=0, dim2=1):
    """The view of the diagonal of dimensions dim1 and dim2 (above it for a positive `offset`),
    which become a last dimension."""
    return result(_C.diagonal(tensor_arg(input, "diagonal")._h, as_index(offset), as_index(dim1), as_index(dim2)))


def as_strided(input, size, stride, storage_offset=None):
    """The view of `input`'s storage with these sizes and strides (in elements, not negative)
    from `storage_offset` (input's own by default), as torch.as_strided. It must lie inside the
    storage; its elements may repeat, and their gradients add up."""
    size, stride = int_tuple(size, "as_strided: size"), int_tuple(stride, "as_strided: stride")
    if len(size) != len(stride):
        raise RuntimeError(f"as_strided: {len(stride)} strides for {len(size)} sizes")
    offset = 0 if storage_offset is None else as_index(storage_offset)
    return result(_C.as_strided(tensor_arg(input, "as_strided")._h, size, stride, offset,
                                storage_offset is not None))


def split(input, split_size_or_sections, dim=0):
    """Views of consecutive pieces along `dim`: of ``split_size`` entries each, or of the listed
    sizes."""
    t = tensor_arg(input, "split")
    dim = as_index(dim)
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = int_tuple(split_size_or_sections, "split sizes")
        handles = _C.split(t._h, _C.SPLIT_SIZES, sizes, dim, len(sizes))
    else:
        size = as_index(split_size_or_sections)
        n = t.shape[t._wrap_dim(dim, "split")] if t.ndim else 1
        handles = _C.split(t._h, _C.SPLIT_SIZE, (size,), dim, n)
    return tuple(wrap(h) for h in handles)


def chunk(input, chunks, dim=0):
    """At most `chunks` views of equal size along `dim` (the last may be smaller)."""
    t = tensor_arg(input, "chunk")
    chunks, dim = as_index(chunks), as_index(dim)
    # At most `chunks` pieces, nor more than the longest dimension's entries: the engine says
    # how many.
    capacity = min(max(chunks, 1), max(max(t.shape, default=1), 1))
    return tuple(wrap(h) for h in _C.split(t._h, _C.SPLIT_CHUNKS, (chunks,), dim, capacity))


def contiguous(input):
    """`input` when its elements are in row-major order, else a copy that is."""
    if tensor_arg(input, "contiguous").is_contiguous():
        return input
    return result(_C.contiguous(input._h))


def _tensors(tensors, fn):
    if isinstance(tensors, TensorBase):
        raise TypeError(f"{fn}(): expected a sequence of tensors, got a single tensor")
    ts = list(tensors)
    for i, t in enumerate(ts):
        tensor_arg(t, fn, f"tensors[{i}]")
    return ts


def cat(tensors, dim=0, *, out=None):
    """Joins tensors along ``dim``; under autocast mixed floating dtypes join in the widest."""
    ts = _tensors(tensors, "cat")  # held until the engine has them: a generator's tensors have no other owner
    return returned(result(_C.cat([t._h for t in ts], as_index(dim), False)), out, "cat")


concat = cat


def stack(tensors, dim=0, *, out=None):
    """Joins tensors of one shape along a new dimension ``dim``."""
    ts = _tensors(tensors, "stack")
    return returned(result(_C.cat([t._h for t in ts], as_index(dim), True)), out, "stack")


def _band(input, diagonal, lower, fn):
    tensor_arg(input, fn)
    if input.ndim < 2:
        raise ValueError(f"{fn}(): expected a tensor of at least 2 dimensions, got shape {tuple(input.shape)}")
    rows, cols = input.shape[-2], input.shape[-1]
    r = reshape(arange(rows, device=input.device), rows, 1)
    c = reshape(arange(cols, device=input.device), 1, cols)
    keep = (c - r) <= as_index(diagonal) if lower else (c - r) >= as_index(diagonal)
    return where(keep, input, 0)


def tril(input, diagonal=0, *, out=None):
    """The lower triangle of the last two dimensions (on and below `diagonal`), zeros above."""
    return returned(_band(input, diagonal, True, "tril"), out, "tril")


def triu(input, diagonal=0, *, out=None):
    """The upper triangle of the last two dimensions (on and above `diagonal`), zeros below."""
    return returned(_band(input, diagonal, False, "triu"), out, "triu")


def roll(input, shifts, dims=None):
    """Rolls elements along `dims` by `shifts` (ints, or tuples of the same length); without
    `dims`, over the flattened tensor, whose shape is then restored."""
    t = tensor_arg(input, "roll")
    if dims is None:
        if isinstance(shifts, (tuple, list)) and len(shifts) != 1:
            raise RuntimeError(f"roll(): {len(shifts)} shifts without dims (one is allowed)")
        return view(roll(flatten(t), shifts, 0), *t.shape)
    shifts = int_tuple(shifts if isinstance(shifts, (tuple, list)) else (shifts,), "roll: shifts")
    dims = int_tuple(dims if isinstance(dims, (tuple, list)) else (dims,), "roll: dims")
    if len(shifts) != len(dims):
        raise RuntimeError(f"roll(): {len(shifts)} shifts for {len(dims)} dims")
    for s, d in zip(shifts, dims):
        d = t._wrap_dim(d, "roll")
        n = t.shape[d]
        k = s % n if n else 0
        if k:
            t = cat([narrow(t, d, n - k, k), narrow(t, d, 0, n - k)], d)
    return t if t is not input else t.clone()  # a new tensor, as PyTorch's, even unrolled


def flip(input, dims):
    """The elements in reverse order along `dims` (a new tensor; differentiable)."""
    t = tensor_arg(input, "flip")
    dims = int_tuple(dims if isinstance(dims, (tuple, list)) else (dims,), "flip: dims")
    for d in dims:
        d = t._wrap_dim(d, "flip")
        n = t.shape[d]
        t = result(_C.index_select(t, d, arange(n - 1, -1, -1, device=t.device)))
    return t if t is not input else t.clone()


def unbind(input, dim=0):
    """The slices along `dim`, that dimension removed, as a tuple of views."""
    t = tensor_arg(input, "unbind")
    d = t._wrap_dim(dim, "unbind")
    return tuple(squeeze(narrow(t, d, i, 1), d) for i in range(t.shape[d]))


def repeat(input, *sizes):
    """The tensor tiled `sizes` times along each dimension (leading sizes add dimensions), as
    Tensor.repeat."""
    t = tensor_arg(input, "repeat")
    sizes = shape_args(sizes, "repeat: sizes")
    if len(sizes) < t.ndim:
        raise RuntimeError(f"repeat(): {len(sizes)} sizes for a tensor of {t.ndim} dimensions")
    shape = (1,) * (len(sizes) - t.ndim) + tuple(t.shape)
    x = reshape(t, *[v for n in shape for v in (1, n)])
    x = expand(x, *[v for r, n in zip(sizes, shape) for v in (r, n)])
    return reshape(x, *[r * n for r, n in zip(sizes, shape)])


def repeat_interleave(input, repeats, dim=None, *, output_size=None):
    """Each element (or slice along `dim`) repeated `repeats` times in place, as
    torch.repeat_interleave; `repeats` an int or a 1-D tensor of counts. Without `dim`, over the
    flattened tensor."""
    t = tensor_arg(input, "repeat_interleave")
    if dim is None:
        t, dim = flatten(t), 0
    d = t._wrap_dim(dim, "repeat_interleave")
    n = t.shape[d]
    counts = repeats.numpy() if isinstance(repeats, TensorBase) else np.full(n, as_index(repeats))
    counts = np.broadcast_to(np.asarray(counts, dtype=np.int64).reshape(-1), (n,)) if np.ndim(counts) <= 1 else None
    if counts is None or (counts < 0).any():
        raise RuntimeError("repeat_interleave(): repeats must be a non-negative int or a 1-D tensor of them, one per "
                           "entry")
    positions = np.repeat(np.arange(n, dtype=np.int64), counts)
    return result(_C.index_select(t, d, tensor(positions, device=t.device)))


class ShapeMethods:
    """Tensor's shape methods."""

    __slots__ = ()

    reshape, view, flatten, unflatten, squeeze, unsqueeze = reshape, view, flatten, unflatten, squeeze, unsqueeze
    expand, transpose, swapaxes, permute, t, narrow = expand, transpose, swapaxes, permute, t, narrow
    diagonal, as_strided, split, chunk, contiguous, tril, triu, roll = (diagonal, as_strided, split, chunk,
                                                                         contiguous, tril, triu, roll)

    flip, unbind, repeat, repeat_interleave = flip, unbind, repeat, repeat_interleave

    @property
    def mT(self):
        """The transpose of the last two dimensions (of each matrix of a batch)."""
        return transpose(self, -2, -1)

    @property
    def T(self):
        return permute(self, *reversed(range(self.ndim)))

    def expand_as(self, other):
        return expand(self, other.shape)

    def view_as(self, other):
        return view(self, other.shape)

    def reshape_as(self, other):
        return reshape(self, other.shape)


__all__ = ["reshape", "flatten", "unflatten", "squeeze", "unsqueeze", "transpose", "swapaxes", "permute", "t",
           "narrow", "diagonal", "as_strided", "split", "chunk", "cat", "concat", "stack", "tril", "triu", "roll", "flip",
           "unbind", "repeat_interleave"]
