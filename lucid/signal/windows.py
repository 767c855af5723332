"""Window functions, as ``torch.signal.windows``: 1-D tensors of `M` points, symmetric by
default (``sym=True``, for filter design) or periodic (``sym=False``, for spectral analysis:
the first `M` points of the symmetric window of ``M + 1``); a window of one point is ``[1]``.

The points are computed in float64 and given in `dtype` (the default dtype when None).
"""

from __future__ import annotations

import operator

import numpy as np

from .._ops.creation import leaf, tensor
from .._settings import get_default_dtype
from .._types import check_dtype

__all__ = [
    "bartlett",
    "blackman",
    "cosine",
    "exponential",
    "gaussian",
    "general_cosine",
    "general_hamming",
    "hamming",
    "hann",
    "kaiser",
    "nuttall",
]


def _points(M, sym, fn):
    """The window's length checked, and the length it is computed at (one more when periodic)."""
    try:
        M = operator.index(M)
    except TypeError:
        raise TypeError(f"{fn}(): M must be an integer, got {type(M).__name__}") from None
    if M < 0:
        raise ValueError(f"{fn}(): M must be non-negative, got {M}")
    return M, (M if sym or M <= 1 else M + 1)  # one point is [1], periodic or not


def _window(values, M, dtype, layout, device, requires_grad, fn):
    d = get_default_dtype() if dtype is None else check_dtype(dtype)
    if not d.is_floating_point:
        raise ValueError(f"{fn}(): expected a floating-point dtype, got {d}")
    if layout not in (None, "strided"):
        raise ValueError(f"{fn}(): only the strided layout is supported, got {layout}")
    return leaf(tensor(np.asarray(values[:M], dtype=np.float64), dtype=d, device=device or "cpu"), requires_grad)


def _cosine_sum(M, coefficients, sym):
    """``sum_k (-1)^k a_k cos(2 pi k n / (N - 1))`` over n < N (N the computed length)."""
    if M <= 1:
        return np.ones(M)
    phase = 2 * np.pi * np.arange(M) / (M - 1)
    return sum((-1) ** k * a * np.cos(k * phase) for k, a in enumerate(coefficients))


def general_cosine(M, *, a, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The sum of cosines with the coefficients `a`: ``w[n] = sum_k (-1)^k a[k] cos(2 pi k n /
    (M - 1))``."""
    M, N = _points(M, sym, "general_cosine")
    try:
        coefficients = [float(x) for x in a]
    except TypeError:
        raise TypeError(f"general_cosine(): a must be a sequence of numbers, got {type(a).__name__}") from None
    if not coefficients:
        raise ValueError("general_cosine(): a needs at least one coefficient")
    return _window(_cosine_sum(N, coefficients, sym), M, dtype, layout, device, requires_grad, "general_cosine")


def general_hamming(M, *, alpha=0.54, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """``alpha - (1 - alpha) cos(2 pi n / (M - 1))``."""
    M, N = _points(M, sym, "general_hamming")
    return _window(
        _cosine_sum(N, [alpha, 1.0 - alpha], sym), M, dtype, layout, device, requires_grad, "general_hamming"
    )


def hamming(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Hamming window: :func:`general_hamming` with ``alpha=0.54``."""
    M, N = _points(M, sym, "hamming")
    return _window(_cosine_sum(N, [0.54, 0.46], sym), M, dtype, layout, device, requires_grad, "hamming")


def hann(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Hann window: ``0.5 - 0.5 cos(2 pi n / (M - 1))``."""
    M, N = _points(M, sym, "hann")
    return _window(_cosine_sum(N, [0.5, 0.5], sym), M, dtype, layout, device, requires_grad, "hann")


def blackman(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Blackman window: cosine coefficients 0.42, 0.5, 0.08."""
    M, N = _points(M, sym, "blackman")
    return _window(_cosine_sum(N, [0.42, 0.5, 0.08], sym), M, dtype, layout, device, requires_grad, "blackman")


def nuttall(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """Nuttall's minimum 4-term Blackman-Harris window."""
    M, N = _points(M, sym, "nuttall")
    return _window(
        _cosine_sum(N, [0.3635819, 0.4891775, 0.1365995, 0.0106411], sym),
        M,
        dtype,
        layout,
        device,
        requires_grad,
        "nuttall",
    )


def bartlett(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The triangular window that is 0 at both ends: ``1 - |2n / (M - 1) - 1|``."""
    M, N = _points(M, sym, "bartlett")
    values = np.ones(N) if N <= 1 else 1.0 - np.abs(2.0 * np.arange(N) / (N - 1) - 1.0)
    return _window(values, M, dtype, layout, device, requires_grad, "bartlett")


def cosine(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The sine window: ``sin(pi (n + 0.5) / M)``."""
    M, N = _points(M, sym, "cosine")
    return _window(np.sin(np.pi * (np.arange(N) + 0.5) / max(N, 1)), M, dtype, layout, device, requires_grad, "cosine")


def exponential(M, *, center=None, tau=1.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The exponential (Poisson) window: ``exp(-|n - center| / tau)``, centred in the middle by
    default (a `center` only for a periodic window)."""
    M, N = _points(M, sym, "exponential")
    if tau <= 0:
        raise ValueError(f"exponential(): tau must be positive, got {tau}")
    if sym and center is not None:
        raise ValueError("exponential(): center must be None for a symmetric window")
    c = (N - 1) / 2 if center is None else float(center)
    return _window(np.exp(-np.abs(np.arange(N) - c) / tau), M, dtype, layout, device, requires_grad, "exponential")


def gaussian(M, *, std=1.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Gaussian window: ``exp(-(n - (M - 1) / 2)^2 / (2 std^2))``."""
    M, N = _points(M, sym, "gaussian")
    if std <= 0:
        raise ValueError(f"gaussian(): std must be positive, got {std}")
    return _window(
        np.exp(-((np.arange(N) - (N - 1) / 2) ** 2) / (2 * std * std)),
        M,
        dtype,
        layout,
        device,
        requires_grad,
        "gaussian",
    )


def kaiser(M, *, beta=12.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Kaiser window: ``I0(beta sqrt(1 - (2n / (M - 1) - 1)^2)) / I0(beta)``, I0 the modified
    Bessel function of order 0."""
    M, N = _points(M, sym, "kaiser")
    if beta < 0:
        raise ValueError(f"kaiser(): beta must be non-negative, got {beta}")
    if N <= 1:
        values = np.ones(N)
    else:
        x = 2.0 * np.arange(N) / (N - 1) - 1.0
        values = np.i0(beta * np.sqrt(np.clip(1.0 - x * x, 0.0, None))) / np.i0(beta)
    return _window(values, M, dtype, layout, device, requires_grad, "kaiser")
