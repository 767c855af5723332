"""Ops composed in Python from engine ops, with the host's help where the engine has no kernel;
with `ComposedMethods`:

- random integers and sampling (``randint``, ``multinomial``, ``normal``, ``bernoulli``, the
  in-place ``cauchy_``, ``exponential_`` …);
- ordering and order statistics (``sort``, ``argsort``, ``topk``, ``kthvalue``, ``median``,
  ``mode``, ``quantile`` …): the order is found on the host, the values gathered by the engine;
- scans (``cumprod``, ``cummax``, ``logcumsumexp``), differences and integrals (``diff``,
  ``gradient``, ``trapezoid``), statistics and distances (``cov``, ``corrcoef``, ``cdist``,
  ``renorm``) and contractions (``tensordot``, ``einsum``), differentiable through their parts;
- counting and searching on the host (``histc``, ``histogram``, ``bincount``, ``searchsorted``,
  ``isin`` …), not differentiable, as in PyTorch.

The random draws come from numpy generators seeded from the engine's stream, so
``lucid.manual_seed`` makes them reproducible like every other lucid random op.
"""

from __future__ import annotations

import builtins
import math
from collections import namedtuple

import numpy as np

from .._core import TensorBase, tensor_arg
from .._types import as_index, bool_, check_dtype, float32, float64, int32, int64
from .creation import arange, leaf, rand, tensor, zeros
from .elementwise import addbmm, addmm, addmv, addr, baddbmm, clamp, matmul, where
from .indexing import gather, index_put
from .reduce import cumsum, norm as norm_, scan, stable_logaddexp, sum as sum_
from .shape import cat, diagonal as diagonal_view, stack, view
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
    return tensor(
        values, dtype=int64 if dtype is None else check_dtype(dtype), device=device, requires_grad=requires_grad
    )


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
        raise ValueError(
            f"multinomial(): cannot draw {num_samples} samples from {rows.shape[1]} categories"
            f"{'' if replacement else ' without replacement'}"
        )
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


def argsort(input, dim: int = -1, descending: bool = False, *, stable: bool = False):
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


def sort(input, dim: int = -1, descending: bool = False, *, stable: bool = False, out=None):
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
        raise ValueError(f"topk(): k ({k}) must be between 0 and the size of dimension {d} ({size})")
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
        same = np.concatenate(
            [
                [False],
                (vals[1:] == vals[:-1]) | (np.isnan(vals[1:]) & np.isnan(vals[:-1]))
                if vals.dtype.kind == "f"
                else vals[1:] == vals[:-1],
            ]
        )
        starts = np.flatnonzero(~same)
        ends = np.append(starts[1:], n)
        run = int(np.argmax(ends - starts))  # the first longest run: the smallest value
        best[r] = pos[starts[run] : ends[run]].max()
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
    return tensor(
        generator_rng(generator).permutation(n),
        dtype=int64 if dtype is None else check_dtype(dtype),
        device=device,
        requires_grad=requires_grad,
    )


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
        out.append(
            tensor(
                found[1].astype(np.int64).reshape(-1) if dim is not None else found[1].astype(np.int64), device=t.device
            )
        )
    if return_counts:
        out.append(tensor(found[2].astype(np.int64), device=t.device))
    return out[0] if len(out) == 1 else tuple(out)


# ---- scans: cumprod, cummax, cummin, logcumsumexp ---------------------------------------------------


def _scan_dim(t, dim, fn):
    return 0 if t.ndim == 0 else t._wrap_dim(dim, fn)


def cumprod(input, dim, *, dtype=None, out=None):
    """Running products along ``dim``; integers and bools multiply in int64. The gradient is
    exact where elements are zero."""
    t = tensor_arg(input, "cumprod")
    d = _scan_dim(t, dim, "cumprod")
    t = t.to(dtype) if dtype is not None else (t if t.dtype.is_floating_point else t.to(int64))
    if t.ndim == 0:
        return returned(t.clone(), out, "cumprod")
    return returned(scan(t, d, lambda a, b: a * b, 1), out, "cumprod")


CummaxResult = namedtuple("cummax", ["values", "indices"])
CumminResult = namedtuple("cummin", ["values", "indices"])


def _cumulative_extreme(input, dim, largest, kind, fn):
    t = tensor_arg(input, fn)
    d = _scan_dim(t, dim, fn)
    if t.ndim == 0:
        return kind(t.clone(), tensor(0, dtype=int64, device=t.device))
    v = np.moveaxis(t.numpy(), d, 0)
    idx = np.zeros(v.shape, dtype=np.int64)
    best = v[0].copy()
    for i in range(1, v.shape[0]):
        x = v[i]
        # A later equal value takes the index; NaN, once met, stays (the latest NaN's index).
        better = (x >= best) if largest else (x <= best)
        if v.dtype.kind == "f":
            better = np.isnan(x) | (better & ~np.isnan(best))
        idx[i] = np.where(better, i, idx[i - 1])
        best = np.where(better, x, best)
    indices = tensor(np.moveaxis(idx, 0, d), device=t.device)
    return kind(gather(t, d, indices), indices)


def cummax(input, dim, *, out=None):
    """``(values, indices)`` of the running max along ``dim`` (a later equal value takes the
    index; NaN propagates); gradients flow to the entries picked."""
    return returned(_cumulative_extreme(input, dim, True, CummaxResult, "cummax"), out, "cummax")


def cummin(input, dim, *, out=None):
    """``(values, indices)`` of the running min along ``dim`` (see :func:`cummax`)."""
    return returned(_cumulative_extreme(input, dim, False, CumminResult, "cummin"), out, "cummin")


def logcumsumexp(input, dim, *, out=None):
    """``log(cumsum(exp(input)))`` along ``dim``, computed stably."""
    t = tensor_arg(input, "logcumsumexp")
    if not t.dtype.is_floating_point:
        raise TypeError(f"logcumsumexp(): expected a floating-point input, got {t.dtype}")
    d = _scan_dim(t, dim, "logcumsumexp")
    if t.ndim == 0:
        return returned(t.clone(), out, "logcumsumexp")
    return returned(scan(t, d, stable_logaddexp, float("-inf")), out, "logcumsumexp")


# ---- differences and integrals: diff, gradient, trapezoid -------------------------------------------


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The `n`-th forward difference along `dim` (``out[i] = input[i + 1] - input[i]``, `n`
    times), after joining `prepend` and `append` to `input` along `dim`; for bool tensors,
    whether neighbours differ."""
    t = tensor_arg(input, "diff")
    if t.ndim == 0:
        raise RuntimeError("diff(): expected a tensor with at least one dimension")
    d = t._wrap_dim(dim, "diff")
    n = as_index(n)
    if n < 0:
        raise RuntimeError(f"diff(): order n must be non-negative, got {n}")
    parts = [p for p in (prepend, t, append) if p is not None]
    for p in parts:
        tensor_arg(p, "diff", "prepend/append")
        if p.ndim != t.ndim:
            raise RuntimeError(
                f"diff(): prepend and append must have the input's {t.ndim} dimensions, got shape {tuple(p.shape)}"
            )
    if len(parts) > 1:
        t = cat(parts, d)
    for _ in range(n):
        m = t.shape[d]
        if m == 0:
            break
        a, b = t.narrow(d, 1, m - 1), t.narrow(d, 0, m - 1)
        t = (a != b) if t.dtype is bool_ else a - b
    return t


def _along(values, d, ndim, like):
    """The 1-D numpy `values` as a tensor laid along dimension `d` of an `ndim`-D tensor."""
    shape = [1] * ndim
    shape[d] = len(values)
    return tensor(np.asarray(values).reshape(shape), dtype=like.dtype, device=like.device)


def _gradient_along(t, d, x, edge_order):
    """numpy's second-order accurate central differences of `t` along `d`, at the coordinates
    `x` (a float64 array), with one-sided differences of `edge_order` at the ends."""
    n = t.shape[d]
    f = lambda start, length: t.narrow(d, start, length)  # noqa: E731
    h = np.diff(x)
    h1, h2 = h[:-1], h[1:]
    interior = (
        f(0, n - 2) * _along(-h2 / (h1 * (h1 + h2)), d, t.ndim, t)
        + f(1, n - 2) * _along((h2 - h1) / (h1 * h2), d, t.ndim, t)
        + f(2, n - 2) * _along(h1 / (h2 * (h1 + h2)), d, t.ndim, t)
    )
    if edge_order == 1:
        first = (f(1, 1) - f(0, 1)) / float(h[0])
        last = (f(n - 1, 1) - f(n - 2, 1)) / float(h[-1])
    else:
        a, b = float(h[0]), float(h[1])
        first = (
            f(0, 1) * (-(2 * a + b) / (a * (a + b))) + f(1, 1) * ((a + b) / (a * b)) + f(2, 1) * (-a / (b * (a + b)))
        )
        a, b = float(h[-2]), float(h[-1])
        last = (
            f(n - 3, 1) * (b / (a * (a + b)))
            + f(n - 2, 1) * (-(a + b) / (a * b))
            + f(n - 1, 1) * ((2 * b + a) / (b * (a + b)))
        )
    return cat([first, interior, last], d)


def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """The gradient of the samples `input` along each of `dim` (all by default), one tensor
    per dimension, by central differences inside and one-sided ones of `edge_order` (1 or 2)
    at the ends. `spacing`: one number for every dimension, one number per dimension, or one
    1-D tensor of coordinates per dimension."""
    t = tensor_arg(input, "gradient")
    if not t.dtype.is_floating_point:
        t = t.to(float32)
    if edge_order not in (1, 2):
        raise ValueError(f"gradient(): edge_order must be 1 or 2, got {edge_order!r}")
    dims = (
        list(range(t.ndim))
        if dim is None
        else [t._wrap_dim(x, "gradient") for x in (dim if isinstance(dim, (tuple, list)) else (dim,))]
    )
    if spacing is None:
        spacing = 1
    spacings = list(spacing) if isinstance(spacing, (tuple, list)) else [spacing] * len(dims)
    if len(spacings) != len(dims):
        raise RuntimeError(f"gradient(): expected {len(dims)} spacings, one per dimension, got {len(spacings)}")
    out = []
    for d, s in zip(dims, spacings):
        n = t.shape[d]
        if n < edge_order + 1:
            raise RuntimeError(
                f"gradient(): each dimension needs at least edge_order + 1 = {edge_order + 1} "
                f"samples, dimension {d} has {n}"
            )
        if isinstance(s, TensorBase):
            if s.ndim != 1 or s.shape[0] != n:
                raise RuntimeError(
                    f"gradient(): the coordinates of dimension {d} must be 1-D of size {n}, got shape {tuple(s.shape)}"
                )
            x = s.numpy().astype(np.float64)
        else:
            x = np.arange(n, dtype=np.float64) * float(s)
        out.append(_gradient_along(t, d, x, edge_order))
    return tuple(out)


def _trapezoid_parts(y, x, dx, dim, fn):
    """The intervals' widths (a tensor or a number) and the mean heights of `y` along `dim`."""
    t = tensor_arg(y, fn, "y")
    if t.ndim == 0:
        raise IndexError(f"{fn}(): y must have at least one dimension")
    d = t._wrap_dim(dim, fn)
    n = t.shape[d]
    heights = (t.narrow(d, 1, n - 1) + t.narrow(d, 0, n - 1)) * 0.5 if n else t
    if x is None:
        return (1.0 if dx is None else float(dx)), heights, d
    if dx is not None:
        raise TypeError(f"{fn}(): pass x or dx, not both")
    x = tensor_arg(x, fn, "x")
    if x.ndim == 1:
        if x.shape[0] != n:
            raise RuntimeError(f"{fn}(): x has {x.shape[0]} points where y has {n} along dim {d}")
        widths = x[1:] - x[:-1]
        return widths.reshape([-1 if i == d else 1 for i in range(t.ndim)]), heights, d
    xd = x._wrap_dim(dim, fn)
    m = x.shape[xd]
    return x.narrow(xd, 1, m - 1) - x.narrow(xd, 0, m - 1), heights, d


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The integral of `y` along `dim` by the trapezoidal rule, at the sample points `x` (a
    1-D tensor or one that broadcasts with `y`) or spaced `dx` (1 by default)."""
    widths, heights, d = _trapezoid_parts(y, x, dx, dim, "trapezoid")
    return sum_(heights * widths, d)


def trapz(y, x=None, *, dx=None, dim=-1):
    """:func:`trapezoid` (its older name)."""
    widths, heights, d = _trapezoid_parts(y, x, dx, dim, "trapz")
    return sum_(heights * widths, d)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running integrals of `y` along `dim` by the trapezoidal rule (one fewer than `y`
    has samples; see :func:`trapezoid`)."""
    widths, heights, d = _trapezoid_parts(y, x, dx, dim, "cumulative_trapezoid")
    return cumsum(heights * widths, d)


# ---- distances and statistics: cdist, dist, cov, corrcoef, renorm -----------------------------------


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The p-norm distances between each row of `x1` ``[..., P, M]`` and each row of `x2`
    ``[..., R, M]``: ``[..., P, R]``, batch dimensions broadcast."""
    for t, what in ((x1, "x1"), (x2, "x2")):
        if tensor_arg(t, "cdist", what).ndim < 2:
            raise RuntimeError(f"cdist(): {what} must have at least 2 dimensions, got shape {tuple(t.shape)}")
        if not t.dtype.is_floating_point:
            raise TypeError(f"cdist(): {what} must be floating-point, got {t.dtype}")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(
            f"cdist(): x1 and x2 must have the same number of columns, got {x1.shape[-1]} and {x2.shape[-1]}"
        )
    if p < 0:
        raise RuntimeError(f"cdist(): p must be non-negative, got {p}")
    if compute_mode not in (
        "use_mm_for_euclid_dist_if_necessary",
        "use_mm_for_euclid_dist",
        "donot_use_mm_for_euclid_dist",
    ):
        raise ValueError(f"cdist(): unknown compute_mode {compute_mode!r}")
    return norm_(x1.unsqueeze(-2) - x2.unsqueeze(-3), p, -1)


def dist(input, other, p=2):
    """The p-norm of ``input - other`` (broadcast), over all elements."""
    tensor_arg(input, "dist")
    tensor_arg(other, "dist", "other")
    return norm_(input - other, p)


def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance matrix of the variables in the rows of `input` (a 1-D input: one
    variable), its observations in the columns, weighted by the integer frequencies `fweights`
    and the observation weights `aweights`; `correction` is subtracted from the count (1,
    Bessel's, by default)."""
    t = tensor_arg(input, "cov")
    if t.ndim > 2:
        raise ValueError(f"cov(): expected a 1-D or 2-D input, got shape {tuple(t.shape)}")
    if not t.dtype.is_floating_point:
        t = t.to(float32)
    x = t.reshape(1, -1) if t.ndim < 2 else t
    n = x.shape[1]
    w = None
    if fweights is not None:
        tensor_arg(fweights, "cov", "fweights")
        if fweights.dtype.is_floating_point:
            raise TypeError(f"cov(): fweights must be integers, got {fweights.dtype}")
        if fweights.ndim > 1 or fweights.numel() != n:
            raise RuntimeError(f"cov(): fweights must be 1-D with {n} entries, got shape {tuple(fweights.shape)}")
        if bool((fweights < 0).any()):
            raise RuntimeError("cov(): fweights cannot be negative")
        w = fweights.to(x.dtype)
    if aweights is not None:
        tensor_arg(aweights, "cov", "aweights")
        if not aweights.dtype.is_floating_point:
            raise TypeError(f"cov(): aweights must be floating-point, got {aweights.dtype}")
        if aweights.ndim > 1 or aweights.numel() != n:
            raise RuntimeError(f"cov(): aweights must be 1-D with {n} entries, got shape {tuple(aweights.shape)}")
        if bool((aweights < 0).any()):
            raise RuntimeError("cov(): aweights cannot be negative")
        w = aweights if w is None else w * aweights
    if w is None:
        avg = x.mean(1, keepdim=True)
        factor = float(n) - correction
    else:
        w_sum = w.sum()
        avg = (x * w).sum(1, keepdim=True) / w_sum
        factor = w_sum - (correction if aweights is None else correction * (w * aweights).sum() / w_sum)
    factor = clamp(factor, min=0.0) if isinstance(factor, TensorBase) else max(factor, 0.0)
    centred = x - avg
    c = matmul(centred * w if w is not None else centred, centred.mT) / factor
    return c.squeeze()


def corrcoef(input):
    """Pearson's correlation coefficients of the variables in the rows of `input` (see
    :func:`cov`), clipped to [-1, 1]."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    sd = diagonal_view(c).sqrt()
    return clamp(c / sd.reshape(-1, 1) / sd.reshape(1, -1), -1.0, 1.0)


def renorm(input, p, dim, maxnorm, *, out=None):
    """`input` with each slice along `dim` whose p-norm exceeds `maxnorm` scaled down to norm
    `maxnorm`."""
    t = tensor_arg(input, "renorm")
    if t.ndim == 0:
        raise RuntimeError("renorm(): expected a tensor with at least one dimension")
    if p <= 0:
        raise RuntimeError(f"renorm(): p must be positive, got {p}")
    if maxnorm < 0:
        raise RuntimeError(f"renorm(): maxnorm must be non-negative, got {maxnorm}")
    d = t._wrap_dim(dim, "renorm")
    others = tuple(i for i in range(t.ndim) if i != d)
    norms = norm_(t, p, others, True) if others else t.abs()
    # PyTorch's small epsilon keeps the scaled norm just under maxnorm.
    factor = where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)
    return returned(t * factor, out, "renorm")


# ---- tensor contractions: tensordot, einsum ---------------------------------------------------------


def tensordot(a, b, dims=2, out=None):
    """The sum of products of `a` and `b` over the dimensions `dims` names: a number n (the
    last n of `a` with the first n of `b`) or two lists (``([a dims], [b dims])``)."""
    tensor_arg(a, "tensordot", "a")
    tensor_arg(b, "tensordot", "b")
    if isinstance(dims, TensorBase):
        dims = dims.tolist()
    if isinstance(dims, (tuple, list)):
        if len(dims) != 2:
            raise RuntimeError(f"tensordot(): dims must be a number or a pair of lists, got {dims!r}")
        da, db = ([x] if isinstance(x, int) else list(x) for x in dims)
    else:
        n = as_index(dims)
        if n < 0 or n > a.ndim or n > b.ndim:
            raise RuntimeError(
                f"tensordot(): dims ({n}) must be between 0 and the inputs' dimensions ({a.ndim}, {b.ndim})"
            )
        da, db = list(range(a.ndim - n, a.ndim)), list(range(n))
    if len(da) != len(db):
        raise RuntimeError(f"tensordot(): both inputs must contract as many dimensions, got {da} and {db}")
    da = [a._wrap_dim(x, "tensordot") for x in da]
    db = [b._wrap_dim(x, "tensordot") for x in db]
    sa, sb = list(a.shape), list(b.shape)
    for i, j in zip(da, db):
        if sa[i] != sb[j]:
            if 1 not in (sa[i], sb[j]):
                raise RuntimeError(
                    f"tensordot(): contracted dimensions {i} of a (size {sa[i]}) and {j} of b (size {sb[j]}) differ"
                )
            sa[i] = sb[j] = builtins.max(sa[i], sb[j])  # a size 1 broadcasts, as in PyTorch
    a, b = a.expand(*sa), b.expand(*sb)
    keep_a = [i for i in range(a.ndim) if i not in da]
    keep_b = [j for j in range(b.ndim) if j not in db]
    k = math.prod(a.shape[i] for i in da)
    left = a.permute(*keep_a, *da).reshape(-1, k)
    right = b.permute(*db, *keep_b).reshape(k, -1)
    r = matmul(left, right).reshape(*(a.shape[i] for i in keep_a), *(b.shape[j] for j in keep_b))
    return returned(r, out, "tensordot")


def _einsum_terms(equation, operands):
    """The labels of each operand (ellipses expanded into labels of their own, aligned from the
    right) and of the output."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ValueError(f"einsum(): the equation has {len(terms)} operands, {len(operands)} were given")
    ellipsis = 0
    for term, t in zip(terms, operands):
        if "..." in term:
            ellipsis = builtins.max(ellipsis, t.ndim - len(term.replace("...", "")))
    dots = [chr(0x100 + i) for i in range(ellipsis)]  # letters outside ASCII: no equation uses them

    def expand(term, ndim):
        if term.replace("...", "").count(".") or term.count("...") > 1:
            raise ValueError(f"einsum(): invalid term {term!r} in {equation!r}")
        if "..." not in term:
            return list(term)
        head, _, tail = term.partition("...")
        n = ndim - len(head) - len(tail)
        if n < 0:
            raise ValueError(f"einsum(): term {term!r} has more labels than its operand's {ndim} dimensions")
        return list(head) + dots[ellipsis - n :] + list(tail)

    labels = [expand(term, t.ndim) for term, t in zip(terms, operands)]
    for term, t, ls in zip(terms, operands, labels):
        if len(ls) != t.ndim:
            raise ValueError(f"einsum(): term {term!r} has {len(ls)} labels for an operand of {t.ndim} dimensions")
        if not builtins.all(c.isalpha() for c in ls) or not term.replace("...", "").isascii():
            raise ValueError(f"einsum(): labels must be letters, got {term!r}")
    if arrow:
        output = expand(rhs, len(dots) + len(rhs.replace("...", ""))) if "..." in rhs else list(rhs)
        every = {c for ls in labels for c in ls}
        for c in output:
            if c not in every:
                raise ValueError(f"einsum(): output label {c!r} appears in no operand")
        if len(set(output)) != len(output):
            raise ValueError(f"einsum(): output labels repeat in {rhs!r}")
    else:
        counts = {}
        for ls in labels:
            for c in ls:
                counts[c] = counts.get(c, 0) + 1
        output = dots + sorted(c for c, k in counts.items() if k == 1 and c not in dots)
    return labels, output


def einsum(equation, *operands):
    """Sums of products of the operands' entries, as the equation in Einstein's notation says
    (``"ij,jk->ik"``; ``...`` for broadcast dimensions; without ``->``, the labels that occur
    once, sorted). Operands may be passed as one list."""
    if not isinstance(equation, str):
        raise TypeError(f"einsum(): equation must be a string, got {type(equation).__name__}")
    if len(operands) == 1 and isinstance(operands[0], (tuple, list)):
        operands = tuple(operands[0])
    for t in operands:
        tensor_arg(t, "einsum", "operand")
    labels, output = _einsum_terms(equation, operands)
    sizes = {}
    views = []
    for t, ls in zip(operands, labels):
        # A label repeated within one operand takes its diagonal.
        ls = list(ls)
        while len(set(ls)) != len(ls):
            c = next(c for c in ls if ls.count(c) > 1)
            i = ls.index(c)
            j = ls.index(c, i + 1)
            t = diagonal_view(t, 0, i, j)
            ls = [x for k, x in enumerate(ls) if k not in (i, j)] + [c]
        for c, n in zip(ls, t.shape):
            if n != 1 and sizes.get(c, 1) not in (1, n):
                raise RuntimeError(f"einsum(): label {c!r} has sizes {sizes[c]} and {n}")
            if n != 1 or c not in sizes:
                sizes[c] = n
        views.append((t, ls))
    # Pairwise, left to right: each step a batched matrix product over the labels the two share
    # and nothing later needs, so no intermediate holds more than its operands and result.
    t, ls = views[0]
    for k in range(1, len(views)):
        later = set(output).union(*(set(x) for _, x in views[k + 1 :]))
        t, ls = _contract(t, ls, *views[k], later, sizes)
    t, ls = _sum_out(t, ls, set(output))
    t = t.permute(*(ls.index(c) for c in output)) if t.ndim else t
    full = tuple(sizes[c] for c in output)
    # A label of size 1 in every operand that has it, but larger in the output's own sizes: broadcast.
    return t.expand(*full) if tuple(t.shape) != full else t


def _sum_out(t, ls, keep):
    """`t` summed over its labels not in `keep`."""
    gone = [i for i, c in enumerate(ls) if c not in keep]
    if not gone:
        return t, ls
    return sum_(t, tuple(gone)), [c for c in ls if c in keep]


def _contract(a, la, b, lb, later, sizes):
    """The product of `a` and `b` (labelled `la`, `lb`) summed over the labels they share that
    `later` does not need, as one batched matmul; its labels follow."""
    a, la = _sum_out(a, la, later | set(lb))
    b, lb = _sum_out(b, lb, later | set(la))
    shared = [c for c in la if c in lb]
    batch = [c for c in shared if c in later]
    inner = [c for c in shared if c not in later]
    left = [c for c in la if c not in lb]
    right = [c for c in lb if c not in la]

    def arranged(t, ls, first, second, third):
        """`t` as [first, second, third], each group of labels merged into one dimension."""
        order = first + second + third
        t = t.permute(*(ls.index(c) for c in order)) if t.ndim else t
        # A shared label of size 1 in this operand broadcasts to the other's size.
        t = t.expand(*(sizes[c] if c in shared else n for c, n in zip(order, t.shape)))
        return t.reshape([math.prod(t.shape[order.index(c)] for c in g) for g in (first, second, third)])

    a3 = arranged(a, la, batch, left, inner)
    b3 = arranged(b, lb, batch, inner, right)
    r = matmul(a3, b3)
    dims = [sizes[c] for c in batch] + [a.shape[la.index(c)] for c in left] + [b.shape[lb.index(c)] for c in right]
    return r.reshape(dims), batch + left + right


# ---- counting and searching on the host: histograms, bincount, bucketize, searchsorted, isin ------
# Not differentiable (as in PyTorch): each reads its input once and makes its result from numpy.

HistogramResult = namedtuple("histogram", ["hist", "bin_edges"])
HistogramddResult = namedtuple("histogramdd", ["hist", "bin_edges"])


def _linspace(lo, hi, n, np_dtype):
    """n points from lo to hi in `np_dtype`, each computed from the nearer end (PyTorch's
    linspace, so that edges agree to the bit)."""
    lo, hi = np_dtype.type(lo), np_dtype.type(hi)
    if n == 1:
        return np.array([lo], dtype=np_dtype)
    step = (hi - lo) / np_dtype.type(n - 1)
    i = np.arange(n)
    half = n // 2
    return np.where(i < half, lo + step * i.astype(np_dtype), hi - step * (n - 1 - i).astype(np_dtype)).astype(np_dtype)


def _bin_positions(x, edges, linear, local_search):
    """The bin of each value of `x` (-1 outside the edges): by the edges' linear spacing (with a
    look at the neighbouring edges when `local_search`), else by binary search; the last edge
    belongs to the last bin."""
    n = len(edges) - 1
    lo, hi = edges[0], edges[-1]
    inside = (x >= lo) & (x <= hi)
    if linear:
        with np.errstate(all="ignore"):
            pos = np.trunc((x - lo) * x.dtype.type(n) / (hi - lo))
        pos = np.where(inside, pos, 0).astype(np.int64)
        if local_search:
            # An upper-bound search among the edges pos-1 .. pos+1, as PyTorch refines the guess.
            low, high = np.maximum(pos - 1, 0), np.minimum(pos + 2, n + 1)
            bound = high.copy()
            for shift in (1, 0, -1):
                k = pos + shift
                ok = (k >= low) & (k < high)
                bound = np.where(ok & (edges[np.clip(k, 0, n)] > x), k, bound)
            pos = bound - 1
    else:
        pos = np.searchsorted(edges, x, side="right") - 1
    pos = np.where(pos >= n, n - 1, pos)
    return np.where(inside, pos, -1)


def _float_input(t, fn):
    if not t.dtype.is_floating_point:
        raise RuntimeError(f"{fn}(): expected a floating-point input, got {t.dtype}")
    return t.numpy()


def histc(input, bins=100, min=0, max=0, *, out=None):
    """The counts of `input`'s elements in `bins` equal bins between `min` and `max` (the data's
    own min and max when both are 0; elements outside are not counted)."""
    t = tensor_arg(input, "histc")
    x = _float_input(t, "histc").reshape(-1)
    bins = as_index(bins)
    if bins <= 0:
        raise RuntimeError(f"histc(): bins must be positive, got {bins}")
    lo, hi = x.dtype.type(min), x.dtype.type(max)
    if lo == hi and x.size:
        lo, hi = x.min(), x.max()
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if lo > hi or not (np.isfinite(lo) and np.isfinite(hi)):
        raise RuntimeError(f"histc(): min ({lo}) must not exceed max ({hi}), and both must be finite")
    edges = _linspace(lo, hi, bins + 1, x.dtype)
    edges[0], edges[-1] = lo, hi
    pos = _bin_positions(x, edges, True, False)
    counts = np.bincount(pos[pos >= 0], minlength=bins).astype(x.dtype)
    return returned(tensor(counts, dtype=t.dtype, device=t.device), out, "histc")


def _histogramdd(t, bins, range, weight, density, fn):
    x = _float_input(tensor_arg(t, fn), fn)
    d = x.shape[-1] if x.ndim else 1
    points = x.reshape(-1, d)
    if isinstance(bins, TensorBase) or isinstance(bins, int):
        bins = [bins] * d
    bins = list(bins)
    if len(bins) != d:
        raise ValueError(f"{fn}(): expected {d} bin counts or edge tensors, one per dimension, got {len(bins)}")
    if range is not None and len(range) != 2 * d:
        raise ValueError(f"{fn}(): range must hold {2 * d} numbers (a min and max per dimension), got {len(range)}")
    w = None
    if weight is not None:
        tensor_arg(weight, fn, "weight")
        if tuple(weight.shape) != tuple(x.shape[:-1]):
            raise RuntimeError(f"{fn}(): weight must have the shape {tuple(x.shape[:-1])}, got {tuple(weight.shape)}")
        w = weight.numpy().reshape(-1).astype(x.dtype)
    edges, positions = [], []
    for k, b in enumerate(bins):
        col = points[:, k]
        if isinstance(b, TensorBase):
            e = b.numpy().astype(x.dtype).reshape(-1)
            if e.size < 2:
                raise ValueError(f"{fn}(): a tensor of bin edges needs at least 2 of them, got {e.size}")
            positions.append(_bin_positions(col, e, False, False))
        else:
            n = as_index(b)
            if n <= 0:
                raise ValueError(f"{fn}(): bins must be positive, got {n}")
            if range is not None:
                lo, hi = x.dtype.type(range[2 * k]), x.dtype.type(range[2 * k + 1])
            elif col.size:
                lo, hi = col.min(), col.max()
            else:  # no data: the unit interval, as PyTorch
                lo, hi = x.dtype.type(0), x.dtype.type(1)
            if lo > hi:
                raise ValueError(f"{fn}(): the range's min ({lo}) exceeds its max ({hi})")
            if lo == hi:
                lo, hi = lo - x.dtype.type(0.5), hi + x.dtype.type(0.5)
            e = _linspace(lo, hi, n + 1, x.dtype)
            positions.append(_bin_positions(col, e, True, True))
        edges.append(e)
    shape = tuple(len(e) - 1 for e in edges)
    keep = np.all(np.stack(positions, 1) >= 0, 1) if positions else np.ones(len(points), bool)
    flat = np.ravel_multi_index(tuple(p[keep] for p in positions), shape) if keep.any() else np.zeros(0, np.int64)
    hist = np.bincount(flat, weights=None if w is None else w[keep], minlength=int(np.prod(shape))).astype(x.dtype)
    hist = hist.reshape(shape)
    if density:
        total = hist.sum()
        widths = np.ones(shape, dtype=x.dtype)
        for k, e in enumerate(edges):
            widths = widths * np.diff(e).reshape([-1 if i == k else 1 for i in builtins.range(d)])
        with np.errstate(all="ignore"):
            hist = (hist / total / widths).astype(x.dtype)
    return (tensor(hist, dtype=t.dtype, device=t.device), [tensor(e, dtype=t.dtype, device=t.device) for e in edges])


def histogram(input, bins, *, range=None, weight=None, density=False, out=None):
    """``(hist, bin_edges)``: the counts (or summed `weight`) of `input`'s elements in the bins,
    `bins` of them equal over `range` (the data's min and max by default) or between the edges
    of the 1-D tensor `bins`; with `density`, normalised to integrate to 1."""
    t = tensor_arg(input, "histogram")
    if isinstance(weight, TensorBase) and tuple(weight.shape) != tuple(t.shape):
        raise RuntimeError(
            f"histogram(): weight must have the input's shape {tuple(t.shape)}, got {tuple(weight.shape)}"
        )
    hist, edges = _histogramdd(
        t.reshape(-1, 1),
        [bins],
        range,
        weight.reshape(-1) if isinstance(weight, TensorBase) else weight,
        density,
        "histogram",
    )
    return returned(HistogramResult(hist, edges[0]), out, "histogram")


def histogramdd(input, bins, *, range=None, weight=None, density=False):
    """``(hist, bin_edges)`` of the points in the last dimension of `input` ``[..., D]``: the
    D-dimensional histogram and the D tensors of edges (`bins`: a count for all dimensions, a
    count per dimension, or a tensor of edges per dimension)."""
    t = tensor_arg(input, "histogramdd")
    if t.ndim < 1:
        raise ValueError("histogramdd(): expected an input of at least 1 dimension")
    hist, edges = _histogramdd(t, bins, range, weight, density, "histogramdd")
    return HistogramddResult(hist, edges)


def bincount(input, weights=None, minlength=0):
    """How often each value 0..max occurs in the 1-D non-negative integer `input` (at least
    `minlength` counts); with `weights`, their sums instead (float64, or the weights' dtype
    when float32 or float64)."""
    t = tensor_arg(input, "bincount")
    if t.ndim != 1 or t.dtype.is_floating_point or t.dtype is bool_:
        raise RuntimeError(f"bincount(): expected a 1-D integer tensor, got {t.dtype} of shape {tuple(t.shape)}")
    v = t.numpy().astype(np.int64)
    if (v < 0).any():
        raise RuntimeError("bincount(): input must be non-negative")
    minlength = as_index(minlength)
    if minlength < 0:
        raise RuntimeError(f"bincount(): minlength must be non-negative, got {minlength}")
    if weights is None:
        return tensor(np.bincount(v, minlength=minlength).astype(np.int64), device=t.device)
    tensor_arg(weights, "bincount", "weights")
    if tuple(weights.shape) != tuple(t.shape):
        raise RuntimeError(
            f"bincount(): weights must have the input's shape {tuple(t.shape)}, got {tuple(weights.shape)}"
        )
    dtype = weights.dtype if weights.dtype in (float32, float64) else float64
    return tensor(np.bincount(v, weights.numpy().astype(np.float64), minlength), dtype=dtype, device=t.device)


def _as_tensor_like(v, like):
    return v if isinstance(v, TensorBase) else tensor(v, dtype=like.dtype, device=like.device)


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None, out=None):
    """Where each value of `input` would go in `sorted_sequence` to keep it sorted (its
    innermost dimension, the leading ones matching `input`'s): the first such place, or with
    ``right`` / ``side="right"`` the last. `sorter` orders an unsorted sequence."""
    seq = tensor_arg(sorted_sequence, "searchsorted", "sorted_sequence")
    scalar_input = not isinstance(input, TensorBase)
    values = _as_tensor_like(input, seq)
    if side is not None:
        if side not in ("left", "right"):
            raise ValueError(f"searchsorted(): side must be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise RuntimeError("searchsorted(): side='left' contradicts right=True")
        right = side == "right"
    s = seq.numpy()
    if sorter is not None:
        tensor_arg(sorter, "searchsorted", "sorter")
        if tuple(sorter.shape) != tuple(seq.shape) or sorter.dtype.is_floating_point:
            raise RuntimeError(f"searchsorted(): sorter must be integers of the sequence's shape {tuple(seq.shape)}")
        s = np.take_along_axis(s, sorter.numpy().astype(np.int64), -1)
    v = values.numpy()
    how = "right" if right else "left"
    if s.ndim <= 1:
        r = np.searchsorted(s.reshape(-1), v, side=how)
    else:
        if scalar_input or tuple(s.shape[:-1]) != tuple(v.shape[:-1]):
            raise RuntimeError(
                f"searchsorted(): the leading dimensions of sorted_sequence {tuple(s.shape)} and input "
                f"{tuple(v.shape)} must match"
            )
        lead = int(np.prod(s.shape[:-1]))
        rows, vals = s.reshape(lead, s.shape[-1]), v.reshape(lead, v.shape[-1])
        r = (
            np.stack([np.searchsorted(a, b, side=how) for a, b in zip(rows, vals)]).reshape(v.shape)
            if len(rows)
            else np.zeros(v.shape, np.int64)
        )
    return returned(tensor(np.asarray(r), dtype=int32 if out_int32 else int64, device=seq.device), out, "searchsorted")


def bucketize(input, boundaries, *, out_int32=False, right=False, out=None):
    """The bucket of each value of `input` among the increasing 1-D `boundaries`: i with
    ``boundaries[i-1] < x <= boundaries[i]`` (with `right`, ``boundaries[i-1] <= x <
    boundaries[i]``)."""
    b = tensor_arg(boundaries, "bucketize", "boundaries")
    if b.ndim != 1:
        raise RuntimeError(f"bucketize(): boundaries must be 1-D, got shape {tuple(b.shape)}")
    return returned(searchsorted(b, input, out_int32=out_int32, right=right), out, "bucketize")


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each of `elements` is among `test_elements` (either may be a number); bool."""
    if not isinstance(elements, TensorBase) and not isinstance(test_elements, TensorBase):
        raise TypeError("isin(): elements or test_elements must be a lucid.Tensor")
    like = elements if isinstance(elements, TensorBase) else test_elements
    e = _as_tensor_like(elements, like).numpy()
    found = np.isin(e, _as_tensor_like(test_elements, like).numpy(), invert=invert)
    return tensor(np.asarray(found), dtype=bool_, device=like.device)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """`input` with each run of equal consecutive elements (or slices along `dim`) kept once;
    with `return_inverse` the run each element belongs to, with `return_counts` the runs'
    lengths."""
    t = tensor_arg(input, "unique_consecutive")
    v = t.numpy()
    if dim is None:
        flat = v.reshape(-1)
        starts = np.flatnonzero(np.concatenate([[True], flat[1:] != flat[:-1]])) if flat.size else np.zeros(0, int)
        values = flat[starts]
        inverse_shape = v.shape
        n = flat.size
    else:
        d = t._wrap_dim(dim, "unique_consecutive")
        moved = np.moveaxis(v, d, 0)
        n = moved.shape[0]
        rows = moved.reshape(n, int(np.prod(moved.shape[1:])))
        change = (rows[1:] != rows[:-1]).any(1) if n else np.zeros(0, bool)
        starts = np.flatnonzero(np.concatenate([[True], change])) if n else np.zeros(0, int)
        values = np.moveaxis(moved[starts], 0, d)
        inverse_shape = (n,)
    out = [tensor(values, dtype=t.dtype, device=t.device)]
    if return_inverse:
        run = np.cumsum(np.isin(np.arange(n), starts)) - 1
        out.append(tensor(run.reshape(inverse_shape).astype(np.int64), device=t.device))
    if return_counts:
        out.append(tensor(np.diff(np.append(starts, n)).astype(np.int64), device=t.device))
    return out[0] if len(out) == 1 else tuple(out)


# ---- random samplers: normal, bernoulli, randint_like, and the in-place distributions --------------


def _drawn(values, like_dtype, device):
    return tensor(np.asarray(values), dtype=like_dtype, device=device)


def _float_dtype(dtype, fn):
    d = float32 if dtype is None else check_dtype(dtype)
    if not d.is_floating_point:
        raise TypeError(f"{fn}(): expected a floating-point dtype, got {d}")
    return d


def normal(
    mean,
    std=1.0,
    size=None,
    *,
    generator=None,
    out=None,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=False,
    requires_grad=False,
):
    """Normal samples of `mean` and standard deviation `std` (tensors broadcast together, or
    numbers with a `size`), as ``mean + std * z``: a gradient reaches tensor means and
    deviations."""
    if layout not in (None, "strided"):
        raise ValueError(f"normal(): only the strided layout is supported, got {layout!r}")
    tensors = [v for v in (mean, std) if isinstance(v, TensorBase)]
    if tensors:
        if size is not None:
            raise TypeError("normal(): size is taken only when mean and std are numbers")
        for v, what in ((mean, "mean"), (std, "std")):
            if isinstance(v, TensorBase):
                if not v.dtype.is_floating_point:
                    raise TypeError(f"normal(): {what} must be floating-point, got {v.dtype}")
            elif not isinstance(v, (int, float)):
                raise TypeError(f"normal(): {what} must be a tensor or a number, got {type(v).__name__}")
        if not isinstance(std, TensorBase) and std < 0:
            raise RuntimeError(f"normal(): std must be non-negative, got {std}")
        if isinstance(std, TensorBase) and bool((std < 0).any()):
            raise RuntimeError("normal(): std must be non-negative")
        shape = tuple(np.broadcast_shapes(*(tuple(v.shape) for v in tensors)))
        like = tensors[0]
        z = _drawn(generator_rng(generator).standard_normal(shape), like.dtype, like.device)
        r = z * std + mean
    else:
        if size is None:
            raise TypeError("normal(): with a number mean and std, give a size")
        if std < 0:
            raise RuntimeError(f"normal(): std must be non-negative, got {std}")
        shape = tuple(as_index(s) for s in (size if isinstance(size, (tuple, list)) else (size,)))
        d = _float_dtype(dtype, "normal")
        r = leaf(
            _drawn(generator_rng(generator).normal(float(mean), float(std), shape), d, device or "cpu"), requires_grad
        )
    return returned(r, out, "normal")


def bernoulli(input, p=None, *, generator=None, out=None):
    """Zeros and ones drawn with the probabilities `input` (or the one probability `p`), in
    `input`'s dtype; the gradient to `input` is zero, as PyTorch's."""
    t = tensor_arg(input, "bernoulli")
    if not t.dtype.is_floating_point:
        raise TypeError(f"bernoulli(): expected floating-point probabilities, got {t.dtype}")
    probs = np.full(tuple(t.shape), float(p)) if p is not None else t.numpy().astype(np.float64)
    if ((probs < 0) | (probs > 1) | np.isnan(probs)).any():
        raise RuntimeError("bernoulli(): probabilities must be in [0, 1]")
    drawn = _drawn(generator_rng(generator).random(probs.shape) < probs, t.dtype, t.device)
    # Tied to the input with a zero weight, so that the result is in its graph.
    return returned(drawn + t * 0.0 if t.requires_grad else drawn, out, "bernoulli")


def randint_like(
    input,
    low=0,
    high=None,
    *,
    generator=None,
    dtype=None,
    layout=None,
    device=None,
    requires_grad=False,
    memory_format=None,
):
    """Integers drawn uniformly from [low, high) in `input`'s shape (and dtype unless given);
    ``randint_like(input, high)`` draws from [0, high)."""
    t = tensor_arg(input, "randint_like")
    if high is None:
        low, high = 0, low
    return randint(
        low,
        high,
        tuple(t.shape),
        generator=generator,
        dtype=dtype or t.dtype,
        device=device or t.device,
        requires_grad=requires_grad,
    )


def _fill_drawn(self, values, name):
    """Writes the numpy `values` into `self`, in place (not recorded by autograd)."""
    return assign(self, _drawn(values, self.dtype, self.device), name)


def _random_float_tensor(self, name):
    tensor_arg(self, name)
    if not self.dtype.is_floating_point:
        raise TypeError(f"{name}(): expected a floating-point tensor, got {self.dtype}")
    return tuple(self.shape)


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    """Fills with samples of the Cauchy distribution of this `median` and scale `sigma`."""
    shape = _random_float_tensor(self, "cauchy_")
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
    return _fill_drawn(self, median + sigma * generator_rng(generator).standard_cauchy(shape), "cauchy_")


def exponential_(self, lambd=1.0, *, generator=None):
    """Fills with samples of the exponential distribution of rate `lambd` (all positive)."""
    shape = _random_float_tensor(self, "exponential_")
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    rng = generator_rng(generator)
    # -log(1 - u) with u in [0, 1): never 0 after rounding, as PyTorch's samples.
    values = -np.log1p(-rng.random(shape)) / lambd
    return _fill_drawn(self, np.maximum(values, np.finfo(np.float32).tiny), "exponential_")


def geometric_(self, p, *, generator=None):
    """Fills with the number of Bernoulli(`p`) trials up to the first success (1, 2, ...)."""
    tensor_arg(self, "geometric_")
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    return _fill_drawn(self, generator_rng(generator).geometric(p, tuple(self.shape)), "geometric_")


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    """Fills with ``exp(x)`` for normal samples x of this `mean` and `std`."""
    shape = _random_float_tensor(self, "log_normal_")
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    return _fill_drawn(self, generator_rng(generator).lognormal(mean, std, shape), "log_normal_")


def bernoulli_(self, p=0.5, *, generator=None):
    """Fills with zeros and ones drawn with probability `p` (a number, or a tensor that
    broadcasts to this shape)."""
    tensor_arg(self, "bernoulli_")
    probs = p.numpy().astype(np.float64) if isinstance(p, TensorBase) else float(p)
    probs = np.broadcast_to(probs, tuple(self.shape))
    if ((probs < 0) | (probs > 1) | np.isnan(probs)).any():
        raise RuntimeError("bernoulli_(): probabilities must be in [0, 1]")
    return _fill_drawn(self, generator_rng(generator).random(probs.shape) < probs, "bernoulli_")


# ---- in-place forms -----------------------------------------------------------------------------


def _in_place(fn, doc):
    """The in-place method of `fn` (its first argument the tensor written): the result,
    computed from a copy when autograd records the write, written into the tensor."""
    name = f"{fn.__name__}_"

    def method(self, *args, **kwargs):
        tensor_arg(self, name)
        value = fn(source(self, *args, *kwargs.values()), *args, **kwargs)
        if tuple(value.shape) != tuple(self.shape):
            raise RuntimeError(
                f"{name}(): the result's shape {tuple(value.shape)} is not the tensor's {tuple(self.shape)}"
            )
        return assign(self, value, name, same_kind=True, result=True)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = doc
    return method


# ---- segment reductions and hashing --------------------------------------------------------

_SEGMENT_IDENTITY = {"max": -math.inf, "min": math.inf, "sum": 0.0, "mean": 0.0, "prod": 1.0}


def _segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0, unsafe=False, initial=None):
    """Reduces ``data`` along ``axis`` over consecutive segments: ``reduce`` one of ``"max"``,
    ``"min"``, ``"sum"``, ``"mean"``, ``"prod"``; the segments given by ``lengths`` (of shape
    ``data.shape[:axis] + (segments,)``) or by ``offsets`` (their starts and the end, one more
    along the last dimension). ``initial`` joins every segment's reduction (an empty segment gives
    it; without it max gives -inf, min inf, sum 0, prod 1, mean NaN). Unless ``unsafe``, the
    lengths must be non-negative and cover ``data.shape[axis]``. Differentiable in ``data``."""
    fn = "_segment_reduce"
    tensor_arg(data, fn, "data")
    if reduce not in _SEGMENT_IDENTITY:
        raise ValueError(f"{fn}(): reduce must be one of {', '.join(map(repr, _SEGMENT_IDENTITY))}, got {reduce!r}")
    if indices is not None:
        raise NotImplementedError(f"{fn}(): segments given by indices are not supported (nor in PyTorch)")
    if (lengths is None) == (offsets is None):
        raise ValueError(f"{fn}(): give exactly one of lengths and offsets")
    seg = lengths if lengths is not None else offsets
    what = "lengths" if lengths is not None else "offsets"
    tensor_arg(seg, fn, what)
    if seg.dtype.is_floating_point or seg.dtype == bool_:
        raise TypeError(f"{fn}(): {what} must be an integer tensor, got {seg.dtype}")
    if not data.dtype.is_floating_point:
        raise TypeError(f"{fn}(): data must be floating point, got {data.dtype}")
    ax = as_index(axis)
    ax = ax + data.ndim if -data.ndim <= ax < 0 else ax
    if not 0 <= ax < data.ndim or seg.ndim != ax + 1 or tuple(seg.shape[:ax]) != tuple(data.shape[:ax]):
        raise ValueError(
            f"{fn}(): {what} of shape {tuple(seg.shape)} must have shape data.shape[:axis] + "
            f"(segments,) for data of shape {tuple(data.shape)} and axis {axis}"
        )
    s = seg.detach().numpy().astype(np.int64)
    if offsets is not None:
        if s.shape[-1] == 0:
            raise ValueError(f"{fn}(): offsets must hold at least one entry along their last dimension")
        starts, lens = s[..., :-1], np.diff(s, axis=-1)
    else:
        lens = s
        starts = np.cumsum(s, axis=-1) - s
    n = data.shape[ax]
    if (lens < 0).any():
        raise ValueError(f"{fn}(): {what} must give segments of non-negative length")
    if not unsafe and not (lens.sum(-1) == n).all():
        raise ValueError(f"{fn}(): the segments must cover dimension {ax} (of size {n}) of data exactly")
    if ((starts + lens) > n).any() or (starts < 0).any():
        raise ValueError(f"{fn}(): the segments reach past dimension {ax} (of size {n}) of data")
    outer, inner = tuple(data.shape[:ax]), tuple(data.shape[ax + 1 :])
    count = lens.shape[-1]
    width = builtins.max(int(lens.max()) if lens.size else 0, 1)
    j = np.arange(width)
    valid = j < lens[..., None]  # outer + (count, width)
    pos = np.where(valid, starts[..., None] + j, 0)
    fill = _SEGMENT_IDENTITY[reduce]
    shape = outer + (count * width,) + (1,) * len(inner)
    full_shape = outer + (count * width,) + inner
    if n == 0:
        picked = zeros(full_shape, dtype=data.dtype, device=data.device)
    else:
        index = tensor(pos.reshape(outer + (count * width,)), dtype=int64, device=data.device)
        picked = gather(data, ax, index.reshape(*shape).expand(*full_shape))
    picked = picked.reshape(*(outer + (count, width) + inner))
    mask = tensor(valid.reshape(outer + (count, width) + (1,) * len(inner)), dtype=bool_, device=data.device)
    picked = where(mask, picked, tensor(fill, dtype=data.dtype, device=data.device))
    if reduce in ("sum", "mean"):
        r = picked.sum(ax + 1)
    elif reduce == "prod":
        r = picked.prod(ax + 1)
    elif reduce == "max":
        r = picked.amax(ax + 1)
    else:
        r = picked.amin(ax + 1)
    lens_t = tensor(lens.reshape(outer + (count,) + (1,) * len(inner)), dtype=data.dtype, device=data.device)
    if initial is not None:
        init = float(initial)
        if reduce in ("sum", "mean"):
            r = r + init
        elif reduce == "prod":
            r = r * init
        else:  # (clamp keeps a NaN of the segment, as PyTorch's max and min)
            r = r.clamp(min=init) if reduce == "max" else r.clamp(max=init)
    if reduce == "mean":
        empty = lens_t == 0
        r = where(
            empty,
            r if initial is not None else tensor(math.nan, dtype=data.dtype, device=data.device),
            r / where(empty, tensor(1.0, dtype=data.dtype, device=data.device), lens_t),
        )
    return r


def hash_tensor(input, dim=(), *, keepdim=False, mode=0):
    """A hash of the entries over ``dim`` (all dimensions when it is None or empty): the xor of
    their 64-bit patterns, each entry first widened to float64 (floating point) or int64
    (integers and bool). PyTorch returns uint64; lucid, which has no unsigned 64-bit dtype,
    returns those 64 bits as int64. Not differentiable."""
    fn = "hash_tensor"
    tensor_arg(input, fn)
    if as_index(mode) != 0:
        raise ValueError(f"{fn}(): mode must be 0 (xor reduction), got {mode!r}")
    x = input.detach()
    a = x.to(float64 if x.dtype.is_floating_point else int64).numpy()
    bits = np.array(a, order="C").view(np.uint64)
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        dims = tuple(range(x.ndim))
    else:
        dims = tuple(as_index(d) for d in ((dim,) if not isinstance(dim, (tuple, list)) else dim))
        nd = builtins.max(x.ndim, 1)
        for d in dims:
            if not -nd <= d < nd:
                raise IndexError(f"{fn}(): dim {d} is out of range for a tensor of {x.ndim} dimensions")
        dims = tuple(sorted({d % nd for d in dims})) if x.ndim else ()
    r = np.bitwise_xor.reduce(bits, axis=dims, keepdims=bool(keepdim)) if dims else bits.copy()
    if x.ndim == 0 and keepdim:
        r = r.reshape(())
    return tensor(np.array(r, order="C").view(np.int64), dtype=int64, device=input.device)  # (0-d stays 0-d)


class ComposedMethods:
    """Tensor's ordering and sampling methods, and the in-place forms of the products."""

    __slots__ = ()

    addmm_ = _in_place(addmm, "``self = beta * self + alpha * (mat1 @ mat2)``, in place.")
    addmv_ = _in_place(addmv, "``self = beta * self + alpha * (mat @ vec)``, in place.")
    addr_ = _in_place(addr, "``self = beta * self + alpha * outer(vec1, vec2)``, in place.")
    baddbmm_ = _in_place(baddbmm, "``self = beta * self + alpha * bmm(batch1, batch2)``, in place.")
    cumprod, cummax, cummin, logcumsumexp, diff, renorm = cumprod, cummax, cummin, logcumsumexp, diff, renorm
    dist, cov, corrcoef = dist, cov, corrcoef
    histc, histogram, bincount, unique_consecutive = histc, histogram, bincount, unique_consecutive
    bernoulli, bernoulli_, cauchy_, exponential_, geometric_, log_normal_ = (
        bernoulli,
        bernoulli_,
        cauchy_,
        exponential_,
        geometric_,
        log_normal_,
    )
    cumprod_ = _in_place(cumprod, "`cumprod`, in place.")
    renorm_ = _in_place(renorm, "`renorm`, in place.")
    addbmm_ = _in_place(addbmm, "``self = beta * self + alpha * sum_b batch1[b] @ batch2[b]``, in place.")

    sort, argsort, topk, multinomial, diag, unique = sort, argsort, topk, multinomial, diag, unique
    msort, kthvalue, median, nanmedian, mode, quantile, nanquantile = (
        msort,
        kthvalue,
        median,
        nanmedian,
        mode,
        quantile,
        nanquantile,
    )


__all__ = [
    "Generator",
    "unique",
    "randint",
    "randperm",
    "multinomial",
    "argsort",
    "sort",
    "topk",
    "eye",
    "diag",
    "msort",
    "kthvalue",
    "median",
    "nanmedian",
    "mode",
    "quantile",
    "nanquantile",
    "cumprod",
    "cummax",
    "cummin",
    "logcumsumexp",
    "diff",
    "gradient",
    "trapezoid",
    "trapz",
    "cumulative_trapezoid",
    "cdist",
    "dist",
    "cov",
    "corrcoef",
    "renorm",
    "tensordot",
    "einsum",
    "histc",
    "histogram",
    "histogramdd",
    "bincount",
    "searchsorted",
    "bucketize",
    "isin",
    "unique_consecutive",
    "normal",
    "bernoulli",
    "randint_like",
    "_segment_reduce",
    "hash_tensor",
]
