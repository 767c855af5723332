"""Reductions (sum, mean, max, var, logsumexp …) and softmax, with `ReduceMethods`."""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import _C
from .._core import dims_arg, result, tensor_arg, wrap
from .._types import as_index, check_dtype
from .creation import tensor
from .elementwise import where
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
    if dim is None:
        if keepdim:
            raise TypeError(f"{name}() without dim does not take keepdim")
        return returned(amax(input) if largest else amin(input), out, name)
    v, i = _C.max_dim(input._h, as_index(dim), keepdim, largest)
    return returned((MaxResult if largest else MinResult)(wrap(v), wrap(i)), out, name)


def max(input, dim=None, keepdim=False, *, out=None):
    """The max of all elements, or ``(values, indices)`` along ``dim``."""
    return _extreme(input, dim, keepdim, True, "max", out)


def min(input, dim=None, keepdim=False, *, out=None):
    """The min of all elements, or ``(values, indices)`` along ``dim``."""
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
    r = sum(wrap(s), -1)
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
        r = sum((a != 0).to(x.dtype), dim, keepdim)
    elif p == 1:
        r = sum(a, dim, keepdim)
    else:
        s = sum(a * a if p == 2 else a ** p, dim, keepdim)
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


def cumsum(input, dim, *, dtype=None, out=None):
    """Running sums along ``dim``: element i is the sum of elements 0..i. Floating inputs are
    differentiable (a product with a triangle of ones); integers and bools sum in int64."""
    t = tensor_arg(input, "cumsum")
    d = t._wrap_dim(dim, "cumsum")
    if dtype is not None:
        t = t.to(dtype)
    if not t.dtype.is_floating_point:
        summed = np.cumsum(t.numpy().astype(np.int64), axis=d) if t.ndim else t.numpy().astype(np.int64)
        return returned(tensor(summed, device=t.device), out, "cumsum")
    if t.ndim == 0:
        return returned(t.clone(), out, "cumsum")
    n = t.shape[d]
    upper = tensor(np.triu(np.ones((n, n), dtype=np.float32)), dtype=t.dtype, device=t.device)
    return returned((t.transpose(d, -1) @ upper).transpose(d, -1), out, "cumsum")


class ReduceMethods:
    """Tensor's reductions."""

    __slots__ = ()

    sum, mean, amax, amin, logsumexp = sum, mean, amax, amin, logsumexp
    max, min, argmax, argmin, var, std = max, min, argmax, argmin, var, std
    softmax, log_softmax, norm, any, all, cumsum = softmax, log_softmax, norm, any, all, cumsum


__all__ = ["sum", "mean", "amax", "amin", "logsumexp", "max", "min", "argmax", "argmin", "var", "std", "softmax",
           "log_softmax", "norm", "any", "all", "cumsum"]
