"""Functional forms of the layers."""

from __future__ import annotations

import functools
import itertools
import math
import numbers
import warnings

import numpy as np

from .. import _C
from .._ops import creation as _creation, shape as _shape, writes
from .._ops.elementwise import unary_functions
from .._grad_mode import no_grad
from .._tensor import Tensor
from .._types import _DEVICE_CODES, as_index, bool_ as _bool, float32, float64 as _float64, int64 as _int64
from .._core import result as _result

_REDUCTIONS = _C.codes("lucid_reduction", "LUCID_REDUCTION_")


def _check(t, what):
    if not isinstance(t, Tensor):
        raise TypeError(f"{what} must be a lucid.Tensor, got {type(t).__name__}")


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias``; lower precision under autocast (float32 accumulation)."""
    _check(input, "input")
    _check(weight, "weight")
    if bias is not None:
        _check(bias, "bias")
    if weight.ndim == 1:  # one output feature, its dimension dropped (input @ weight), as PyTorch
        if input.ndim == 0 or input.shape[-1] != weight.shape[0]:
            raise ValueError(
                f"linear: input of shape {tuple(input.shape)} does not match weight of shape "
                f"{tuple(weight.shape)} (in_features)"
            )
        y = input.matmul(weight)
        return y if bias is None else y + bias
    return _result(_C.linear(input._h, weight._h, 0 if bias is None else bias._h))


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias=None) -> Tensor:
    """``y[..., o] = input1[..., i]·weight[o, i, j]·input2[..., j] + bias[o]``."""
    for t, what in ((input1, "input1"), (input2, "input2"), (weight, "weight")):
        _check(t, what)
    if weight.ndim != 3:
        raise ValueError(f"bilinear: weight must be 3-D [out, in1, in2], got shape {tuple(weight.shape)}")
    o, i, j = weight.shape
    if input1.ndim == 0 or input2.ndim == 0 or input1.shape[-1] != i or input2.shape[-1] != j:
        raise ValueError(
            f"bilinear: inputs of shapes {tuple(input1.shape)} and {tuple(input2.shape)} do not match "
            f"weight of shape {tuple(weight.shape)} (their last dimensions must be {i} and {j})"
        )
    if tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise ValueError(
            f"bilinear: the inputs' leading dimensions must agree, got shapes {tuple(input1.shape)} and "
            f"{tuple(input2.shape)}"
        )
    if bias is not None:
        _check(bias, "bias")
        if tuple(bias.shape) != (o,):
            raise ValueError(f"bilinear: bias must have shape ({o},), got {tuple(bias.shape)}")
    lead = tuple(input1.shape[:-1])
    # input1 against each output's [in1, in2] matrix, then each row against input2.
    u = input1.reshape(-1, i).matmul(weight.permute(1, 0, 2).reshape(i, o * j)).reshape(-1, o, j)
    y = (u * input2.reshape(-1, 1, j)).sum(2).reshape(*lead, o)
    return y if bias is None else y + bias


def _out(input, fn, inplace, op):
    """``fn(input)``, or with `inplace` the input updated to it (PyTorch's ``inplace=True``;
    computed from a copy when recorded for autograd, see ``writes.source``)."""
    return writes.assign(input, fn(writes.source(input)), op, result=True) if inplace else fn(input)


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    _check(input, "input")
    return _out(input, lambda x: x.relu(), inplace, "relu")


def relu_(input: Tensor) -> Tensor:
    """:func:`relu` in place."""
    return relu(input, inplace=True)


def _unary(name, input):
    _check(input, "input")
    return unary_functions[name](input)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """x where x > 0, else ``negative_slope``·x (rounded once into the input's dtype), with
    PyTorch's gradient (``negative_slope`` at 0). One fused engine kernel for float32."""
    _check(input, "input")
    if not isinstance(negative_slope, numbers.Real) or isinstance(negative_slope, bool):
        raise TypeError(f"leaky_relu: negative_slope must be a number, got {negative_slope!r}")
    return _out(input, lambda x: _result(_C.leaky_relu(x._h, float(negative_slope))), inplace, "leaky_relu")


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """:func:`leaky_relu` in place."""
    return leaky_relu(input, negative_slope, inplace=True)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """x·Φ(x) exactly (``approximate="none"``) or with the tanh approximation (``"tanh"``)."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return _unary("gelu" if approximate == "none" else "gelu_tanh", input)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """x·sigmoid(x)."""
    return _out(input, lambda x: _unary("silu", x), inplace, "silu")


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta·x)) / beta, and x itself where beta·x > ``threshold`` (as PyTorch)."""
    _check(input, "input")
    if not isinstance(beta, numbers.Real) or isinstance(beta, bool):
        raise TypeError(f"softplus: beta must be a number, got {beta!r}")
    if not isinstance(threshold, numbers.Real) or isinstance(threshold, bool):
        raise TypeError(f"softplus: threshold must be a number, got {threshold!r}")
    if beta == 1 and threshold == 20:
        return _unary("softplus", input)
    z = input * float(beta)
    # The engine's softplus is stable (linear above 20), so the unused branch never overflows.
    return input.where(z > float(threshold), _unary("softplus", z) / float(beta))


def sigmoid(input: Tensor) -> Tensor:
    return _unary("sigmoid", input)


def tanh(input: Tensor) -> Tensor:
    return _unary("tanh", input)


def _h(t, what):
    """The handle of an optional tensor argument (0 for None)."""
    if t is None:
        return 0
    _check(t, what)
    return t._h


def _pair(v, what):
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise ValueError(f"{what} must be an int or a pair of ints, got {v!r}")
        return tuple(as_index(x) for x in v)
    try:
        v = as_index(v)
    except TypeError:
        raise TypeError(f"{what} must be an int or a pair of ints, got {v!r}") from None
    return v, v


def _single(v, what):
    if isinstance(v, (tuple, list)):
        if len(v) != 1:
            raise ValueError(f"{what} must be an int or a 1-tuple, got {v!r}")
        v = v[0]
    try:
        return as_index(v)
    except TypeError:
        raise TypeError(f"{what} must be an int, got {v!r}") from None


def _float32_under_autocast(fn):
    """Runs a composed loss or distance in float32 inside an autocast scope, as the engine's
    losses and PyTorch's autocast float32 list do: its floating tensor arguments are cast to
    float32 and its parts run with autocast off (outside a scope it changes nothing)."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        from ..amp.autocast_mode import autocast, cast_floating_args, is_autocast_enabled

        first = next((a for a in args if isinstance(a, Tensor)), None)
        if first is None or not is_autocast_enabled(first.device.type):
            return fn(*args, **kwargs)
        args, kwargs = cast_floating_args(args, kwargs, float32)
        with autocast(first.device.type, enabled=False):
            return fn(*args, **kwargs)

    return run


def _reduction(reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be 'none', 'mean' or 'sum', got {reduction!r}")
    return _REDUCTIONS[reduction]


# ---- activations ---------------------------------------------------------------------------


def _softmax_dim(ndim, dim, fn):
    """``dim``, or PyTorch's implicit choice when it is None (0 for 0-, 1- and 3-D input, else 1),
    with PyTorch's warning."""
    if dim is not None:
        return as_index(dim)
    warnings.warn(
        f"Implicit dimension choice for {fn} has been deprecated. Change the call to include dim=X as an argument.",
        stacklevel=3,
    )
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input: Tensor, dim=None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """exp(x) / sum(exp(x)) along ``dim``, computed in ``dtype`` when given; float32 under
    autocast."""
    _check(input, "input")
    return input.softmax(_softmax_dim(input.ndim, dim, "softmax"), dtype)


def log_softmax(input: Tensor, dim=None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """x - logsumexp(x) along ``dim``, computed in ``dtype`` when given; float32 under autocast."""
    _check(input, "input")
    return input.log_softmax(_softmax_dim(input.ndim, dim, "log_softmax"), dtype)


def softmin(input: Tensor, dim=None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """softmax(-x) along ``dim``, computed in ``dtype`` when given."""
    _check(input, "input")
    d = _softmax_dim(input.ndim, dim, "softmin")
    x = input if dtype is None else input.to(dtype)
    return (-x).softmax(d)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zeroes elements with probability ``p`` and scales the rest by 1/(1-p) when training."""
    _check(input, "input")
    if (not training or p == 0) and 0 <= p <= 1:
        return input
    return _out(input, lambda x: _result(_C.dropout(x._h, float(p), bool(training))), inplace, "dropout")


def _float_input(input, fn):
    _check(input, "input")
    if not input.dtype.is_floating_point:
        raise TypeError(f"{fn}: expected a floating-point input, got {input.dtype}")


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """x clamped to [``min_val``, ``max_val``]; the gradient is 1 strictly inside, 0 elsewhere."""
    _check(input, "input")
    lo, hi = _float(min_val, "min_val", "hardtanh"), _float(max_val, "max_val", "hardtanh")
    if lo > hi:
        raise ValueError(f"hardtanh: min_val ({lo}) cannot be greater than max_val ({hi})")

    def f(x):
        if not x.dtype.is_floating_point:  # integers stay integers (no gradient to shape)
            return x.clamp(lo, hi).to(x.dtype)
        inside = (x > lo) & (x < hi)
        return x.where(inside, x.detach().clamp(lo, hi))

    return _out(input, f, inplace, "hardtanh")


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """:func:`hardtanh` in place."""
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """min(max(x, 0), 6) (``hardtanh(x, 0, 6)``)."""
    return hardtanh(input, 0.0, 6.0, inplace)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """relu6(x + 3) / 6: 0 below -3, 1 above 3, linear between."""
    _float_input(input, "hardsigmoid")
    return _out(
        input,
        lambda x: (x + 3.0).where((x > -3.0) & (x < 3.0), (x.detach() + 3.0).clamp(0.0, 6.0)) / 6.0,
        inplace,
        "hardsigmoid",
    )


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """x·relu6(x + 3) / 6, with PyTorch's gradient (0 below -3, x/3 + 0.5 up to 3, 1 above)."""
    _float_input(input, "hardswish")

    def f(x):
        # x·(x + 3)/6 in the middle; the outer pieces are 0 and x, with the gradients PyTorch gives.
        mid = x * (x + 3.0) / 6.0
        return mid.where((x >= -3.0) & (x <= 3.0), x.where(x > 3.0, x * 0.0))

    return _out(input, f, inplace, "hardswish")


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """x·tanh(softplus(x))."""
    _float_input(input, "mish")
    return _out(input, lambda x: x * _unary("softplus", x).tanh(), inplace, "mish")


def softsign(input: Tensor) -> Tensor:
    """x / (1 + abs(x))."""
    _check(input, "input")
    return input / (input.abs() + 1.0)


def tanhshrink(input: Tensor) -> Tensor:
    """x - tanh(x)."""
    _check(input, "input")
    return input - input.tanh()


def _threshold(input, t, v, inplace):
    _check(input, "input")
    t, v = _float(t, "threshold", "threshold"), _float(v, "value", "threshold")
    return _out(input, lambda x: x.where(x > t, v).to(x.dtype), inplace, "threshold")


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """x where x > ``threshold``, else ``value``."""
    return _threshold(input, threshold, value, inplace)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """:func:`threshold` in place."""
    return _threshold(input, threshold, value, True)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x - lambd above ``lambd``, x + lambd below -``lambd``, 0 between."""
    _float_input(input, "softshrink")
    lam = _float(lambd, "lambd", "softshrink")
    if lam < 0:
        raise RuntimeError(f"softshrink: lambd must be greater or equal to 0, got {lam}")
    return (input - lam).where(input > lam, (input + lam).where(input < -lam, input * 0.0))


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x where abs(x) > ``lambd``, else 0."""
    _float_input(input, "hardshrink")
    lam = _float(lambd, "lambd", "hardshrink")
    return input.where((input > lam) | (input < -lam), input * 0.0)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x where x > 0, else ``alpha``·(exp(x/alpha) - 1)."""
    _float_input(input, "celu")
    a = _float(alpha, "alpha", "celu")
    if a == 0:
        raise RuntimeError("celu: ZeroDivisionError, alpha must not be 0")
    return _out(input, lambda x: x.where(x > 0, (x.clamp(max=0.0) / a).expm1() * a), inplace, "celu")


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """:func:`celu` in place."""
    return celu(input, alpha, inplace=True)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """scale·(x where x > 0, else alpha·(exp(x) - 1)) with the self-normalising constants."""
    _float_input(input, "selu")
    return _out(input, lambda x: x.where(x > 0, x.clamp(max=0.0).expm1() * _SELU_ALPHA) * _SELU_SCALE, inplace, "selu")


def selu_(input: Tensor) -> Tensor:
    """:func:`selu` in place."""
    return selu(input, inplace=True)


def logsigmoid(input: Tensor) -> Tensor:
    """log(sigmoid(x)) = -softplus(-x), stable for large abs(x)."""
    _float_input(input, "logsigmoid")
    return -_unary("softplus", -input)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """a·sigmoid(b), where a and b are the two halves of the input along ``dim``."""
    _float_input(input, "glu")
    if input.ndim == 0:
        raise RuntimeError("glu: does not support scalars because halving size must be even")
    d = as_index(dim)
    if not -input.ndim <= d < input.ndim:
        raise IndexError(f"glu: dim {dim} is out of range for an input of {input.ndim} dimensions")
    n = input.shape[d]
    if n % 2:
        raise RuntimeError(f"glu: halving dimension must be even, but dimension {d % input.ndim} is size {n}")
    a, b = input.narrow(d, 0, n // 2), input.narrow(d, n // 2, n // 2)
    return a * b.sigmoid()


def rrelu(
    input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False, inplace: bool = False
) -> Tensor:
    """Leaky ReLU whose negative slope is drawn uniformly from [``lower``, ``upper``] for each
    element when training, and is their mean otherwise."""
    _float_input(input, "rrelu")
    lo, hi = _float(lower, "lower", "rrelu"), _float(upper, "upper", "rrelu")
    if lo > hi:
        raise ValueError(f"rrelu: lower bound ({lo}) must not be greater than the upper bound ({hi})")
    if not training:
        return leaky_relu(input, (lo + hi) / 2, inplace)
    slope = (_creation.rand(*input.shape, device=input.device) * (hi - lo) + lo).to(input.dtype)
    return _out(input, lambda x: x.where(x >= 0, x * slope), inplace, "rrelu")


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False) -> Tensor:
    """:func:`rrelu` in place."""
    return rrelu(input, lower, upper, training, inplace=True)


# ---- normalisation -------------------------------------------------------------------------


def layer_norm(input: Tensor, normalized_shape, weight=None, bias=None, eps: float = 1e-5) -> Tensor:
    """Normalises over the trailing ``normalized_shape`` dimensions; float32 under autocast."""
    _check(input, "input")
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    eps = _float(eps, "eps", "layer_norm")
    if eps < 0:
        return _layer_norm_composed(input, tuple(as_index(s) for s in shape), weight, bias, eps)
    return _result(_C.layer_norm(input._h, shape, _h(weight, "weight"), _h(bias, "bias"), float(eps)))


def group_norm(input: Tensor, num_groups: int, weight=None, bias=None, eps: float = 1e-5) -> Tensor:
    """Normalises each group of channels of ``[N, C, *]`` input; float32 under autocast."""
    _check(input, "input")
    eps = _float(eps, "eps", "group_norm")
    if eps < 0 or input.numel() == 0:  # (the engine's kernel refuses an empty batch)
        return _group_norm_composed(input, as_index(num_groups), weight, bias, eps)
    return _result(_C.group_norm(input._h, as_index(num_groups), _h(weight, "weight"), _h(bias, "bias"), float(eps)))


def _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps):
    """The output; in training mode the running statistics given are updated in place."""
    _check(input, "input")
    if input.numel() == 0:  # an empty batch: nothing to normalise, the statistics stay (as PyTorch)
        return input + 0.0
    y, m, v = _C.batch_norm(
        input._h,
        _h(running_mean, "running_mean"),
        _h(running_var, "running_var"),
        _h(weight, "weight"),
        _h(bias, "bias"),
        bool(training),
        float(momentum),
        float(eps),
    )
    if m:
        with no_grad():
            running_mean.copy_(_result(m))
            running_var.copy_(_result(v))
    return _result(y)


def batch_norm(
    input: Tensor,
    running_mean=None,
    running_var=None,
    weight=None,
    bias=None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Batch normalisation of ``[N, C, *]`` input, computed in float32, returned in the input's
    dtype. In training mode the running statistics given are updated in place."""
    return _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


@_float32_under_autocast
def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> Tensor:
    """x / (k + alpha·mean of x² over a window of ``size`` neighbouring channels)**beta, the
    window zero-padded at the edges (size//2 channels before, (size-1)//2 after), of
    ``[N, C, *]`` input."""
    _check(input, "input")
    if input.ndim < 3:
        raise ValueError(
            f"local_response_norm: expected 3D or higher dimensionality input (got {input.ndim} dimensions)"
        )
    n = as_index(size)
    if n <= 0:
        raise ValueError(f"local_response_norm: size must be positive, got {size!r}")
    a, b, kk = (_float(v, w, "local_response_norm") for v, w in ((alpha, "alpha"), (beta, "beta"), (k, "k")))
    if input.numel() == 0:
        return input
    sq = input * input
    c = input.shape[1]
    before, after = n // 2, (n - 1) // 2
    parts = [
        _creation.zeros((input.shape[0], w, *input.shape[2:]), dtype=input.dtype, device=input.device)
        for w in (before, after)
    ]
    padded = _cat([t for t in (parts[0], sq, parts[1]) if t.shape[1]], 1)
    window = padded.narrow(1, 0, c)
    for i in range(1, n):
        window = window + padded.narrow(1, i, c)
    return input / (window * (a / n) + kk) ** b


def _moments(x, dims):
    """The mean and the biased variance over ``dims`` (kept)."""
    mean = x.mean(dims, keepdim=True)
    d = x - mean
    return mean, (d * d).mean(dims, keepdim=True)


def _layer_norm_composed(input, shape, weight, bias, eps):
    """layer_norm from reductions, for what the engine's kernel refuses (a negative eps: PyTorch
    computes 1/sqrt(var + eps) and gives NaN where that is negative)."""
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    if input.ndim < len(shape) or tuple(input.shape[input.ndim - len(shape) :]) != shape:
        raise ValueError(
            f"layer_norm: normalized_shape {shape} must be the trailing dimensions of the input, got "
            f"shape {tuple(input.shape)}"
        )
    if input.numel() == 0:
        y = input + 0.0
    else:
        mean, var = _moments(input, dims)
        y = (input - mean) * (var + eps).rsqrt()
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def _group_norm_composed(input, g, weight, bias, eps):
    """group_norm from reductions (see _layer_norm_composed)."""
    if input.ndim < 2 or input.shape[1] % g:
        raise ValueError(
            f"group_norm: expected an input [N, C, *] with C divisible by num_groups ({g}), got shape "
            f"{tuple(input.shape)}"
        )
    n, c = input.shape[0], input.shape[1]
    if input.numel() == 0:
        y = input + 0.0
    else:
        x = input.reshape(n, g, -1)
        mean, var = _moments(x, (2,))
        y = ((x - mean) * (var + eps).rsqrt()).reshape(*input.shape)
    per_channel = (c,) + (1,) * (input.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(*per_channel)
    if bias is not None:
        y = y + bias.reshape(*per_channel)
    return y


# ---- convolution and pooling ---------------------------------------------------------------


def _ntuple(v, n, what, fn):
    """``v`` as ``n`` ints: an int, or a sequence of ``n`` ints (or of one, repeated)."""
    if isinstance(v, (tuple, list)):
        if len(v) == 1:
            v = tuple(v) * n
        if len(v) != n:
            raise ValueError(f"{fn}: {what} must be an int or a tuple of {n} ints, got {v!r}")
        try:
            return tuple(as_index(x) for x in v)
        except TypeError:
            raise TypeError(f"{fn}: {what} must be an int or a tuple of {n} ints, got {v!r}") from None
    try:
        return (as_index(v),) * n
    except TypeError:
        raise TypeError(f"{fn}: {what} must be an int or a tuple of {n} ints, got {v!r}") from None


def _spatial_input(input, k, fn):
    """``input`` as [N, C, *k spatial dims] (an unbatched [C, *spatial] input gets N = 1), and
    whether it was unbatched."""
    _check(input, "input")
    if input.ndim == k + 1:
        return input.unsqueeze(0), True
    if input.ndim != k + 2:
        raise ValueError(
            f"{fn}: expected a {k + 1}-D (unbatched) or {k + 2}-D (batched) input, got shape {tuple(input.shape)}"
        )
    return input, False


def _windows(x, specs, fill):
    """The windows of x [N, C, *S] as [N, C, *o, *k]: ``specs`` gives for each spatial dimension
    the source positions ``pos`` [o, k] and whether each is inside (``ok``, same shape); the
    positions outside read ``fill``. Built from index_select, so differentiable. Also returns the
    flat source index of each window entry within its plane, [*o, *k] (numpy)."""
    k = len(specs)
    sizes = tuple(x.shape[2:])
    valid, flat = np.ones((), bool), np.zeros((), np.int64)
    for d, (pos, ok) in enumerate(specs):
        src = np.clip(pos, 0, sizes[d] - 1) if sizes[d] else np.zeros_like(pos)
        dim = 2 + 2 * d
        index = _creation.tensor(np.ascontiguousarray(src.reshape(-1), np.int64), dtype=_int64, device=x.device)
        x = x.index_select(dim, index)
        x = x.unflatten(dim, pos.shape)
        valid = valid[..., None, None] & ok
        flat = flat[..., None, None] * sizes[d] + src
    order = [2 * d for d in range(k)] + [2 * d + 1 for d in range(k)]
    x = x.permute(0, 1, *(2 + i for i in order))
    valid, flat = valid.transpose(order), flat.transpose(order)
    if not valid.all():
        x = x.where(_creation.tensor(valid, device=x.device), fill)
    return x, flat


def _sliding(n, size, kernel, stride, pad_left, dilation):
    """A window spec over a dimension of ``n``: ``size`` windows of ``kernel`` taps."""
    pos = (np.arange(size) * stride - pad_left)[:, None] + np.arange(kernel) * dilation
    return pos, (pos >= 0) & (pos < n)


def _pool_size(n, k, s, p, d, ceil_mode):
    """PyTorch's pooling output size (a window that would start in the right padding is
    dropped in ceil mode)."""
    span = n + 2 * p - d * (k - 1) - 1
    o = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (o - 1) * s >= n + p:
        o -= 1
    return o


def _pool_args(input, k, kernel_size, stride, padding, dilation, ceil_mode, fn, avg=False):
    x, unbatched = _spatial_input(input, k, fn)
    kernel = _ntuple(kernel_size, k, "kernel_size", fn)
    strides = (
        kernel
        if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0)
        else _ntuple(stride, k, "stride", fn)
    )
    pads = _ntuple(padding, k, "padding", fn)
    dil = _ntuple(dilation, k, "dilation", fn)
    if any(v <= 0 for v in kernel + strides + dil):
        raise ValueError(
            f"{fn}: kernel_size, stride and dilation must be positive, got kernel_size={kernel}, "
            f"stride={strides}, dilation={dil}"
        )
    for p, kk, d in zip(pads, kernel, dil):
        if p < 0 or p > (d * (kk - 1) + 1) // 2:
            raise ValueError(
                f"{fn}: pad should be at most half of effective kernel size, but got pad={p}, "
                f"kernel_size={kk} and dilation={d}"
            )
    sizes = tuple(x.shape[2:])
    out = tuple(_pool_size(n, kk, s, p, d, ceil_mode) for n, kk, s, p, d in zip(sizes, kernel, strides, pads, dil))
    if any(o <= 0 for o in out) or (not avg and any(n == 0 for n in sizes)):
        raise RuntimeError(
            f"{fn}: given input size {tuple(input.shape)}, the calculated output size {out} is too small"
        )
    return x, unbatched, kernel, strides, pads, dil, out


def _max_windows(x, specs, unbatched, return_indices):
    """The max over each window (the first one where several tie) and, with
    ``return_indices``, its flat index within the input plane."""
    k = len(specs)
    w, flat = _windows(x, specs, float("-inf"))
    w = w.flatten(2 + k)
    at = w.argmax(-1, keepdim=True)
    values = w.gather(-1, at).squeeze(-1)
    if unbatched:
        values = values.squeeze(0)
    if not return_indices:
        return values
    flat = _creation.tensor(flat.reshape(*flat.shape[:k], -1), dtype=_int64, device=x.device)
    indices = flat.expand(*w.shape).gather(-1, at).squeeze(-1)
    return values, (indices.squeeze(0) if unbatched else indices)


def _max_pool(input, k, kernel_size, stride, padding, dilation, ceil_mode, return_indices, fn):
    x, unbatched, kernel, strides, pads, dil, out = _pool_args(
        input, k, kernel_size, stride, padding, dilation, ceil_mode, fn
    )
    specs = [_sliding(n, o, kk, s, p, d) for n, o, kk, s, p, d in zip(x.shape[2:], out, kernel, strides, pads, dil)]
    return _max_windows(x, specs, unbatched, return_indices)


def _avg_pool(input, k, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, fn):
    x, unbatched, kernel, strides, pads, _, out = _pool_args(
        input, k, kernel_size, stride, padding, 1, ceil_mode, fn, avg=True
    )
    if divisor_override is not None:
        divisor = as_index(divisor_override)
        if divisor == 0:
            raise ValueError(f"{fn}: divisor_override must be non-zero, got {divisor_override!r}")
    specs, counts = [], np.ones((), np.float64)
    for n, o, kk, s, p in zip(x.shape[2:], out, kernel, strides, pads):
        specs.append(_sliding(n, o, kk, s, p, 1))
        start = np.arange(o) * s - p
        end = np.minimum(start + kk, n + p)  # the window stops at the padding's end
        c = end - start if count_include_pad else np.minimum(end, n) - np.maximum(start, 0)
        counts = counts[..., None] * c
    w, _ = _windows(x, specs, 0.0)
    total = w.sum(tuple(range(2 + k, 2 + 2 * k)))
    if divisor_override is not None:
        y = total / float(divisor)
    else:
        y = total / _creation.tensor(counts.astype(np.float32), device=x.device).to(total.dtype)
    return y.squeeze(0) if unbatched else y


def _adaptive_specs(sizes, output_size, fn):
    k = len(sizes)
    if isinstance(output_size, (tuple, list)):
        outs = list(output_size) if len(output_size) != 1 else list(output_size) * k
        if len(outs) != k:
            raise ValueError(f"{fn}: output_size must be an int or a tuple of {k}, got {output_size!r}")
    else:
        outs = [output_size] * k
    outs = [n if o is None else as_index(o) for n, o in zip(sizes, outs)]
    if any(o < 0 for o in outs):
        raise ValueError(f"{fn}: output_size must not be negative, got {output_size!r}")
    specs, counts = [], np.ones((), np.float64)
    for n, o in zip(sizes, outs):
        i = np.arange(o)
        start, end = (i * n) // o if o else i, -((-(i + 1) * n) // o) if o else i
        width = int((end - start).max()) if o else 0
        pos = start[:, None] + np.arange(width)
        specs.append((pos, pos < end[:, None]))
        counts = counts[..., None] * (end - start)
    return specs, counts


def _adaptive(input, k, output_size, fn, maximum, return_indices=False):
    x, unbatched = _spatial_input(input, k, fn)
    if any(n == 0 for n in x.shape[2:]):
        raise RuntimeError(f"{fn}: expected an input with non-zero spatial sizes, got shape {tuple(input.shape)}")
    specs, counts = _adaptive_specs(tuple(x.shape[2:]), output_size, fn)
    if maximum:
        return _max_windows(x, specs, unbatched, return_indices)
    w, _ = _windows(x, specs, 0.0)
    y = w.sum(tuple(range(2 + k, 2 + 2 * k))) / _creation.tensor(counts.astype(np.float32), device=x.device).to(w.dtype)
    return y.squeeze(0) if unbatched else y


def _same_padding(kernel, dilation, stride, fn):
    if any(s != 1 for s in stride):
        raise ValueError(f"{fn}: padding='same' is not supported for strided convolutions")
    total = [d * (kk - 1) for kk, d in zip(kernel, dilation)]
    return [t // 2 for t in total], [t - t // 2 for t in total]


def _conv_padding(padding, k, kernel, dilation, stride, fn):
    """(left pads, right pads) of a convolution's ``padding``: ints, ``'valid'`` or ``'same'``."""
    if isinstance(padding, str):
        if padding == "valid":
            return [0] * k, [0] * k
        if padding == "same":
            return _same_padding(kernel, dilation, stride, fn)
        raise ValueError(f"{fn}: padding must be 'valid', 'same' or ints, got {padding!r}")
    p = list(_ntuple(padding, k, "padding", fn))
    if any(v < 0 for v in p):
        raise ValueError(f"{fn}: padding must not be negative, got {padding!r}")
    return p, p


def _conv_check(x, weight, bias, k, groups, fn, transposed=False):
    _check(weight, "weight")
    if bias is not None:
        _check(bias, "bias")
    if weight.ndim != k + 2:
        raise RuntimeError(f"{fn}: expected a {k + 2}-D weight, got shape {tuple(weight.shape)}")
    dtypes = {x.dtype, weight.dtype} | ({bias.dtype} if bias is not None else set())
    # Under autocast the product takes mixed float dtypes (it casts them), as PyTorch's conv.
    if len(dtypes) > 1 and not (_autocasting(x) and all(t.is_floating_point() for t in (x, weight))):
        raise RuntimeError(
            f"{fn}: input ({x.dtype}), weight ({weight.dtype})"
            + (f" and bias ({bias.dtype})" if bias is not None else "")
            + " must have one dtype"
        )
    if groups <= 0:
        raise ValueError(f"{fn}: groups must be positive, got {groups}")
    c = x.shape[1]
    expected = weight.shape[0] if transposed else weight.shape[1] * groups
    if c != expected or (not transposed and weight.shape[0] % groups) or (transposed and c % groups):
        raise RuntimeError(
            f"{fn}: given groups={groups} and weight of shape {tuple(weight.shape)}, expected input "
            f"of shape {tuple(x.shape)} to have {expected} channels, but got {c}"
        )
    out_channels = weight.shape[1] * groups if transposed else weight.shape[0]
    if bias is not None and tuple(bias.shape) != (out_channels,):
        raise RuntimeError(f"{fn}: expected a bias of shape ({out_channels},), got {tuple(bias.shape)}")


def _autocasting(t):
    """Whether autocast is on for ``t``'s device on this thread (the engine's state)."""
    return _C.autocast_is_enabled(_DEVICE_CODES.get(str(t.device), -1)) != 0


def _conv_windows(x, weight, bias, specs, groups):
    """The convolution of x [N, C, *S] by weight [O, C / groups, *k] over the window ``specs``
    (zero outside): the windows times the weights, one matrix product per group."""
    k = len(specs)
    w, _ = _windows(x, specs, 0.0)
    n, c = x.shape[0], x.shape[1]
    out_sizes = tuple(w.shape[2 : 2 + k])
    taps = math.prod(w.shape[2 + k :])
    p = math.prod(out_sizes)
    o = weight.shape[0]
    cols = w.reshape(n, groups, c // groups, p, taps).permute(0, 1, 3, 2, 4).reshape(n, groups, p, c // groups * taps)
    wm = weight.reshape(groups, o // groups, c // groups * taps).transpose(1, 2)
    y = cols.matmul(wm).permute(0, 1, 3, 2).reshape(n, o, *out_sizes)
    if bias is not None:
        y = y + bias.reshape(o, *([1] * k)).to(y.dtype)  # the product's dtype, also under autocast
    return y


def _conv_nd(input, weight, bias, stride, padding, dilation, groups, k, fn):
    x, unbatched = _spatial_input(input, k, fn)
    groups = as_index(groups)
    _conv_check(x, weight, bias, k, groups, fn)
    kernel = tuple(weight.shape[2:])
    strides = _ntuple(stride, k, "stride", fn)
    dil = _ntuple(dilation, k, "dilation", fn)
    if any(v <= 0 for v in strides + dil):
        raise ValueError(f"{fn}: stride and dilation must be positive, got stride={strides}, dilation={dil}")
    left, right = _conv_padding(padding, k, kernel, dil, strides, fn)
    specs = []
    for n, kk, s, pl, pr, d in zip(x.shape[2:], kernel, strides, left, right, dil):
        o = (n + pl + pr - d * (kk - 1) - 1) // s + 1
        if o <= 0:
            raise RuntimeError(
                f"{fn}: the kernel of size {kernel} (dilation {dil}) is larger than the padded input "
                f"of shape {tuple(input.shape)}"
            )
        specs.append(_sliding(n, o, kk, s, pl, d))
    y = None
    if k == 3 and x.numel() and weight.numel():
        y = _conv3d_by_planes(x, weight, bias, specs[0], strides, left, right, dil, groups)
    if y is None:
        y = _conv_windows(x, weight, bias, specs, groups)
    return y.squeeze(0) if unbatched else y


def _conv3d_by_planes(x, weight, bias, depth, strides, left, right, dil, groups):
    """conv3d as a sum over the kernel's depth taps of the engine's conv2d, each over the input
    planes that tap reads (output depths folded into the batch); None when no tap reads the
    input (the window product then gives the zeros)."""
    n, c = x.shape[0], x.shape[1]
    o = weight.shape[0]
    pos, ok = depth
    if (left[1], left[2]) != (right[1], right[2]):  # 'same' with an odd total: pad first
        x = pad(x, (left[2], right[2], left[1], right[1]))
        plane_pad = (0, 0)
    else:
        plane_pad = (left[1], left[2])
    do = pos.shape[0]
    h, w = x.shape[3], x.shape[4]
    out = None
    for t in range(pos.shape[1]):
        if not ok[:, t].any():
            continue
        index = _creation.tensor(np.clip(pos[:, t], 0, x.shape[2] - 1).astype(np.int64), dtype=_int64, device=x.device)
        planes = x.index_select(2, index)
        if not ok[:, t].all():
            planes = planes.where(_creation.tensor(ok[:, t].reshape(1, 1, do, 1, 1), device=x.device), 0.0)
        planes = planes.transpose(1, 2).reshape(n * do, c, h, w)
        y = conv2d(planes, weight.select(2, t).contiguous(), None, strides[1:], plane_pad, dil[1:], groups)
        out = y if out is None else out + y
    if out is None:
        return None
    out = out.reshape(n, do, o, out.shape[2], out.shape[3]).transpose(1, 2)
    if bias is not None:
        out = out + bias.reshape(o, 1, 1, 1).to(out.dtype)
    return out


def _conv_transpose_nd(input, weight, bias, stride, padding, output_padding, groups, dilation, k, fn):
    """The transpose of a convolution, as a convolution of the input spread out by ``stride``
    (in index space: no zeros are stored) with the kernel flipped and its channels swapped."""
    x, unbatched = _spatial_input(input, k, fn)
    groups = as_index(groups)
    _conv_check(x, weight, bias, k, groups, fn, transposed=True)
    kernel = tuple(weight.shape[2:])
    strides = _ntuple(stride, k, "stride", fn)
    pads = _ntuple(padding, k, "padding", fn)
    outpad = _ntuple(output_padding, k, "output_padding", fn)
    dil = _ntuple(dilation, k, "dilation", fn)
    if any(v <= 0 for v in strides + dil) or any(v < 0 for v in pads + outpad):
        raise ValueError(
            f"{fn}: stride and dilation must be positive and padding not negative, got stride={strides}, "
            f"padding={pads}, dilation={dil}"
        )
    if any(op >= s and op >= d for op, s, d in zip(outpad, strides, dil)):
        raise ValueError(
            f"{fn}: output_padding {outpad} must be smaller than either stride {strides} or dilation {dil}"
        )
    specs = []
    for n, kk, s, p, op, d in zip(x.shape[2:], kernel, strides, pads, outpad, dil):
        o = (n - 1) * s - 2 * p + d * (kk - 1) + op + 1
        if o <= 0:
            raise RuntimeError(f"{fn}: the output size {o} of input {tuple(input.shape)} is not positive")
        q = (np.arange(o) - (d * (kk - 1) - p))[:, None] + np.arange(kk)[::-1] * d  # spread coordinates
        specs.append((q // s, (q >= 0) & (q % s == 0) & (q // s < n)))
    i, og = weight.shape[0], weight.shape[1]
    w = weight.reshape(groups, i // groups, og, *kernel).transpose(1, 2).reshape(groups * og, i // groups, *kernel)
    y = _conv_windows(x, w, bias, specs, groups)
    return y.squeeze(0) if unbatched else y


def _same_2d(input, weight, padding, dilation, stride, k, fn):
    """For ``padding='same'`` with an odd total pad, the input padded asymmetrically and pad 0."""
    if padding != "same":
        return input, padding
    _check(weight, "weight")
    kernel = tuple(weight.shape[2:])
    left, right = _same_padding(kernel, _ntuple(dilation, k, "dilation", fn), _ntuple(stride, k, "stride", fn), fn)
    if left == right:
        return input, tuple(left)
    pads = []
    for l, r in zip(reversed(left), reversed(right)):
        pads += [l, r]
    return pad(input, pads), 0


def conv2d(input: Tensor, weight: Tensor, bias=None, stride=1, padding=0, dilation=1, groups: int = 1) -> Tensor:
    """2-D cross-correlation; lower precision under autocast. ``padding`` is ints, ``'valid'``
    (none) or ``'same'`` (the output as large as the input; stride 1)."""
    _check(input, "input")
    _check(weight, "weight")
    if padding == "valid":
        padding = 0
    input, padding = _same_2d(input, weight, padding, dilation, stride, 2, "conv2d")
    params = (
        *_ntuple(stride, 2, "stride", "conv2d"),
        *_ntuple(padding, 2, "padding", "conv2d"),
        *_ntuple(dilation, 2, "dilation", "conv2d"),
        as_index(groups),
    )
    return _result(_C.conv2d(input._h, weight._h, _h(bias, "bias"), params))


def conv1d(input: Tensor, weight: Tensor, bias=None, stride=1, padding=0, dilation=1, groups: int = 1) -> Tensor:
    """1-D cross-correlation of [N, C, L] input; lower precision under autocast. ``padding`` is
    an int, ``'valid'`` or ``'same'``."""
    _check(input, "input")
    _check(weight, "weight")
    if padding == "valid":
        padding = 0
    input, padding = _same_2d(input, weight, padding, dilation, stride, 1, "conv1d")
    params = (_single(stride, "stride"), _single(padding, "padding"), _single(dilation, "dilation"), as_index(groups))
    return _result(_C.conv1d(input._h, weight._h, _h(bias, "bias"), params))


def conv3d(input: Tensor, weight: Tensor, bias=None, stride=1, padding=0, dilation=1, groups: int = 1) -> Tensor:
    """3-D cross-correlation of [N, C, D, H, W] (or unbatched [C, D, H, W]) input by weight
    [out, C / groups, kd, kh, kw]; ``padding`` is ints, ``'valid'`` or ``'same'``. Composed of
    gathered windows and a matrix product, so lower precision under autocast as matmul is."""
    return _conv_nd(input, weight, bias, stride, padding, dilation, groups, 3, "conv3d")


def conv_transpose1d(
    input: Tensor, weight: Tensor, bias=None, stride=1, padding=0, output_padding=0, groups: int = 1, dilation=1
) -> Tensor:
    """The transpose of conv1d (weights [in, out / groups, k]) over [N, C, L] or [C, L] input."""
    x, unbatched = _spatial_input(input, 1, "conv_transpose1d")
    _check(weight, "weight")
    if weight.ndim != 3:
        raise RuntimeError(f"conv_transpose1d: expected a 3-D weight, got shape {tuple(weight.shape)}")
    params = (
        1,
        _single(stride, "stride"),
        0,
        _single(padding, "padding"),
        0,
        _single(output_padding, "output_padding"),
        1,
        _single(dilation, "dilation"),
        as_index(groups),
    )
    x2, w2 = x.unsqueeze(2), weight.unsqueeze(2)  # kept alive across the call
    y = _result(_C.conv_transpose2d(x2._h, w2._h, _h(bias, "bias"), params)).squeeze(2)
    return y.squeeze(0) if unbatched else y


def conv_transpose2d(
    input: Tensor, weight: Tensor, bias=None, stride=1, padding=0, output_padding=0, groups: int = 1, dilation=1
) -> Tensor:
    """The transpose of conv2d (weights [in, out/groups, kh, kw]); lower precision under autocast."""
    _check(input, "input")
    _check(weight, "weight")
    params = (
        *_ntuple(stride, 2, "stride", "conv_transpose2d"),
        *_ntuple(padding, 2, "padding", "conv_transpose2d"),
        *_ntuple(output_padding, 2, "output_padding", "conv_transpose2d"),
        *_ntuple(dilation, 2, "dilation", "conv_transpose2d"),
        as_index(groups),
    )
    return _result(_C.conv_transpose2d(input._h, weight._h, _h(bias, "bias"), params))


def conv_transpose3d(
    input: Tensor, weight: Tensor, bias=None, stride=1, padding=0, output_padding=0, groups: int = 1, dilation=1
) -> Tensor:
    """The transpose of conv3d (weights [in, out / groups, kd, kh, kw]) over [N, C, D, H, W] or
    [C, D, H, W] input."""
    return _conv_transpose_nd(
        input, weight, bias, stride, padding, output_padding, groups, dilation, 3, "conv_transpose3d"
    )


def max_pool1d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    """The max over each window of [N, C, L] or [C, L] input (padding counts as -inf); with
    ``return_indices`` also the index of each max within L."""
    if return_indices:
        return _max_pool(input, 1, kernel_size, stride, padding, dilation, ceil_mode, True, "max_pool1d")
    # The 2-D kernel over a height of one (checked first, for 1-D messages).
    x, unbatched, kernel, strides, pads, dil, _ = _pool_args(
        input, 1, kernel_size, stride, padding, dilation, ceil_mode, "max_pool1d"
    )
    x2 = x.unsqueeze(2)  # kept alive across the call
    y = _result(_C.max_pool2d(x2._h, (1, *kernel, 1, *strides, 0, *pads, 1, *dil), bool(ceil_mode))).squeeze(2)
    return y.squeeze(0) if unbatched else y


def max_pool2d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    """The max over each window (padding counts as -inf); with ``return_indices`` also the flat
    index of each max within its H x W plane."""
    _check(input, "input")
    if return_indices or input.ndim != 4:
        if return_indices or input.ndim != 3:
            return _max_pool(input, 2, kernel_size, stride, padding, dilation, ceil_mode, return_indices, "max_pool2d")
        return max_pool2d(input.unsqueeze(0), kernel_size, stride, padding, dilation, ceil_mode).squeeze(0)
    k = _ntuple(kernel_size, 2, "kernel_size", "max_pool2d")
    s = k if stride is None or stride == [] or stride == () else _ntuple(stride, 2, "stride", "max_pool2d")
    params = (*k, *s, *_ntuple(padding, 2, "padding", "max_pool2d"), *_ntuple(dilation, 2, "dilation", "max_pool2d"))
    return _result(_C.max_pool2d(input._h, params, bool(ceil_mode)))


def max_pool3d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    """The max over each window of [N, C, D, H, W] or [C, D, H, W] input; with
    ``return_indices`` also the flat index of each max within its D x H x W volume."""
    return _max_pool(input, 3, kernel_size, stride, padding, dilation, ceil_mode, return_indices, "max_pool3d")


def avg_pool1d(
    input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True
) -> Tensor:
    """The mean over each window of [N, C, L] or [C, L] input, with PyTorch's divisor rules."""
    x, unbatched, kernel, strides, pads, _, _ = _pool_args(
        input, 1, kernel_size, stride, padding, 1, ceil_mode, "avg_pool1d", avg=True
    )
    x2 = x.unsqueeze(2)  # the 2-D kernel over a height of one; kept alive across the call
    y = _result(
        _C.avg_pool2d(x2._h, (1, *kernel, 1, *strides, 0, *pads), bool(ceil_mode), bool(count_include_pad), 0)
    ).squeeze(2)
    return y.squeeze(0) if unbatched else y


def avg_pool2d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override=None,
) -> Tensor:
    """The mean over each window, with PyTorch's divisor rules."""
    _check(input, "input")
    if input.ndim == 3 and (divisor_override is None or as_index(divisor_override) > 0):
        return avg_pool2d(
            input.unsqueeze(0), kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
        ).squeeze(0)
    if input.ndim != 4 or (divisor_override is not None and as_index(divisor_override) < 0):
        return _avg_pool(
            input, 2, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, "avg_pool2d"
        )
    k = _ntuple(kernel_size, 2, "kernel_size", "avg_pool2d")
    s = k if stride is None or stride == [] or stride == () else _ntuple(stride, 2, "stride", "avg_pool2d")
    divisor = 0 if divisor_override is None else as_index(divisor_override)
    if divisor_override is not None and divisor == 0:
        raise ValueError(f"avg_pool2d: divisor_override must be non-zero, got {divisor_override!r}")
    params = (*k, *s, *_ntuple(padding, 2, "padding", "avg_pool2d"))
    return _result(_C.avg_pool2d(input._h, params, bool(ceil_mode), bool(count_include_pad), divisor))


def avg_pool3d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override=None,
) -> Tensor:
    """The mean over each window of [N, C, D, H, W] or [C, D, H, W] input, with PyTorch's
    divisor rules."""
    return _avg_pool(
        input, 3, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, "avg_pool3d"
    )


def lp_pool1d(input: Tensor, norm_type, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """The ``norm_type``-norm over each window: (sum of x**p)**(1/p), as PyTorch computes it
    (from the mean of x**p, so odd p over negative sums gives NaN)."""
    return _lp_pool(input, 1, norm_type, kernel_size, stride, ceil_mode, "lp_pool1d")


def lp_pool2d(input: Tensor, norm_type, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """The ``norm_type``-norm over each 2-D window (see :func:`lp_pool1d`)."""
    return _lp_pool(input, 2, norm_type, kernel_size, stride, ceil_mode, "lp_pool2d")


def lp_pool3d(input: Tensor, norm_type, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """The ``norm_type``-norm over each 3-D window (see :func:`lp_pool1d`)."""
    return _lp_pool(input, 3, norm_type, kernel_size, stride, ceil_mode, "lp_pool3d")


def _lp_pool(input, k, norm_type, kernel_size, stride, ceil_mode, fn):
    _check(input, "input")
    p = _float(norm_type, "norm_type", fn)
    kernel = _ntuple(kernel_size, k, "kernel_size", fn)
    mean = _avg_pool(input.pow(p), k, kernel, stride, 0, ceil_mode, True, None, fn)
    # PyTorch's sign(m) * relu(|m|): m itself, with no gradient where m is 0.
    zero = mean == 0
    m = mean.where(~zero, 0.0) if bool(zero.any()) else mean
    return (m * float(math.prod(kernel))).pow(1.0 / p)


def adaptive_avg_pool1d(input: Tensor, output_size) -> Tensor:
    """Averages over the windows that split L into ``output_size`` cells."""
    return _adaptive(input, 1, output_size, "adaptive_avg_pool1d", False)


def adaptive_avg_pool2d(input: Tensor, output_size) -> Tensor:
    """Averages over the windows that split each plane into ``output_size`` cells (None keeps
    a dimension)."""
    _check(input, "input")
    if input.ndim != 4:
        return _adaptive(input, 2, output_size, "adaptive_avg_pool2d", False)
    if isinstance(output_size, (tuple, list)) and len(output_size) == 2:
        oh = input.shape[-2] if output_size[0] is None else output_size[0]
        ow = input.shape[-1] if output_size[1] is None else output_size[1]
    else:
        oh, ow = _ntuple(output_size, 2, "output_size", "adaptive_avg_pool2d")
    return _result(_C.adaptive_avg_pool2d(input._h, as_index(oh), as_index(ow)))


def adaptive_avg_pool3d(input: Tensor, output_size) -> Tensor:
    """Averages over the windows that split each volume into ``output_size`` cells (None keeps
    a dimension)."""
    return _adaptive(input, 3, output_size, "adaptive_avg_pool3d", False)


def adaptive_max_pool1d(input: Tensor, output_size, return_indices: bool = False):
    """The max over the windows that split L into ``output_size`` cells; with
    ``return_indices`` also where each max is."""
    return _adaptive(input, 1, output_size, "adaptive_max_pool1d", True, return_indices)


def adaptive_max_pool2d(input: Tensor, output_size, return_indices: bool = False):
    """The max over the windows that split each plane into ``output_size`` cells; with
    ``return_indices`` also the flat index of each max within its plane."""
    return _adaptive(input, 2, output_size, "adaptive_max_pool2d", True, return_indices)


def adaptive_max_pool3d(input: Tensor, output_size, return_indices: bool = False):
    """The max over the windows that split each volume into ``output_size`` cells; with
    ``return_indices`` also the flat index of each max within its volume."""
    return _adaptive(input, 3, output_size, "adaptive_max_pool3d", True, return_indices)


def _fractional_starts(sample, n, o, k):
    """PyTorch's pseudo-random window starts along a dimension, for each plane's ``sample``
    [N, C] in [0, 1): [N, C, o], computed in float32 as its kernel is."""
    sample = sample.astype(np.float32)[..., None]
    seq = np.zeros(sample.shape[:-1] + (o,), np.int64)
    if o > 1:
        alpha = np.float32(n - k) / np.float32(o - 1)
        i = np.arange(o - 1, dtype=np.float32)
        seq[..., :-1] = ((i + sample) * alpha).astype(np.int64) - (sample * alpha).astype(np.int64)
    if o > 0:
        seq[..., -1] = n - k
    return seq


def _fractional_max_pool(input, k, kernel_size, output_size, output_ratio, return_indices, _random_samples, fn):
    x, unbatched = _spatial_input(input, k, fn)
    kernel = _ntuple(kernel_size, k, "kernel_size", fn)
    sizes = tuple(x.shape[2:])
    if (output_size is None) == (output_ratio is None):
        raise ValueError(f"{fn}: give exactly one of output_size and output_ratio")
    if output_size is not None:
        outs = _ntuple(output_size, k, "output_size", fn)
    else:
        ratios = output_ratio if isinstance(output_ratio, (tuple, list)) else (output_ratio,) * k
        if len(ratios) == 1:
            ratios = tuple(ratios) * k
        if len(ratios) != k or not all(0 < float(r) < 1 for r in ratios):
            raise ValueError(f"{fn}: output_ratio must be {k} number(s) in (0, 1), got {output_ratio!r}")
        outs = tuple(int(n * float(r)) for n, r in zip(sizes, ratios))
    for n, o, kk in zip(sizes, outs, kernel):
        if kk <= 0 or o <= 0 or o + kk - 1 > n:
            raise ValueError(
                f"{fn}: output size {outs} with kernel_size {kernel} is too large for the input of shape "
                f"{tuple(input.shape)}"
            )
    nb, c = x.shape[0], x.shape[1]
    if _random_samples is None:
        samples = _creation.rand(nb, c, k).numpy()  # lucid's generator, so manual_seed repeats it
    else:
        _check(_random_samples, "_random_samples")
        shape = tuple(_random_samples.shape)
        if len(shape) != 3 or shape[0] < nb or shape[1:] != (c, k):
            raise ValueError(
                f"{fn}: _random_samples must have shape (n, {c}, {k}) with n at least the batch size {nb}, got {shape}"
            )
        samples = _random_samples.detach().float().numpy()[:nb]  # (the first rows, as PyTorch)
    # Each plane has windows of its own: flat source indices [N, C, *o, *k], read with gather.
    order = list(range(k))[::-1] if k == 2 else list(range(k))  # 2-D samples are (w, h), 3-D (t, h, w)
    flat = np.zeros((nb, c) + outs + kernel, np.int64)
    for d in range(k):
        starts = _fractional_starts(samples[:, :, order[d]], sizes[d], outs[d], kernel[d])  # [N, C, o]
        pos = starts[..., :, None] + np.arange(kernel[d])  # [N, C, o, k]
        shape = [nb, c] + [1] * (2 * k)
        shape[2 + d], shape[2 + k + d] = outs[d], kernel[d]
        flat = flat * sizes[d] + pos.reshape(shape)
    idx = _creation.tensor(flat.reshape(nb, c, math.prod(outs) * math.prod(kernel)), dtype=_int64, device=x.device)
    w = x.flatten(2).gather(2, idx).reshape(nb, c, math.prod(outs), math.prod(kernel))
    at = w.argmax(-1, keepdim=True)
    values = w.gather(-1, at).reshape(nb, c, *outs)
    if unbatched:
        values = values.squeeze(0)
    if not return_indices:
        return values
    indices = idx.reshape(nb, c, math.prod(outs), math.prod(kernel)).gather(-1, at).reshape(nb, c, *outs)
    return values, (indices.squeeze(0) if unbatched else indices)


def fractional_max_pool2d(
    input: Tensor, kernel_size, output_size=None, output_ratio=None, return_indices: bool = False, _random_samples=None
):
    """Max pooling over windows of ``kernel_size`` at pseudo-random steps, chosen per plane from
    ``_random_samples`` [N, C, 2] in [0, 1) (drawn when not given), to ``output_size`` or
    ``output_ratio`` of the input size."""
    return _fractional_max_pool(
        input, 2, kernel_size, output_size, output_ratio, return_indices, _random_samples, "fractional_max_pool2d"
    )


def fractional_max_pool3d(
    input: Tensor, kernel_size, output_size=None, output_ratio=None, return_indices: bool = False, _random_samples=None
):
    """The 3-D form of :func:`fractional_max_pool2d` (``_random_samples`` [N, C, 3])."""
    return _fractional_max_pool(
        input, 3, kernel_size, output_size, output_ratio, return_indices, _random_samples, "fractional_max_pool3d"
    )


def _max_unpool(input, indices, k, kernel_size, stride, padding, output_size, fn):
    x, unbatched = _spatial_input(input, k, fn)
    _check(indices, "indices")
    if indices.dtype != _int64:
        raise TypeError(f"{fn}: indices must be int64, got {indices.dtype}")
    if tuple(indices.shape) != tuple(input.shape):
        raise ValueError(
            f"{fn}: indices of shape {tuple(indices.shape)} must match the input's shape {tuple(input.shape)}"
        )
    kernel = _ntuple(kernel_size, k, "kernel_size", fn)
    strides = kernel if stride is None else _ntuple(stride, k, "stride", fn)
    pads = _ntuple(padding, k, "padding", fn)
    default = tuple((n - 1) * s - 2 * p + kk for n, s, p, kk in zip(x.shape[2:], strides, pads, kernel))
    if output_size is None:
        outs = default
    else:
        outs = tuple(as_index(o) for o in output_size)
        if len(outs) == k + 2 or (len(outs) == k + 1 and unbatched):
            outs = outs[-k:]
        if len(outs) != k:
            raise ValueError(f"{fn}: output_size must have {k} elements, got {tuple(output_size)}")
        for o, dflt, s in zip(outs, default, strides):
            if not dflt - s < o < dflt + s:
                raise ValueError(
                    f"{fn}: invalid output_size {tuple(output_size)}: each size must be within the "
                    f"stride of the default {default}"
                )
    nb, c = x.shape[0], x.shape[1]
    plane = math.prod(outs)
    plane_in = math.prod(x.shape[2:])
    idx = (indices.unsqueeze(0) if unbatched else indices).reshape(nb, c, plane_in)
    if idx.numel() and (bool((idx < 0).any()) or bool((idx >= plane).any())):
        raise IndexError(f"{fn}: found an invalid max index (the output plane {outs} has {plane} entries)")
    src = x.reshape(nb, c, plane_in)
    zeros = _creation.zeros((nb, c, plane), dtype=x.dtype, device=x.device)
    # The values are written once per index (the last write wins where indices repeat, as
    # PyTorch's loop); the gradient reads the output's gradient at each index, as PyTorch's.
    y = zeros.scatter(2, idx, src.detach())
    if src.requires_grad:
        summed = zeros.scatter_add(2, idx, src)
        y = y + (summed - summed.detach())
    y = y.reshape(nb, c, *outs)
    return y.squeeze(0) if unbatched else y


def max_unpool1d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """The inverse of max_pool1d: each value placed at its index, zeros elsewhere."""
    return _max_unpool(input, indices, 1, kernel_size, stride, padding, output_size, "max_unpool1d")


def max_unpool2d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """The inverse of max_pool2d: each value placed at its flat index in the output plane."""
    return _max_unpool(input, indices, 2, kernel_size, stride, padding, output_size, "max_unpool2d")


def max_unpool3d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """The inverse of max_pool3d: each value placed at its flat index in the output volume."""
    return _max_unpool(input, indices, 3, kernel_size, stride, padding, output_size, "max_unpool3d")


def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """The sliding blocks of [N, C, H, W] (or [C, H, W]) input as columns: [N, C * kh * kw, L]
    (im2col), L the number of blocks."""
    x, unbatched = _spatial_input(input, 2, "unfold")
    kernel = _ntuple(kernel_size, 2, "kernel_size", "unfold")
    dil = _ntuple(dilation, 2, "dilation", "unfold")
    pads = _ntuple(padding, 2, "padding", "unfold")
    strides = _ntuple(stride, 2, "stride", "unfold")
    if any(v <= 0 for v in kernel + dil + strides) or any(p < 0 for p in pads):
        raise ValueError(
            f"unfold: kernel_size, dilation and stride must be positive and padding not negative, got "
            f"kernel_size={kernel}, dilation={dil}, padding={pads}, stride={strides}"
        )
    specs = []
    for n, kk, d, p, s in zip(x.shape[2:], kernel, dil, pads, strides):
        o = (n + 2 * p - d * (kk - 1) - 1) // s + 1
        if o <= 0:
            raise RuntimeError(
                f"unfold: the kernel {kernel} (dilation {dil}) does not fit the padded input of shape "
                f"{tuple(input.shape)}"
            )
        specs.append(_sliding(n, o, kk, s, p, d))
    w, _ = _windows(x, specs, 0.0)  # [N, C, oh, ow, kh, kw]
    nb, c, oh, ow = w.shape[:4]
    y = w.permute(0, 1, 4, 5, 2, 3).reshape(nb, c * kernel[0] * kernel[1], oh * ow)
    return y.squeeze(0) if unbatched else y


def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """The adjoint of :func:`unfold` (col2im): columns [N, C * kh * kw, L] (or [C * kh * kw, L])
    summed into [N, C, H, W] at their blocks."""
    _check(input, "input")
    if input.ndim not in (2, 3):
        raise ValueError(f"fold: expected a 2-D (unbatched) or 3-D (batched) input, got shape {tuple(input.shape)}")
    unbatched = input.ndim == 2
    x = input.unsqueeze(0) if unbatched else input
    outs = _ntuple(output_size, 2, "output_size", "fold")
    kernel = _ntuple(kernel_size, 2, "kernel_size", "fold")
    dil = _ntuple(dilation, 2, "dilation", "fold")
    pads = _ntuple(padding, 2, "padding", "fold")
    strides = _ntuple(stride, 2, "stride", "fold")
    if any(v <= 0 for v in kernel + dil + strides) or any(p < 0 for p in pads):
        raise ValueError(
            f"fold: kernel_size, dilation and stride must be positive and padding not negative, got "
            f"kernel_size={kernel}, dilation={dil}, padding={pads}, stride={strides}"
        )
    taps = kernel[0] * kernel[1]
    nb, ck, l = x.shape
    if ck % taps:
        raise RuntimeError(
            f"fold: expected the size of dimension 1 of the input ({ck}) to be divisible by the "
            f"product of kernel_size {kernel}"
        )
    blocks = [(n + 2 * p - d * (kk - 1) - 1) // s + 1 for n, kk, d, p, s in zip(outs, kernel, dil, pads, strides)]
    if any(b <= 0 for b in blocks) or blocks[0] * blocks[1] != l:
        raise RuntimeError(
            f"fold: given output_size={outs}, kernel_size={kernel}, dilation={dil}, padding={pads}, "
            f"stride={strides}, expected {max(blocks[0], 0) * max(blocks[1], 0)} blocks in dimension 2 "
            f"of the input, got {l}"
        )
    c = ck // taps
    (ph, okh), (pw, okw) = (
        _sliding(n, b, kk, s, p, d) for n, b, kk, s, p, d in zip(outs, blocks, kernel, strides, pads, dil)
    )
    # Entry (ki, kj, bi, bj) of a column block lands at (ph[bi, ki], pw[bj, kj]) when inside.
    rows = ph.T[:, None, :, None]
    cols = pw.T[None, :, None, :]
    inside = (okh.T[:, None, :, None] & okw.T[None, :, None, :]).reshape(-1)
    target = (rows * outs[1] + cols).reshape(-1)
    keep = np.nonzero(inside)[0]
    src = x.reshape(nb, c, taps * l)
    if len(keep) != taps * l:
        src = src.index_select(2, _creation.tensor(keep.astype(np.int64), dtype=_int64, device=x.device))
    y = _creation.zeros((nb, c, outs[0] * outs[1]), dtype=x.dtype, device=x.device)
    y = y.index_add(2, _creation.tensor(target[keep].astype(np.int64), dtype=_int64, device=x.device), src)
    y = y.reshape(nb, c, *outs)
    return y.squeeze(0) if unbatched else y


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """``[N, C, *]`` with its channels regrouped: channel g * (C / groups) + i goes to
    i * groups + g (ShuffleNet's shuffle)."""
    _check(input, "input")
    g = as_index(groups)
    if g <= 0:
        raise ValueError(f"channel_shuffle: groups must be positive, got {groups}")
    if input.ndim < 3:
        raise RuntimeError(
            f"channel_shuffle: expected an input of at least 3 dimensions, got shape {tuple(input.shape)}"
        )
    n, c, *rest = input.shape
    if c % g:
        raise RuntimeError(f"channel_shuffle: the {c} channels are not divisible by groups={g}")
    return input.reshape(n, g, c // g, *rest).transpose(1, 2).reshape(n, c, *rest)


# ---- attention and embedding ---------------------------------------------------------------


def _attention(query, key, value, attn_mask, dropout_p, is_causal, scale, need_weights):
    for t, what in ((query, "query"), (key, "key"), (value, "value")):
        _check(t, what)
    o, w = _C.attention(
        query._h,
        key._h,
        value._h,
        _h(attn_mask, "attn_mask"),
        bool(is_causal),
        None if scale is None else float(scale),
        float(dropout_p),
        need_weights,
    )
    return _result(o), (_result(w) if need_weights else None)


def _repeat_heads(t, r):
    """Each head (dimension -3) repeated ``r`` times in place, as repeat_interleave."""
    index = _creation.tensor(np.repeat(np.arange(t.shape[-3], dtype=np.int64), r), dtype=_int64, device=t.device)
    return t.index_select(t.ndim - 3, index)


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask=None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale=None,
    enable_gqa: bool = False,
) -> Tensor:
    """softmax(q·kᵀ·scale + mask)·v over the last two dimensions. A bool ``attn_mask`` is True
    where attention is allowed; a float one is added to the scores. With ``enable_gqa`` the
    key and value may have fewer heads (dimension -3) than the query, each shared by a group
    of query heads. The products run in lower precision under autocast, the softmax in
    float32."""
    for t, what in ((query, "query"), (key, "key"), (value, "value")):
        _check(t, what)
    if enable_gqa and query.ndim >= 3 and key.ndim >= 3 and value.ndim >= 3:
        hq, hk, hv = query.shape[-3], key.shape[-3], value.shape[-3]
        if hk != hq or hv != hq:
            if hk == 0 or hv == 0 or hq % hk or hq % hv:
                raise RuntimeError(
                    f"scaled_dot_product_attention: with enable_gqa the query's {hq} heads must be a "
                    f"multiple of the key's {hk} and the value's {hv}"
                )
            key = _repeat_heads(key, hq // hk) if hk != hq else key
            value = _repeat_heads(value, hq // hv) if hv != hq else value
    return _attention(query, key, value, attn_mask, dropout_p, is_causal, scale, False)[0]


def _additive_mask(mask, what, dtype):
    """A bool mask (True: not allowed) as 0 / -inf, or a float mask as it is."""
    _check(mask, what)
    if mask.dtype == _bool:
        return _creation.zeros(tuple(mask.shape), dtype=dtype, device=mask.device).masked_fill(mask, float("-inf"))
    if not mask.is_floating_point():
        raise TypeError(f"multi_head_attention_forward: {what} must be a bool or float tensor, got {mask.dtype}")
    return mask.to(dtype)


def multi_head_attention_forward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    embed_dim_to_check: int,
    num_heads: int,
    in_proj_weight,
    in_proj_bias,
    bias_k,
    bias_v,
    add_zero_attn: bool,
    dropout_p: float,
    out_proj_weight: Tensor,
    out_proj_bias,
    training: bool = True,
    key_padding_mask=None,
    need_weights: bool = True,
    attn_mask=None,
    use_separate_proj_weight: bool = False,
    q_proj_weight=None,
    k_proj_weight=None,
    v_proj_weight=None,
    static_k=None,
    static_v=None,
    average_attn_weights: bool = True,
    is_causal: bool = False,
):
    """Multi-head attention of query [L, N, E] over key [S, N, Ek] and value [S, N, Ev] (or
    unbatched [L, E], [S, Ek], [S, Ev]), as ``torch.nn.functional.multi_head_attention_forward``:
    the input projections (``in_proj_weight`` split in three, or the separate ``q/k/v_proj_weight``),
    the learnt ``bias_k``/``bias_v`` and a zero position appended to the keys and values when
    asked, the masks (bool True: not allowed; float: added), attention per head and the output
    projection. Returns (output [L, N, E], weights [N, L, S] averaged over heads, or
    [N, heads, L, S], or None without ``need_weights``)."""
    for t, what in ((query, "query"), (key, "key"), (value, "value")):
        _check(t, what)
    if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
        raise ValueError(
            f"multi_head_attention_forward: expected 2-D or 3-D query, key and value of one rank, got "
            f"shapes {tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}"
        )
    unbatched = query.ndim == 2
    if unbatched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    l, n, e = query.shape
    s = key.shape[0]
    h = as_index(num_heads)
    if e != embed_dim_to_check:
        raise ValueError(
            f"multi_head_attention_forward: the query's embedding size {e} is not embed_dim_to_check "
            f"{embed_dim_to_check}"
        )
    if h <= 0 or e % h:
        raise ValueError(f"multi_head_attention_forward: embed_dim {e} is not divisible by num_heads {num_heads}")
    if key.shape[:2] != value.shape[:2] or key.shape[1] != n:
        raise ValueError(
            f"multi_head_attention_forward: key {tuple(key.shape)} and value {tuple(value.shape)} must "
            f"share their sequence and batch sizes with the query's batch {n}"
        )
    hd = e // h
    if is_causal and attn_mask is None:
        raise RuntimeError("multi_head_attention_forward: is_causal needs attn_mask (the causal mask itself)")
    if use_separate_proj_weight:
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise ValueError(
                "multi_head_attention_forward: use_separate_proj_weight needs q_proj_weight, "
                "k_proj_weight and v_proj_weight"
            )
        wq, wk, wv = q_proj_weight, k_proj_weight, v_proj_weight
    else:
        _check(in_proj_weight, "in_proj_weight")
        wq, wk, wv = in_proj_weight.chunk(3)
    bq, bk, bv = (None, None, None) if in_proj_bias is None else in_proj_bias.chunk(3)
    q, k, v = linear(query, wq, bq), linear(key, wk, bk), linear(value, wv, bv)
    dtype = q.dtype
    if attn_mask is not None:
        attn_mask = _additive_mask(attn_mask, "attn_mask", dtype)
        if attn_mask.ndim == 2:
            if tuple(attn_mask.shape) != (l, s):
                raise ValueError(
                    f"multi_head_attention_forward: the 2-D attn_mask should be of shape {(l, s)}, "
                    f"got {tuple(attn_mask.shape)}"
                )
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.ndim == 3:
            if tuple(attn_mask.shape) != (n * h, l, s):
                raise ValueError(
                    f"multi_head_attention_forward: the 3-D attn_mask should be of shape "
                    f"{(n * h, l, s)}, got {tuple(attn_mask.shape)}"
                )
        else:
            raise ValueError(f"multi_head_attention_forward: attn_mask must be 2-D or 3-D, got {attn_mask.ndim}-D")
    if key_padding_mask is not None:
        key_padding_mask = _additive_mask(key_padding_mask, "key_padding_mask", dtype)
        if tuple(key_padding_mask.shape) != (n, s):
            raise ValueError(
                f"multi_head_attention_forward: key_padding_mask should be of shape {(n, s)}, got "
                f"{tuple(key_padding_mask.shape)}"
            )
    if bias_k is not None or bias_v is not None:
        if bias_k is None or bias_v is None:
            raise ValueError("multi_head_attention_forward: give both bias_k and bias_v, or neither")
        if static_k is not None or static_v is not None:
            raise ValueError("multi_head_attention_forward: bias_k and bias_v cannot be added to static keys")
        k = _shape.cat([k, bias_k.reshape(1, 1, e).expand(1, n, e)], 0)
        v = _shape.cat([v, bias_v.reshape(1, 1, e).expand(1, n, e)], 0)
        attn_mask = None if attn_mask is None else pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else pad(key_padding_mask, (0, 1))
    q = q.reshape(l, n * h, hd).transpose(0, 1)
    k = k.reshape(k.shape[0], n * h, hd).transpose(0, 1) if static_k is None else static_k
    v = v.reshape(v.shape[0], n * h, hd).transpose(0, 1) if static_v is None else static_v
    for t, what in ((k, "static_k"), (v, "static_v")):
        if t.ndim != 3 or t.shape[0] != n * h or t.shape[2] != hd:
            raise RuntimeError(
                f"multi_head_attention_forward: {what} should be of shape ({n * h}, S, {hd}), got {tuple(t.shape)}"
            )
    if add_zero_attn:
        k = _shape.cat([k, _creation.zeros((n * h, 1, hd), dtype=k.dtype, device=k.device)], 1)
        v = _shape.cat([v, _creation.zeros((n * h, 1, hd), dtype=v.dtype, device=v.device)], 1)
        attn_mask = None if attn_mask is None else pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else pad(key_padding_mask, (0, 1))
    src = k.shape[1]
    mask = None
    if attn_mask is not None:
        mask = attn_mask.reshape(-1, 1 if attn_mask.shape[0] == 1 else h, l, src)
    if key_padding_mask is not None:
        kpm = key_padding_mask.reshape(n, 1, 1, src)
        mask = kpm if mask is None else mask + kpm
    if mask is not None:
        mask = mask.expand(n, h, l, src)
    out, weights = _attention(
        q.reshape(n, h, l, hd),
        k.reshape(n, h, src, hd),
        v.reshape(n, h, src, hd),
        mask,
        float(dropout_p) if training else 0.0,
        False,
        None,
        need_weights,
    )
    out = out.permute(2, 0, 1, 3).reshape(l * n, e)
    out = linear(out, out_proj_weight, out_proj_bias).reshape(l, n, e)
    if unbatched:
        out = out.squeeze(1)
    if not need_weights:
        return out, None
    if average_attn_weights:
        weights = weights.mean(1)
    return out, (weights.squeeze(0) if unbatched else weights)


def _shuffle_factor(input, factor, fn):
    if not isinstance(input, Tensor):
        raise TypeError(f"{fn}(): input must be a lucid.Tensor, got {type(input).__name__}")
    r = as_index(factor)
    if r <= 0:
        raise ValueError(f"{fn}(): the factor must be positive, got {factor}")
    if input.ndim < 3:
        raise RuntimeError(f"{fn}(): expected an input of at least 3 dimensions, got shape {tuple(input.shape)}")
    return r


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """``[*, C * r**2, H, W]`` to ``[*, C, H * r, W * r]``: each group of r**2 channels becomes
    an r x r block of pixels (sub-pixel convolution's upsampling)."""
    r = _shuffle_factor(input, upscale_factor, "pixel_shuffle")
    *batch, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle(): {c} channels are not divisible by upscale_factor**2 = {r * r}")
    n = len(batch)
    x = input.reshape(*batch, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*batch, c // (r * r), h * r, w * r)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """The inverse of :func:`pixel_shuffle`: ``[*, C, H * r, W * r]`` to ``[*, C * r**2, H, W]``."""
    r = _shuffle_factor(input, downscale_factor, "pixel_unshuffle")
    *batch, c, hr, wr = input.shape
    if hr % r or wr % r:
        raise RuntimeError(f"pixel_unshuffle(): height {hr} and width {wr} must be divisible by {r}")
    n = len(batch)
    x = input.reshape(*batch, c, hr // r, r, wr // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*batch, c * r * r, hr // r, wr // r)


def _embedding_renorm_(weight, input, max_norm, norm_type):
    """Rescales, in place, the rows of ``weight`` that ``input`` looks up whose ``norm_type``-norm
    exceeds ``max_norm`` to that norm (PyTorch's embedding_renorm_)."""
    with no_grad():
        rows = np.unique(input.detach().cpu().numpy().reshape(-1))
        if rows.size == 0:
            return
        index = _creation.tensor(rows.astype(np.int64), dtype=_int64, device=weight.device)
        picked = weight.index_select(0, index)
        norms = picked.abs().pow(norm_type).sum(1, keepdim=True).pow(1.0 / norm_type)
        scale = (float(max_norm) / (norms + 1e-7)).where(norms > float(max_norm), 1.0)
        weight.index_put_((index,), picked * scale.to(picked.dtype))


def embedding(
    input: Tensor,
    weight: Tensor,
    padding_idx=None,
    max_norm=None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """Rows of ``weight`` at the integer ``input``; the ``padding_idx`` row gets no gradient.
    With ``max_norm`` the looked-up rows whose ``norm_type``-norm exceeds it are first rescaled
    to it, in place; with ``scale_grad_by_freq`` each row's gradient is divided by how often
    the input names it."""
    _check(input, "input")
    _check(weight, "weight")
    if sparse:
        raise NotImplementedError("embedding: sparse=True (sparse gradients) is not supported")
    if padding_idx is not None:
        padding_idx = as_index(padding_idx)
        if not -weight.shape[0] <= padding_idx < weight.shape[0]:
            raise ValueError(f"embedding: padding_idx {padding_idx} must be within num_embeddings ({weight.shape[0]})")
        padding_idx %= weight.shape[0]
    if max_norm is not None:
        _embedding_renorm_(
            weight, input, _float(max_norm, "max_norm", "embedding"), _float(norm_type, "norm_type", "embedding")
        )
    out = _result(_C.embedding(weight._h, input._h, padding_idx is not None, 0 if padding_idx is None else padding_idx))
    if scale_grad_by_freq and out.requires_grad:
        ids = input.detach().cpu().numpy().astype(np.int64)
        counts = np.bincount(ids.reshape(-1) % max(weight.shape[0], 1), minlength=weight.shape[0])
        share = (1.0 / np.maximum(counts[ids % max(weight.shape[0], 1)], 1)).astype(np.float32)[..., None]
        scaled = out * _creation.tensor(share, device=out.device).to(out.dtype)
        # The value stays the row; the gradient is the scaled one.
        out = scaled + (out - scaled).detach()
    return out


# ---- losses (float32 under autocast) -------------------------------------------------------


def _pointwise_loss(code, input, target, size_average, reduce, reduction, weight):
    _check(input, "input")
    _check(target, "target")
    reduction = _loss_reduction(size_average, reduce, reduction)
    if weight is None:
        return _result(_C.pointwise_loss(code, input._h, target._h, _reduction(reduction)))
    _check(weight, "weight")  # weighted: the engine's elementwise losses, scaled, then reduced
    loss = _result(_C.pointwise_loss(code, input._h, target._h, _C.REDUCTION_NONE))
    return _reduce(loss * weight, reduction)


def mse_loss(
    input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean", weight=None
) -> Tensor:
    """The squared differences, reduced; ``weight`` multiplies them first."""
    return _pointwise_loss(_C.LOSS_MSE, input, target, size_average, reduce, reduction, weight)


def l1_loss(
    input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean", weight=None
) -> Tensor:
    """The absolute differences, reduced; ``weight`` multiplies them first."""
    return _pointwise_loss(_C.LOSS_L1, input, target, size_average, reduce, reduction, weight)


def nll_loss(
    input: Tensor,
    target: Tensor,
    weight=None,
    size_average=None,
    ignore_index: int = -100,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood of class indices under log-probabilities ``[N, C, *]``."""
    _check(input, "input")
    _check(target, "target")
    reduction = _loss_reduction(size_average, reduce, reduction)
    return _result(
        _C.nll_loss(input._h, target._h, _h(weight, "weight"), as_index(ignore_index), _reduction(reduction))
    )


def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight=None,
    size_average=None,
    ignore_index: int = -100,
    reduce=None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """log_softmax + nll_loss on logits ``[N, C, *]`` (or unbatched ``[C]``), with class-index
    targets (``ignore_index``, ``label_smoothing``) or class-probability targets of the input's
    shape. With probabilities, ``"mean"`` divides by the number of positions ``N·d1·…`` (weights
    scale the terms, not the divisor), as PyTorch does."""
    _check(input, "input")
    _check(target, "target")
    reduction = _loss_reduction(size_average, reduce, reduction)
    ls = _float(label_smoothing, "label_smoothing", "cross_entropy")
    if not 0.0 <= ls <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got {ls}")
    if target.dtype.is_floating_point:
        return _cross_entropy_probabilities(input, target, weight, reduction, ls)
    return _result(
        _C.cross_entropy(input._h, target._h, _h(weight, "weight"), as_index(ignore_index), _reduction(reduction), ls)
    )


def _cross_entropy_probabilities(input, target, weight, reduction, ls):
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(
            f"cross_entropy: class-probability targets must have the input's shape "
            f"{tuple(input.shape)}, got {tuple(target.shape)}"
        )
    if input.ndim == 0:
        raise ValueError("cross_entropy: expected an input of at least 1 dimension ([C] or [N, C, *]), got a 0-D one")
    if not input.dtype.is_floating_point:
        raise TypeError(f"cross_entropy: expected a floating-point input, got {input.dtype}")
    cdim = 0 if input.ndim == 1 else 1
    c = input.shape[cdim]
    wide = (input[(0,) * input.ndim] * target[(0,) * target.ndim]).dtype if input.numel() else input.dtype
    if input.dtype != wide:  # mixed floats compute in the wider dtype, whatever their order
        input = input.to(wide)
    t = target if ls == 0 else target * (1.0 - ls) + ls / c
    terms = input.log_softmax(cdim) * t
    if weight is not None:
        _check(weight, "weight")
        if tuple(weight.shape) != (c,):
            raise ValueError(f"cross_entropy: weight must have shape ({c},), one per class, got {tuple(weight.shape)}")
        terms = terms * weight.reshape(c, *([1] * (input.ndim - cdim - 1)))
    loss = -terms.sum(cdim)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    positions = input.numel() // c if c else 0
    return loss.sum() / positions if positions else loss.sum() * math.nan


def linear_cross_entropy(
    input: Tensor,
    linear_weight: Tensor,
    target: Tensor,
    *,
    linear_bias=None,
    weight=None,
    reduction: str = "mean",
    ignore_index=None,
    label_smoothing: float = 0.0,
    options=None,
) -> Tensor:
    """:func:`cross_entropy` of the logits ``input @ linear_weight`` (a linear layer and the loss
    in one call): ``input`` ``[N, in]`` or ``[in]``, ``linear_weight`` ``[C, *out_features, in]``
    (logits ``[N, C, *out_features]``), ``linear_bias`` ``[C, *out_features]``. ``target`` holds
    class indices, or probabilities of the logits' shape (then ``ignore_index`` must be None;
    otherwise None means -100). ``options`` (``nn.LinearCrossEntropyOptions``) choose PyTorch's
    memory-saving chunked evaluation; lucid takes them and computes the same values directly."""
    for t, what in ((input, "input"), (linear_weight, "linear_weight"), (target, "target")):
        _check(t, what)
    if input.ndim not in (1, 2):
        raise RuntimeError(f"linear_cross_entropy: expected input with dimensionality 1 or 2, got {input.ndim}")
    if linear_weight.ndim < 2:
        raise RuntimeError(
            f"linear_cross_entropy: expected linear_weight with dimensionality at least 2, got {linear_weight.ndim}"
        )
    batch, n_in = tuple(input.shape[:-1]), input.shape[-1]
    if linear_weight.shape[-1] != n_in:
        raise RuntimeError(
            f"linear_cross_entropy: expected equal input and linear_weight last dimensions "
            f"(in_features), got {n_in} and {linear_weight.shape[-1]}"
        )
    c, out_features = linear_weight.shape[0], tuple(linear_weight.shape[1:-1])
    if linear_bias is not None:
        _check(linear_bias, "linear_bias")
        if tuple(linear_bias.shape) != (c, *out_features):
            raise RuntimeError(
                f"linear_cross_entropy: expected linear_bias shape {(c, *out_features)}, got {tuple(linear_bias.shape)}"
            )
    if out_features and not batch:
        raise RuntimeError(
            f"linear_cross_entropy: the K-dimensional loss of linear_weight shape "
            f"{tuple(linear_weight.shape)} needs a batched input (N, {n_in}), got shape "
            f"{tuple(input.shape)}"
        )
    logits_shape = (*batch, c, *out_features)
    probabilities = tuple(target.shape) == logits_shape
    if probabilities and ignore_index is not None:
        raise RuntimeError("linear_cross_entropy: ignore_index cannot be specified when target contains probabilities")
    logits = input.matmul(linear_weight.reshape(-1, n_in).transpose(0, 1)).reshape(*logits_shape)
    if linear_bias is not None:
        logits = logits + linear_bias
    return cross_entropy(
        logits,
        target,
        weight,
        ignore_index=-100 if ignore_index is None else ignore_index,
        reduction=reduction,
        label_smoothing=label_smoothing,
    )


def binary_cross_entropy(
    input: Tensor, target: Tensor, weight=None, size_average=None, reduce=None, reduction: str = "mean"
) -> Tensor:
    """Binary cross-entropy of probabilities, with each log clamped at -100 as PyTorch does.
    Like PyTorch, it refuses to run under autocast (its float16 log is unsafe): use
    ``binary_cross_entropy_with_logits``, which also is more stable."""
    _check(input, "input")
    _check(target, "target")
    reduction = _loss_reduction(size_average, reduce, reduction)
    return _result(_C.binary_cross_entropy(input._h, target._h, _h(weight, "weight"), _reduction(reduction)))


def binary_cross_entropy_with_logits(
    input: Tensor, target: Tensor, weight=None, size_average=None, reduce=None, reduction: str = "mean", pos_weight=None
) -> Tensor:
    """Sigmoid and binary cross-entropy in one numerically stable expression."""
    _check(input, "input")
    _check(target, "target")
    reduction = _loss_reduction(size_average, reduce, reduction)
    return _result(
        _C.bce_with_logits(
            input._h, target._h, _h(weight, "weight"), _h(pos_weight, "pos_weight"), _reduction(reduction)
        )
    )


# ---- more activations, normalisation and dropout -------------------------------------------


def _float(v, what, fn):
    if not isinstance(v, numbers.Real) or isinstance(v, bool):
        raise TypeError(f"{fn}: {what} must be a number, got {v!r}")
    return float(v)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x where x > 0, else ``alpha``·(exp(x) - 1); the gradient at 0 is ``alpha`` as in PyTorch."""
    _check(input, "input")
    a = _float(alpha, "alpha", "elu")
    # expm1 of min(x, 0), so the unused branch never overflows into the gradient.
    return _out(input, lambda x: x.where(x > 0, x.clamp(max=0.0).expm1() * a), inplace, "elu")


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    return elu(input, alpha, inplace=True)


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """x where x > 0, else ``weight``·x, with one learned slope (``weight`` of one element) or one
    per channel (dimension 1 of the input; ``weight`` of ``C`` elements)."""
    _check(input, "input")
    _check(weight, "weight")
    if weight.ndim > 1:
        raise RuntimeError(f"prelu: weight must be 0-D or 1-D, got shape {tuple(weight.shape)}")
    n = weight.numel()
    channels = input.shape[1] if input.ndim >= 2 else 1
    if n != 1 and n != channels:
        raise RuntimeError(
            f"prelu: mismatch of parameter numbers and input channel size: weight has {n} elements, "
            f"the input {channels} channels (dimension 1 of shape {tuple(input.shape)})"
        )
    w = weight.reshape(-1)
    if n != 1:
        w = w.reshape(n, *([1] * (input.ndim - 2)))
    elif input.ndim == 0:
        w = w.reshape(())
    return input.where(input > 0, input * w)


def rms_norm(input: Tensor, normalized_shape, weight=None, eps=None) -> Tensor:
    """``x / sqrt(mean(x**2) + eps) * weight`` over the trailing ``normalized_shape`` dimensions.

    16-bit inputs are computed in float32 (``weight`` multiplying in float32 too) and the result
    rounded to the input's dtype, as PyTorch does; ``eps=None`` is the machine epsilon of that
    float32 computation, 2**-23 (PyTorch's default, float32 being the computation dtype of
    every lucid floating dtype)."""
    _check(input, "input")
    shape = (normalized_shape,) if isinstance(normalized_shape, numbers.Integral) else tuple(normalized_shape)
    shape = tuple(as_index(s) for s in shape)
    k = len(shape)
    if k == 0 or input.ndim < k or tuple(input.shape[input.ndim - k :]) != shape:
        raise RuntimeError(
            f"rms_norm: normalized_shape {shape} must be the trailing dimensions of the input, "
            f"got input of shape {tuple(input.shape)}"
        )
    if weight is not None:
        _check(weight, "weight")
        if tuple(weight.shape) != shape:
            raise RuntimeError(f"rms_norm: weight must have shape {shape}, got {tuple(weight.shape)}")
    if not input.dtype.is_floating_point:
        raise TypeError(f"rms_norm: input must be floating point, got {input.dtype}")
    eps = 2.0**-23 if eps is None else _float(eps, "eps", "rms_norm")
    x = input.float() if input.dtype != float32 else input
    dims = tuple(range(-k, 0))
    y = x * (x * x).mean(dims, keepdim=True).add(eps).rsqrt()
    if weight is not None:
        y = y * (weight.float() if weight.dtype != float32 else weight)
    return y.to(input.dtype)


def _check_p(p, fn):
    p = _float(p, "p", fn)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{fn}: dropout probability has to be between 0 and 1, got {p}")
    return p


def _feature_dropout(input, p, training, inplace, fn):
    _check(input, "input")
    p = _check_p(p, fn)
    if not training or p == 0:
        return input
    if input.ndim < 2:
        raise RuntimeError(
            f"{fn}: expected an input of at least 2 dimensions ([N, C, *]), got shape {tuple(input.shape)}"
        )
    mask_shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
    if p == 1:
        scale = _creation.zeros(mask_shape, dtype=input.dtype, device=input.device)
    else:
        keep = _creation.rand(*mask_shape, device=input.device) >= p
        scale = keep.to(input.dtype) * (1.0 / (1.0 - p))
    return _out(input, lambda x: x * scale, inplace, fn)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zeroes whole channels of ``[N, C, H, W]`` input (each with probability ``p``) and scales
    the rest by 1/(1-p) when training. A 3-D input is taken as ``[N, C, L]``, as PyTorch does
    for compatibility."""
    _check(input, "input")
    if input.ndim == 3:
        warnings.warn(
            "dropout2d: received a 3-D input and takes it as [N, C, L], zeroing whole channels (1-D "
            "channel dropout); use dropout1d for that, and a 4-D [N, C, H, W] input for 2-D dropout",
            stacklevel=2,
        )
    elif input.ndim != 4 and input.ndim >= 2:
        warnings.warn(f"dropout2d: received a {input.ndim}-D input; it expects a 4-D [N, C, H, W] input", stacklevel=2)
    return _feature_dropout(input, p, training, inplace, "dropout2d")


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zeroes whole channels of ``[N, C, L]`` input (see :func:`dropout2d`)."""
    _check(input, "input")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: expected a 2-D or 3-D input, got shape {tuple(input.shape)}")
    if input.ndim == 2:  # unbatched [C, L]: a new tensor even with inplace
        return _feature_dropout(input.unsqueeze(0), p, training, False, "dropout1d").squeeze(0)
    return _feature_dropout(input, p, training, inplace, "dropout1d")


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zeroes whole channels of ``[N, C, D, H, W]`` (or unbatched ``[C, D, H, W]``) input, each
    with probability ``p``, and scales the rest by 1/(1-p) when training."""
    _check(input, "input")
    if input.ndim not in (4, 5):
        warnings.warn(
            f"dropout3d: received a {input.ndim}-D input; it expects a 5-D [N, C, D, H, W] input (or a "
            f"4-D unbatched one)",
            stacklevel=2,
        )
    if input.ndim == 4:  # unbatched [C, D, H, W]
        return _feature_dropout(input.unsqueeze(0), p, training, False, "dropout3d").squeeze(0)
    return _feature_dropout(input, p, training, inplace, "dropout3d")


def _alpha_dropout(input, p, training, inplace, fn, mask_shape):
    _check(input, "input")
    p = _check_p(p, fn)
    if not training or p == 0:
        return input
    if p == 1:
        return _out(input, lambda x: x * 0.0, inplace, fn)
    # Dropped values become SELU's negative saturation value, and an affine map restores the
    # mean and variance of self-normalised inputs (Klambauer et al.).
    sat = -_SELU_ALPHA * _SELU_SCALE
    a = ((1 - p) * (1 + p * sat * sat)) ** -0.5
    b = -a * sat * p
    keep = (_creation.rand(*mask_shape, device=input.device) >= p).to(input.dtype)
    return _out(input, lambda x: (x * keep + (1.0 - keep) * sat) * a + b, inplace, fn)


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """Dropout that keeps the mean and variance of SELU activations: each element is replaced,
    with probability ``p``, by SELU's negative saturation value, and the result mapped affinely
    back to zero mean and unit variance. The identity when not training."""
    _check(input, "input")
    return _alpha_dropout(input, p, training, inplace, "alpha_dropout", tuple(input.shape))


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """:func:`alpha_dropout` of whole channels of ``[N, C, *]`` input."""
    _check(input, "input")
    if training and input.ndim < 2 and p not in (0, 0.0):
        raise RuntimeError(
            f"feature_alpha_dropout: expected an input of at least 2 dimensions ([N, C, *]), got "
            f"shape {tuple(input.shape)}"
        )
    shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
    return _alpha_dropout(input, p, training, inplace, "feature_alpha_dropout", shape)


def instance_norm(
    input: Tensor,
    running_mean=None,
    running_var=None,
    weight=None,
    bias=None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Normalises each channel of each sample of ``[N, C, *]`` input over its spatial elements
    (computed in float32). With ``use_input_stats`` and running statistics given, those are
    updated in place with the mean over the batch of each sample's statistics (the unbiased
    variance), as PyTorch does; without ``use_input_stats`` the running statistics normalise."""
    _check(input, "input")
    if input.ndim < 3:
        raise ValueError(
            f"instance_norm: expected an input of at least 3 dimensions ([N, C, *]), got shape {tuple(input.shape)}"
        )
    n, c = input.shape[0], input.shape[1]
    spatial = input.numel() // max(n * c, 1) if n * c else 0
    if use_input_stats and spatial <= 1:
        raise ValueError(
            f"instance_norm: expected more than 1 spatial element when training, got input of shape "
            f"{tuple(input.shape)}"
        )
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise ValueError("instance_norm: use_input_stats=False needs running_mean and running_var")
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    if running_mean is None and running_var is None:
        return group_norm(input, c, weight, bias, eps)
    if running_mean is None or running_var is None:
        raise ValueError("instance_norm: give both running_mean and running_var, or neither")
    # Each (sample, channel) pair is one channel of a batch of one, its running statistics
    # copies of the channel's; their new values are averaged back over the batch.
    flat = input.reshape(1, n * c, *input.shape[2:])
    with no_grad():
        rm = running_mean.reshape(1, c).expand(n, c).reshape(n * c).float()
        rv = running_var.reshape(1, c).expand(n, c).reshape(n * c).float()
    w = None if weight is None else weight.reshape(1, c).expand(n, c).reshape(n * c)
    b = None if bias is None else bias.reshape(1, c).expand(n, c).reshape(n * c)
    y = _batch_norm(flat, rm, rv, w, b, True, momentum, eps)
    with no_grad():
        running_mean.copy_(rm.reshape(n, c).mean(0).to(running_mean.dtype))
        running_var.copy_(rv.reshape(n, c).mean(0).to(running_var.dtype))
    return y.reshape(*input.shape)


# ---- padding -------------------------------------------------------------------------------

_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _pad_index(n, left, right, mode):
    """The source index of each output position of a dimension of size ``n`` padded by
    ``left`` and ``right`` (negative values crop)."""
    out = []
    for j in range(-left, n + right):
        if mode == "reflect":
            i = -j if j < 0 else (2 * (n - 1) - j if j >= n else j)
        elif mode == "replicate":
            i = min(max(j, 0), n - 1)
        else:  # circular
            i = j % n
        out.append(i)
    return out


def pad(input: Tensor, pad, mode: str = "constant", value=None) -> Tensor:
    """Pads the trailing dimensions: ``pad`` is (left, right) of the last dimension, then of the
    one before, and so on. ``"constant"`` fills with ``value`` (0 by default) any number of
    dimensions and crops where a pad is negative; ``"reflect"`` (mirroring without repeating the
    edge), ``"replicate"`` (repeating the edge) and ``"circular"`` (wrapping around) pad the last
    1, 2 or 3 dimensions of an input with one or two more (batch, channel). Differentiable."""
    _check(input, "input")
    if not isinstance(pad, (tuple, list)):
        raise TypeError(f"pad: pad must be a tuple of ints, got {pad!r}")
    pads = [as_index(p) for p in pad]
    if len(pads) % 2:
        raise ValueError(f"pad: pad must have an even length (pairs of left, right), got {tuple(pad)}")
    k = len(pads) // 2
    if k > input.ndim:
        raise ValueError(f"pad: pad {tuple(pad)} pads {k} dimensions, the input has only {input.ndim}")
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"pad: mode must be one of {', '.join(repr(m) for m in _PAD_MODES)}, got {mode!r}")
    if mode != "constant":
        if value is not None and value != 0:
            raise ValueError(f"pad: mode {mode!r} does not take a value argument")
        if not 1 <= k <= 3 or input.ndim not in (k + 1, k + 2):
            raise NotImplementedError(
                f"pad: mode {mode!r} pads the last 1, 2 or 3 dimensions of an input with 1 or "
                f"2 more; got pad of {k} dimension(s) for an input of shape "
                f"{tuple(input.shape)}"
            )
    x = input
    for i in range(k):
        dim = input.ndim - 1 - i
        left, right = pads[2 * i], pads[2 * i + 1]
        if left == 0 and right == 0:
            continue
        n = x.shape[dim]
        if mode == "constant":
            if left < 0 or right < 0:
                start, stop = max(-left, 0), n - max(-right, 0)
                if stop < start:
                    raise ValueError(f"pad: negative padding {tuple(pad)} crops dimension {dim} of size {n} below zero")
                x = x.narrow(dim, start, stop - start)
            parts = []
            for width in (left, right):
                if width > 0:
                    shape = list(x.shape)
                    shape[dim] = width
                    parts.append(
                        _creation.full(tuple(shape), 0 if value is None else value, dtype=x.dtype, device=x.device)
                    )
                else:
                    parts.append(None)
            x = _cat([t for t in (parts[0], x, parts[1]) if t is not None], dim)
            continue
        if mode == "reflect" and (left >= n or right >= n):
            raise ValueError(
                f"pad: reflect padding ({left}, {right}) must be less than the size {n} of dimension "
                f"{dim} of the input of shape {tuple(input.shape)}"
            )
        if mode == "circular" and (left > n or right > n):
            raise ValueError(
                f"pad: circular padding ({left}, {right}) must be at most the size {n} of dimension "
                f"{dim} of the input of shape {tuple(input.shape)}"
            )
        if n == 0:
            raise ValueError(f"pad: mode {mode!r} cannot pad dimension {dim} of size 0")
        if n + left + right < 0:
            raise ValueError(f"pad: padding ({left}, {right}) crops dimension {dim} of size {n} below zero")
        if mode == "circular" and (left < 0 or right < 0):  # crop first, then wrap the rest, as PyTorch
            x = x.narrow(dim, max(-left, 0), n + min(left, 0) + min(right, 0))
            n, left, right = x.shape[dim], max(left, 0), max(right, 0)
        index = _creation.tensor(_pad_index(n, left, right, mode), dtype=_int64, device=x.device)
        x = x.index_select(dim, index)
    return x


def _cat(tensors, dim):
    return _shape.cat(tensors, dim)


# ---- resampling ----------------------------------------------------------------------------

_INTERPOLATE_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area")
_INTERPOLATE_DIMS = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}
_CUBIC_A = -0.75  # the cubic convolution's parameter, as PyTorch (and OpenCV) use


def _source_scale(in_size, out_size, scale, align_corners):
    """The step in input coordinates between output positions (PyTorch's area_pixel scale)."""
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    return 1.0 / scale if scale is not None and scale > 0 else in_size / out_size


def _weighted_taps(x, dim, taps, weights):
    """sum_t x.index_select(dim, taps[:, t]) * weights[:, t] along ``dim``."""
    shape = [taps.shape[0]] + [1] * (x.ndim - 1 - (dim % x.ndim))
    out = None
    for t in range(taps.shape[1]):
        index = _creation.tensor(np.ascontiguousarray(taps[:, t], np.int64), dtype=_int64, device=x.device)
        part = x.index_select(dim, index)
        w = _creation.tensor(weights[:, t].astype(np.float32).reshape(shape), device=x.device).to(x.dtype)
        out = part * w if out is None else out + part * w
    return out


def _cubic_weights(t):
    """The four cubic-convolution weights of the taps at floor - 1 … floor + 2, t the fraction."""
    a = np.float32(_CUBIC_A)
    t = t.astype(np.float32)

    def near(u):  # |u| <= 1
        return ((a + 2) * u - (a + 3)) * u * u + 1

    def far(u):  # 1 < |u| < 2
        return ((a * u - 5 * a) * u + 8 * a) * u - 4 * a

    return np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], axis=1)


def _antialias_taps(n, out_size, scale, mode, align_corners):
    """PyTorch's antialiased (PIL-style) taps and weights along a dimension: the filter (the
    triangle, or the cubic with a = -0.5) widened by the downsampling factor, its weights
    normalised over the taps inside. In float32, as its kernel."""
    f32 = np.float32
    s = f32(_source_scale(n, out_size, scale, align_corners))
    size = 2 if mode == "bilinear" else 4
    support = f32(size * 0.5) * s if s >= 1 else f32(size * 0.5)
    inv = f32(1) / s if s >= 1 else f32(1)
    a = f32(-0.5)

    def filt(u):
        u = np.abs(u)
        if mode == "bilinear":
            return np.where(u < 1, f32(1) - u, f32(0))
        return np.where(
            u < 1, ((a + 2) * u - (a + 3)) * u * u + 1, np.where(u < 2, (((u - 5) * u + 8) * u - 4) * a, f32(0))
        )

    centre = s * (np.arange(out_size, dtype=f32) + f32(0.5))
    lo = np.maximum((centre - support + f32(0.5)).astype(np.int64), 0)
    count = np.minimum((centre + support + f32(0.5)).astype(np.int64), n) - lo
    width = max(int(count.max()), 1)
    j = np.arange(width)
    w = filt(((j[None, :] + lo[:, None]).astype(f32) - centre[:, None] + f32(0.5)) * inv).astype(f32)
    w = np.where(j[None, :] < count[:, None], w, f32(0))
    total = w.sum(1, keepdims=True, dtype=f32)
    w = np.where(total != 0, w / np.where(total != 0, total, f32(1)), w)
    return np.minimum(lo[:, None] + j[None, :], n - 1), w


def _resample_dim(x, dim, out_size, scale, mode, align_corners, antialias=False):
    n = x.shape[dim]
    if antialias:
        taps, weights = _antialias_taps(n, out_size, scale, mode, align_corners)
        return _weighted_taps(x, dim, taps, weights)
    if mode in ("nearest", "nearest-exact"):
        s = np.float32(_source_scale(n, out_size, scale, False))
        j = np.arange(out_size, dtype=np.float32)
        src = np.floor(j * s) if mode == "nearest" else np.floor((j + np.float32(0.5)) * s)
        idx = np.minimum(src.astype(np.int64), n - 1)
        if mode == "nearest" and out_size == n:  # PyTorch's shortcuts, whatever the factor
            return x
        if mode == "nearest" and out_size == 2 * n:
            idx = np.arange(out_size) // 2
        return x.index_select(dim, _creation.tensor(np.ascontiguousarray(idx, np.int64), dtype=_int64, device=x.device))
    if mode == "bicubic":
        # In float32, as PyTorch's kernel: the source position is not clamped at 0 (the taps are).
        s = np.float32(_source_scale(n, out_size, scale, align_corners))
        j = np.arange(out_size, dtype=np.float32)
        src = j * s if align_corners else (j + np.float32(0.5)) * s - np.float32(0.5)
        i0 = np.minimum(np.floor(src).astype(np.int64), n - 1)
        t = np.clip(src - i0.astype(np.float32), 0, 1)
        taps = np.clip(i0[:, None] + np.arange(-1, 3), 0, n - 1)
        return _weighted_taps(x, dim, taps, _cubic_weights(t))
    s = _source_scale(n, out_size, scale, align_corners)
    j = np.arange(out_size, dtype=np.float64)
    src = j * s if align_corners else np.maximum((j + 0.5) * s - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n - 1)
    i1 = np.minimum(i0 + 1, n - 1)
    lam = (src - i0).astype(np.float32)
    return _weighted_taps(x, dim, np.stack([i0, i1], 1), np.stack([1 - lam, lam], 1))


def interpolate(
    input: Tensor,
    size=None,
    scale_factor=None,
    mode: str = "nearest",
    align_corners=None,
    recompute_scale_factor=None,
    antialias: bool = False,
) -> Tensor:
    """Resizes the spatial dimensions of ``[N, C, L]``, ``[N, C, H, W]`` or ``[N, C, D, H, W]``
    input to ``size`` or by ``scale_factor`` (one of the two; the output size is the floor of
    size × factor).

    Modes: ``"nearest"`` (PyTorch's: the source index is floor(j × in/out), or j / factor when a
    factor is given), ``"nearest-exact"`` (pixel centres), ``"linear"`` (3-D), ``"bilinear"``
    and ``"bicubic"`` (4-D, cubic convolution with a = -0.75) and ``"trilinear"`` (5-D), all
    with ``align_corners`` False (the default: pixel centres, edges clamped) or True (corner
    pixels aligned), and ``"area"`` (adaptive average pooling). With ``antialias`` (bilinear and
    bicubic) the filter is widened by the downsampling factor, as PIL's and PyTorch's.
    Differentiable: each dimension is gathered with index_select and weighted."""
    _check(input, "input")
    if mode not in _INTERPOLATE_MODES:
        raise NotImplementedError(
            f"interpolate: mode {mode!r} is not supported; the supported modes are "
            f"{', '.join(repr(m) for m in _INTERPOLATE_MODES)}"
        )
    if antialias and mode not in ("bilinear", "bicubic"):
        raise ValueError(f"interpolate: antialias=True needs mode 'bilinear' or 'bicubic', got {mode!r}")
    if input.ndim not in (3, 4, 5):
        raise ValueError(
            f"interpolate: expected a 3-D [N, C, L], 4-D [N, C, H, W] or 5-D [N, C, D, H, W] input, "
            f"got shape {tuple(input.shape)}"
        )
    k = input.ndim - 2
    if mode in _INTERPOLATE_DIMS and _INTERPOLATE_DIMS[mode] != k:
        raise ValueError(
            f"interpolate: mode {mode!r} needs a {_INTERPOLATE_DIMS[mode] + 2}-D input, got shape {tuple(input.shape)}"
        )
    interpolating = mode in _INTERPOLATE_DIMS
    if align_corners is not None and not interpolating:
        raise ValueError(
            "interpolate: align_corners can only be set with the interpolating modes linear, "
            "bilinear, bicubic and trilinear"
        )
    align = bool(align_corners) if interpolating else False
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate: give exactly one of size and scale_factor")
    in_sizes = tuple(input.shape[2:])
    if size is not None:
        sizes = list(size) if isinstance(size, (tuple, list)) else [size] * k
        if len(sizes) != k:
            raise ValueError(
                f"interpolate: size {size!r} must have {k} element(s) for an input of shape {tuple(input.shape)}"
            )
        sizes = [as_index(s) for s in sizes]
        scales = [None] * k
    else:
        scales = list(scale_factor) if isinstance(scale_factor, (tuple, list)) else [scale_factor] * k
        if len(scales) != k:
            raise ValueError(
                f"interpolate: scale_factor {scale_factor!r} must have {k} element(s) for an input "
                f"of shape {tuple(input.shape)}"
            )
        scales = [_float(s, "scale_factor", "interpolate") for s in scales]
        if any(s <= 0 for s in scales):
            raise ValueError(f"interpolate: scale_factor must be positive, got {scale_factor!r}")
        sizes = [int(n * s) for n, s in zip(in_sizes, scales)]  # floor, as PyTorch (in double)
        if recompute_scale_factor:
            scales = [None] * k
    if any(s <= 0 for s in sizes):
        raise ValueError(
            f"interpolate: the output size {tuple(sizes)} must be positive (input shape {tuple(input.shape)})"
        )
    if any(n == 0 for n in in_sizes):
        raise ValueError(f"interpolate: cannot resize an empty input of shape {tuple(input.shape)}")
    if mode == "area":
        return _adaptive(input, k, tuple(sizes), "interpolate", False)
    x = input
    for d in range(k):
        if sizes[d] == in_sizes[d] and scales[d] in (None, 1.0) and mode != "bicubic" and not antialias:
            continue
        x = _resample_dim(x, 2 + d, sizes[d], scales[d], mode, align, bool(antialias))
    return x


def upsample(input: Tensor, size=None, scale_factor=None, mode: str = "nearest", align_corners=None) -> Tensor:
    """:func:`interpolate` (PyTorch's older name)."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """:func:`interpolate` with mode ``"nearest"`` (PyTorch's older name)."""
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """:func:`interpolate` of 4-D input with mode ``"bilinear"`` and the corners aligned
    (PyTorch's older name)."""
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def _affine_base(n, align_corners):
    """PyTorch's sample positions along a dimension of ``n`` in [-1, 1] (pixel centres, or the
    corners with ``align_corners``)."""
    if n <= 1:
        return np.zeros(max(n, 0), np.float32)
    r = np.linspace(-1, 1, n, dtype=np.float32)
    return r if align_corners else r * np.float32((n - 1) / n)


def affine_grid(theta: Tensor, size, align_corners=None) -> Tensor:
    """The sampling grid of the affine maps ``theta`` ([N, 2, 3] for a 4-D ``size`` (N, C, H, W),
    [N, 3, 4] for a 5-D one) over the output positions in [-1, 1]: [N, H, W, 2] or
    [N, D, H, W, 3] of (x, y[, z]) for :func:`grid_sample`."""
    _check(theta, "theta")
    if not theta.is_floating_point():
        raise TypeError(f"affine_grid: theta must be a floating-point tensor, got {theta.dtype}")
    size = tuple(as_index(s) for s in size)
    if len(size) not in (4, 5):
        raise NotImplementedError(f"affine_grid: size must be 4-D or 5-D, got {size}")
    k = len(size) - 2
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (k, k + 1) or theta.shape[0] != size[0]:
        raise ValueError(
            f"affine_grid: for size {size} theta must have shape ({size[0]}, {k}, {k + 1}), got {tuple(theta.shape)}"
        )
    if any(s <= 0 for s in size[2:]):
        raise ValueError(f"affine_grid: the spatial sizes must be positive, got {size}")
    align = bool(align_corners)
    axes = [_affine_base(n, align) for n in reversed(size[2:])]  # x (the last dimension) first
    mesh = list(np.meshgrid(*axes[::-1], indexing="ij"))[::-1]  # x, y[, z], each [*spatial]
    base = np.stack(mesh + [np.ones_like(mesh[0])], -1).reshape(1, -1, k + 1)
    grid = _creation.tensor(base, device=theta.device).to(theta.dtype).matmul(theta.transpose(1, 2))
    return grid.reshape(size[0], *size[2:], k)


def _reflect(x, low2, high2):
    """PyTorch's reflect_coordinates of numpy positions: (value, slope)."""
    if low2 == high2:
        return np.zeros_like(x), np.zeros_like(x)
    lo, span = low2 / 2, (high2 - low2) / 2
    d = x - lo
    a = np.abs(d)
    flips = np.floor(a / span)
    extra = np.fmod(a, span)
    even = flips % 2 == 0
    value = np.where(even, extra + lo, span - extra + lo)
    slope = np.where(d >= 0, 1.0, -1.0) * np.where(even, 1.0, -1.0)
    return value, slope


def _pad_coordinates(x, n, padding_mode, align_corners):
    """Positions ``x`` (numpy) moved inside by the padding mode: (value, slope), the slope for
    the gradient."""
    ones = np.ones_like(x)
    if padding_mode == "zeros":
        return x, ones
    slope = ones
    if padding_mode == "reflection":
        x, slope = _reflect(x, 0, 2 * (n - 1)) if align_corners else _reflect(x, -1, 2 * n - 1)
    inside = (x > 0) & (x < n - 1)
    return np.clip(x, 0, n - 1), slope * inside


def _gather_plane(flat, idx, ok):
    """Entries of flat [N, C, P] at idx [N, Q] (numpy; 0 where not ``ok``): [N, C, Q]."""
    n, c = flat.shape[0], flat.shape[1]
    index = _creation.tensor(np.where(ok, idx, 0).astype(np.int64), device=flat.device)
    return flat.gather(2, index.unsqueeze(1).expand(n, c, idx.shape[1]))


def grid_sample(
    input: Tensor, grid: Tensor, mode: str = "bilinear", padding_mode: str = "zeros", align_corners=None
) -> Tensor:
    """Samples [N, C, H, W] input at the positions of grid [N, Ho, Wo, 2] ((x, y) in [-1, 1]), or
    [N, C, D, H, W] input at grid [N, Do, Ho, Wo, 3]: ``mode`` ``"bilinear"`` (trilinear for 5-D),
    ``"nearest"`` or ``"bicubic"`` (4-D); outside the input ``padding_mode`` ``"zeros"``,
    ``"border"`` (the edge value) or ``"reflection"``. Differentiable in the input and (but
    for nearest) in the grid."""
    _check(input, "input")
    _check(grid, "grid")
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"grid_sample: mode must be 'bilinear', 'nearest' or 'bicubic', got {mode!r}")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"grid_sample: padding_mode must be 'zeros', 'border' or 'reflection', got {padding_mode!r}")
    if input.ndim not in (4, 5):
        raise ValueError(f"grid_sample: expected a 4-D or 5-D input, got shape {tuple(input.shape)}")
    k = input.ndim - 2
    if grid.ndim != input.ndim or grid.shape[-1] != k or grid.shape[0] != input.shape[0]:
        raise ValueError(
            f"grid_sample: for input of shape {tuple(input.shape)} the grid must have shape "
            f"({input.shape[0]}, {', '.join(['*'] * k)}, {k}), got {tuple(grid.shape)}"
        )
    if input.dtype != grid.dtype:
        raise TypeError(f"grid_sample: input ({input.dtype}) and grid ({grid.dtype}) must have one dtype")
    if any(s == 0 for s in input.shape[2:]):
        raise ValueError(
            f"grid_sample: cannot sample an input with empty spatial dimensions, shape {tuple(input.shape)}"
        )
    align = bool(align_corners)
    n, c = input.shape[0], input.shape[1]
    sizes = tuple(input.shape[2:])  # (H, W) or (D, H, W)
    outs = tuple(grid.shape[1:-1])
    q = math.prod(outs)
    flat = input.reshape(n, c, math.prod(sizes))
    g = grid.reshape(n, q, k)
    # Coordinate j of the grid indexes spatial dimension k - 1 - j (x is the width).
    coords, values = [], []
    for j in range(k):
        size = sizes[k - 1 - j]
        gj = g.select(2, j)
        # Unnormalised, differentiable: the grid's own tensor times constants.
        u = (gj + 1.0) * ((size - 1) / 2.0) if align else ((gj + 1.0) * size - 1.0) / 2.0
        coords.append(u)
        values.append(u.detach().numpy().astype(np.float64))
    strides = [math.prod(sizes[k - j :]) for j in range(k)]  # of x, y, z in the flat plane
    if mode == "bicubic":
        return _grid_bicubic(flat, coords, values, sizes, strides, padding_mode, align, n, c, outs)
    moved, slopes = [], []
    for j in range(k):
        v, s = _pad_coordinates(values[j], sizes[k - 1 - j], padding_mode, align)
        moved.append(v)
        slopes.append(s)
    # The moved positions as tensors with the grid's gradient: u * slope + (moved - u * slope).
    pos = [
        coords[j] * _creation.tensor(slopes[j].astype(np.float32), device=grid.device).to(grid.dtype)
        + _creation.tensor((moved[j] - values[j] * slopes[j]).astype(np.float32), device=grid.device).to(grid.dtype)
        for j in range(k)
    ]
    if mode == "nearest":
        idx = np.zeros((n, q), np.int64)
        ok = np.ones((n, q), bool)
        for j in range(k):
            r = np.rint(moved[j]).astype(np.int64)  # half to even, as nearbyint
            ok &= (r >= 0) & (r < sizes[k - 1 - j])
            idx += r * strides[j]
        out = _gather_plane(flat, idx, ok)
        if not ok.all():
            out = out * _creation.tensor(ok[:, None, :], device=input.device).to(out.dtype)
        return out.reshape(n, c, *outs)
    lows = [np.floor(m).astype(np.int64) for m in moved]
    fracs = [pos[j] - _creation.tensor(lows[j].astype(np.float32), device=grid.device).to(grid.dtype) for j in range(k)]
    out = None
    for corner in itertools.product((0, 1), repeat=k):
        idx = np.zeros((n, q), np.int64)
        ok = np.ones((n, q), bool)
        weight = None
        for j, bit in enumerate(corner):
            t = lows[j] + bit
            ok &= (t >= 0) & (t < sizes[k - 1 - j])
            idx += t * strides[j]
            w = fracs[j] if bit else 1.0 - fracs[j]
            weight = w if weight is None else weight * w
        if not ok.any():
            continue
        weight = weight * _creation.tensor(ok.astype(np.float32), device=grid.device).to(grid.dtype)
        term = _gather_plane(flat, idx, ok) * weight.unsqueeze(1)
        out = term if out is None else out + term
    if out is None:  # every position outside a zero-padded input: zeros, still in the graph
        out = _connected_zeros(flat, g, n, c, q)
    return out.reshape(n, c, *outs)


def _connected_zeros(flat, g, n, c, q):
    """Zeros [N, C, Q] with gradients (of zero) to the input and the grid."""
    return flat.sum(2, keepdim=True).expand(n, c, q) * 0.0 + (g.sum(2) * 0.0).unsqueeze(1)


def _grid_bicubic(flat, coords, values, sizes, strides, padding_mode, align, n, c, outs):
    """Bicubic (tricubic for 5-D) grid sampling: 4 taps per dimension around each position
    (cubic convolution, a = -0.75), each tap's integer position moved inside by the padding
    mode, zero outside for 'zeros'. The weights are computed in float64: the grid's gradient
    sums many products of them."""
    k = len(sizes)
    q = math.prod(outs)
    a = _CUBIC_A
    lows = [np.floor(v).astype(np.int64) for v in values]
    ts = [coords[j].double() - _creation.tensor(lows[j].astype(np.float64), device=flat.device) for j in range(k)]

    def near(u):
        return ((u * (a + 2)) - (a + 3)) * u * u + 1.0

    def far(u):
        return ((u * a - 5 * a) * u + 8 * a) * u - 4 * a

    weights = [[far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)] for t in ts]
    out = None
    for taps in itertools.product(range(4), repeat=k):  # (dx, dy[, dz])
        idx = np.zeros((n, q), np.int64)
        ok = np.ones((n, q), bool)
        w = None
        for j, d in enumerate(taps):
            size = sizes[k - 1 - j]
            t = (lows[j] + d - 1).astype(np.float64)
            if padding_mode != "zeros":
                t = _pad_coordinates(t, size, padding_mode, align)[0]
            t = t.astype(np.int64)
            ok &= (t >= 0) & (t < size)
            idx += np.clip(t, 0, size - 1) * strides[j]
            w = weights[j][d] if w is None else w * weights[j][d]
        if not ok.any():
            continue
        if not ok.all():
            w = w * _creation.tensor(ok.astype(np.float64), device=flat.device)
        term = _gather_plane(flat, idx, ok) * w.to(flat.dtype).unsqueeze(1)
        out = term if out is None else out + term
    if out is None:  # every position outside a zero-padded input: zeros, still in the graph
        out = _connected_zeros(flat, coords[0].unsqueeze(-1), n, c, q)
    return out.reshape(n, c, *outs)


# ---- more losses ---------------------------------------------------------------------------


def _reduce(loss, reduction):
    code = _reduction(reduction)
    return loss if code == _C.REDUCTION_NONE else (loss.sum() if code == _C.REDUCTION_SUM else loss.mean())


def _legacy_reduction(size_average, reduce):
    """PyTorch's deprecated ``size_average`` and ``reduce`` flags as a ``reduction`` (each True when
    None), with PyTorch's warning."""
    warnings.warn("size_average and reduce are deprecated, use reduction='none', 'mean' or 'sum' instead", stacklevel=3)
    if reduce is not None and not reduce:
        return "none"
    return "sum" if size_average is not None and not size_average else "mean"


@_float32_under_autocast
def smooth_l1_loss(
    input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean", beta: float = 1.0
) -> Tensor:
    """0.5·d²/beta where d = ``|input - target|`` < beta, else d - 0.5·beta (the L1 loss when
    ``beta`` is 0)."""
    _check(input, "input")
    _check(target, "target")
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    beta = _float(beta, "beta", "smooth_l1_loss")
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be non-negative, got {beta}")
    d = (input - target).abs()
    if beta == 0:
        return _reduce(d, reduction)
    return _reduce((d * d * (0.5 / beta)).where(d < beta, d - 0.5 * beta), reduction)


@_float32_under_autocast
def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0, weight=None) -> Tensor:
    """0.5·d² where d = ``|input - target|`` < delta, else delta·(d - 0.5·delta) (``delta`` times
    smooth_l1_loss with beta = delta); ``weight`` multiplies the elementwise losses."""
    _check(input, "input")
    _check(target, "target")
    delta = _float(delta, "delta", "huber_loss")
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be positive, got {delta}")
    d = (input - target).abs()
    loss = (d * d * 0.5).where(d < delta, (d - 0.5 * delta) * delta)
    if weight is not None:
        _check(weight, "weight")
        loss = loss * weight
    return _reduce(loss, reduction)


def _loss_reduction(size_average, reduce, reduction):
    """``reduction``, or the one PyTorch's deprecated flags ask for when either is given."""
    if size_average is not None or reduce is not None:
        return _legacy_reduction(size_average, reduce)
    _reduction(reduction)
    return reduction


def _same_shape(a, b, fn, what="target"):
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(f"{fn}: {what} of shape {tuple(b.shape)} must have the input's shape {tuple(a.shape)}")


@_float32_under_autocast
def kl_div(
    input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean", log_target: bool = False
) -> Tensor:
    """The Kullback-Leibler divergence ``target·(log(target) - input)`` of log-probabilities
    ``input`` (``exp(target)·(target - input)`` with ``log_target``). ``"batchmean"`` sums and
    divides by the batch size (the size of dimension 0); ``"mean"`` averages over every element,
    with PyTorch's warning that it is not the mathematical KL divergence."""
    _check(input, "input")
    _check(target, "target")
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    if reduction not in ("none", "mean", "sum", "batchmean"):
        raise ValueError(f"kl_div: reduction must be 'none', 'batchmean', 'mean' or 'sum', got {reduction!r}")
    if reduction == "mean":
        warnings.warn(
            "reduction: 'mean' divides the total loss by both the batch size and the support size. "
            "'batchmean' divides only by the batch size, and aligns with the KL div math definition. "
            "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
            stacklevel=2,
        )
    if log_target:
        loss = target.exp() * (target - input)
    else:  # target·log(target) is 0 where target is 0
        loss = (target * target.log()).where(target != 0, target * 0.0) - target * input
    if reduction == "batchmean":
        return loss.sum() / input.shape[0] if input.ndim else loss.sum()
    return _reduce(loss, reduction)


@_float32_under_autocast
def margin_ranking_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0.0,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """max(0, -target·(input1 - input2) + margin); ``target`` holds 1 or -1."""
    for t, what in ((input1, "input1"), (input2, "input2"), (target, "target")):
        _check(t, what)
    reduction = _loss_reduction(size_average, reduce, reduction)
    if not (input1.ndim == input2.ndim == target.ndim):
        raise RuntimeError(
            f"margin_ranking_loss: all input tensors should have the same number of dimensions, got "
            f"shapes {tuple(input1.shape)}, {tuple(input2.shape)} and {tuple(target.shape)}"
        )
    m = _float(margin, "margin", "margin_ranking_loss")
    return _reduce((-target * (input1 - input2) + m).clamp(min=0.0), reduction)


@_float32_under_autocast
def hinge_embedding_loss(
    input: Tensor, target: Tensor, margin: float = 1.0, size_average=None, reduce=None, reduction: str = "mean"
) -> Tensor:
    """x where target is 1, max(0, margin - x) where target is -1 (PyTorch's sum of the two
    selections for any other target)."""
    _check(input, "input")
    _check(target, "target")
    reduction = _loss_reduction(size_average, reduce, reduction)
    m = _float(margin, "margin", "hinge_embedding_loss")
    zero = input * 0.0
    loss = (m - input).clamp(min=0.0).where(target != 1, zero) + input.where(target != -1, zero)
    return _reduce(loss, reduction)


@_float32_under_autocast
def soft_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """log(1 + exp(-target·input)), averaged over every element by default."""
    _check(input, "input")
    _check(target, "target")
    reduction = _loss_reduction(size_average, reduce, reduction)
    return _reduce(_unary("softplus", -target * input), reduction)


@_float32_under_autocast
def cosine_embedding_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0.0,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """1 - cos(input1, input2) where target is 1, max(0, cos - margin) where it is -1; the
    cosine over the last dimension of 1-D or 2-D inputs."""
    for t, what in ((input1, "input1"), (input2, "input2"), (target, "target")):
        _check(t, what)
    reduction = _loss_reduction(size_average, reduce, reduction)
    if target.ndim not in (0, 1) or input1.ndim != target.ndim + 1 or input2.ndim != target.ndim + 1:
        raise RuntimeError(
            f"cosine_embedding_loss: expected 1-D inputs with a 0-D target or 2-D inputs with a 1-D "
            f"target, got shapes {tuple(input1.shape)}, {tuple(input2.shape)} and "
            f"{tuple(target.shape)}"
        )
    m = _float(margin, "margin", "cosine_embedding_loss")
    eps = 1e-12  # PyTorch's, keeping the denominator off zero
    prod = (input1 * input2).sum(-1)
    cos = prod / ((input1 * input1).sum(-1).add(eps) * (input2 * input2).sum(-1).add(eps)).sqrt()
    zero = cos * 0.0
    loss = (1.0 - cos).where(target == 1, zero) + (cos - m).clamp(min=0.0).where(target == -1, zero)
    return _reduce(loss, reduction)


@_float32_under_autocast
def poisson_nll_loss(
    input: Tensor,
    target: Tensor,
    log_input: bool = True,
    full: bool = False,
    size_average=None,
    eps: float = 1e-8,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """The Poisson negative log-likelihood: exp(input) - target·input (``log_input``), else
    input - target·log(input + eps); ``full`` adds Stirling's approximation of log(target!)
    where target > 1."""
    _check(input, "input")
    _check(target, "target")
    reduction = _loss_reduction(size_average, reduce, reduction)
    e = _float(eps, "eps", "poisson_nll_loss")
    loss = input.exp() - target * input if log_input else input - target * (input + e).log()
    if full:
        stirling = target * target.log() - target + (target * (2 * math.pi)).log() * 0.5
        loss = loss + stirling.where(target > 1, target * 0.0)
    return _reduce(loss, reduction)


@_float32_under_autocast
def gaussian_nll_loss(
    input: Tensor, target: Tensor, var, full: bool = False, eps: float = 1e-6, reduction: str = "mean"
) -> Tensor:
    """0.5·(log(var) + (input - target)²/var), var clamped at ``eps`` (the gradient passing the
    clamp, as PyTorch's); ``full`` adds 0.5·log(2π). ``var`` has the input's shape, or one
    dimension fewer or of size 1 (one variance shared), or is a number."""
    _check(input, "input")
    _check(target, "target")
    if isinstance(var, numbers.Real) and not isinstance(var, bool):
        if var < 0:
            raise ValueError("gaussian_nll_loss: var has negative entry/entries")
        var = _creation.full(tuple(input.shape), float(var), dtype=input.dtype, device=input.device)
    _check(var, "var")
    if bool((var < 0).any()):
        raise ValueError("gaussian_nll_loss: var has negative entry/entries")
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif not (input.ndim == var.ndim and sum(v for i, v in zip(input.shape, var.shape) if i != v) == 1):
            raise ValueError(
                f"gaussian_nll_loss: var is of incorrect size {tuple(var.shape)} for an input of shape "
                f"{tuple(input.shape)}"
            )
    _reduction(reduction)
    e = _float(eps, "eps", "gaussian_nll_loss")
    v = var + (var.detach().clamp(min=e) - var.detach())
    loss = ((input - target) ** 2 / v + v.log()) * 0.5
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


@_float32_under_autocast
def multilabel_soft_margin_loss(
    input: Tensor, target: Tensor, weight=None, size_average=None, reduce=None, reduction: str = "mean"
) -> Tensor:
    """The binary cross-entropy of each class's logit against ``target`` (0 or 1), ``weight``
    per class, averaged over the classes (the last dimension) of each sample."""
    _check(input, "input")
    _check(target, "target")
    reduction = _loss_reduction(size_average, reduce, reduction)
    loss = target * logsigmoid(input) + (1.0 - target) * logsigmoid(-input)
    if weight is not None:
        _check(weight, "weight")
        loss = loss * weight
    if input.ndim == 0:
        return _reduce(-loss, reduction)
    return _reduce(-loss.sum(-1) / input.shape[-1], reduction)


def _class_rows(input, target, fn):
    """Input as [N, C] and class-index target as [N] (0-D and 1-D inputs are one sample), with
    the targets checked."""
    if input.ndim > 2:
        raise ValueError(f"{fn}: expected an input of at most 2 dimensions, got shape {tuple(input.shape)}")
    if target.dtype.is_floating_point:
        raise TypeError(f"{fn}: target must hold integer class indices, got {target.dtype}")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    return x, x.shape[1]


@_float32_under_autocast
def multi_margin_loss(
    input: Tensor,
    target: Tensor,
    p: int = 1,
    margin: float = 1.0,
    weight=None,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """The multi-class hinge loss: for each sample, the sum over the classes i other than the
    target y of max(0, margin - x[y] + x[i])**p (times weight[y]), divided by the number of
    classes. ``p`` is 1 or 2."""
    _check(input, "input")
    _check(target, "target")
    reduction = _loss_reduction(size_average, reduce, reduction)
    if p not in (1, 2) or isinstance(p, bool):
        raise ValueError(f"multi_margin_loss: only p == 1 and p == 2 are supported, got {p!r}")
    m = _float(margin, "margin", "multi_margin_loss")
    x, c = _class_rows(input, target, "multi_margin_loss")
    y = target.reshape(-1)
    if y.shape[0] != x.shape[0]:
        raise ValueError(
            f"multi_margin_loss: target of shape {tuple(target.shape)} must hold one class per sample "
            f"of the input of shape {tuple(input.shape)}"
        )
    yi = np.asarray(y.numpy()).astype(np.int64)
    if yi.size and (yi.min() < 0 or yi.max() >= c):
        raise IndexError(
            f"multi_margin_loss: target values must be in [0, {c}), got values from {yi.min()} to {yi.max()}"
        )
    y = y.to(_int64)
    xy = x.gather(1, y.reshape(-1, 1))
    z = (xy.neg() + x + m).clamp(min=0.0)
    if p == 2:
        z = z * z
    if weight is not None:
        _check(weight, "weight")
        if weight.ndim != 1 or weight.shape[0] != c:
            raise ValueError(f"multi_margin_loss: weight must be 1-D of {c} elements, got shape {tuple(weight.shape)}")
        z = z * weight.index_select(0, y).reshape(-1, 1)
    others = _creation.tensor(np.arange(c)[None, :] != yi[:, None], device=input.device).to(z.dtype)
    loss = (z * others).sum(1) / c
    if input.ndim < 2:
        loss = loss.reshape(())
    return _reduce(loss, reduction)


@_float32_under_autocast
def multilabel_margin_loss(
    input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean"
) -> Tensor:
    """The multi-label hinge loss: for each sample, the sum over its target classes j (the
    entries of ``target`` before the first -1) and the other classes i of
    max(0, 1 - (x[j] - x[i])), divided by the number of classes."""
    _check(input, "input")
    _check(target, "target")
    reduction = _loss_reduction(size_average, reduce, reduction)
    x, c = _class_rows(input, target, "multilabel_margin_loss")
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(
            f"multilabel_margin_loss: target of shape {tuple(target.shape)} must have the input's shape "
            f"{tuple(input.shape)}"
        )
    t = np.asarray(target.numpy()).astype(np.int64).reshape(x.shape[0], c)
    counts = np.zeros((x.shape[0], c), np.float32)  # how often each class is a target of the sample
    for n, row in enumerate(t):
        for v in row:
            if v < 0:
                break
            if v >= c:
                raise IndexError(f"multilabel_margin_loss: target values must be in [-1, {c}), got {v}")
            counts[n, v] += 1
    pairs = counts[:, :, None] * (counts[:, None, :] == 0)  # [N, j, i]: j a target, i not one
    z = (x.unsqueeze(1) - x.unsqueeze(2) + 1.0).clamp(min=0.0)  # [N, j, i]: 1 - (x[j] - x[i])
    w = _creation.tensor(pairs, device=input.device).to(z.dtype)
    loss = (z * w).sum((1, 2)) / c
    if input.ndim < 2:
        loss = loss.reshape(())
    return _reduce(loss, reduction)


@_float32_under_autocast
def triplet_margin_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    margin: float = 1.0,
    p: float = 2,
    eps: float = 1e-6,
    swap: bool = False,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """max(0, margin + d(anchor, positive) - d(anchor, negative)) with d the p-norm
    :func:`pairwise_distance`; ``swap`` takes the smaller of d(anchor, negative) and
    d(positive, negative)."""
    reduction = _loss_reduction(size_average, reduce, reduction)
    dist = lambda a, b: pairwise_distance(a, b, p, eps)  # noqa: E731
    return _triplet(
        anchor,
        positive,
        negative,
        dist,
        _float(margin, "margin", "triplet_margin_loss"),
        swap,
        reduction,
        "triplet_margin_loss",
    )


@_float32_under_autocast
def triplet_margin_with_distance_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    *,
    distance_function=None,
    margin: float = 1.0,
    swap: bool = False,
    reduction: str = "mean",
) -> Tensor:
    """:func:`triplet_margin_loss` with any ``distance_function`` of two tensors (by default
    :func:`pairwise_distance`)."""
    dist = pairwise_distance if distance_function is None else distance_function
    if not callable(dist):
        raise TypeError(
            f"triplet_margin_with_distance_loss: distance_function must be callable, got {type(dist).__name__}"
        )
    return _triplet(
        anchor,
        positive,
        negative,
        dist,
        _float(margin, "margin", "triplet_margin_with_distance_loss"),
        swap,
        reduction,
        "triplet_margin_with_distance_loss",
    )


def _triplet(anchor, positive, negative, dist, margin, swap, reduction, fn):
    for t, what in ((anchor, "anchor"), (positive, "positive"), (negative, "negative")):
        _check(t, what)
    _reduction(reduction)
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(
            f"{fn}: the anchor, positive and negative tensors are expected to have the same number "
            f"of dimensions, got shapes {tuple(anchor.shape)}, {tuple(positive.shape)} and "
            f"{tuple(negative.shape)}"
        )
    d_pos, d_neg = dist(anchor, positive), dist(anchor, negative)
    if swap:
        d_neg = d_neg.minimum(dist(positive, negative))
    return _reduce((d_pos - d_neg + margin).clamp(min=0.0), reduction)


# ---- distances -----------------------------------------------------------------------------


def _p_norm(x, p, dim, keepdim=False):
    """The p-norm over ``dim``; a 0-D ``x`` is taken as one element along dimension 0 (or -1)."""
    if x.ndim == 0:
        if dim not in (0, -1):
            raise IndexError(f"dimension {dim} is out of range for a 0-D tensor")
        return x.reshape(1).norm(p, 0, False)
    return x.norm(p, dim, keepdim)


@_float32_under_autocast
def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out=None) -> Tensor:
    """``input / max(norm_p(input, dim), eps)``: unit p-norm along ``dim``."""
    _check(input, "input")
    denom = _p_norm(input, _float(p, "p", "normalize"), as_index(dim), True).clamp(min=_float(eps, "eps", "normalize"))
    return writes.returned(input / denom, out, "normalize")


@_float32_under_autocast
def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """The cosine of the angle between ``x1`` and ``x2`` (broadcast together) along ``dim``: each
    is divided by its Euclidean norm, held at least ``eps`` (the gradient passing that floor,
    as PyTorch's), and the products summed."""
    _check(x1, "x1")
    _check(x2, "x2")
    e = _float(eps, "eps", "cosine_similarity")
    d = as_index(dim)
    try:
        shape = np.broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    except ValueError:
        raise ValueError(
            f"cosine_similarity: x1 of shape {tuple(x1.shape)} and x2 of shape {tuple(x2.shape)} cannot "
            f"be broadcast together"
        ) from None
    a, b = x1.expand(*shape), x2.expand(*shape)

    def unit(x):
        n = _p_norm(x, 2, d, True)
        n = n + (n.detach().clamp(min=e) - n.detach())
        return x / n

    prod = unit(a) * unit(b)
    return prod if prod.ndim == 0 else prod.sum(d)


@_float32_under_autocast
def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Tensor:
    """The p-norm of ``x1 - x2 + eps`` over the last dimension (of the two inputs broadcast)."""
    _check(x1, "x1")
    _check(x2, "x2")
    diff = x1 - x2 + _float(eps, "eps", "pairwise_distance")
    if diff.ndim == 0:
        return diff.abs()
    return diff.norm(_float(p, "p", "pairwise_distance"), max(x1.ndim, x2.ndim) - 1, bool(keepdim))


@_float32_under_autocast
def pdist(input: Tensor, p: float = 2) -> Tensor:
    """The p-norm distances between the rows of a 2-D input, for each pair i < j in row-major
    order (``N·(N-1)/2`` values)."""
    _check(input, "input")
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    p = _float(p, "p", "pdist")
    if p < 0:
        raise RuntimeError(f"pdist only supports non-negative p values, got {p}")
    i, j = np.triu_indices(input.shape[0], 1)
    if len(i) == 0:
        return _creation.zeros((0,), dtype=input.dtype, device=input.device) + input.sum() * 0.0

    def rows(idx):
        return input.index_select(0, _creation.tensor(idx.tolist(), dtype=_int64, device=input.device))

    return (rows(i) - rows(j)).norm(p, 1)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 ``[*, num_classes]``: 1 at each entry's class index, 0 elsewhere; ``num_classes=-1``
    takes one more than the largest index."""
    _check(tensor, "tensor")
    if tensor.dtype.is_floating_point or tensor.dtype == _bool:
        raise TypeError(f"one_hot is only applicable to index tensors of an integer dtype, got {tensor.dtype}")
    n = as_index(num_classes)
    idx = np.asarray(tensor.numpy()).astype(np.int64)
    if n == -1:
        if idx.size == 0:
            raise RuntimeError("one_hot: can not infer the total number of classes from an empty tensor")
        n = int(idx.max()) + 1
    elif n < -1:
        raise RuntimeError(f"one_hot: num_classes should be -1 or positive, got {n}")
    if idx.size and idx.min() < 0:
        raise RuntimeError("one_hot: class values must be non-negative")
    if idx.size and idx.max() >= n:
        raise RuntimeError(f"one_hot: class values must be smaller than num_classes ({n}), got {int(idx.max())}")
    classes = _creation.arange(n, device=tensor.device)
    return (tensor.to(_int64).unsqueeze(-1) == classes).to(_int64)


def _lengths(v, n, what):
    if isinstance(v, Tensor):
        v = np.asarray(v.numpy()).reshape(-1).tolist()
    elif isinstance(v, numbers.Integral):
        v = [v]
    v = [as_index(x) for x in v]
    if len(v) != n:
        raise ValueError(f"ctc_loss: {what} must have one length per batch element ({n}), got {len(v)}")
    return v


@_float32_under_autocast
def ctc_loss(
    log_probs: Tensor,
    targets: Tensor,
    input_lengths,
    target_lengths,
    blank: int = 0,
    reduction: str = "mean",
    zero_infinity: bool = False,
) -> Tensor:
    """The connectionist temporal classification loss: minus the log of the total probability,
    under ``log_probs`` ``[T, N, C]`` (or unbatched ``[T, C]``), of the alignments that collapse
    to each target sequence (``targets`` ``[N, S]`` padded, or 1-D, the sequences one after the
    other). ``"mean"`` divides each loss by its target length before averaging over the batch;
    ``zero_infinity`` replaces impossible alignments' infinite losses (and their gradients) by 0.

    Computed by the forward (alpha) recursion in log space, so autograd gives the gradient. As
    PyTorch's, that gradient is taken with respect to the logits that ``log_probs`` is the
    log_softmax of: it is the exact gradient plus ``exp(log_probs)`` over each sequence's
    input length."""
    _check(log_probs, "log_probs")
    _check(targets, "targets")
    _reduction(reduction)
    if log_probs.ndim not in (2, 3):
        raise ValueError(
            f"ctc_loss: log_probs must be [T, N, C] or unbatched [T, C], got shape {tuple(log_probs.shape)}"
        )
    if log_probs.numel() == 0:
        raise RuntimeError(f"ctc_loss: log_probs tensor must not be empty, got shape {tuple(log_probs.shape)}")
    unbatched = log_probs.ndim == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs
    T, N, C = lp.shape
    blank = as_index(blank)
    if not 0 <= blank < C:
        raise ValueError(f"ctc_loss: blank {blank} must be a class index in [0, {C})")
    il = _lengths(input_lengths, N, "input_lengths")
    tl = _lengths(target_lengths, N, "target_lengths")
    tg = np.asarray(targets.numpy()).astype(np.int64)
    if unbatched:
        tg = tg.reshape(1, -1)
    elif tg.ndim == 2 and tg.shape[0] != N:
        raise ValueError(
            f"ctc_loss: padded targets must have one row per batch element ({N}), got shape {tuple(tg.shape)}"
        )
    elif tg.ndim > 2:
        raise ValueError(f"ctc_loss: targets must be [N, S] padded or 1-D, got shape {tuple(tg.shape)}")
    seqs, offset = [], 0
    for n in range(N):
        if not 0 <= il[n] <= T:
            raise ValueError(f"ctc_loss: input length {il[n]} of batch element {n} must be in [0, {T}]")
        if tl[n] < 0:
            raise ValueError(f"ctc_loss: target length {tl[n]} of batch element {n} must be non-negative")
        if tg.ndim == 2 and not unbatched:
            if tl[n] > tg.shape[1]:
                raise ValueError(f"ctc_loss: target length {tl[n]} exceeds the {tg.shape[1]} columns of targets")
            seq = tg[n, : tl[n]]
        else:
            flat = tg.reshape(-1)
            if offset + tl[n] > flat.size:
                raise ValueError(f"ctc_loss: the target lengths {tl} add up to more than the {flat.size} targets")
            seq = flat[offset : offset + tl[n]]
            offset += tl[n]
        if seq.size and (seq.min() < 0 or seq.max() >= C or (seq == blank).any()):
            raise ValueError(
                f"ctc_loss: the targets of batch element {n} must be class indices in [0, {C}) other "
                f"than blank ({blank}), got {seq.tolist()}"
            )
        seqs.append(seq)
    L = 2 * max(tl, default=0) + 1
    ext = np.full((N, L), blank, np.int64)  # blank, l1, blank, l2, …, blank
    skip = np.zeros((N, L), bool)  # s may come from s - 2: a label unlike the one two before
    for n, seq in enumerate(seqs):
        ext[n, 1 : 2 * len(seq) : 2] = seq
        if len(seq) > 1:
            skip[n, 3 : 2 * len(seq) : 2] = seq[1:] != seq[:-1]
    dev = lp.device
    out_dtype = lp.dtype

    if lp.dtype != _float64 and dev.type == "cpu":
        # The recursion's sums of exponentials cancel: run it in float64 where there is float64
        # arithmetic (metal has none).
        lp = lp.to(_float64)
    neg = -1e30  # log(0), kept finite so that logsumexp and its gradient stay finite
    idx = _creation.tensor(ext, device=dev).reshape(1, N, L).expand(T, N, L)
    emit = lp.gather(2, idx)  # [T, N, L]: the log-probability of each extended label
    start = np.full((N, L), neg, np.float32)
    start[:, 0] = 0.0
    if L > 1:
        start[:, 1] = [0.0 if len(s) else neg for s in seqs]
    dtype = lp.dtype
    alpha = emit[0] + _creation.tensor(start, device=dev).to(dtype)
    pad1 = _creation.full((N, 1), neg, dtype=dtype, device=dev)
    pad2 = _creation.full((N, 2), neg, dtype=dtype, device=dev)
    skip_t = _creation.tensor(skip, device=dev)
    lengths = np.asarray(il)
    for t in range(1, T):
        a1 = _shape.cat([pad1, alpha.narrow(1, 0, L - 1)], 1)
        a2 = _shape.cat([pad2, alpha.narrow(1, 0, L - 2)], 1) if L > 2 else pad2.narrow(1, 0, L) + 0.0
        a2 = a2.where(skip_t, neg)
        new = _shape.stack([alpha, a1, a2], 0).logsumexp(0) + emit[t]
        live = _creation.tensor((t < lengths).reshape(N, 1), device=dev)
        alpha = new.where(live, alpha)
    ends = np.array([[2 * len(s), max(2 * len(s) - 1, 0)] for s in seqs], np.int64)
    last = alpha.gather(1, _creation.tensor(ends, device=dev))
    two = np.array([[True, len(s) > 0] for s in seqs])
    loss = -last.where(_creation.tensor(two, device=dev), neg).logsumexp(1)
    empty = _creation.tensor(lengths == 0, device=dev)  # no frames: probability 1 of an empty target only
    # PyTorch's gradient convention (see the docstring): exp(log_probs) added over each input length.
    frames = _creation.tensor((np.arange(T)[:, None] < lengths[None, :]).reshape(T, N, 1), device=dev)
    soft = (lp.detach().exp() * frames.to(dtype) * (lp - lp.detach())).sum((0, 2))
    loss = loss + soft
    impossible = (loss > 1e29) | (empty & _creation.tensor(np.array([len(s) > 0 for s in seqs]), device=dev))
    loss = loss.where(empty.logical_not() | impossible, loss * 0.0)
    loss = loss.where(impossible.logical_not(), loss.detach() * 0.0 + (0.0 if zero_infinity else math.inf))
    loss = loss.to(out_dtype)
    if reduction == "mean":
        per = _creation.tensor(np.maximum(np.asarray(tl, np.float32), 1.0), device=dev).to(out_dtype)
        return (loss / per).mean()
    if unbatched and reduction == "none":
        return loss.reshape(())
    return _reduce(loss, reduction)


# ---- embedding bags ------------------------------------------------------------------------


def embedding_bag(
    input: Tensor,
    weight: Tensor,
    offsets=None,
    max_norm=None,
    norm_type: float = 2,
    scale_grad_by_freq: bool = False,
    mode: str = "mean",
    sparse: bool = False,
    per_sample_weights=None,
    include_last_offset: bool = False,
    padding_idx=None,
) -> Tensor:
    """The sum, mean or max of the rows of ``weight`` in each bag: the rows of a 2-D ``input``
    ``[B, L]``, or the runs of a 1-D ``input`` starting at ``offsets`` (with
    ``include_last_offset`` the last offset is the end of the last bag). An empty bag gives
    zeros; entries equal to ``padding_idx`` are left out (and not counted by the mean).
    ``per_sample_weights`` (mode "sum" only) weight each entry. ``max_norm`` rescales the rows
    looked up in place first and ``scale_grad_by_freq`` divides each row's gradient by how
    often the input names it, as in :func:`embedding`; ``sparse`` is not supported."""
    _check(input, "input")
    _check(weight, "weight")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"embedding_bag: mode must be 'sum', 'mean' or 'max', got {mode!r}")
    if sparse:
        raise NotImplementedError("embedding_bag: sparse=True (sparse gradients) is not supported")
    if scale_grad_by_freq and mode == "max":
        raise ValueError("embedding_bag: max mode does not support scaling the gradient by the frequency")
    if weight.ndim != 2:
        raise ValueError(f"embedding_bag: weight must be 2-D, got shape {tuple(weight.shape)}")
    if input.dtype.is_floating_point:
        raise TypeError(f"embedding_bag: input must hold integer indices, got {input.dtype}")
    if per_sample_weights is not None:
        _check(per_sample_weights, "per_sample_weights")
        if mode != "sum":
            raise NotImplementedError(
                f"embedding_bag: per_sample_weights are only supported with mode 'sum', got {mode!r}"
            )
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ValueError(
                f"embedding_bag: per_sample_weights of shape {tuple(per_sample_weights.shape)} must "
                f"have the input's shape {tuple(input.shape)}"
            )
    idx = np.asarray(input.numpy()).astype(np.int64)
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("embedding_bag: offsets must be None for a 2-D input")
        b, l = idx.shape
        starts = np.arange(b) * l
        ends = starts + l
        flat = input.reshape(-1)
        psw = None if per_sample_weights is None else per_sample_weights.reshape(-1)
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("embedding_bag: a 1-D input needs offsets")
        _check(offsets, "offsets")
        offs = np.asarray(offsets.numpy()).astype(np.int64).reshape(-1)
        if offsets.ndim != 1 or len(offs) == 0:
            raise ValueError(f"embedding_bag: offsets must be a non-empty 1-D tensor, got shape {tuple(offsets.shape)}")
        if offs[0] != 0 or np.any(np.diff(offs) < 0) or offs[-1] > len(idx):
            raise ValueError(
                f"embedding_bag: offsets must start at 0, not decrease and stay within the input's "
                f"{len(idx)} elements, got {offs.tolist()}"
            )
        if include_last_offset:
            starts, ends = offs[:-1], offs[1:]
        else:
            starts, ends = offs, np.append(offs[1:], len(idx))
        flat, psw = input, per_sample_weights
    else:
        raise ValueError(f"embedding_bag: input must be 1-D or 2-D, got shape {tuple(input.shape)}")
    n_rows = weight.shape[0]
    flat_idx = idx.reshape(-1)
    if np.any(flat_idx < 0) or np.any(flat_idx >= n_rows):
        raise IndexError(
            f"embedding_bag: indices must be in [0, {n_rows}), got values from {flat_idx.min()} to {flat_idx.max()}"
        )
    if padding_idx is not None:
        padding_idx = as_index(padding_idx)
        if not -n_rows <= padding_idx < n_rows:
            raise ValueError(f"embedding_bag: padding_idx {padding_idx} must be within num_embeddings ({n_rows})")
        padding_idx %= n_rows
    keep = np.ones(len(flat_idx), bool) if padding_idx is None else flat_idx != padding_idx
    if max_norm is not None:
        _embedding_renorm_(
            weight,
            input,
            _float(max_norm, "max_norm", "embedding_bag"),
            _float(norm_type, "norm_type", "embedding_bag"),
        )
    rows = weight.index_select(0, flat.reshape(-1).to(_int64))  # [n, D]
    if scale_grad_by_freq and rows.requires_grad:
        counts = np.bincount(flat_idx, minlength=n_rows)
        share = (1.0 / np.maximum(counts[flat_idx], 1)).astype(np.float32)[:, None]
        scaled = rows * _creation.tensor(share, device=rows.device).to(rows.dtype)
        rows = scaled + (rows - scaled).detach()  # the rows as values, the scaled gradient
    nb = len(starts)
    if mode == "max":
        out = []
        for s, e in zip(starts, ends):
            members = [int(i) for i in range(s, e) if keep[i]]
            if members:
                sel = rows.index_select(0, _creation.tensor(members, dtype=_int64, device=weight.device))
                out.append(sel.amax(0))
            else:
                out.append(_creation.zeros((weight.shape[1],), dtype=weight.dtype, device=weight.device))
        return (
            _shape.stack(out, 0)
            if out
            else _creation.zeros((0, weight.shape[1]), dtype=weight.dtype, device=weight.device)
        )
    # Each kept entry adds its row, weighted, into its bag's output row.
    starts, ends = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
    bag_of = np.full(len(flat_idx), -1, np.int64)
    if nb:  # the bags are consecutive runs
        bag_of[starts[0] : ends[-1]] = np.repeat(np.arange(nb), ends - starts)
    bag_of[~keep] = -1
    kept = np.nonzero(bag_of >= 0)[0]
    counts = np.bincount(bag_of[kept], minlength=nb).astype(np.float32)
    scale = np.ones(len(flat_idx), np.float32)
    if mode == "mean":
        scale[kept] = 1.0 / counts[bag_of[kept]]
    d = weight.shape[1]
    out = _creation.zeros((nb, d), dtype=weight.dtype, device=weight.device)
    if len(kept) == 0:
        return out
    sel = _creation.tensor(kept.tolist(), dtype=_int64, device=weight.device)
    w = _creation.tensor(scale[kept].reshape(-1, 1), device=weight.device).to(weight.dtype)
    if psw is not None:
        w = w * psw.reshape(-1).index_select(0, sel).reshape(-1, 1).to(weight.dtype)
    target = _creation.tensor(np.repeat(bag_of[kept].reshape(-1, 1), d, axis=1), dtype=_int64, device=weight.device)
    return out.scatter_add(0, target, rows.index_select(0, sel) * w)
