"""Shape ops: views (reshape, transpose, narrow, split …), joins (cat, stack) and the
triangles, with `ShapeMethods`. Views take no ``out=``, as in PyTorch."""

from __future__ import annotations

import numpy as np

from .. import _C
from .._core import TensorBase, dims_arg, int_tuple, result, shape_args, tensor_arg
from .._types import (
    as_index,
    channels_last,
    channels_last_3d,
    contiguous_format,
    memory_format as _MemoryFormat,
    preserve_format,
)
from .creation import arange, tensor
from .elementwise import where
from .reduce import sum as _sum
from .writes import encode as _encode, returned, set_data


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
    return view(t, *(shape[:d] + sizes + shape[d + 1 :]))


def squeeze(input, dim=None):
    """Drops size-1 dimensions (all of them, or those in `dim`: an int or a tuple of them; an
    empty tuple drops none)."""
    t = tensor_arg(input, "squeeze")
    if isinstance(dim, (tuple, list)) and not dim:
        return view(t, *t.shape)  # a view of every dimension, as PyTorch's
    return result(_C.squeeze(t._h, dims_arg(dim)))


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
    return result(_C.as_strided(tensor_arg(input, "as_strided")._h, size, stride, offset, storage_offset is not None))


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
    return tuple(result(h) for h in handles)


def chunk(input, chunks, dim=0):
    """At most `chunks` views of equal size along `dim` (the last may be smaller)."""
    t = tensor_arg(input, "chunk")
    chunks, dim = as_index(chunks), as_index(dim)
    # At most `chunks` pieces, nor more than the longest dimension's entries: the engine says
    # how many.
    capacity = min(max(chunks, 1), max(max(t.shape, default=1), 1))
    return tuple(result(h) for h in _C.split(t._h, _C.SPLIT_CHUNKS, (chunks,), dim, capacity))


def laid_out(t, memory_format, fn):
    """`t` in `memory_format`: as it is for preserve_format (or None), row-major for
    contiguous_format, with the channels dimension innermost in memory for channels_last (4-d)
    and channels_last_3d (5-d), as PyTorch lays them out."""
    if memory_format is None or memory_format is preserve_format:
        return t
    if memory_format is contiguous_format:
        return t if t.is_contiguous() else result(_C.contiguous(t._h))
    if memory_format is channels_last or memory_format is channels_last_3d:
        rank = 4 if memory_format is channels_last else 5
        if t.ndim != rank:
            raise RuntimeError(
                f"{fn}(): required rank {rank} tensor to use {memory_format.name} format, got a "
                f"tensor of dimension {t.ndim}"
            )
        last = (0, *range(2, rank), 1)  # channels moved last, made row-major, moved back (a view)
        back = (0, rank - 1, *range(1, rank - 1))
        return laid_out(t.permute(*last), contiguous_format, fn).permute(*back)
    raise TypeError(
        f"{fn}(): memory_format must be a lucid.memory_format (e.g. lucid.contiguous_format), got {memory_format!r}"
    )


def contiguous(input, memory_format=contiguous_format):
    """`input` when its elements are laid out as `memory_format` asks (row-major by default),
    else a copy that is."""
    t = tensor_arg(input, "contiguous")
    if memory_format is preserve_format:
        raise RuntimeError("contiguous(): preserve memory format is unsupported by the contiguous operator")
    return laid_out(t, memory_format, "contiguous")


def clone(input, *, memory_format=None):
    """A copy of `input` in storage of its own (gradients flow back), laid out as
    `memory_format` asks (row-major for preserve_format)."""
    t = tensor_arg(input, "clone")
    if memory_format is not None and not isinstance(memory_format, _MemoryFormat):
        laid_out(t, memory_format, "clone")  # raises the TypeError
    copy = result(_C.clone(t._h))
    return (
        copy if memory_format in (None, preserve_format, contiguous_format) else laid_out(copy, memory_format, "clone")
    )


def _tensors(tensors, fn):
    if isinstance(tensors, TensorBase):
        raise TypeError(f"{fn}(): expected a sequence of tensors, got a single tensor")
    ts = list(tensors)
    for i, t in enumerate(ts):
        tensor_arg(t, fn, f"tensors[{i}]")
    return ts


def cat(tensors, dim=0, *, out=None):
    """Joins tensors along ``dim``; under autocast mixed floating dtypes join in the widest. As
    in PyTorch, a 1-D tensor of size 0 beside tensors of other shapes is skipped (the legacy
    rule that lets ``cat([empty, x])`` start an accumulation)."""
    ts = _tensors(tensors, "cat")  # held until the engine has them: a generator's tensors have no other owner
    if len(ts) > 1 and any(t.shape != (0,) for t in ts):
        ts = [t for t in ts if t.shape != (0,)]
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
    return where(keep, input, tensor(0, dtype=input.dtype, device=input.device))  # (bool stays bool)


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
        raise RuntimeError(
            "repeat_interleave(): repeats must be a non-negative int or a 1-D tensor of them, one per entry"
        )
    positions = np.repeat(np.arange(n, dtype=np.int64), counts)
    return result(_C.index_select(t, d, tensor(positions, device=t.device)))


# ---- copies of views: the view's values in storage of their own (PyTorch's *_copy ops) -------


def _copy_of(view_fn, name, doc):
    def fn(input, *args, out=None, **kwargs):
        tensor_arg(input, name)
        r = view_fn(input, *args, **kwargs)
        if isinstance(r, tuple):
            return returned(tuple(x.clone() for x in r), out, name)
        return returned(r.clone(), out, name)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


def _view_of_size(input, size):
    return view(input, *((size,) if isinstance(size, int) else tuple(size)))


alias_copy = _copy_of(lambda x: x, "alias_copy", "A copy of `input` (the values of ``torch.alias``).")
as_strided_copy = _copy_of(
    as_strided, "as_strided_copy", "A copy of ``as_strided(input, size, stride, storage_offset)``."
)
diagonal_copy = _copy_of(diagonal, "diagonal_copy", "A copy of ``diagonal(input, offset, dim1, dim2)``.")
expand_copy = _copy_of(
    lambda x, size, *, implicit=False: expand(x, size), "expand_copy", "A copy of ``input.expand(size)``."
)
narrow_copy = _copy_of(narrow, "narrow_copy", "A copy of ``narrow(input, dim, start, length)``.")
permute_copy = _copy_of(lambda x, dims: permute(x, dims), "permute_copy", "A copy of ``permute(input, dims)``.")
squeeze_copy = _copy_of(squeeze, "squeeze_copy", "A copy of ``squeeze(input, dim)``.")
t_copy = _copy_of(t, "t_copy", "A copy of ``t(input)``.")
transpose_copy = _copy_of(transpose, "transpose_copy", "A copy of ``transpose(input, dim0, dim1)``.")
unsqueeze_copy = _copy_of(unsqueeze, "unsqueeze_copy", "A copy of ``unsqueeze(input, dim)``.")
view_copy = _copy_of(_view_of_size, "view_copy", "A copy of ``input.view(size)``.")
unbind_copy = _copy_of(unbind, "unbind_copy", "Copies of the slices ``unbind(input, dim)`` gives.")


def split_with_sizes(input, split_sizes, dim=0):
    """Views of consecutive pieces along `dim` of the listed sizes, which must add up to its
    size."""
    t = tensor_arg(input, "split_with_sizes")
    sizes = int_tuple(split_sizes, "split_with_sizes: split_sizes")
    n = t.shape[t._wrap_dim(dim, "split_with_sizes")] if t.ndim else 1
    if sum(sizes) != n or any(k < 0 for k in sizes):
        raise RuntimeError(
            f"split_with_sizes: split_sizes {list(sizes)} must be non-negative and add up to the size "
            f"of dimension {dim} ({n})"
        )
    return split(t, list(sizes), dim)


split_with_sizes_copy = _copy_of(
    split_with_sizes,
    "split_with_sizes_copy",
    "Copies of the pieces ``split_with_sizes(input, split_sizes, dim)`` gives.",
)
# PyTorch's unsafe_* pieces are views that autograd doesn't guard against in-place writes; copies
# give the same values without that hazard.
unsafe_split = _copy_of(split, "unsafe_split", "``split``'s pieces, as copies.")
unsafe_chunk = _copy_of(chunk, "unsafe_chunk", "``chunk``'s pieces, as copies.")


# ---- views and their arrangements -------------------------------------------------------------


def broadcast_shapes(*shapes):
    """The shape tensors of these shapes broadcast to (each an int or a sequence of ints)."""
    out = []
    for shape in shapes:
        dims = int_tuple((shape,) if not isinstance(shape, (tuple, list)) else shape, "broadcast_shapes: shape")
        if any(n < 0 for n in dims):
            raise RuntimeError(f"broadcast_shapes: negative size in shape {dims}")
        pad = len(dims) - len(out)
        out = [1] * pad + out if pad > 0 else out
        for i, n in enumerate(dims, len(out) - len(dims)):
            if out[i] == 1:
                out[i] = n
            elif n != 1 and n != out[i]:
                raise RuntimeError(
                    f"broadcast_shapes: shape {tuple(dims)} does not broadcast with the others "
                    f"(size {n} against {out[i]} at dimension {i})"
                )
    return tuple(out)


def broadcast_to(input, size):
    """The broadcast view of `input` at `size` (-1 keeps a dimension)."""
    return expand(tensor_arg(input, "broadcast_to"), (size,) if isinstance(size, int) else tuple(size))


def broadcast_tensors(*tensors):
    """The tensors broadcast to one shape, as views."""
    ts = _tensors(
        tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors, "broadcast_tensors"
    )
    shape = broadcast_shapes(*(t.shape for t in ts))
    return tuple(expand(t, shape) for t in ts)


def _atleast(tensors, n, fn, make):
    if len(tensors) == 1 and not isinstance(tensors[0], TensorBase):
        return (
            tuple(_atleast(tuple(tensors[0]), n, fn, make))
            if isinstance(tensors[0], (list, tuple))
            else tensor_arg(tensors[0], fn)
        )
    out = tuple(make(tensor_arg(t, fn)) if t.ndim < n else t for t in tensors)
    return out[0] if len(out) == 1 else out


def atleast_1d(*tensors):
    """Each tensor with at least 1 dimension (a 0-d tensor becomes of shape (1,)); a tuple for
    several tensors or a sequence of them."""
    return _atleast(tensors, 1, "atleast_1d", lambda t: reshape(t, 1))


def atleast_2d(*tensors):
    """Each tensor with at least 2 dimensions: (1, 1) from 0-d, (1, n) from 1-d."""
    return _atleast(tensors, 2, "atleast_2d", lambda t: reshape(t, 1, t.numel()))


def atleast_3d(*tensors):
    """Each tensor with at least 3 dimensions: (1, 1, 1) from 0-d, (1, n, 1) from 1-d and
    (m, n, 1) from 2-d."""
    return _atleast(
        tensors, 3, "atleast_3d", lambda t: reshape(t, *((1, t.numel(), 1) if t.ndim < 2 else (*t.shape, 1)))
    )


def _joined(tensors, fn, shaped, dim, out):
    ts = [shaped(t) for t in _tensors(tensors, fn)]
    if not ts:
        raise RuntimeError(f"{fn}(): expected a non-empty sequence of tensors")
    return returned(cat(ts, dim(ts)), out, fn)


def hstack(tensors, *, out=None):
    """Joins tensors column-wise: along dimension 1, or 0 for 1-D tensors (0-d become 1-D)."""
    return _joined(tensors, "hstack", atleast_1d, lambda ts: 0 if ts[0].ndim == 1 else 1, out)


def vstack(tensors, *, out=None):
    """Joins tensors row-wise: along dimension 0, 1-D tensors (and 0-d) first made rows."""
    return _joined(tensors, "vstack", atleast_2d, lambda ts: 0, out)


row_stack = vstack


def dstack(tensors, *, out=None):
    """Joins tensors depth-wise: along dimension 2, after ``atleast_3d``."""
    return _joined(tensors, "dstack", atleast_3d, lambda ts: 2, out)


def column_stack(tensors, *, out=None):
    """Joins tensors as columns: 0-d and 1-D tensors become columns (n, 1), then all join along
    dimension 1."""
    return _joined(tensors, "column_stack", lambda t: reshape(t, t.numel(), 1) if t.ndim < 2 else t, lambda ts: 1, out)


def tensor_split(input, indices_or_sections, dim=0):
    """Views of `input` split along `dim`: into `n` pieces as equal as can be (the first ones
    one longer) for an int (or 0-d tensor) `n`, or at the listed indices (a sequence or 1-D
    tensor)."""
    t = tensor_arg(input, "tensor_split")
    d = t._wrap_dim(dim, "tensor_split")
    size = t.shape[d]
    ios = indices_or_sections
    if isinstance(ios, TensorBase):
        if ios.dtype.is_floating_point or ios.dtype.name == "bool" or ios.ndim > 1:
            raise TypeError(
                f"tensor_split: indices_or_sections must be an integer tensor of 0 or 1 dimensions, got "
                f"{ios.dtype} of shape {tuple(ios.shape)}"
            )
        ios = ios.item() if ios.ndim == 0 else ios.tolist()
    if isinstance(ios, (list, tuple)):
        bounds = [min(max(b if b >= 0 else b + size, 0), size) for b in int_tuple(ios, "tensor_split: indices")]
        starts = [0] + bounds
        ends = bounds + [size]
    else:
        n = as_index(ios)
        if n <= 0:
            raise RuntimeError(f"tensor_split: number of sections must be larger than 0, got {n}")
        q, r = divmod(size, n)
        lengths = [q + 1] * r + [q] * (n - r)
        starts = [sum(lengths[:i]) for i in range(n)]
        ends = [s + k for s, k in zip(starts, lengths)]
    return tuple(narrow(t, d, s, max(e - s, 0)) for s, e in zip(starts, ends))


def _split_at(input, ios, fn, dim):
    t = tensor_arg(input, fn)
    if not isinstance(ios, (list, tuple, TensorBase)):
        n = as_index(ios)
        if n == 0 or t.shape[dim] % n:
            raise RuntimeError(
                f"{fn}: dimension {dim} of size {t.shape[dim]} is not divisible by the number of sections {n}"
            )
    return tensor_split(t, ios, dim)


def hsplit(input, indices_or_sections):
    """``tensor_split`` along dimension 1 (0 for a 1-D tensor); sections must divide evenly."""
    t = tensor_arg(input, "hsplit")
    if t.ndim < 1:
        raise RuntimeError("hsplit: expected a tensor of at least 1 dimension, got a 0-d tensor")
    return _split_at(t, indices_or_sections, "hsplit", 1 if t.ndim > 1 else 0)


def vsplit(input, indices_or_sections):
    """``tensor_split`` along dimension 0 of a tensor of at least 2 dimensions."""
    t = tensor_arg(input, "vsplit")
    if t.ndim < 2:
        raise RuntimeError(f"vsplit: expected a tensor of at least 2 dimensions, got {t.ndim}")
    return _split_at(t, indices_or_sections, "vsplit", 0)


def dsplit(input, indices_or_sections):
    """``tensor_split`` along dimension 2 of a tensor of at least 3 dimensions."""
    t = tensor_arg(input, "dsplit")
    if t.ndim < 3:
        raise RuntimeError(f"dsplit: expected a tensor of at least 3 dimensions, got {t.ndim}")
    return _split_at(t, indices_or_sections, "dsplit", 2)


def movedim(input, source, destination):
    """The view with dimensions `source` (an int or a sequence) moved to `destination`, the
    others keeping their order."""
    t = tensor_arg(input, "movedim")
    src = int_tuple(source if isinstance(source, (list, tuple)) else (source,), "movedim: source")
    dst = int_tuple(destination if isinstance(destination, (list, tuple)) else (destination,), "movedim: destination")
    if len(src) != len(dst):
        raise RuntimeError(
            f"movedim: source ({len(src)} dims) and destination ({len(dst)} dims) must have the same "
            "number of dimensions"
        )
    n = t.ndim
    src = [_C.wrap_dim(d, n, "movedim") for d in src] if n else [_C.wrap_dim(d, 1, "movedim") for d in src]
    dst = [_C.wrap_dim(d, n, "movedim") for d in dst] if n else [_C.wrap_dim(d, 1, "movedim") for d in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise RuntimeError(f"movedim: repeated dim in source {list(src)} or destination {list(dst)}")
    if n == 0:
        return view(t)
    order = [None] * n
    for s_, d_ in zip(src, dst):
        order[d_] = s_
    rest = iter(d for d in range(n) if d not in src)
    order = [next(rest) if o is None else o for o in order]
    return permute(t, order)


moveaxis = movedim


def ravel(input):
    """The elements as a 1-D tensor (a view when the strides allow)."""
    return reshape(tensor_arg(input, "ravel"), -1)


def _reversed(t, *dims):
    """`t` in reverse order along each of `dims` (wrapped), each index held until the engine has
    used it."""
    for d in dims:
        at = arange(t.shape[d] - 1, -1, -1, device=t.device)
        t = result(_C.index_select(t._h, d, at._h))
    return t


def fliplr(input):
    """The columns (dimension 1) in reverse order; `input` needs at least 2 dimensions."""
    if tensor_arg(input, "fliplr").ndim < 2:
        raise RuntimeError(f"fliplr: expected a tensor of at least 2 dimensions, got {input.ndim}")
    return _reversed(input, 1)


def flipud(input):
    """The rows (dimension 0) in reverse order; `input` needs at least 1 dimension."""
    if tensor_arg(input, "flipud").ndim < 1:
        raise RuntimeError("flipud: expected a tensor of at least 1 dimension, got a 0-d tensor")
    return _reversed(input, 0)


def rot90(input, k=1, dims=(0, 1)):
    """The tensor turned `k` times by 90 degrees in the plane of `dims`, from the first axis
    towards the second."""
    t = tensor_arg(input, "rot90")
    dims = int_tuple(dims, "rot90: dims")
    if len(dims) != 2:
        raise RuntimeError(f"rot90: expected 2 dims, got {len(dims)}")
    if t.ndim < 2:
        raise RuntimeError(f"rot90: expected a tensor of at least 2 dimensions, got {t.ndim}")
    d0, d1 = t._wrap_dim(dims[0], "rot90"), t._wrap_dim(dims[1], "rot90")
    if d0 == d1:
        raise RuntimeError(f"rot90: dims must be different, got {dims}")
    k = as_index(k) % 4
    if k == 1:
        return transpose(_reversed(t, d1), d0, d1)
    if k == 2:
        return _reversed(t, d0, d1)
    if k == 3:
        return transpose(_reversed(t, d0), d0, d1)
    return t.clone()


def tile(input, dims):
    """The tensor repeated `dims` times along each dimension; with fewer `dims` than
    dimensions, the leading ones repeat once."""
    t = tensor_arg(input, "tile")
    dims = int_tuple((dims,) if isinstance(dims, int) else dims, "tile: dims")
    if any(n < 0 for n in dims):
        raise RuntimeError(f"tile: dims must be non-negative, got {dims}")
    dims = (1,) * (t.ndim - len(dims)) + dims
    return repeat(t, *dims) if dims else t.clone()


def unfold(input, dimension, size, step):
    """Every slice of `size` entries along `dimension`, `step` apart, in a new last dimension
    (``Tensor.unfold``). PyTorch's is a view; lucid's is a copy, whose overlapping windows' gradients
    add up."""
    t = tensor_arg(input, "unfold")
    size, step = as_index(size), as_index(step)
    if step <= 0:
        raise RuntimeError(f"unfold: step must be positive, got {step}")
    if t.ndim == 0:
        if size > 1 or size < 0:
            raise RuntimeError(f"unfold: size {size} is larger than the 0-d tensor's 1 element")
        return reshape(t, size)
    d = t._wrap_dim(dimension, "unfold")
    n = t.shape[d]
    if size < 0 or size > n:
        raise RuntimeError(f"unfold: size {size} does not fit dimension {d} of size {n}")
    windows = (n - size) // step + 1
    positions = (np.arange(windows)[:, None] * step + np.arange(size)[None, :]).reshape(-1)
    at = tensor(positions.astype(np.int64), device=t.device)
    picked = result(_C.index_select(t._h, d, at._h))
    shape = t.shape[:d] + (windows, size) + t.shape[d + 1 :]
    return movedim(reshape(picked, shape), d + 1, -1)


unfold_copy = _copy_of(unfold, "unfold_copy", "A copy of ``input.unfold(dimension, size, step)``.")


def _promoted(ts):
    """The tensors in the dtype they promote to, as the engine's rule (asked through an addition
    of 0-d tensors) has it."""
    d = ts[0].dtype
    for x in ts[1:]:
        if x.dtype != d:
            d = (
                result(_C.tensor_full((), 0.0, 0, _C.SCALAR_INT, d.code, x.device.code))
                + result(_C.tensor_full((), 0.0, 0, _C.SCALAR_INT, x.dtype.code, x.device.code))
            ).dtype
    return [x if x.dtype == d else x.to(d) for x in ts]


def block_diag(*tensors):
    """The block-diagonal matrix of these tensors (0-d as 1x1, 1-D as one row), zeros elsewhere;
    of the dtype they promote to."""
    ts = [tensor_arg(t, "block_diag", f"tensors[{i}]") for i, t in enumerate(tensors)]
    for i, x in enumerate(ts):
        if x.ndim > 2:
            raise RuntimeError(f"block_diag: tensors[{i}] has {x.ndim} dimensions; expected at most 2")
    if not ts:
        return tensor(np.zeros((1, 0), dtype=np.float32))
    ts = [reshape(x, *((1, 1) if x.ndim == 0 else (1, x.shape[0]) if x.ndim == 1 else x.shape)) for x in _promoted(ts)]
    width = sum(x.shape[1] for x in ts)
    rows, left = [], 0
    for x in ts:
        r, c = x.shape
        pad_l = result(_C.tensor_full((r, left), 0.0, 0, _C.SCALAR_INT, x.dtype.code, x.device.code))
        pad_r = result(_C.tensor_full((r, width - left - c), 0.0, 0, _C.SCALAR_INT, x.dtype.code, x.device.code))
        rows.append(result(_C.cat([pad_l._h, x._h, pad_r._h], 1, False)))
        left += c
    return result(_C.cat([x._h for x in rows], 0, False))


def kron(input, other, *, out=None):
    """The Kronecker product: every element of `input` times the whole of `other`, laid out in
    blocks (the fewer dimensions of either count as leading ones of size 1)."""
    a, b = tensor_arg(input, "kron"), tensor_arg(other, "kron", "other")
    n = max(a.ndim, b.ndim)
    sa = (1,) * (n - a.ndim) + tuple(a.shape)
    sb = (1,) * (n - b.ndim) + tuple(b.shape)
    x = reshape(a, *[v for k in sa for v in (k, 1)]) * reshape(b, *[v for k in sb for v in (1, k)])
    return returned(reshape(x, *[p * q for p, q in zip(sa, sb)]), out, "kron")


def meshgrid(*tensors, indexing="ij"):
    """Coordinate grids of 1-D (or 0-d) tensors: one broadcast view per tensor, of shape
    ``(len(t0), len(t1), …)`` for ``indexing="ij"``; ``"xy"`` swaps the first two."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    ts = _tensors(tensors, "meshgrid")
    if not ts:
        raise RuntimeError("meshgrid: expected at least one tensor")
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    for i, x in enumerate(ts):
        if x.ndim > 1:
            raise RuntimeError(f"meshgrid: expected 0-d or 1-D tensors, got tensors[{i}] of shape {tuple(x.shape)}")
    sizes = [x.numel() for x in ts]
    place = list(range(len(ts)))
    if indexing == "xy" and len(ts) >= 2:
        place[0], place[1] = 1, 0
    shape = [0] * len(ts)
    for i, p in enumerate(place):
        shape[p] = sizes[i]
    return tuple(
        expand(reshape(x, *[sizes[i] if k == place[i] else 1 for k in range(len(ts))]), shape) for i, x in enumerate(ts)
    )


def cartesian_prod(*tensors):
    """Every combination of one element of each 1-D tensor, as rows of a ``(N, len(tensors))``
    tensor (a single tensor is returned as it is)."""
    ts = _tensors(tensors, "cartesian_prod")
    if not ts:
        raise RuntimeError("cartesian_prod: expected at least one tensor")
    for i, x in enumerate(ts):
        if x.ndim != 1:
            raise RuntimeError(f"cartesian_prod: expected 1-D tensors, got tensors[{i}] of shape {tuple(x.shape)}")
    if len(ts) == 1:
        return ts[0]
    return stack([reshape(g, -1) for g in meshgrid(*ts, indexing="ij")], 1)


def combinations(input, r=2, with_replacement=False):
    """The length-`r` combinations of the elements of a 1-D tensor, as rows (in the order of
    ``itertools.combinations``, or ``combinations_with_replacement``)."""
    import itertools

    t = tensor_arg(input, "combinations")
    if t.ndim != 1:
        raise RuntimeError(f"combinations: expected a 1-D tensor, got shape {tuple(t.shape)}")
    r = as_index(r)
    if r < 0:
        raise RuntimeError(f"combinations: r must be non-negative, got {r}")
    if r == 0:
        return reshape(narrow(t, 0, 0, 0), 0)
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = np.array(list(pick(range(t.shape[0]), r)), dtype=np.int64).reshape(-1, r)
    at = tensor(rows.reshape(-1), device=t.device)
    picked = result(_C.index_select(t._h, 0, at._h))
    return reshape(picked, rows.shape[0], r)


def _diag_positions(n, offset, device):
    rows = np.arange(n, dtype=np.int64) + max(-offset, 0)
    return tensor(rows, device=device), tensor(rows - max(-offset, 0) + max(offset, 0), device=device)


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """A tensor whose diagonals (of dimensions dim1 and dim2 of the result, above the main one
    for a positive `offset`) hold the last dimension of `input`; zeros elsewhere."""
    t = tensor_arg(input, "diag_embed")
    offset = as_index(offset)
    n = t.shape[-1] if t.ndim else 1
    m = n + abs(offset)
    nd = t.ndim + 1
    d1, d2 = _C.wrap_dim(as_index(dim1), nd, "diag_embed"), _C.wrap_dim(as_index(dim2), nd, "diag_embed")
    if d1 == d2:
        raise RuntimeError(f"diag_embed: diagonal dimensions cannot be identical {dim1}, {dim2}")
    base = result(_C.tensor_full(tuple(t.shape[:-1]) + (m, m), 0.0, 0, _C.SCALAR_INT, t.dtype.code, t.device.code))
    r, c = _diag_positions(n, offset, t.device)
    values = reshape(t, *t.shape[:-1], n)  # held: the engine has only its handle
    filled = result(_C.index_put(base._h, _encode((Ellipsis, r, c), t.device, []), values._h, False))
    return movedim(filled, (-2, -1), (d1, d2))


def diagflat(input, offset=0):
    """The 2-D tensor with the flattened `input` on its diagonal (above it for a positive
    `offset`), zeros elsewhere."""
    return diag_embed(reshape(tensor_arg(input, "diagflat"), -1), offset, 0, 1)


def _scatter_into(t, src, key, fn):
    """A new tensor: `t` with `src` written at ``t[key]`` (gradients flow to both)."""
    if not isinstance(src, TensorBase):
        raise TypeError(f"{fn}(): src must be a lucid.Tensor, got {type(src).__name__}")
    keep = []
    return result(_C.index_put(t._h, _encode(key, t.device, keep), src._h, False))


def _expect_shape(src, shape, fn):
    if tuple(src.shape) != tuple(shape):
        raise RuntimeError(
            f"{fn}(): expected src of shape {tuple(shape)} (the slice it replaces), got {tuple(src.shape)}"
        )


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """A new tensor: `input` with `src` written on the diagonal ``diagonal(input, offset, dim1,
    dim2)`` gives."""
    t = tensor_arg(input, "diagonal_scatter")
    _expect_shape(tensor_arg(src, "diagonal_scatter", "src"), diagonal(t, offset, dim1, dim2).shape, "diagonal_scatter")
    d1, d2 = t._wrap_dim(dim1, "diagonal_scatter"), t._wrap_dim(dim2, "diagonal_scatter")
    moved = movedim(t, (d1, d2), (-2, -1))
    offset = as_index(offset)
    r, c = _diag_positions(src.shape[-1], offset, t.device)
    return movedim(_scatter_into(moved, src, (Ellipsis, r, c), "diagonal_scatter"), (-2, -1), (d1, d2))


def select_scatter(input, src, dim, index):
    """A new tensor: `input` with `src` written at the slice ``select(input, dim, index)``."""
    t = tensor_arg(input, "select_scatter")
    d = t._wrap_dim(dim, "select_scatter") if t.ndim else _C.wrap_dim(as_index(dim), 1, "select_scatter")
    tensor_arg(src, "select_scatter", "src")
    if t.ndim == 0:
        raise IndexError("select_scatter(): cannot select from a 0-d tensor")
    i = as_index(index)
    n = t.shape[d]
    if not -n <= i < n:
        raise IndexError(f"select_scatter(): index {i} is out of range for dimension {d} of size {n}")
    _expect_shape(src, t.shape[:d] + t.shape[d + 1 :], "select_scatter")
    at = tensor(np.array([i % n], dtype=np.int64), device=t.device)
    return _scatter_into(t, unsqueeze(src, d), (slice(None),) * d + (at,), "select_scatter")


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """A new tensor: `input` with `src` written at ``input[..., start:end:step]`` along `dim`."""
    t = tensor_arg(input, "slice_scatter")
    tensor_arg(src, "slice_scatter", "src")
    d = t._wrap_dim(dim, "slice_scatter")
    step = as_index(step)
    if step <= 0:
        raise RuntimeError(f"slice_scatter(): step must be positive, got {step}")
    positions = np.arange(t.shape[d], dtype=np.int64)[slice(start, end, step)]
    _expect_shape(src, t.shape[:d] + (len(positions),) + t.shape[d + 1 :], "slice_scatter")
    return _scatter_into(t, src, (slice(None),) * d + (tensor(positions, device=t.device),), "slice_scatter")


def as_strided_scatter(input, src, size, stride, storage_offset=None):
    """A new tensor: `input` (taken in row-major order) with `src` written at the elements
    ``as_strided(input, size, stride, storage_offset)`` views."""
    t = tensor_arg(input, "as_strided_scatter")
    tensor_arg(src, "as_strided_scatter", "src")
    size, stride = int_tuple(size, "as_strided_scatter: size"), int_tuple(stride, "as_strided_scatter: stride")
    if len(size) != len(stride):
        raise RuntimeError(f"as_strided_scatter: {len(stride)} strides for {len(size)} sizes")
    _expect_shape(src, size, "as_strided_scatter")
    offset = 0 if storage_offset is None else as_index(storage_offset)
    positions = np.full(size, offset, dtype=np.int64)
    for k, (n, st) in enumerate(zip(size, stride)):
        along = [n if j == k else 1 for j in range(len(size))]
        positions = positions + (np.arange(n, dtype=np.int64) * st).reshape(along)
    if positions.size and (positions.min() < 0 or positions.max() >= t.numel()):
        raise RuntimeError(
            f"as_strided_scatter: size {size}, stride {stride} and offset {offset} reach outside the "
            f"input's {t.numel()} elements"
        )
    flat = _scatter_into(
        reshape(t, -1), reshape(src, -1), (tensor(positions.reshape(-1), device=t.device),), "as_strided_scatter"
    )
    return reshape(flat, *t.shape)


def sum_to_size(input, *size):
    """`input` summed down to `size`, which it must broadcast from (``Tensor.sum_to_size``)."""
    t = tensor_arg(input, "sum_to_size")
    size = shape_args(size, "sum_to_size: size")
    if len(size) > t.ndim or any(n != 1 and n != m for n, m in zip(size, t.shape[t.ndim - len(size) :])):
        raise RuntimeError(f"sum_to_size: size {list(size)} is not expandable to size {list(t.shape)}")
    lead = t.ndim - len(size)
    dims = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(size) if n == 1 and t.shape[lead + i] != 1)
    return reshape(_sum(t, dims, True), *size) if dims else t


def resolve_conj(input):
    """`input` itself: lucid's dtypes are real, so no tensor carries a pending conjugation."""
    return tensor_arg(input, "resolve_conj")


def resolve_neg(input):
    """`input` itself: no lucid tensor carries a pending negation."""
    return tensor_arg(input, "resolve_neg")


def _chunk_cat(tensors, dim, num_chunks, *, out=None):
    """Each tensor split into `num_chunks` chunks along `dim` (zero-padded to a multiple of it),
    each chunk flattened from `dim` on, and the chunks of all tensors joined side by side: a
    tensor of shape ``(*leading, num_chunks, total)`` (PyTorch's torch._chunk_cat)."""
    ts = _tensors(tensors, "_chunk_cat")
    if not ts:
        raise RuntimeError("_chunk_cat: expected a non-empty list of tensors")
    num_chunks = as_index(num_chunks)
    if num_chunks < 1:
        raise RuntimeError(f"_chunk_cat: num_chunks must be at least 1, got {num_chunks}")
    d = ts[0]._wrap_dim(dim, "_chunk_cat")
    lead = tuple(ts[0].shape[:d])
    parts = []
    for i, x in enumerate(ts):
        if x.ndim <= d or tuple(x.shape[:d]) != lead:
            raise RuntimeError(
                f"_chunk_cat: tensors[{i}] of shape {tuple(x.shape)} does not share the leading "
                f"dimensions {lead} of tensors[0] before dimension {d}"
            )
        n = x.shape[d]
        size = -(-n // num_chunks)
        if size * num_chunks > n:
            pad = result(
                _C.tensor_full(
                    x.shape[:d] + (size * num_chunks - n,) + x.shape[d + 1 :],
                    0.0,
                    0,
                    _C.SCALAR_INT,
                    x.dtype.code,
                    x.device.code,
                )
            )
            x = result(_C.cat([x._h, pad._h], d, False))
        parts.append(reshape(x, *lead, num_chunks, -1) if x.numel() else reshape(x, *lead, num_chunks, 0))
    return returned(cat(parts, -1), out, "_chunk_cat")


def resize_(input, *sizes, memory_format=None):
    """Gives `input` the shape `sizes`, in place: the elements it had, in row-major order, as
    far as they go, zeros after (lucid has no uninitialised memory). A tensor that requires
    grad can't be resized."""
    t = tensor_arg(input, "resize_")
    shape = shape_args(sizes, "resize_: size")
    if any(n < 0 for n in shape):
        raise RuntimeError(f"resize_: negative size in {shape}")
    if t.requires_grad:
        raise RuntimeError("resize_: cannot resize a tensor that requires grad")
    if tuple(shape) == tuple(t.shape):
        return t
    n = int(np.prod(shape, dtype=np.int64))
    flat = reshape(t.detach(), -1)
    keep = min(n, flat.shape[0])
    pad = result(_C.tensor_full((n - keep,), 0.0, 0, _C.SCALAR_INT, t.dtype.code, t.device.code))
    kept = narrow(flat, 0, 0, keep)
    set_data(t, reshape(result(_C.cat([kept._h, pad._h], 0, False)), *shape))
    return t


def resize_as_(input, the_template, *, memory_format=None):
    """``input.resize_(the_template.shape)``."""
    return resize_(input, tuple(tensor_arg(the_template, "resize_as_", "the_template").shape))


class ShapeMethods:
    """Tensor's shape methods."""

    __slots__ = ()

    reshape, view, flatten, unflatten, squeeze, unsqueeze = reshape, view, flatten, unflatten, squeeze, unsqueeze
    expand, transpose, swapaxes, permute, t, narrow = expand, transpose, swapaxes, permute, t, narrow
    diagonal, as_strided, split, chunk, contiguous, tril, triu, roll = (
        diagonal,
        as_strided,
        split,
        chunk,
        contiguous,
        tril,
        triu,
        roll,
    )

    flip, unbind, repeat, repeat_interleave = flip, unbind, repeat, repeat_interleave
    movedim, moveaxis, ravel, fliplr, flipud, rot90, tile, unfold, kron = (
        movedim,
        moveaxis,
        ravel,
        fliplr,
        flipud,
        rot90,
        tile,
        unfold,
        kron,
    )
    broadcast_to, tensor_split, hsplit, vsplit, dsplit = broadcast_to, tensor_split, hsplit, vsplit, dsplit
    split_with_sizes, unsafe_split, unsafe_chunk = split_with_sizes, unsafe_split, unsafe_chunk
    diag_embed, diagflat, diagonal_scatter, select_scatter, slice_scatter, as_strided_scatter = (
        diag_embed,
        diagflat,
        diagonal_scatter,
        select_scatter,
        slice_scatter,
        as_strided_scatter,
    )
    sum_to_size, resize_, resize_as_ = sum_to_size, resize_, resize_as_
    resolve_conj, resolve_neg = resolve_conj, resolve_neg

    @property
    def mT(self):
        """The transpose of the last two dimensions (of each matrix of a batch)."""
        return transpose(self, -2, -1)

    @property
    def T(self):
        return permute(self, *reversed(range(self.ndim)))

    @property
    def mH(self):
        """The conjugate transpose of the last two dimensions: ``mT`` for lucid's real dtypes."""
        if self.ndim < 2:
            raise RuntimeError(
                f"tensor.mH is only supported on matrices or batches of matrices, got a {self.ndim}-D tensor"
            )
        return transpose(self, -2, -1)

    @property
    def H(self):
        """The conjugate transpose of a matrix: ``T`` for lucid's real dtypes (a 0-d tensor is
        its own)."""
        if self.ndim not in (0, 2):
            raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors), got a {self.ndim}-D tensor")
        return permute(self, *reversed(range(self.ndim)))

    def expand_as(self, other):
        return expand(self, other.shape)

    def view_as(self, other):
        return view(self, other.shape)

    def reshape_as(self, other):
        return reshape(self, other.shape)


__all__ = [
    "reshape",
    "flatten",
    "unflatten",
    "squeeze",
    "unsqueeze",
    "transpose",
    "swapaxes",
    "permute",
    "t",
    "narrow",
    "diagonal",
    "as_strided",
    "split",
    "chunk",
    "cat",
    "concat",
    "stack",
    "tril",
    "triu",
    "roll",
    "flip",
    "unbind",
    "repeat_interleave",
    "alias_copy",
    "as_strided_copy",
    "diagonal_copy",
    "expand_copy",
    "narrow_copy",
    "permute_copy",
    "squeeze_copy",
    "t_copy",
    "transpose_copy",
    "unsqueeze_copy",
    "view_copy",
    "unbind_copy",
    "split_with_sizes",
    "split_with_sizes_copy",
    "unsafe_split",
    "unsafe_chunk",
    "broadcast_shapes",
    "broadcast_to",
    "broadcast_tensors",
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "hstack",
    "vstack",
    "row_stack",
    "dstack",
    "column_stack",
    "tensor_split",
    "hsplit",
    "vsplit",
    "dsplit",
    "movedim",
    "moveaxis",
    "ravel",
    "fliplr",
    "flipud",
    "rot90",
    "tile",
    "unfold_copy",
    "block_diag",
    "kron",
    "meshgrid",
    "cartesian_prod",
    "combinations",
    "diag_embed",
    "diagflat",
    "diagonal_scatter",
    "select_scatter",
    "slice_scatter",
    "as_strided_scatter",
    "resize_as_",
    "clone",
    "resolve_conj",
    "resolve_neg",
    "_chunk_cat",
]
