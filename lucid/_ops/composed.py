"""Ops composed in Python from engine ops, with the host's help where the engine has no kernel:
random integers and sampling (``randint``, ``multinomial``), and the host-ordered ``sort``,
``argsort`` and ``topk``; with `ComposedMethods`.

The random draws come from numpy generators seeded from the engine's stream, so
``lucid.manual_seed`` makes them reproducible like every other lucid random op.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from .._core import TensorBase, tensor_arg
from .._types import as_index, check_dtype, float32, int64
from .creation import arange, leaf, rand, tensor, zeros
from .elementwise import addbmm, addmm, addmv, addr, baddbmm, where
from .indexing import gather, index_put
from .shape import diagonal as diagonal_view, stack, view
from .writes import assign, returned, source


class Generator:
    """A random source of its own, as ``torch.Generator``: for shuffling and splitting data and
    for the ``generator=`` of randint, randperm and multinomial. Seeded from the OS until
    :meth:`manual_seed`."""

    def __init__(self, device="cpu"):
        self._seed = int(np.random.SeedSequence().entropy % (1 << 63))
        self._rng = np.random.default_rng(self._seed)

    def manual_seed(self, seed: int):
        self._seed = int(seed)
        self._rng = np.random.default_rng(self._seed)
        return self

    def initial_seed(self) -> int:
        return self._seed


def generator_rng(generator) -> np.random.Generator:
    """The numpy generator behind `generator`, or, for None, one seeded from lucid's stream."""
    if generator is None:
        return engine_seeded_rng()
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be a lucid.Generator, got {type(generator).__name__}")
    return generator._rng


def engine_seeded_rng() -> np.random.Generator:
    """A numpy generator seeded from the engine's random stream (48 bits from two float32
    draws), so that lucid.manual_seed reproduces what it draws."""
    high, low = (rand(2) * float(1 << 24)).numpy().astype(np.int64)
    return np.random.default_rng((int(high) << 24) | int(low))


def randint(low=0, high=None, size=None, *, generator=None, dtype=None, device="cpu", requires_grad=False):
    """Integers drawn uniformly from [low, high), as ``torch.randint(low, high, size)`` (or
    ``randint(high, size)``, `size` given by position or by name)."""
    if size is None:
        if high is None or not isinstance(high, (tuple, list)):
            raise TypeError("randint() needs a size: randint(high, size) or randint(low, high, size)")
        low, high, size = 0, low, high
    elif high is None:  # randint(high, size=...)
        low, high = 0, low
    low, high = as_index(low), as_index(high)
    if high <= low:
        raise ValueError(f"randint(): high ({high}) must be greater than low ({low})")
    shape = tuple(as_index(s) for s in (size if isinstance(size, (tuple, list)) else (size,)))
    values = generator_rng(generator).integers(low, high, size=shape, dtype=np.int64)
    return tensor(values, dtype=int64 if dtype is None else check_dtype(dtype), device=device,
                            requires_grad=requires_grad)


def multinomial(input, num_samples: int, replacement: bool = False, *, generator=None):
    """Indices drawn from the categories weighted by each row of `input` ([n] or [rows, n],
    non-negative, not necessarily summing to 1), as ``torch.multinomial``."""
    tensor_arg(input, "multinomial")
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
    rng = generator_rng(generator)
    drawn = np.stack([rng.choice(rows.shape[1], size=n, replace=replacement, p=r / t) for r, t in zip(rows, totals)])
    return tensor(drawn.reshape(weights.shape[:-1] + (n,)), dtype=int64, device=input.device)


# ---- ordering: sort, argsort, topk ----------------------------------------------------------------
# The order is found on the host (numpy's stable sort over the values, NaN counting as the
# largest, as PyTorch); the values are then gathered by the engine, so gradients flow to the
# entries picked.

def _order(input, dim: int, descending: bool, fn: str):
    """The stable order of `input` along `dim` (a numpy array of positions) and the wrapped
    dim; a 0-d input is taken as one element."""
    tensor_arg(input, fn)
    d = as_index(dim)
    nd = max(input.ndim, 1)
    if not -nd <= d < nd:
        raise IndexError(f"{fn}(): dim {dim} is out of range for a {input.ndim}-D tensor")
    d %= nd
    values = input.numpy()
    if input.ndim == 0:
        return np.zeros((), dtype=np.int64), 0
    if input.dtype.is_floating_point:
        values = values.astype(np.float64)
        nan = np.isnan(values)
        if not descending:
            return np.argsort(np.where(nan, np.inf, values), axis=d, kind="stable"), d
        # Descending: by -value, then NaN first (two stable passes, as -NaN would tie with -inf).
        first = np.argsort(np.where(nan, 0.0, -values), axis=d, kind="stable")
        second = np.argsort(np.take_along_axis(~nan, first, axis=d), axis=d, kind="stable")
        return np.take_along_axis(first, second, axis=d), d
    # Descending by the complement (~v = -v - 1), which, unlike -v, cannot overflow.
    key = ~values.astype(np.int64) if descending else values
    return np.argsort(key, axis=d, kind="stable"), d


def _indices(order, input):
    return tensor(order.astype(np.int64), device=input.device)


def argsort(input, dim: int = -1, descending: bool = False, stable: bool = False):
    """The positions that sort `input` along `dim` (NaN counts as the largest). The order is
    always stable, so `stable` changes nothing."""
    order, _ = _order(input, dim, descending, "argsort")
    return _indices(order, input)


# (values, indices), as torch.sort and torch.topk return.
SortResult = namedtuple("sort", ["values", "indices"])
TopkResult = namedtuple("topk", ["values", "indices"])


def _taken(input, d, indices):
    """The entries of `input` at `indices` along `d` (a 0-d input: itself)."""
    return input.clone() if input.ndim == 0 else gather(input, d, indices)


def sort(input, dim: int = -1, descending: bool = False, stable: bool = False, *, out=None):
    """``(values, indices)`` of `input` sorted along `dim` (stable; NaN counts as the largest);
    gradients flow back to the entries through `values`."""
    order, d = _order(input, dim, descending, "sort")
    indices = _indices(order, input)
    return returned(SortResult(_taken(input, d, indices), indices), out, "sort")


def msort(input, *, out=None):
    """`input` sorted along its first dimension (the values of :func:`sort` with ``dim=0``)."""
    return returned(sort(input, 0).values, out, "msort")


def topk(input, k: int, dim: int = -1, largest: bool = True, sorted: bool = True, *, out=None):
    """``(values, indices)`` of the `k` largest (or smallest) entries along `dim`, largest
    first (NaN counts as the largest); gradients flow back through `values`."""
    order, d = _order(input, dim, largest, "topk")
    k = as_index(k)
    size = input.shape[d] if input.ndim else 1
    if not 0 <= k <= size:
        raise RuntimeError(f"topk(): k ({k}) must be between 0 and the size of dimension {d} ({size})")
    indices = _indices(order if input.ndim == 0 else np.take(order, np.arange(k), axis=d), input)
    return returned(TopkResult(_taken(input, d, indices), indices), out, "topk")


# ---- order statistics: kthvalue, median, mode, quantile --------------------------------------------
# Each picks positions in the stable order on the host; the values are gathered by the engine,
# so gradients flow to the entries picked.

KthvalueResult = namedtuple("kthvalue", ["values", "indices"])
MedianResult = namedtuple("median", ["values", "indices"])
NanmedianResult = namedtuple("nanmedian", ["values", "indices"])
ModeResult = namedtuple("mode", ["values", "indices"])


def _pick(input, order, d, position, keepdim, kind):
    """``(values, indices)`` of the entries at `position` (an array, one per slice along `d`,
    or a number) in `order`."""
    if input.ndim == 0:
        return kind(input.clone(), tensor(0, dtype=int64, device=input.device))
    pos = np.broadcast_to(np.asarray(position, dtype=np.int64), np.delete(order.shape, d))
    picked = np.take_along_axis(order, np.expand_dims(pos, d), axis=d)
    indices = tensor(picked.astype(np.int64), device=input.device)
    values = gather(input, d, indices)
    if not keepdim:
        values, indices = values.squeeze(d), indices.squeeze(d)
    return kind(values, indices)


def _dim_size(input, d, fn):
    n = input.shape[d] if input.ndim else 1
    if n == 0:
        raise IndexError(f"{fn}(): cannot pick from an empty dimension (dim {d} of shape {tuple(input.shape)})")
    return n


def kthvalue(input, k, dim=-1, keepdim=False, *, out=None):
    """``(values, indices)`` of the `k`-th smallest entry (1-based) along `dim`."""
    order, d = _order(input, dim, False, "kthvalue")
    n = _dim_size(input, d, "kthvalue")
    k = as_index(k)
    if not 1 <= k <= n:
        raise IndexError(f"kthvalue(): k ({k}) must be between 1 and the size of dimension {d} ({n})")
    return returned(_pick(input, order, d, k - 1, keepdim, KthvalueResult), out, "kthvalue")


def _nan_counts(input, d):
    """How many entries of each slice along `d` are not NaN."""
    v = input.numpy()
    if input.ndim == 0:
        v = v.reshape(1)
    return (~np.isnan(v)).sum(axis=d) if input.dtype.is_floating_point else np.full(np.delete(v.shape, d), v.shape[d])


def _median(input, dim, keepdim, ignore_nan, kind, fn):
    tensor_arg(input, fn)
    whole = dim is None
    t = input.reshape(-1) if whole else input
    order, d = _order(t, 0 if whole else dim, False, fn)
    n = _dim_size(t, d, fn)
    present = _nan_counts(t, d)
    if ignore_nan:  # the lower median of the entries that are not NaN (NaN when all are)
        position = np.maximum(present - 1, 0) // 2
    else:  # NaN sorts last: a slice with one gives NaN, the first of them
        position = np.where(present < n, present, (n - 1) // 2)
    r = _pick(t, order, d, position, keepdim and not whole, kind)
    return r.values if whole else r


def median(input, dim=None, keepdim=False, *, out=None):
    """The lower median of all elements, or ``(values, indices)`` along `dim`; NaN where a
    slice has a NaN."""
    return returned(_median(input, dim, keepdim, False, MedianResult, "median"), out, "median")


def nanmedian(input, dim=None, keepdim=False, *, out=None):
    """:func:`median` of the entries that are not NaN."""
    return returned(_median(input, dim, keepdim, True, NanmedianResult, "nanmedian"), out, "nanmedian")


def mode(input, dim=-1, keepdim=False, *, out=None):
    """``(values, indices)`` of the most frequent value along `dim` (the smallest of equally
    frequent ones) and the last position where it occurs."""
    order, d = _order(input, dim, False, "mode")
    n = _dim_size(input, d, "mode")
    if input.ndim == 0:
        return returned(_pick(input, order, d, 0, keepdim, ModeResult), out, "mode")
    v = np.take_along_axis(input.numpy(), order, axis=d)
    moved = np.moveaxis(v, d, -1).reshape(-1, n)
    rows = np.moveaxis(order, d, -1).reshape(-1, n)
    best = np.empty(len(moved), dtype=np.int64)
    for r, (vals, pos) in enumerate(zip(moved, rows)):
        same = np.concatenate([[False], (vals[1:] == vals[:-1]) | (np.isnan(vals[1:]) & np.isnan(vals[:-1]))
                               if vals.dtype.kind == "f" else vals[1:] == vals[:-1]])
        starts = np.flatnonzero(~same)
        ends = np.append(starts[1:], n)
        run = int(np.argmax(ends - starts))  # the first longest run: the smallest value
        best[r] = pos[starts[run]:ends[run]].max()
    picked = best.reshape(np.delete(order.shape, d))
    indices = tensor(np.expand_dims(picked, d), device=input.device)
    values = gather(input, d, indices)
    if not keepdim:
        values, indices = values.squeeze(d), indices.squeeze(d)
    return returned(ModeResult(values, indices), out, "mode")


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan, fn):
    t = tensor_arg(input, fn)
    if not t.dtype.is_floating_point:
        raise TypeError(f"{fn}(): expected a floating-point input, got {t.dtype}")
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"{fn}(): interpolation must be one of {', '.join(_INTERPOLATIONS)}, got {interpolation!r}")
    scalar_q = not isinstance(q, TensorBase)
    qs = np.asarray([q] if scalar_q else q.numpy(), dtype=np.float64)
    if qs.ndim > 1:
        raise RuntimeError(f"{fn}(): q must be a number or a 1-D tensor, got shape {qs.shape}")
    if scalar_q is False and q.dtype != t.dtype:
        raise RuntimeError(f"{fn}(): q ({q.dtype}) must have the input's dtype ({t.dtype})")
    if ((qs < 0) | (qs > 1)).any():
        raise RuntimeError(f"{fn}(): q values must be in [0, 1], got {qs.tolist()}")
    whole = dim is None
    src = t.reshape(-1) if whole else (t.reshape(1) if t.ndim == 0 else t)
    d = 0 if whole else src._wrap_dim(dim, fn)
    n = src.shape[d]
    if n == 0:
        raise RuntimeError(f"{fn}(): cannot take a quantile of an empty dimension")
    values = sort(src, d).values
    present = _nan_counts(src, d)  # per slice
    count = present if ignore_nan else np.full(present.shape, n)
    # The rank of each quantile in each slice: [len(q), *slice shape].
    rank = qs.reshape((-1,) + (1,) * present.ndim) * np.maximum(count - 1, 0)
    lo, hi = np.floor(rank), np.ceil(rank)
    if interpolation == "lower":
        hi = lo
    elif interpolation == "higher":
        lo = hi
    elif interpolation == "nearest":
        lo = hi = np.round(rank)
    weight = {"linear": rank - lo, "midpoint": np.where(hi > lo, 0.5, 0.0)}.get(interpolation, np.zeros_like(rank))
    pieces = []
    for i in range(len(qs)):
        a = gather(values, d, tensor(np.expand_dims(lo[i].astype(np.int64), d), device=t.device))
        b = gather(values, d, tensor(np.expand_dims(hi[i].astype(np.int64), d), device=t.device))
        if interpolation == "linear" and not scalar_q:
            # The weight as q's function, so that the gradient reaches q too (as PyTorch's).
            span = tensor(np.expand_dims(np.maximum(count - 1, 0), d), dtype=t.dtype, device=t.device)
            w = q[i] * span - tensor(np.expand_dims(lo[i], d), dtype=t.dtype, device=t.device)
        else:
            w = tensor(np.expand_dims(weight[i], d), dtype=t.dtype, device=t.device)
        v = a + (b - a) * w
        nan = present == 0 if ignore_nan else present < n
        if nan.any():
            v = where(tensor(np.expand_dims(nan, d), device=t.device), float("nan"), v)
        pieces.append(v)
    r = stack(pieces, 0)  # [len(q), ... with dim kept]
    if whole:
        r = r.reshape(len(qs), *([1] * t.ndim)) if keepdim else r.reshape(len(qs))
    elif not keepdim or t.ndim == 0:
        r = r.squeeze(d + 1)
    return r[0] if scalar_q else r


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """The `q`-th quantiles (a number or a 1-D tensor in [0, 1], whose length becomes the first
    dimension) over `dim` (all elements by default), interpolated between the nearest ranks as
    `interpolation` says (``linear``, ``lower``, ``higher``, ``midpoint``, ``nearest``); NaN
    where a slice has a NaN."""
    return returned(_quantile(input, q, dim, keepdim, interpolation, False, "quantile"), out, "quantile")


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """:func:`quantile` of the entries that are not NaN."""
    return returned(_quantile(input, q, dim, keepdim, interpolation, True, "nanquantile"), out, "nanquantile")


def randperm(n, *, generator=None, dtype=None, device="cpu", requires_grad=False):
    """A random permutation of 0..n-1 (int64 by default), from the generator
    ``lucid.manual_seed`` reseeds."""
    n = as_index(n)
    if n < 0:
        raise ValueError(f"randperm(): n must be non-negative, got {n}")
    return tensor(generator_rng(generator).permutation(n), dtype=int64 if dtype is None else check_dtype(dtype),
                  device=device, requires_grad=requires_grad)


def eye(n, m=None, *, dtype=None, device="cpu", requires_grad=False):
    """The n x m (n x n by default) identity matrix: ones on the diagonal, zeros elsewhere."""
    n = as_index(n)
    m = n if m is None else as_index(m)
    if n < 0 or m < 0:
        raise ValueError(f"eye(): sizes must be non-negative, got {n} and {m}")
    rows = view(arange(n, device=device), n, 1)
    cols = view(arange(m, device=device), 1, m)
    d = float32 if dtype is None else check_dtype(dtype)
    return leaf((rows == cols).to(d), requires_grad)


def diag(input, diagonal=0):
    """For a 1-D input, the square matrix with it on the `diagonal` (above the main one when
    positive, below when negative) and zeros elsewhere; for a 2-D input, a copy of that
    diagonal as a 1-D tensor. Gradients flow to the input."""
    t = tensor_arg(input, "diag")
    k = as_index(diagonal)
    if t.ndim == 2:
        return diagonal_view(t, k).clone()
    if t.ndim != 1:
        raise RuntimeError(f"diag(): expected a 1-D or 2-D input, got shape {tuple(t.shape)}")
    n = t.shape[0] + abs(k)
    i = arange(t.shape[0], device=t.device)
    return index_put(zeros(n, n, dtype=t.dtype, device=t.device), (i + max(-k, 0), i + max(k, 0)), t)


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values (sorted), and with `return_inverse` where each element's value is
    among them, with `return_counts` how often each occurs; along `dim`, the distinct slices.
    Not differentiable (as PyTorch's)."""
    t = tensor_arg(input, "unique")
    values = t.numpy()
    if dim is not None:
        d = t._wrap_dim(dim, "unique")
        found = np.unique(values, return_inverse=True, return_counts=True, axis=d)
    else:
        found = np.unique(values.reshape(-1), return_inverse=True, return_counts=True)
        found = (found[0], found[1].reshape(values.shape), found[2])
    out = [tensor(found[0], dtype=t.dtype, device=t.device)]
    if return_inverse:
        out.append(tensor(found[1].astype(np.int64).reshape(-1) if dim is not None else found[1].astype(np.int64),
                          device=t.device))
    if return_counts:
        out.append(tensor(found[2].astype(np.int64), device=t.device))
    return out[0] if len(out) == 1 else tuple(out)


# ---- in-place forms -----------------------------------------------------------------------------

def _in_place(fn, doc):
    """The in-place method of `fn` (its first argument the tensor written): the result,
    computed from a copy when autograd records the write, written into the tensor."""
    name = f"{fn.__name__}_"

    def method(self, *args, **kwargs):
        tensor_arg(self, name)
        value = fn(source(self, *args, *kwargs.values()), *args, **kwargs)
        if tuple(value.shape) != tuple(self.shape):
            raise RuntimeError(f"{name}(): the result's shape {tuple(value.shape)} is not the tensor's "
                               f"{tuple(self.shape)}")
        return assign(self, value, name, same_kind=True, result=True)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = doc
    return method


class ComposedMethods:
    """Tensor's ordering and sampling methods, and the in-place forms of the products."""

    __slots__ = ()

    addmm_ = _in_place(addmm, "``self = beta * self + alpha * (mat1 @ mat2)``, in place.")
    addmv_ = _in_place(addmv, "``self = beta * self + alpha * (mat @ vec)``, in place.")
    addr_ = _in_place(addr, "``self = beta * self + alpha * outer(vec1, vec2)``, in place.")
    baddbmm_ = _in_place(baddbmm, "``self = beta * self + alpha * bmm(batch1, batch2)``, in place.")
    addbmm_ = _in_place(addbmm, "``self = beta * self + alpha * sum_b batch1[b] @ batch2[b]``, in place.")

    sort, argsort, topk, multinomial, diag, unique = sort, argsort, topk, multinomial, diag, unique
    msort, kthvalue, median, nanmedian, mode, quantile, nanquantile = (msort, kthvalue, median, nanmedian, mode,
                                                                       quantile, nanquantile)


__all__ = ["Generator", "unique", "randint", "randperm", "multinomial", "argsort", "sort", "topk", "eye", "diag", "msort",
           "kthvalue", "median", "nanmedian", "mode", "quantile", "nanquantile"]
