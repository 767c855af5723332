"""Reductions (sum, mean, max, var, prod, nansum, logsumexp …), softmax, and the stable
``logaddexp`` the scans and masked ops share, with `ReduceMethods`."""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import _C
from .._core import TensorBase, dims_arg, result, tensor_arg
from .._types import as_index, check_dtype, int64
from .creation import full_like, tensor
from .elementwise import maximum, minimum, where
from .writes import returned

# (values, indices), as torch.max(x, dim) returns.
MaxResult = namedtuple("max", ["values", "indices"])
MinResult = namedtuple("min", ["values", "indices"])


def _reduction(op, name, doc):
    def fn(input, dim=None, keepdim=False, *, out=None):
        r = result(_C.reduce(op, tensor_arg(input, name)._h, dims_arg(dim), keepdim))
        return returned(r, out, name)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


sum = _reduction(_C.SUM, "sum", "The sum over ``dim`` (all dimensions by default); float32 under autocast.")
mean = _reduction(_C.MEAN, "mean", "The mean over ``dim`` (all dimensions by default); float32 under autocast.")
amax = _reduction(_C.AMAX, "amax", "The max over ``dim`` (all by default); ties share the gradient evenly.")
amin = _reduction(_C.AMIN, "amin", "The min over ``dim`` (all by default); ties share the gradient evenly.")


def logsumexp(input, dim, keepdim=False, *, out=None):
    """``log(sum(exp(x)))`` over ``dim``, computed stably; float32 under autocast."""
    r = result(_C.reduce(_C.LOGSUMEXP, tensor_arg(input, "logsumexp")._h, dims_arg(dim), keepdim))
    return returned(r, out, "logsumexp")


def _extreme(input, dim, keepdim, largest, name, out):
    tensor_arg(input, name)
    if isinstance(dim, TensorBase):  # max(input, other): the elementwise maximum
        if keepdim:
            raise TypeError(f"{name}(input, other) does not take keepdim")
        return returned((maximum if largest else minimum)(input, dim), out, name)
    if dim is None:
        if keepdim:
            raise TypeError(f"{name}() without dim does not take keepdim")
        return returned(amax(input) if largest else amin(input), out, name)
    v, i = _C.max_dim(input._h, as_index(dim), keepdim, largest)
    return returned((MaxResult if largest else MinResult)(result(v), result(i)), out, name)


def max(input, dim=None, keepdim=False, *, out=None):
    """The max of all elements, or ``(values, indices)`` along ``dim``, or, given a tensor
    ``other`` for ``dim``, the elementwise :func:`maximum`."""
    return _extreme(input, dim, keepdim, True, "max", out)


def min(input, dim=None, keepdim=False, *, out=None):
    """The min of all elements, or ``(values, indices)`` along ``dim``, or, given a tensor
    ``other`` for ``dim``, the elementwise :func:`minimum`."""
    return _extreme(input, dim, keepdim, False, "min", out)


def _arg(input, dim, keepdim, largest, name, out):
    tensor_arg(input, name)
    d = 0 if dim is None else as_index(dim)
    return returned(result(_C.argmax(input._h, d, dim is not None, keepdim, largest)), out, name)


def argmax(input, dim=None, keepdim=False, *, out=None):
    """The index of the max along ``dim``, or into the flattened tensor."""
    return _arg(input, dim, keepdim, True, "argmax", out)


def argmin(input, dim=None, keepdim=False, *, out=None):
    """The index of the min along ``dim``, or into the flattened tensor."""
    return _arg(input, dim, keepdim, False, "argmin", out)


def _var(input, dim, unbiased, correction, keepdim, root, name, out):
    tensor_arg(input, name)
    if isinstance(dim, bool):  # var(input, unbiased): PyTorch's positional overload
        dim, unbiased = None, dim
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    elif unbiased is not None:
        raise TypeError(f"{name}(): pass either unbiased or correction, not both")
    return returned(result(_C.var(input._h, dims_arg(dim), float(correction), keepdim, root)), out, name)


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
    """The variance over ``dim`` with Bessel's correction (``correction=1``) by default; float32
    under autocast."""
    return _var(input, dim, unbiased, correction, keepdim, False, "var", out)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
    """The standard deviation over ``dim`` (see :func:`var`); float32 under autocast."""
    return _var(input, dim, unbiased, correction, keepdim, True, "std", out)


def _softmax_input(input, dtype, name):
    """The input of softmax or log_softmax: cast to ``dtype`` first when one is given (as
    PyTorch does, so that the op runs and returns in that dtype)."""
    x = tensor_arg(input, name)
    if dtype is None:
        return x
    d = check_dtype(dtype)
    if not d.is_floating_point:
        raise TypeError(f"{name}(): dtype must be a floating-point dtype, got {d}")
    return x.to(d)


def softmax(input, dim, dtype=None, *, out=None):
    """Softmax along ``dim``, computed in ``dtype`` when given (the input is cast first); float32
    under autocast."""
    x = _softmax_input(input, dtype, "softmax")
    return returned(result(_C.softmax(x._h, as_index(dim), False)), out, "softmax")


def log_softmax(input, dim, dtype=None, *, out=None):
    """Log-softmax along ``dim``, computed in ``dtype`` when given (the input is cast first);
    float32 under autocast."""
    x = _softmax_input(input, dtype, "log_softmax")
    return returned(result(_C.softmax(x._h, as_index(dim), True)), out, "log_softmax")


def _nuclear_norm(x, dim, keepdim):
    """The sum of the singular values of the matrices over the two dims ``dim`` (a 2-D x's by
    default), from the engine's SVD."""
    if not x.dtype.is_floating_point:
        raise TypeError(f"norm(): expected a floating-point input, got {x.dtype}")
    if dim is None:
        if x.ndim != 2:
            raise RuntimeError(f"norm(): p='nuc' without dim needs a 2-D input, got shape {tuple(x.shape)}")
        dim = (0, 1)
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise ValueError(f"norm(): p='nuc' needs dim to be 2 dimensions, got {dim!r}")
    d0, d1 = (x._wrap_dim(d, "norm") for d in dim)
    if d0 == d1:
        raise ValueError(f"norm(): p='nuc' needs 2 different dims, got {dim!r}")
    moved = x.permute(*([d for d in range(x.ndim) if d not in (d0, d1)] + [d0, d1]))
    _, s, _ = _C.linalg_svd(moved._h, False, False)
    r = sum(result(s), -1)
    if keepdim:
        for d in sorted((d0, d1)):
            r = r.unsqueeze(d)
    return r


def norm(input, p="fro", dim=None, keepdim=False, *, out=None):
    """The p-norm over ``dim`` (all elements by default): ``"fro"`` and 2 the Euclidean norm, 1,
    ``inf``, ``-inf``, 0 (the count of non-zeros) and any other number as ``sum(|x|**p)**(1/p)``;
    ``"nuc"`` the nuclear norm (the sum of singular values) of the matrices over ``dim``.
    The gradient at a zero vector is 0, as PyTorch's."""
    x = tensor_arg(input, "norm")
    if p == "nuc":
        return returned(_nuclear_norm(x, dim, keepdim), out, "norm")
    if p == "fro":
        p = 2
    if isinstance(p, str) or isinstance(p, bool) or not isinstance(p, (int, float)):
        raise ValueError(f"norm(): p must be a number or 'fro', got {p!r}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"norm(): expected a floating-point input, got {x.dtype}")
    a = x.abs()
    if p == float("inf"):
        r = amax(a, dim, keepdim)
    elif p == float("-inf"):
        r = amin(a, dim, keepdim)
    elif p == 0:
        # The count of non-zeros, carrying the input's (zero) gradient as PyTorch's does.
        r = sum(where(a != 0, 1.0, a * 0.0), dim, keepdim)
    elif p == 1:
        r = sum(a, dim, keepdim)
    else:
        s = sum(a * a if p == 2 else a**p, dim, keepdim)
        # The root of a zero sum has an infinite derivative: taken of 1 there, and masked, so that
        # the gradient at a zero vector is 0.
        nonzero = s > 0
        safe = where(nonzero, s, 1.0)
        r = where(nonzero, safe.sqrt() if p == 2 else safe ** (1.0 / p), 0.0)
    return returned(r, out, "norm")


def any(input, dim=None, keepdim=False, *, out=None):
    """Whether any element (along ``dim``, or of all) is non-zero (bool)."""
    t = tensor_arg(input, "any")
    return returned(sum(t != 0, dim, keepdim) > 0, out, "any")


def all(input, dim=None, keepdim=False, *, out=None):
    """Whether every element (along ``dim``, or of all) is non-zero (bool)."""
    t = tensor_arg(input, "all")
    return returned(sum(t == 0, dim, keepdim) == 0, out, "all")


def scan(t, d, combine, pad):
    """The inclusive scan of `t` along `d` under the associative `combine`, in log2(n) steps of
    whole-tensor ops (each combines every entry with the one `step` before it, or with the
    identity `pad`): O(n log n) work and memory, differentiable like any composition."""
    n = t.shape[d]
    step = 1
    while step < n:
        head, body = full_like(t.narrow(d, 0, step), pad), t.narrow(d, 0, n - step)
        t = combine(t, result(_C.cat([head._h, body._h], d, False)))
        step *= 2
    return t


def cumsum(input, dim, *, dtype=None, out=None):
    """Running sums along ``dim``: element i is the sum of elements 0..i. Floating inputs are
    differentiable (a scan of additions); integers and bools sum in int64."""
    t = tensor_arg(input, "cumsum")
    d = t._wrap_dim(dim, "cumsum")
    if dtype is not None:
        t = t.to(dtype)
    if not t.dtype.is_floating_point:
        summed = np.cumsum(t.numpy().astype(np.int64), axis=d) if t.ndim else t.numpy().astype(np.int64)
        return returned(tensor(summed, device=t.device), out, "cumsum")
    if t.ndim == 0:
        return returned(t.clone(), out, "cumsum")
    return returned(scan(t, d, lambda a, b: a + b, 0.0), out, "cumsum")


# ---- more reductions: prod, nan-aware sums, counts, statistics --------------------------------

MinMaxResult = namedtuple("aminmax", ["min", "max"])


def _integer_accumulation(t, dtype):
    """`t` in the dtype a sum or product accumulates in: `dtype` when given, int64 for integers
    and bools (as PyTorch), else its own."""
    if dtype is not None:
        return t.to(dtype)
    if not t.dtype.is_floating_point:
        return t.to(int64)
    return t


def _tree_product(t):
    """The product over dimension 0 of `t`, as pairwise products of halves (log n engine calls,
    each differentiable, so that zeros get their exact gradients)."""
    n = t.shape[0]
    if n == 0:
        return sum(t, 0) * 0 + 1  # the empty product, shaped as the rest
    left = []
    while n > 1:
        if n % 2:
            left.append(t[n - 1])
            n -= 1
            t = t[:n]
        t = t[: n // 2] * t[n // 2 :]
        n //= 2
    r = t[0]
    for x in left:
        r = r * x
    return r


def prod(input, dim=None, keepdim=False, *, dtype=None, out=None):
    """The product of the elements over ``dim`` (all by default; one dimension at a time as
    in PyTorch); integers and bools multiply in int64. The gradient is exact where elements
    are zero."""
    t = _integer_accumulation(tensor_arg(input, "prod"), dtype)
    if dim is None:
        if keepdim:
            raise TypeError("prod() without dim does not take keepdim")
        return returned(_tree_product(t.reshape(-1)), out, "prod")
    d = t._wrap_dim(as_index(dim), "prod")
    if t.ndim == 0:
        return returned(t.clone(), out, "prod")
    r = _tree_product(t.permute(d, *(i for i in range(t.ndim) if i != d)))
    return returned(r.unsqueeze(d) if keepdim else r, out, "prod")


def nansum(input, dim=None, keepdim=False, *, dtype=None, out=None):
    """The sum over ``dim`` (all by default) with NaN counted as zero."""
    t = tensor_arg(input, "nansum")
    if t.dtype.is_floating_point:
        t = where(t != t, 0.0, t)
    t = _integer_accumulation(t, dtype)
    return returned(sum(t, dim, keepdim), out, "nansum")


def nanmean(input, dim=None, keepdim=False, *, dtype=None, out=None):
    """The mean over ``dim`` (all by default) of the elements that are not NaN (NaN where all
    are)."""
    t = tensor_arg(input, "nanmean")
    if not t.dtype.is_floating_point:
        raise TypeError(f"nanmean(): expected a floating-point input, got {t.dtype}")
    if dtype is not None:
        t = t.to(dtype)
    present = t == t
    total = sum(where(present, t, 0.0), dim, keepdim)
    return returned(total / sum(present, dim, keepdim).to(total.dtype), out, "nanmean")


def count_nonzero(input, dim=None):
    """The number of non-zero elements over ``dim`` (all by default), int64."""
    t = tensor_arg(input, "count_nonzero")
    return sum(t != 0, dim if dim != () else None)


def aminmax(input, *, dim=None, keepdim=False, out=None):
    """``(min, max)`` over ``dim`` (all elements by default)."""
    t = tensor_arg(input, "aminmax")
    if t.numel() == 0 and (dim is None or t.ndim == 0 or t.shape[t._wrap_dim(dim, "aminmax")] == 0):
        raise RuntimeError("aminmax(): cannot compute the min and max of an empty dimension")
    if dim is None:
        r = MinMaxResult(amin(t), amax(t))
        if keepdim:
            r = MinMaxResult(r.min.reshape([1] * t.ndim), r.max.reshape([1] * t.ndim))
    else:
        d = as_index(dim)
        r = MinMaxResult(amin(t, d, keepdim), amax(t, d, keepdim))
    return returned(r, out, "aminmax")


def _var_mean(input, dim, unbiased, keepdim, correction, root, name):
    if isinstance(dim, bool):  # var_mean(input, unbiased), as var's overload
        dim, unbiased = None, dim
    return (_var(input, dim, unbiased, correction, keepdim, root, name, None), mean(input, dim, keepdim))


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
    """``(var, mean)`` over ``dim`` (see :func:`var`)."""
    return returned(_var_mean(input, dim, unbiased, keepdim, correction, False, "var_mean"), out, "var_mean")


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
    """``(std, mean)`` over ``dim`` (see :func:`std`)."""
    return returned(_var_mean(input, dim, unbiased, keepdim, correction, True, "std_mean"), out, "std_mean")


def trace(input):
    """The sum of the main diagonal of a matrix (integers sum in int64)."""
    t = tensor_arg(input, "trace")
    if t.ndim != 2:
        raise RuntimeError(f"trace(): expected a matrix, got shape {tuple(t.shape)}")
    return sum(_integer_accumulation(t.diagonal(), None))


def stable_logaddexp(input, other):
    """``log(exp(input) + exp(other))``, computed stably, elementwise."""
    a, b = tensor_arg(input, "logaddexp"), tensor_arg(other, "logaddexp", "other")
    hi = maximum(a, b)
    # Where both are the same infinity their difference is NaN: the result is that infinity.
    gap = where(hi == minimum(a, b), 0.0, -(a - b).abs())
    return hi + gap.exp().log1p()


class ReduceMethods:
    """Tensor's reductions."""

    __slots__ = ()

    sum, mean, amax, amin, logsumexp = sum, mean, amax, amin, logsumexp
    max, min, argmax, argmin, var, std = max, min, argmax, argmin, var, std
    softmax, log_softmax, norm, any, all, cumsum = softmax, log_softmax, norm, any, all, cumsum
    prod, nansum, nanmean, count_nonzero, aminmax = prod, nansum, nanmean, count_nonzero, aminmax
    trace = trace


__all__ = [
    "sum",
    "mean",
    "amax",
    "amin",
    "logsumexp",
    "max",
    "min",
    "argmax",
    "argmin",
    "var",
    "std",
    "softmax",
    "log_softmax",
    "norm",
    "any",
    "all",
    "cumsum",
    "prod",
    "nansum",
    "nanmean",
    "count_nonzero",
    "aminmax",
    "var_mean",
    "std_mean",
    "trace",
]
