"""Parameter initialisation, as ``torch.nn.init``: each function fills a tensor "in place"
(the tensor object is pointed at new values with its dtype, device and requires_grad kept)
from lucid's seedable generator, and returns it."""

from __future__ import annotations

import math
import numbers

import numpy as np

from .._ops import creation as _creation
from .._ops.composed import engine_seeded_rng
from .._grad_mode import no_grad
from .._tensor import Tensor

_LINEAR = (
    "linear",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "sigmoid",
    "identity",
)


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The recommended gain for a nonlinearity (PyTorch's table)."""
    if nonlinearity in _LINEAR:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        if isinstance(slope, bool) or not isinstance(slope, numbers.Real):
            raise ValueError(f"negative_slope {param!r} is not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"unsupported nonlinearity {nonlinearity!r}")


def _check(t):
    if not isinstance(t, Tensor):
        raise TypeError(f"expected a lucid.Tensor, got {type(t).__name__}")
    if not t.dtype.is_floating_point:
        raise TypeError(f"initialisation needs a floating-point tensor, got {t.dtype}")
    return t


def _assign(t: Tensor, values: Tensor) -> Tensor:
    """Writes `values` (converted to t's dtype and device) into `t`, in place."""
    with no_grad():
        return t.copy_(values)


def _calculate_fan_in_and_fan_out(t: Tensor):
    if t.ndim < 2:
        raise ValueError(f"fan in and fan out need a tensor with at least 2 dimensions, got shape {t.shape}")
    receptive = math.prod(t.shape[2:])
    return t.shape[1] * receptive, t.shape[0] * receptive


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
    """Fills with samples from U(a, b)."""
    _check(tensor)
    with no_grad():
        return _assign(tensor, _creation.rand(tensor.shape) * (float(b) - float(a)) + float(a))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    """Fills with samples from N(mean, std²)."""
    _check(tensor)
    with no_grad():
        return _assign(tensor, _creation.randn(tensor.shape) * float(std) + float(mean))


def constant_(tensor: Tensor, val: float) -> Tensor:
    _check(tensor)
    with no_grad():
        return _assign(tensor, _creation.full(tensor.shape, float(val)))


def zeros_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 0.0)


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1.0)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """U(-a, a) with a = gain·sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(_check(tensor))
    a = gain * math.sqrt(6.0 / max(fan_in + fan_out, 1))
    return uniform_(tensor, -a, a)


def xavier_normal_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """N(0, std²) with std = gain·sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(_check(tensor))
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / max(fan_in + fan_out, 1)))


def orthogonal_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """Fills with a (semi-)orthogonal matrix times `gain`: the Q of the QR decomposition of a
    normal sample from lucid's generator, its signs fixed by R's diagonal (PyTorch's method),
    over the tensor flattened to ``(rows, the rest)``."""
    _check(tensor)
    if tensor.ndim < 2:
        raise ValueError(f"orthogonal_ needs a tensor with at least 2 dimensions, got shape {tensor.shape}")
    rows = tensor.shape[0]
    cols = tensor.numel() // rows if rows else 0
    if rows == 0 or cols == 0:
        return tensor
    sample = _creation.randn(rows, cols).numpy().astype(np.float64)
    if rows < cols:
        sample = sample.T
    q, r = np.linalg.qr(sample)
    q *= np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _assign(tensor, _creation.tensor((gain * q).reshape(tensor.shape)))


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0) -> Tensor:
    """Fills with samples from N(mean, std²) restricted to ``[a, b]``, from lucid's generator:
    normal draws kept when inside, or, where [a, b] is narrow against std, uniform draws on
    [a, b] kept with the density's relative height. ValueError when [a, b] lies so far in a
    tail that neither keeps one draw in 10,000."""
    _check(tensor)
    mean, std, a, b = (float(_real(v, name)) for v, name in ((mean, "mean"), (std, "std"), (a, "a"), (b, "b")))
    if not a < b:
        raise ValueError(f"trunc_normal_: a ({a}) must be below b ({b})")
    if not 0 < std < math.inf:
        raise ValueError(f"trunc_normal_: std must be positive and finite, got {std}")
    lo, hi = (a - mean) / std, (b - mean) / std
    inside = 0.5 * (math.erf(hi / math.sqrt(2)) - math.erf(lo / math.sqrt(2)))  # a normal draw's chance
    peak = math.exp(-0.5 * min(abs(lo), abs(hi)) ** 2 if lo * hi > 0 else 0.0)
    # A uniform draw's chance: the density's mean height over [lo, hi] against its peak there.
    flat = inside * math.sqrt(2 * math.pi) / ((hi - lo) * peak) if peak > 0 else 0.0
    if max(inside, flat) < 1e-4:
        raise ValueError(f"trunc_normal_: [{a}, {b}] lies too far in a tail of N({mean}, {std}²) to sample")
    rng = engine_seeded_rng()
    n = tensor.numel()
    values = np.empty(0)
    while values.size < n:
        want = max(2 * (n - values.size), 16)
        if inside >= flat:
            draw = rng.normal(mean, std, size=want)
            draw = draw[(draw >= a) & (draw <= b)]
        else:
            draw = rng.uniform(a, b, size=want)
            z = (draw - mean) / std
            draw = draw[rng.uniform(0, peak, size=want) <= np.exp(-0.5 * z * z)]
        values = np.concatenate([values, draw])
    return _assign(tensor, _creation.tensor(values[:n].reshape(tensor.shape)))


def _real(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"trunc_normal_: {name} must be a number, got {value!r}")
    return value


def _kaiming_std(tensor, a, mode, nonlinearity):
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(_check(tensor))
    fan = fan_in if mode == "fan_in" else fan_out
    return calculate_gain(nonlinearity, a) / math.sqrt(max(fan, 1))


def kaiming_uniform_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu") -> Tensor:
    """U(-bound, bound) with bound = gain·sqrt(3 / fan) (He et al.)."""
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu") -> Tensor:
    """N(0, std²) with std = gain / sqrt(fan) (He et al.)."""
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity))
