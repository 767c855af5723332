"""lucid.special against numpy, `math`, tabulated values, series written here and identities
between the functions; gradients by finite differences; dtypes and errors."""

import math

import ml_dtypes
import numpy as np
import pytest

import lucid
import lucid.special as S

RNG = np.random.default_rng(21)


def T(a, dtype=np.float64, **kw):
    return lucid.tensor(np.asarray(a, dtype=dtype), **kw)


def f64(fn, x):
    return fn(T(x)).numpy()


def fd_check(fn, x, rtol=1e-5, atol=1e-7, eps=1e-5):
    """fn's gradient at x (float64) against central differences of fn itself."""
    t = T(x, requires_grad=True)
    fn(t).sum().backward()
    num = (f64(fn, x + eps) - f64(fn, x - eps)) / (2 * eps)
    np.testing.assert_allclose(t.grad.numpy(), num, rtol=rtol, atol=atol)


# ---- values at tabulated points (Abramowitz & Stegun's tables) ---------------------------------------

TABLE = {
    "i1": (1.0, 0.5651591039924851),
    "modified_bessel_i1": (1.0, 0.5651591039924851),
    "modified_bessel_k0": (1.0, 0.4210244382407082),
    "modified_bessel_k1": (1.0, 0.6019072301972346),
    "bessel_j0": (1.0, 0.7651976865579666),
    "bessel_j1": (1.0, 0.44005058574493355),
    "bessel_y0": (1.0, 0.08825696421567696),
    "bessel_y1": (1.0, -0.7812128213002887),
    "airy_ai": (1.0, 0.13529241631288141),
}


@pytest.mark.parametrize("name", sorted(TABLE))
def test_tabulated_values(name):
    x, want = TABLE[name]
    np.testing.assert_allclose(getattr(S, name)(T([x])).numpy(), [want], rtol=1e-12)
    got32 = getattr(S, name)(T([x], np.float32))
    assert got32.dtype == lucid.float32
    np.testing.assert_allclose(got32.numpy(), [want], rtol=2e-7)


def test_airy_ai_at_zero_and_minus_one_and_its_tails():
    np.testing.assert_allclose(S.airy_ai(T([0.0, -1.0])).numpy(), [0.3550280538878172, 0.5355608832923521], rtol=1e-12)
    # Ai's Maclaurin series and its asymptotic forms meet: both sides of each switch agree.
    for edge, tol in ((5.8, 3e-8), (-8.0, 1e-10)):
        a, b = S.airy_ai(T([edge - 1e-12, edge + 1e-12])).numpy()
        assert abs(a - b) <= tol * abs(a)
    # Ai'' = x Ai: second differences.
    x = np.array([-12.0, -6.0, -2.0, 0.5, 3.0, 7.0, 12.0])
    h = 1e-3
    second = (f64(S.airy_ai, x + h) - 2 * f64(S.airy_ai, x) + f64(S.airy_ai, x - h)) / h**2
    np.testing.assert_allclose(second, x * f64(S.airy_ai, x), rtol=1e-5, atol=1e-9)


# ---- Bessel functions: series, identities ------------------------------------------------------------


def _series(x, n, sign):
    """Σ sign^k (x/2)^(2k+n) / (k! (k+n)!), the power series of J_n (sign -1) and I_n (sign +1)."""
    term = (x / 2) ** n / math.factorial(n)
    total = term.copy()
    for k in range(1, 300):
        term = term * sign * (x / 2) ** 2 / (k * (k + n))
        total = total + term
    return total


def test_i0_i1_and_j0_j1_against_their_series():
    x = np.linspace(-10, 10, 81)
    np.testing.assert_allclose(f64(lucid.i0, x), np.i0(x), rtol=1e-13)
    np.testing.assert_allclose(f64(S.i1, x), _series(x, 1, 1), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(f64(S.modified_bessel_i0, x), np.i0(x), rtol=1e-13)
    np.testing.assert_allclose(f64(S.bessel_j0, x), _series(np.abs(x), 0, -1), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(f64(S.bessel_j1, x), np.sign(x) * _series(np.abs(x), 1, -1), rtol=1e-9, atol=1e-11)


def test_scaled_functions():
    x = np.concatenate([np.linspace(-50, 50, 101), [700.0, -700.0]])
    ok = np.abs(x) <= 50
    np.testing.assert_allclose(f64(S.i0e, x)[ok], (np.i0(x) * np.exp(-np.abs(x)))[ok], rtol=1e-12)
    np.testing.assert_allclose(f64(S.i1e, x)[ok], (_series(x, 1, 1) * np.exp(-np.abs(x)))[ok], rtol=1e-11)
    # Far out: e^-x I_n(x) ~ 1/sqrt(2πx) (1 - (4n² - 1)/(8x))
    for fn, n in ((S.i0e, 0), (S.i1e, 1)):
        np.testing.assert_allclose(
            fn(T([700.0])).numpy(), (1 - (4 * n * n - 1) / 5600) / math.sqrt(1400 * math.pi), rtol=1e-6
        )
    y = np.linspace(0.1, 40, 60)
    np.testing.assert_allclose(
        f64(S.scaled_modified_bessel_k0, y), f64(S.modified_bessel_k0, y) * np.exp(y), rtol=1e-10
    )
    np.testing.assert_allclose(
        f64(S.scaled_modified_bessel_k1, y), f64(S.modified_bessel_k1, y) * np.exp(y), rtol=1e-10
    )


def test_wronskians_of_the_second_kind():
    x = np.concatenate([np.linspace(0.05, 11.9, 60), np.linspace(12.1, 60, 40)])
    # J1 Y0 - J0 Y1 = 2/(πx) and I0 K1 + I1 K0 = 1/x.
    w = f64(S.bessel_j1, x) * f64(S.bessel_y0, x) - f64(S.bessel_j0, x) * f64(S.bessel_y1, x)
    np.testing.assert_allclose(w, 2 / (np.pi * x), rtol=1e-9)
    xk = x[x < 40]
    w = f64(lucid.i0, xk) * f64(S.modified_bessel_k1, xk) + f64(S.i1, xk) * f64(S.modified_bessel_k0, xk)
    np.testing.assert_allclose(w, 1 / xk, rtol=1e-8)  # (K's series and expansion meet near 9 at ~1e-8)


def test_bessel_domains_and_zeros():
    np.testing.assert_allclose(S.bessel_j0(T([2.404825557695773])).numpy(), [0.0], atol=1e-14)
    y = S.bessel_y0(T([0.0, -1.0, np.inf])).numpy()
    assert y[0] == -np.inf and np.isnan(y[1]) and y[2] == 0
    k = S.modified_bessel_k1(T([0.0, -1.0, np.inf])).numpy()
    assert k[0] == np.inf and np.isnan(k[1]) and k[2] == 0
    np.testing.assert_allclose(
        f64(S.spherical_bessel_j0, np.array([0.0, 1e-6, 2.0])), [1.0, 1.0, math.sin(2.0) / 2.0], rtol=1e-12
    )
    assert np.isnan(S.bessel_j1(T([np.nan])).numpy()[0])


# ---- the normal distribution and the error functions -------------------------------------------------


def test_ndtr_log_ndtr_and_ndtri():
    x = np.linspace(-8, 8, 161)
    phi = 0.5 * np.vectorize(math.erfc)(-x / math.sqrt(2))
    np.testing.assert_allclose(f64(S.ndtr, x), phi, rtol=1e-13)
    np.testing.assert_allclose(f64(S.log_ndtr, x), np.log(phi), rtol=1e-13, atol=1e-16)
    # Far in the lower tail, where Φ underflows: log Φ(x) ~ -x²/2 - log(-x) - log(2π)/2 + log(1 - 1/x² + 3/x⁴)
    for v in (-40.0, -200.0):
        want = -v * v / 2 - math.log(-v) - 0.5 * math.log(2 * math.pi) + math.log(1 - 1 / v**2 + 3 / v**4)
        np.testing.assert_allclose(S.log_ndtr(T([v])).numpy(), [want], rtol=1e-9)
    p = np.concatenate([np.linspace(0.001, 0.999, 101), [1e-10, 1e-300, 1 - 1e-12]])
    np.testing.assert_allclose(f64(S.ndtr, f64(S.ndtri, p)), p, rtol=1e-9)
    edge = S.ndtri(T([0.0, 1.0, 0.5, 1.5])).numpy()
    assert edge[0] == -np.inf and edge[1] == np.inf and edge[2] == 0 and np.isnan(edge[3])


def test_erfcx():
    x = np.linspace(-5, 9, 57)
    np.testing.assert_allclose(f64(S.erfcx, x), np.exp(x * x) * np.vectorize(math.erfc)(x), rtol=1e-12)
    for v in (30.0, 1e4):  # erfcx(x) ~ 1/(x√π) Σ (-1)^k (2k-1)!! / (2x²)^k
        series = sum((-1) ** k * math.prod(range(1, 2 * k, 2)) / (2 * v * v) ** k for k in range(6))
        np.testing.assert_allclose(S.erfcx(T([v])).numpy(), [series / (v * math.sqrt(math.pi))], rtol=1e-12)
    assert S.erfcx(T([-30.0])).numpy()[0] == np.inf


def test_entr():
    x = np.array([0.5, 2.0, 0.0, -1.0, np.nan])
    got = f64(S.entr, x)
    np.testing.assert_allclose(got[:3], [-0.5 * math.log(0.5), -2 * math.log(2), 0.0])
    assert got[3] == -np.inf and np.isnan(got[4])
    t = T([0.5, 2.0, -1.0], requires_grad=True)
    S.entr(t).sum().backward()
    np.testing.assert_allclose(t.grad.numpy()[:2], [-(math.log(0.5) + 1), -(math.log(2) + 1)])
    assert not np.isnan(t.grad.numpy()).any()


# ---- zeta and the polynomials ------------------------------------------------------------------------


def test_hurwitz_zeta():
    np.testing.assert_allclose(S.zeta(T([2.0, 4.0]), T([1.0, 1.0])).numpy(), [np.pi**2 / 6, np.pi**4 / 90], rtol=1e-13)
    s = np.array([1.5, 2.0, 3.5, 7.0])
    q = np.array([0.3, 2.0, 11.0, 0.9])
    np.testing.assert_allclose(
        f64(lambda t: S.zeta(T(s), t), q) - f64(lambda t: S.zeta(T(s), t), q + 1), q**-s, rtol=1e-12
    )
    edge = S.zeta(T([1.0, 0.5, 2.0, 2.0]), T([1.0, 1.0, 0.0, -1.5])).numpy()
    assert edge[0] == np.inf and np.isnan(edge[1]) and edge[2] == np.inf
    # (integer s, negative q: the sum's first terms, then ζ(s, q + 2))
    np.testing.assert_allclose(edge[3], 1 / 2.25 + 1 / 0.25 + S.zeta(T([2.0]), T([0.5])).numpy()[0], rtol=1e-12)
    assert S.zeta(lucid.tensor([2]), lucid.tensor([1])).dtype == lucid.float32
    fd_check(lambda t: S.zeta(T(s), t), q)


def _chebyshev_closed(kind, n, x):
    th = np.arccos(x)
    if kind == "t":
        return np.cos(n * th)
    if kind == "u":
        return np.sin((n + 1) * th) / np.sin(th)
    if kind == "v":
        return np.cos((n + 0.5) * th) / np.cos(th / 2)
    return np.sin((n + 0.5) * th) / np.sin(th / 2)


@pytest.mark.parametrize("kind", ["t", "u", "v", "w"])
def test_chebyshev_polynomials_against_their_trigonometric_forms(kind):
    x = np.linspace(-0.95, 0.95, 39)
    for n in (0, 1, 2, 5, 9):
        want = _chebyshev_closed(kind, n, x)
        got = getattr(S, f"chebyshev_polynomial_{kind}")(T(x), T(np.full_like(x, n))).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
        shifted = getattr(S, f"shifted_chebyshev_polynomial_{kind}")(T((x + 1) / 2), n).numpy()
        np.testing.assert_allclose(shifted, want, rtol=1e-9, atol=1e-12)


def test_the_other_polynomials_against_numpy():
    x = np.linspace(-3, 3, 25)
    P = np.polynomial
    cases = {
        "hermite_polynomial_h": P.hermite.hermval,
        "hermite_polynomial_he": P.hermite_e.hermeval,
        "laguerre_polynomial_l": P.laguerre.lagval,
        "legendre_polynomial_p": P.legendre.legval,
    }
    for name, val in cases.items():
        for n in (0, 1, 3, 7):
            np.testing.assert_allclose(
                getattr(S, name)(T(x), n).numpy(), val(x, [0] * n + [1]), rtol=1e-10, atol=1e-10, err_msg=f"{name} {n}"
            )


def test_polynomial_degrees_truncate_and_broadcast():
    x = T([[0.3], [0.7]])
    n = T([2.9, -1.0, 0.0, -0.5])  # (-0.5 truncates to degree 0)
    got = S.legendre_polynomial_p(x, n).numpy()
    p2 = lambda v: (3 * v * v - 1) / 2  # noqa: E731
    np.testing.assert_allclose(got, [[p2(0.3), 0.0, 1.0, 1.0], [p2(0.7), 0.0, 1.0, 1.0]], rtol=1e-12)
    assert S.hermite_polynomial_h(lucid.tensor([1, 2]), lucid.tensor([2, 3])).dtype == lucid.float32
    np.testing.assert_allclose(S.hermite_polynomial_h(lucid.tensor([1, 2]), lucid.tensor([2, 3])).numpy(), [2.0, 40.0])
    assert np.isnan(S.chebyshev_polynomial_t(T([0.5]), T([np.nan])).numpy()[0])
    with pytest.raises(TypeError, match="Tensor"):
        S.legendre_polynomial_p(0.5, 2)


# ---- gradients, dtypes, errors -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,x",
    [
        ("i0e", [-3.0, -0.5, 0.7, 4.0, 40.0]),
        ("i1", [-3.0, 0.5, 2.0, 8.0]),
        ("i1e", [-3.0, -0.5, 0.7, 4.0, 40.0]),
        ("ndtri", [0.01, 0.3, 0.5, 0.9]),
        ("log_ndtr", [-30.0, -3.0, 0.0, 2.0]),
        ("erfcx", [-2.0, 0.0, 1.0, 10.0]),
        ("ndtr", [-2.0, 0.0, 1.5]),
        ("entr", [0.2, 1.0, 3.0]),
    ],
)
def test_gradients_match_finite_differences(name, x):
    fd_check(getattr(S, name), np.array(x))


def test_i0_gradient_is_i1():
    x = np.array([-2.0, 0.0, 1.0, 5.0])
    t = T(x, requires_grad=True)
    lucid.i0(t).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), f64(S.i1, x), rtol=1e-12)


@pytest.mark.parametrize(
    "name",
    [
        "bessel_j0",
        "bessel_j1",
        "bessel_y0",
        "bessel_y1",
        "modified_bessel_i0",
        "modified_bessel_i1",
        "modified_bessel_k0",
        "modified_bessel_k1",
    ],
)
def test_bessel_gradients_match_finite_differences(name):
    fd_check(getattr(S, name), np.array([0.3, 1.0, 2.5, 7.0, 13.0]))
    if name in ("bessel_j1", "modified_bessel_i1"):  # ½ at 0
        t = T([0.0], requires_grad=True)
        getattr(S, name)(t).sum().backward()
        assert t.grad.numpy()[0] == 0.5


@pytest.mark.parametrize(
    "name",
    [
        "airy_ai",
        "spherical_bessel_j0",
        "scaled_modified_bessel_k0",
        "scaled_modified_bessel_k1",
        "chebyshev_polynomial_t",
        "hermite_polynomial_h",
    ],
)
def test_functions_without_a_gradient_give_results_that_need_none(name):
    t = T([1.0, 2.0], requires_grad=True)
    r = getattr(S, name)(t) if "polynomial" not in name else getattr(S, name)(t, 3)
    assert not r.requires_grad


@pytest.mark.parametrize(
    "name", ["i0e", "i1", "ndtri", "log_ndtr", "erfcx", "bessel_j0", "airy_ai", "modified_bessel_k1"]
)
def test_low_precision_rounds_the_float64_value_once(name):
    x = np.linspace(0.05, 0.95, 40) if name == "ndtri" else np.linspace(0.1, 6, 40)
    xb = x.astype(ml_dtypes.bfloat16)
    got = getattr(S, name)(lucid.tensor(xb))
    assert got.dtype == lucid.bfloat16
    want = f64(getattr(S, name), xb.astype(np.float64)).astype(np.float32).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(got.numpy().astype(np.float32), want.astype(np.float32))


def test_integers_promote_and_non_tensors_raise():
    for name in ("i0e", "i1", "ndtr", "ndtri", "log_ndtr", "erfcx", "entr", "bessel_j0"):
        assert getattr(S, name)(lucid.tensor([1, 2])).dtype == lucid.float32, name
    with pytest.raises(TypeError, match=r"special\.i0e\(\): input must be a lucid.Tensor"):
        S.i0e([1.0])
    with pytest.raises(TypeError, match="Tensor"):
        S.ndtr(1.0)


def test_metal_tensors_compute_on_the_host_kernels_alike():
    x = np.linspace(0.1, 5, 16).astype(np.float32)
    for name in ("i1e", "bessel_y0", "erfcx"):
        got = getattr(S, name)(lucid.tensor(x, device="metal"))
        assert got.device == "metal"
        np.testing.assert_array_equal(got.numpy(), getattr(S, name)(lucid.tensor(x)).numpy())


def test_aliases_of_lucids_functions():
    x = T(np.linspace(0.2, 3, 7))
    pairs = [
        (S.expit, lucid.sigmoid),
        (S.gammaln, lucid.lgamma),
        (S.psi, lucid.digamma),
        (S.digamma, lucid.digamma),
        (S.erf, lucid.erf),
        (S.erfc, lucid.erfc),
        (S.exp2, lucid.exp2),
        (S.expm1, lucid.expm1),
        (S.log1p, lucid.log1p),
        (S.sinc, lucid.sinc),
        (S.i0, lucid.i0),
    ]
    for alias, fn in pairs:
        np.testing.assert_array_equal(alias(x).numpy(), fn(x).numpy())
    np.testing.assert_array_equal(S.round(x).numpy(), lucid.round(x).numpy())
    np.testing.assert_array_equal(S.logit(x / 4).numpy(), lucid.logit(x / 4).numpy())
    np.testing.assert_array_equal(S.xlogy(x, x).numpy(), lucid.xlogy(x, x).numpy())
    np.testing.assert_array_equal(S.multigammaln(x + 2, 2).numpy(), lucid.mvlgamma(x + 2, 2).numpy())
    np.testing.assert_array_equal(S.polygamma(1, x).numpy(), lucid.polygamma(1, x).numpy())
    np.testing.assert_array_equal(S.gammaincc(x, x).numpy(), lucid.igammac(x, x).numpy())
    m = T(RNG.standard_normal((3, 4)))
    np.testing.assert_allclose(S.softmax(m, 1).numpy(), lucid.softmax(m, 1).numpy())
    np.testing.assert_allclose(S.log_softmax(m, 0).numpy(), lucid.log_softmax(m, 0).numpy())
    np.testing.assert_allclose(S.logsumexp(m, 1).numpy(), lucid.logsumexp(m, 1).numpy())
    assert S.softmax(m.float(), 1, dtype=lucid.float64).dtype == lucid.float64
    assert not hasattr(lucid, "bessel_j0") and not hasattr(lucid.Tensor, "special_i0e")
