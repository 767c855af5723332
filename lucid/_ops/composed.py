"""Ops composed in Python from engine ops, with the host's help where the engine has no kernel:
random integers and sampling (``randint``, ``multinomial``), and the host-ordered ``sort``,
``argsort`` and ``topk``; with `ComposedMethods`.

The random draws come from numpy generators seeded from the engine's stream, so
``lucid.manual_seed`` makes them reproducible like every other lucid random op.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from .._core import tensor_arg
from .._types import as_index, check_dtype, float32, int64
from .creation import arange, leaf, rand, tensor, zeros
from .indexing import gather, index_put
from .shape import diagonal as diagonal_view, view


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
    tensor_arg(input, fn)
    if input.ndim == 0:
        raise ValueError(f"{fn}(): expected a tensor with at least one dimension")
    d = as_index(dim)
    if not -input.ndim <= d < input.ndim:
        raise IndexError(f"{fn}(): dim {dim} is out of range for a {input.ndim}-D tensor")
    d %= input.ndim
    values = input.numpy()
    if input.dtype.is_floating_point:
        values = values.astype(np.float64)
        key = np.where(np.isnan(values), -np.inf, -values) if descending else np.where(np.isnan(values), np.inf, values)
    else:
        # Descending by the complement (~v = -v - 1), which, unlike -v, cannot overflow.
        key = ~values.astype(np.int64) if descending else values
    return np.argsort(key, axis=d, kind="stable"), d


def _indices(order, input):
    return tensor(order.astype(np.int64), device=input.device)


def argsort(input, dim: int = -1, descending: bool = False):
    """The positions that sort `input` along `dim` (stable; NaN counts as the largest)."""
    order, _ = _order(input, dim, descending, "argsort")
    return _indices(order, input)


# (values, indices), as torch.sort and torch.topk return.
SortResult = namedtuple("sort", ["values", "indices"])
TopkResult = namedtuple("topk", ["values", "indices"])


def sort(input, dim: int = -1, descending: bool = False):
    """``(values, indices)`` of `input` sorted along `dim` (stable; NaN counts as the largest);
    gradients flow back to the entries through `values`."""
    order, d = _order(input, dim, descending, "sort")
    indices = _indices(order, input)
    return SortResult(gather(input, d, indices), indices)


def topk(input, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
    """``(values, indices)`` of the `k` largest (or smallest) entries along `dim`, largest
    first (NaN counts as the largest); gradients flow back through `values`."""
    order, d = _order(input, dim, largest, "topk")
    k = as_index(k)
    if not 0 <= k <= input.shape[d]:
        raise ValueError(f"topk(): k ({k}) must be between 0 and the size of dimension {d} ({input.shape[d]})")
    indices = _indices(np.take(order, np.arange(k), axis=d), input)
    return TopkResult(gather(input, d, indices), indices)


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


class ComposedMethods:
    """Tensor's ordering and sampling methods."""

    __slots__ = ()

    sort, argsort, topk, multinomial, diag, unique = sort, argsort, topk, multinomial, diag, unique


__all__ = ["Generator", "unique", "randint", "randperm", "multinomial", "argsort", "sort", "topk", "eye", "diag"]
