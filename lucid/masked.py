"""Reductions and normalisations over the elements a mask keeps, as ``torch.masked``.

Each function takes the plain op's arguments and a bool ``mask`` (None keeps every element)
that broadcasts to the input's shape. The masked-out elements are replaced by the op's
identity (0 for sums, 1 for products, -inf for maxima, +inf for minima …) before the op runs,
so they change nothing and receive no gradient. Where every element of a reduction is masked
out, the result is that identity, or NaN for ``mean``, ``median``, ``var`` and ``std``.
"""

from __future__ import annotations

import builtins

import numpy as np

from ._core import TensorBase, tensor_arg
from ._ops import composed as _composed, elementwise as _elementwise, reduce as _reduce
from ._ops.creation import tensor
from ._types import bool_, check_dtype, float32, int64

__all__ = [
    "sum",
    "prod",
    "cumsum",
    "cumprod",
    "amax",
    "amin",
    "argmax",
    "argmin",
    "mean",
    "median",
    "logsumexp",
    "logaddexp",
    "norm",
    "var",
    "std",
    "softmax",
    "log_softmax",
    "softmin",
    "normalize",
]

_INF = float("inf")


def _mask(input, mask, fn, what="mask"):
    """`mask` as a bool tensor of `input`'s shape, or None."""
    if mask is None:
        return None
    tensor_arg(mask, fn, what)
    if mask.ndim > input.ndim:
        raise IndexError(
            f"{fn}(): {what} of shape {tuple(mask.shape)} has more dimensions than the input {tuple(input.shape)}"
        )
    m = mask if mask.dtype is bool_ else mask != 0
    if tuple(m.shape) != tuple(input.shape):
        try:
            m = m.expand(*input.shape)
        except (RuntimeError, ValueError) as e:
            raise RuntimeError(
                f"{fn}(): {what} of shape {tuple(mask.shape)} does not broadcast to the input's "
                f"shape {tuple(input.shape)}"
            ) from e
    return m


def _filled(input, mask, identity, fn):
    """`input` with the masked-out elements replaced by `identity`."""
    m = _mask(input, mask, fn)
    return input if m is None else _elementwise.where(m, input, identity)


def _dims(dim, ndim, fn):
    """The dimensions `dim` names (None and () mean all), wrapped and sorted."""
    if dim is None or dim == ():
        return tuple(range(ndim))
    n = builtins.max(ndim, 1)
    dims = []
    for d in dim if isinstance(dim, (tuple, list)) else (dim,):
        if not -n <= d < n:
            raise IndexError(f"{fn}(): dim {d} is out of range for a {ndim}-D tensor")
        if d % n in dims:
            raise RuntimeError(f"{fn}(): dim {d} appears more than once")
        dims.append(d % n)
    return tuple(sorted(dims)) if ndim else ()


def _one_dim(dim, ndim, fn):
    n = builtins.max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{fn}(): dim {dim} is out of range for a {ndim}-D tensor")
    return dim % n


def _extreme_identity(t, largest):
    if t.dtype.is_floating_point:
        return -_INF if largest else _INF
    info = np.iinfo(np.dtype(t.dtype.name))
    return int(info.min if largest else info.max)


def _accumulating(t, dtype):
    """The dtype a masked sum or product gives: `dtype`, else int64 for integers and bools."""
    if dtype is not None:
        return check_dtype(dtype)
    return t.dtype if t.dtype.is_floating_point else int64


def sum(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The sum over ``dim`` (all by default) of the elements `mask` keeps."""
    t = tensor_arg(input, "masked.sum")
    dims = _dims(dim, t.ndim, "masked.sum")
    x = _filled(t, mask, 0, "masked.sum").to(_accumulating(t, dtype))
    return _reduce.sum(x, dims, keepdim) if t.ndim else x


def prod(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The product over ``dim`` (all by default) of the elements `mask` keeps."""
    t = tensor_arg(input, "masked.prod")
    dims = _dims(dim, t.ndim, "masked.prod")
    r = _filled(t, mask, 1, "masked.prod").to(_accumulating(t, dtype))
    for d in reversed(dims):
        r = _reduce.prod(r, d, keepdim)
    return r


def cumsum(input, dim, *, dtype=None, mask=None):
    """Running sums along ``dim`` of the elements `mask` keeps (the others count as 0)."""
    t = tensor_arg(input, "masked.cumsum")
    d = _one_dim(dim, t.ndim, "masked.cumsum")
    r = _reduce.cumsum(_filled(t, mask, 0, "masked.cumsum"), d)
    return r.to(check_dtype(dtype) if dtype is not None else t.dtype)


def cumprod(input, dim, *, dtype=None, mask=None):
    """Running products along ``dim`` of the elements `mask` keeps (the others count as 1)."""
    t = tensor_arg(input, "masked.cumprod")
    d = _one_dim(dim, t.ndim, "masked.cumprod")
    r = _composed.cumprod(_filled(t, mask, 1, "masked.cumprod"), d)
    return r.to(check_dtype(dtype) if dtype is not None else t.dtype)


def _extreme(input, dim, keepdim, dtype, mask, largest, fn):
    t = tensor_arg(input, fn)
    dims = _dims(dim, t.ndim, fn)
    x = _filled(t, mask, _extreme_identity(t, largest), fn)
    r = (_reduce.amax if largest else _reduce.amin)(x, dims, keepdim) if t.ndim else x
    return r.to(check_dtype(dtype) if dtype is not None else t.dtype)


def amax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The max over ``dim`` (all by default) of the elements `mask` keeps (-inf where none)."""
    return _extreme(input, dim, keepdim, dtype, mask, True, "masked.amax")


def amin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The min over ``dim`` (all by default) of the elements `mask` keeps (+inf where none)."""
    return _extreme(input, dim, keepdim, dtype, mask, False, "masked.amin")


def _arg(input, dim, keepdim, dtype, mask, largest, fn):
    t = tensor_arg(input, fn)
    if dim is not None:
        dim = _one_dim(dim, t.ndim, fn)
    x = _filled(t, mask, _extreme_identity(t, largest), fn)
    r = (_reduce.argmax if largest else _reduce.argmin)(x, dim, keepdim)
    # As torch.masked: the index in the input's dtype unless another is given.
    return r.to(check_dtype(dtype) if dtype is not None else t.dtype)


def argmax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The index of the max of the elements `mask` keeps, along ``dim`` or into the flattened
    input, in the input's dtype unless `dtype` is given."""
    return _arg(input, dim, keepdim, dtype, mask, True, "masked.argmax")


def argmin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The index of the min of the elements `mask` keeps (see :func:`argmax`)."""
    return _arg(input, dim, keepdim, dtype, mask, False, "masked.argmin")


def _count(t, mask, dims, keepdim, fn):
    """How many elements `mask` keeps over `dims`, as a float tensor (or a number without one)."""
    m = _mask(t, mask, fn)
    if m is None:
        n = 1
        for d in dims:
            n *= t.shape[d]
        return float(n)
    return _reduce.sum(m, dims, keepdim).to(t.dtype) if t.ndim else m.to(t.dtype)


def mean(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The mean over ``dim`` (all by default) of the elements `mask` keeps (NaN where none)."""
    t = tensor_arg(input, "masked.mean")
    d = check_dtype(dtype) if dtype is not None else t.dtype
    if not d.is_floating_point:
        raise ValueError(f"masked.mean(): expected a floating-point dtype, got {d}; pass dtype=")
    t = t.to(d)
    dims = _dims(dim, t.ndim, "masked.mean")
    return sum(t, dims, keepdim=keepdim, mask=mask) / _count(t, mask, dims, keepdim, "masked.mean")


def median(input, dim=-1, *, keepdim=False, dtype=None, mask=None):
    """The lower median along ``dim`` of the elements `mask` keeps (NaN where none)."""
    t = tensor_arg(input, "masked.median")
    d = _one_dim(dim, t.ndim, "masked.median")
    x = t if t.dtype.is_floating_point else t.to(float32)
    r = _composed.nanmedian(_filled(x, mask, float("nan"), "masked.median"), d, keepdim).values
    return r if dtype is None else r.to(check_dtype(dtype))


def logsumexp(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """``log(sum(exp(x)))`` over ``dim`` (all by default) of the elements `mask` keeps."""
    t = tensor_arg(input, "masked.logsumexp")
    dims = _dims(dim, t.ndim, "masked.logsumexp")
    x = _filled(t, mask, _extreme_identity(t, True), "masked.logsumexp")
    r = _reduce.logsumexp(x, dims, keepdim) if t.ndim else x
    return r.to(check_dtype(dtype) if dtype is not None else t.dtype)


def logaddexp(input, other, *, dtype=None, input_mask=None, other_mask=None):
    """``log(exp(input) + exp(other))`` elementwise, each operand's masked-out elements taken
    as -inf."""
    a, b = tensor_arg(input, "masked.logaddexp"), tensor_arg(other, "masked.logaddexp", "other")
    ma, mb = (
        _mask(a, input_mask, "masked.logaddexp", "input_mask"),
        _mask(b, other_mask, "masked.logaddexp", "other_mask"),
    )
    a = a if ma is None else _elementwise.where(ma, a, -_INF)
    b = b if mb is None else _elementwise.where(mb, b, -_INF)
    r = _reduce.stable_logaddexp(a, b)
    return r.to(check_dtype(dtype) if dtype is not None else input.dtype)


def norm(input, ord=2.0, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The vector `ord`-norm over ``dim`` (all by default) of the elements `mask` keeps."""
    t = tensor_arg(input, "masked.norm")
    if dtype is not None:
        t = t.to(check_dtype(dtype))
    if not t.dtype.is_floating_point:
        raise TypeError(f"masked.norm(): expected a floating-point input, got {t.dtype}")
    dims = _dims(dim, t.ndim, "masked.norm")
    x = _filled(t, mask, _INF if ord == -_INF else 0.0, "masked.norm")
    return _reduce.norm(x, ord, dims if t.ndim else None, keepdim)


def _var(input, dim, unbiased, correction, keepdim, dtype, mask, root, fn):
    t = tensor_arg(input, fn)
    if unbiased is not None and correction is not None:
        raise TypeError(f"{fn}(): pass either unbiased or correction, not both")
    c = float(correction) if correction is not None else (0.0 if unbiased is False else 1.0)
    d = check_dtype(dtype) if dtype is not None else (t.dtype if t.dtype.is_floating_point else float32)
    t = t.to(d)
    dims = _dims(dim, t.ndim, fn)
    m = _mask(t, mask, fn)
    count = _count(t, m, dims, True, fn)
    centred = t - sum(t, dims, keepdim=True, mask=m) / count
    total = sum(centred * centred, dims, keepdim=keepdim, mask=m)
    count = count - c
    count = _elementwise.clamp(count, min=0.0) if isinstance(count, TensorBase) else builtins.max(count, 0.0)
    if isinstance(count, TensorBase):
        count = count.reshape(*total.shape)
    r = total / count
    return r.sqrt() if root else r


def var(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None, mask=None):
    """The variance over ``dim`` (all by default) of the elements `mask` keeps, their count
    less `correction` (1 by default; 0 with ``unbiased=False``) in the denominator."""
    return _var(input, dim, unbiased, correction, keepdim, dtype, mask, False, "masked.var")


def std(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None, mask=None):
    """The standard deviation over ``dim`` of the elements `mask` keeps (see :func:`var`)."""
    return _var(input, dim, unbiased, correction, keepdim, dtype, mask, True, "masked.std")


def _normalised(input, dim, dtype, mask, largest, log, fn):
    t = tensor_arg(input, fn)
    d = _one_dim(dim, t.ndim, fn)
    x = _filled(t, mask, _extreme_identity(t, largest), fn)
    if dtype is not None:
        x = x.to(check_dtype(dtype))
    if not largest:
        x = -x
    if t.ndim == 0:
        x = x.reshape(1)
    r = (_reduce.log_softmax if log else _reduce.softmax)(x, d)
    return r.reshape(()) if t.ndim == 0 else r


def softmax(input, dim, *, dtype=None, mask=None):
    """Softmax along ``dim`` over the elements `mask` keeps (the others get 0)."""
    return _normalised(input, dim, dtype, mask, True, False, "masked.softmax")


def log_softmax(input, dim, *, dtype=None, mask=None):
    """Log-softmax along ``dim`` over the elements `mask` keeps (the others get -inf)."""
    return _normalised(input, dim, dtype, mask, True, True, "masked.log_softmax")


def softmin(input, dim, *, dtype=None, mask=None):
    """Softmin (the softmax of ``-input``) along ``dim`` over the elements `mask` keeps."""
    return _normalised(input, dim, dtype, mask, False, False, "masked.softmin")


def normalize(input, ord, dim, *, eps=1e-12, dtype=None, mask=None):
    """The elements `mask` keeps divided by their `ord`-norm along ``dim`` (at least `eps`);
    the others are 0."""
    t = tensor_arg(input, "masked.normalize")
    if dtype is not None:
        t = t.to(check_dtype(dtype))
    n = norm(t, ord, dim, keepdim=True, mask=mask)
    floor = tensor(eps, dtype=n.dtype, device=n.device)
    return _filled(t, mask, 0.0, "masked.normalize") / _elementwise.maximum(n, floor)
