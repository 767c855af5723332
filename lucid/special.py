"""Special functions, as PyTorch's ``torch.special``: the engine's (Bessel and Airy functions,
the normal distribution's, the scaled error functions, Hurwitz zeta, the classical orthogonal
polynomials) and this namespace's names for lucid's own functions (``expit`` for sigmoid,
``gammaln`` for lgamma, ``psi`` for digamma …).
"""

from __future__ import annotations

import math

from . import _C
from ._core import TensorBase, tensor_arg
from ._ops import elementwise as _elementwise
from ._ops import reduce as _reduce
from ._ops.elementwise import (
    digamma,
    erf,
    erfc,
    erfinv,
    exp2,
    expm1,
    i0,
    log1p,
    logit,
    mvlgamma,
    polygamma,
    round,
    sigmoid,
    sinc,
    where,
    xlogy,
)
from ._ops.elementwise import special_functions as _special
from ._ops.writes import returned

globals().update(_special)  # i0e, i1, i1e, ndtri, log_ndtr, erfcx, bessel_j0 … airy_ai

expit = sigmoid
gammaln = _elementwise.lgamma
psi = digamma
multigammaln = mvlgamma
gammainc = _elementwise.igamma
gammaincc = _elementwise.igammac
logsumexp = _reduce.logsumexp


def _float(t):
    """`t`, integers and bool as float32."""
    return t if t.dtype.is_floating_point else t.float()


def ndtr(input, *, out=None):
    """The standard normal distribution function ``(1 + erf(x / sqrt 2)) / 2``, through erfc so
    that the lower tail keeps its digits."""
    t = _float(tensor_arg(input, "special.ndtr"))
    return returned(erfc(t * -math.sqrt(0.5)) * 0.5, out, "special.ndtr")


def entr(input, *, out=None):
    """The entropy term ``-x log x``: 0 at 0, -inf below 0 (NaN stays NaN)."""
    t = _float(tensor_arg(input, "special.entr"))
    positive = t > 0
    # log is taken of 1 where x <= 0, so that no NaN reaches the gradient of the branch not taken.
    safe = where(positive, t, 1.0)
    r = where(positive, -safe * safe.log(), where(t == 0, 0.0, where(t.isnan(), t, -math.inf)).to(t.dtype))
    return returned(r, out, "special.entr")


def xlog1py(input, other, *, out=None):
    """``input * log1p(other)``, 0 where `input` is 0 (unless `other` is NaN); integers promote
    to float32."""
    return _elementwise._math_binary(_C.XLOG1PY, "special.xlog1py", input, other, out)


def zeta(input, other, *, out=None):
    """The Hurwitz zeta function ``sum((k + other) ** -input for k >= 0)`` (the gradient is for
    `other`); integers promote to float32."""
    return _elementwise._math_binary(_C.ZETA, "special.zeta", input, other, out)


def _polynomial(code, name, what):
    def fn(input, n, *, out=None):
        if not isinstance(input, TensorBase) and not isinstance(n, TensorBase):
            tensor_arg(input, f"special.{name}")
        return _elementwise._math_binary(code, f"special.{name}", input, n, out)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (
        f"{what} of degree `n` at `input`, elementwise (`n` truncated to an integer; 0 for n < 0; no gradient)."
    )
    return fn


_POLYNOMIALS = {
    "chebyshev_polynomial_t": (_C.CHEBYSHEV_POLYNOMIAL_T, "The Chebyshev polynomial of the first kind T_n"),
    "chebyshev_polynomial_u": (_C.CHEBYSHEV_POLYNOMIAL_U, "The Chebyshev polynomial of the second kind U_n"),
    "chebyshev_polynomial_v": (_C.CHEBYSHEV_POLYNOMIAL_V, "The Chebyshev polynomial of the third kind V_n"),
    "chebyshev_polynomial_w": (_C.CHEBYSHEV_POLYNOMIAL_W, "The Chebyshev polynomial of the fourth kind W_n"),
    "shifted_chebyshev_polynomial_t": (
        _C.SHIFTED_CHEBYSHEV_POLYNOMIAL_T,
        "T_n(2x - 1), the shifted Chebyshev polynomial of the first kind,",
    ),
    "shifted_chebyshev_polynomial_u": (
        _C.SHIFTED_CHEBYSHEV_POLYNOMIAL_U,
        "U_n(2x - 1), the shifted Chebyshev polynomial of the second kind,",
    ),
    "shifted_chebyshev_polynomial_v": (
        _C.SHIFTED_CHEBYSHEV_POLYNOMIAL_V,
        "V_n(2x - 1), the shifted Chebyshev polynomial of the third kind,",
    ),
    "shifted_chebyshev_polynomial_w": (
        _C.SHIFTED_CHEBYSHEV_POLYNOMIAL_W,
        "W_n(2x - 1), the shifted Chebyshev polynomial of the fourth kind,",
    ),
    "hermite_polynomial_h": (_C.HERMITE_POLYNOMIAL_H, "The physicists' Hermite polynomial H_n"),
    "hermite_polynomial_he": (_C.HERMITE_POLYNOMIAL_HE, "The probabilists' Hermite polynomial He_n"),
    "laguerre_polynomial_l": (_C.LAGUERRE_POLYNOMIAL_L, "The Laguerre polynomial L_n"),
    "legendre_polynomial_p": (_C.LEGENDRE_POLYNOMIAL_P, "The Legendre polynomial P_n"),
}
globals().update({name: _polynomial(code, name, what) for name, (code, what) in _POLYNOMIALS.items()})


def softmax(input, dim, *, dtype=None):
    """softmax over `dim`, computed in `dtype` when given."""
    t = tensor_arg(input, "special.softmax")
    return _reduce.softmax(t if dtype is None else t.to(dtype), dim)


def log_softmax(input, dim, *, dtype=None):
    """log_softmax over `dim`, computed in `dtype` when given."""
    t = tensor_arg(input, "special.log_softmax")
    return _reduce.log_softmax(t if dtype is None else t.to(dtype), dim)


__all__ = [
    "expit",
    "gammaln",
    "psi",
    "multigammaln",
    "gammainc",
    "gammaincc",
    "logsumexp",
    "ndtr",
    "entr",
    "xlog1py",
    "zeta",
    "softmax",
    "log_softmax",
    "digamma",
    "erf",
    "erfc",
    "erfinv",
    "exp2",
    "expm1",
    "i0",
    "log1p",
    "logit",
    "polygamma",
    "round",
    "sinc",
    "xlogy",
    *_special,
    *_POLYNOMIALS,
]
