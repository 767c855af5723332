"""The elementwise math functions beyond tests/test_elementwise.py's: the binary math ops, the
rounding and sign family, the gamma family, and the functions composed in Python, against numpy
(ml_dtypes for bfloat16), `math` and series written here, with gradients by finite differences
and errors by type and message."""

import math

import ml_dtypes
import numpy as np
import pytest

import lucid

RNG = np.random.default_rng(11)


def T(a, dtype=np.float32, **kw):
    return lucid.tensor(np.asarray(a, dtype=dtype), **kw)


def numeric_grad(fn, arrays, index, eps=1e-6):
    """d sum(fn(*arrays) * w)/d arrays[index] by central differences in float64, w fixed."""
    base = [np.asarray(a, np.float64) for a in arrays]
    out = np.asarray(fn(*base), np.float64)
    w = np.random.default_rng(5).standard_normal(out.shape)
    g = np.zeros_like(base[index])
    for i in np.ndindex(base[index].shape):
        plus = [a.copy() for a in base]
        minus = [a.copy() for a in base]
        plus[index][i] += eps
        minus[index][i] -= eps
        g[i] = ((np.asarray(fn(*plus)) - np.asarray(fn(*minus))) * w).sum() / (2 * eps)
    return g, w


def check_grads(lucid_fn, numpy_fn, arrays, which=None, rtol=2e-3, atol=2e-3):
    """The gradients lucid computes for `arrays` (float64 tensors) against central differences of
    `numpy_fn`."""
    which = range(len(arrays)) if which is None else which
    ts = [lucid.tensor(np.asarray(a, np.float64), requires_grad=True) for a in arrays]
    out = lucid_fn(*ts)
    for k in which:
        g, w = numeric_grad(numpy_fn, arrays, k)
        for t in ts:
            t.grad = None
        lucid_fn(*ts).mul(lucid.tensor(w)).sum().backward()
        np.testing.assert_allclose(ts[k].grad.numpy(), g, rtol=rtol, atol=atol, err_msg=f"argument {k}")
    return out


# ---- binary math ops against numpy ---------------------------------------------------------------


def _xlogy(x, y):
    with np.errstate(all="ignore"):
        return np.where((x == 0) & ~np.isnan(y), 0.0, x * np.log(y))


def _xlog1py(x, y):
    with np.errstate(all="ignore"):
        return np.where((x == 0) & ~np.isnan(y), 0.0, x * np.log1p(y))


BINARY = {
    "atan2": np.arctan2,
    "fmod": np.fmod,
    "remainder": np.remainder,
    "hypot": np.hypot,
    "copysign": np.copysign,
    "fmax": np.fmax,
    "fmin": np.fmin,
    "xlogy": _xlogy,
    "logaddexp": np.logaddexp,
    "logaddexp2": np.logaddexp2,
    "floor_divide": np.floor_divide,
}


def binary_inputs(name, n=200):
    x = RNG.standard_normal(n) * 4
    y = RNG.standard_normal(n) * 3
    if name in ("fmod", "remainder", "floor_divide"):
        y = np.where(np.abs(y) < 0.1, 0.5, y)
    if name == "xlogy":
        x[:5] = 0
        y = np.abs(y)
    return x.astype(np.float32), y.astype(np.float32)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_values_match_numpy(name):
    x, y = binary_inputs(name)
    got = getattr(lucid, name)(T(x), T(y))
    assert got.dtype == lucid.float32
    with np.errstate(all="ignore"):
        want = BINARY[name](x.astype(np.float64), y.astype(np.float64))
    np.testing.assert_allclose(got.numpy(), want, rtol=2e-6, atol=2e-6)
    # The method form, a number operand, and float64 in double precision.
    np.testing.assert_array_equal(getattr(T(x), name)(T(y)).numpy(), got.numpy())
    s = getattr(lucid, name)(T(x), 1.5)
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(s.numpy(), BINARY[name](x.astype(np.float64), 1.5), rtol=2e-6, atol=2e-6)
    d = getattr(lucid, name)(T(x, np.float64), T(y, np.float64))
    assert d.dtype == lucid.float64
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(d.numpy(), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["atan2", "hypot", "copysign", "fmax", "logaddexp", "fmod"])
def test_binary_bfloat16_rounds_once_like_ml_dtypes(name):
    x, y = binary_inputs(name, 64)
    xb, yb = x.astype(ml_dtypes.bfloat16), y.astype(ml_dtypes.bfloat16)
    got = getattr(lucid, name)(lucid.tensor(xb), lucid.tensor(yb))
    assert got.dtype == lucid.bfloat16
    want = BINARY[name](xb.astype(np.float64), yb.astype(np.float64)).astype(np.float32).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(got.numpy().astype(np.float32), want.astype(np.float32))


def test_broadcasting_and_number_first():
    x = RNG.standard_normal((3, 1)).astype(np.float32)
    y = RNG.standard_normal((1, 4)).astype(np.float32)
    np.testing.assert_allclose(lucid.atan2(T(x), T(y)).numpy(), np.arctan2(x, y), rtol=1e-6)
    np.testing.assert_allclose(lucid.xlogy(2.0, T(np.abs(y))).numpy(), 2 * np.log(np.abs(y)), rtol=1e-6)
    np.testing.assert_allclose(lucid.remainder(5.0, T(y + 3)).numpy(), np.remainder(5.0, y + 3), rtol=1e-5, atol=1e-6)


def test_special_values_of_the_nan_aware_and_signed_ops():
    nan, inf = np.nan, np.inf
    a = T([nan, 1.0, nan, -inf, inf])
    b = T([2.0, nan, nan, inf, inf])
    np.testing.assert_array_equal(lucid.fmax(a, b).numpy(), [2.0, 1.0, nan, inf, inf])
    np.testing.assert_array_equal(lucid.fmin(a, b).numpy(), [2.0, 1.0, nan, -inf, inf])
    np.testing.assert_array_equal(lucid.logaddexp(a, b).numpy()[3:], [inf, inf])
    assert np.signbit(lucid.copysign(T([1.0]), T([-0.0])).numpy()[0])
    np.testing.assert_array_equal(lucid.xlogy(T([0.0, 0.0, 1.0]), T([0.0, nan, 0.0])).numpy(), [0.0, nan, -inf])
    np.testing.assert_array_equal(lucid.fmod(T([5.0, -5.0]), T([0.0, 3.0])).numpy(), [nan, -2.0])


def test_xlog1py_and_heaviside_and_nextafter():
    x, y = RNG.standard_normal(50).astype(np.float32), np.abs(RNG.standard_normal(50)).astype(np.float32)
    np.testing.assert_allclose(lucid.special.xlog1py(T(x), T(y)).numpy(), _xlog1py(x.astype(np.float64), y), rtol=2e-6)
    v = T([-1.5, 0.0, 2.0, 0.0])
    np.testing.assert_array_equal(
        lucid.heaviside(v, T([0.5, 0.5, 0.5, 3.0])).numpy(), np.heaviside([-1.5, 0.0, 2.0, 0.0], [0.5, 0.5, 0.5, 3.0])
    )
    a, b = RNG.standard_normal(30).astype(np.float32), RNG.standard_normal(30).astype(np.float32)
    np.testing.assert_array_equal(lucid.nextafter(T(a), T(b)).numpy(), np.nextafter(a, b))
    np.testing.assert_array_equal(
        lucid.nextafter(T(a, np.float64), T(b, np.float64)).numpy(),
        np.nextafter(a.astype(np.float64), b.astype(np.float64)),
    )
    with pytest.raises(RuntimeError, match="dtype"):
        lucid.heaviside(v, T([1], np.int64))


def test_integer_division_family_against_numpy():
    a = RNG.integers(-50, 50, 300)
    b = RNG.integers(-9, 9, 300)
    b[b == 0] = 7
    ta, tb = lucid.tensor(a), lucid.tensor(b)
    for name, ref in (("fmod", np.fmod), ("remainder", np.remainder), ("floor_divide", np.floor_divide)):
        got = getattr(lucid, name)(ta, tb)
        assert got.dtype == lucid.int64, name
        np.testing.assert_array_equal(got.numpy(), ref(a, b), err_msg=name)
    np.testing.assert_array_equal((ta % tb).numpy(), np.remainder(a, b))
    np.testing.assert_array_equal((ta // tb).numpy(), np.floor_divide(a, b))
    np.testing.assert_array_equal((ta % 4).numpy(), a % 4)
    np.testing.assert_array_equal((100 % tb).numpy(), 100 % b)
    np.testing.assert_array_equal((100 // tb).numpy(), 100 // b)
    np.testing.assert_array_equal(lucid.div(ta, tb, rounding_mode="trunc").numpy(), np.trunc(a / b).astype(np.int64))
    np.testing.assert_array_equal(lucid.div(ta, tb, rounding_mode="floor").numpy(), a // b)
    i32 = lucid.tensor(a.astype(np.int32))
    assert lucid.remainder(i32, 3).dtype == lucid.int32
    for fn in (
        lambda: lucid.fmod(ta, lucid.zeros_like(ta)),
        lambda: ta % 0,
        lambda: lucid.floor_divide(ta, 0),
        lambda: lucid.div(ta, lucid.tensor(0), rounding_mode="trunc"),
    ):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            fn()
    c = ta.clone()
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        c %= 0


def test_float_rounding_divisions():
    x, y = binary_inputs("floor_divide")
    np.testing.assert_allclose(lucid.div(T(x), T(y), rounding_mode="floor").numpy(), np.floor_divide(x, y), rtol=1e-6)
    np.testing.assert_allclose(lucid.div(T(x), T(y), rounding_mode="trunc").numpy(), np.trunc(x / y), rtol=1e-6)
    np.testing.assert_allclose((T(x) // T(y)).numpy(), np.floor_divide(x, y), rtol=1e-6)
    np.testing.assert_allclose((T(x) % T(y)).numpy(), np.remainder(x, y), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lucid.true_divide(T(x), T(y)).numpy(), x / y, rtol=1e-6)
    np.testing.assert_allclose(T(y).__rdiv__(2.0).numpy(), 2.0 / y, rtol=1e-6)
    with pytest.raises(ValueError, match="rounding_mode"):
        lucid.div(T(x), T(y), rounding_mode="round")


def test_gcd_lcm_and_shifts_against_numpy():
    a = RNG.integers(-300, 300, 200)
    b = RNG.integers(-40, 40, 200)
    ta, tb = lucid.tensor(a), lucid.tensor(b)
    np.testing.assert_array_equal(lucid.gcd(ta, tb).numpy(), np.gcd(a, b))
    np.testing.assert_array_equal(lucid.lcm(ta, tb).numpy(), np.lcm(a, b))
    s = RNG.integers(0, 20, 200)
    ts = lucid.tensor(s)
    np.testing.assert_array_equal((ta << ts).numpy(), np.left_shift(a, s))
    np.testing.assert_array_equal((ta >> ts).numpy(), np.right_shift(a, s))
    np.testing.assert_array_equal(lucid.bitwise_left_shift(ta, 3).numpy(), a << 3)
    np.testing.assert_array_equal((1 << ts).numpy(), 1 << s)
    i32 = lucid.tensor(np.array([1, -1, 5], np.int32))
    np.testing.assert_array_equal((i32 << 31).numpy(), np.array([1, -1, 5], np.int32) << 31)
    np.testing.assert_array_equal((i32 << 40).numpy(), [0, 0, 0])  # past the width: 0
    np.testing.assert_array_equal((i32 >> 40).numpy(), [0, -1, 0])  # past the width: the sign
    with pytest.raises(TypeError, match="integer"):
        lucid.gcd(T([1.0]), T([2.0]))
    with pytest.raises(TypeError, match="integer"):
        lucid.bitwise_left_shift(lucid.tensor([True]), lucid.tensor([True]))
    with pytest.raises(TypeError):
        ta << 1.5


def test_dtype_rules_and_errors():
    i = lucid.tensor([3, -4, 0])
    for name in ("atan2", "copysign", "xlogy"):
        assert getattr(lucid, name)(i, lucid.tensor([2, 2, 2])).dtype == lucid.float32, name
    np.testing.assert_allclose(lucid.atan2(i, lucid.tensor([2, 2, 2])).numpy(), np.arctan2([3, -4, 0], 2), rtol=1e-6)
    for name in ("hypot", "logaddexp", "logaddexp2", "nextafter", "igamma", "igammac"):
        with pytest.raises(TypeError, match=f"{name}: only floating-point tensors"):
            getattr(lucid, name)(i, i)
    assert lucid.fmax(i, lucid.tensor([1, 1, 1])).dtype == lucid.int64
    with pytest.raises(TypeError, match="bool"):
        lucid.fmod(lucid.tensor([True]), lucid.tensor([True]))
    with pytest.raises(TypeError, match="Tensor"):
        lucid.atan2([1.0], T([1.0]))
    with pytest.raises(ValueError, match="broadcast"):
        lucid.hypot(T([1.0, 2.0]), T([1.0, 2.0, 3.0]))


@pytest.mark.parametrize(
    "name", ["atan2", "fmod", "remainder", "hypot", "copysign", "fmax", "fmin", "xlogy", "logaddexp", "logaddexp2"]
)
def test_binary_gradients_match_finite_differences(name):
    x, y = binary_inputs(name, 12)
    x, y = x.astype(np.float64), y.astype(np.float64)
    if name in ("fmod", "remainder"):  # away from the jumps of the quotient
        keep = np.abs(x / y - np.round(x / y)) > 0.05
        x, y = x[keep], y[keep]
    if name in ("fmax", "fmin"):
        y = np.where(np.abs(x - y) < 0.05, y + 0.5, y)
    if name == "copysign":
        x = np.where(np.abs(x) < 0.05, 0.5, x)
    if name == "xlogy":
        x, y = x[5:], y[5:] + 0.1
    which = [0] if name == "copysign" else None  # (no gradient for the sign's source)
    check_grads(getattr(lucid, name), BINARY[name], [x, y], which)


def test_gradients_pytorch_leaves_at_zero():
    x = lucid.tensor([1.5, -2.0], requires_grad=True)
    y = lucid.tensor([0.5, 3.0], requires_grad=True)
    lucid.floor_divide(x, y).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0])
    s = lucid.tensor([1.0, -3.0], requires_grad=True)
    lucid.copysign(T([2.0, 2.0]), s).sum().backward()
    np.testing.assert_array_equal(s.grad.numpy(), [0.0, 0.0])


# ---- the gamma family ---------------------------------------------------------------------------


def _digamma(x):
    """ψ by the recurrence to 30 and the asymptotic series (written here, in float64)."""
    x = np.asarray(x, np.float64)
    acc = np.zeros_like(x)
    v = x.copy()
    while (v < 30).any():
        small = v < 30
        acc = acc - np.where(small, 1 / v, 0)
        v = np.where(small, v + 1, v)
    r = 1 / (v * v)
    return acc + np.log(v) - 0.5 / v - r * (1 / 12 - r * (1 / 120 - r / 252))


def test_lgamma_at_negative_arguments_and_poles():
    x = np.array([-0.5, -1.5, -2.25, -3.7, 0.1, 0.0, -1.0, -2.0], np.float32)
    got = lucid.lgamma(T(x)).numpy()
    want = [math.lgamma(v) if v > 0 or v != round(v) else math.inf for v in x.astype(np.float64)]
    np.testing.assert_allclose(got, want, rtol=2e-6)
    assert lucid.lgamma(lucid.tensor([3])).dtype == lucid.float32


def test_digamma_values_and_special_points():
    x = np.concatenate([np.linspace(0.05, 30, 200), [100.5, 1e4]]).astype(np.float32)
    np.testing.assert_allclose(lucid.digamma(T(x)).numpy(), _digamma(x), rtol=2e-6, atol=2e-6)
    g = 0.5772156649015329
    got = lucid.digamma(T([1.0, 0.5, -0.5, 0.0, -0.0, -1.0, -2.0], np.float64)).numpy()
    np.testing.assert_allclose(got[:3], [-g, -g - 2 * math.log(2), -g - 2 * math.log(2) + 2], rtol=1e-12)
    assert got[3] == -np.inf and got[4] == np.inf and np.isnan(got[5]) and np.isnan(got[6])
    # the reflection ψ(1 - x) - ψ(x) = π cot(πx)
    x = np.array([-0.3, -1.7, -4.2], np.float64)
    np.testing.assert_allclose(
        lucid.digamma(T(1 - x, np.float64)).numpy() - lucid.digamma(T(x, np.float64)).numpy(),
        np.pi / np.tan(np.pi * x),
        rtol=1e-10,
    )


def test_polygamma_values_and_gradients():
    zeta3 = 1.2020569031595942
    np.testing.assert_allclose(
        lucid.polygamma(1, T([1.0, 0.5], np.float64)).numpy(), [np.pi**2 / 6, np.pi**2 / 2], rtol=1e-12
    )
    np.testing.assert_allclose(lucid.polygamma(2, T([1.0], np.float64)).numpy(), [-2 * zeta3], rtol=1e-12)
    np.testing.assert_allclose(lucid.polygamma(3, T([1.0], np.float64)).numpy(), [np.pi**4 / 15], rtol=1e-12)
    x = T(np.linspace(0.3, 6, 20))
    np.testing.assert_array_equal(lucid.polygamma(0, x).numpy(), lucid.digamma(x).numpy())
    np.testing.assert_array_equal(x.polygamma(2).numpy(), lucid.polygamma(2, x).numpy())
    # ψ^(n)(x + 1) = ψ^(n)(x) + (-1)^n n! / x^(n+1)
    v = np.linspace(0.3, 6, 20)
    for n in (1, 2, 3):
        lhs = lucid.polygamma(n, T(v + 1, np.float64)).numpy()
        rhs = lucid.polygamma(n, T(v, np.float64)).numpy() + (-1) ** n * math.factorial(n) / v ** (n + 1)
        np.testing.assert_allclose(lhs, rhs, rtol=1e-10)
    for n in (0, 1, 2):  # d/dx ψ^(n) = ψ^(n+1)
        t = lucid.tensor(v, requires_grad=True)
        lucid.polygamma(n, t).sum().backward()
        np.testing.assert_allclose(t.grad.numpy(), lucid.polygamma(n + 1, T(v, np.float64)).numpy(), rtol=1e-8)
    t = lucid.tensor(v, requires_grad=True)
    t.lgamma().sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), lucid.digamma(T(v, np.float64)).numpy(), rtol=1e-10)
    with pytest.raises(RuntimeError, match="negative n"):
        lucid.polygamma(-1, x)
    with pytest.raises(TypeError, match="int"):
        lucid.polygamma(1.5, x)


def test_mvlgamma():
    x = np.array([2.5, 3.0, 7.25])
    got = lucid.mvlgamma(T(x, np.float64), 3).numpy()
    want = [sum(math.lgamma(v - i / 2) for i in range(3)) + 3 * 2 / 4 * math.log(math.pi) for v in x]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    check_grads(
        lambda t: lucid.mvlgamma(t, 2),
        lambda a: np.vectorize(lambda v: math.lgamma(v) + math.lgamma(v - 0.5) + 0.5 * math.log(math.pi))(a),
        [x],
    )
    with pytest.raises(RuntimeError, match="greater than"):
        lucid.mvlgamma(T([0.9]), 3)
    with pytest.raises(ValueError, match="p"):
        lucid.mvlgamma(T([3.0]), 0)


def test_erfinv_inverts_erf():
    y = np.concatenate([np.linspace(-0.999, 0.999, 301), [0.9999999, -0.99999994, 0.0]])
    x = lucid.erfinv(T(y, np.float64)).numpy()
    np.testing.assert_allclose(np.vectorize(math.erf)(x), y, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(lucid.erfinv(T([0.5], np.float64)).numpy(), [0.4769362762044699], rtol=1e-13)
    got = lucid.erfinv(T([1.0, -1.0, 1.5, np.nan])).numpy()
    assert got[0] == np.inf and got[1] == -np.inf and np.isnan(got[2]) and np.isnan(got[3])
    v = np.linspace(-0.9, 0.9, 9)
    t = lucid.tensor(v, requires_grad=True)
    t.erfinv().sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), math.sqrt(math.pi) / 2 * np.exp(x_of(v) ** 2), rtol=1e-10)
    assert lucid.erfinv(lucid.tensor([0, 1])).dtype == lucid.float32


def x_of(y):
    return lucid.erfinv(T(y, np.float64)).numpy()


def test_igamma_against_closed_forms():
    x = np.linspace(0.01, 20, 80)
    for a in (1, 2, 5):  # P(a, x) = 1 - e^-x Σ_{k<a} x^k / k! for integer a
        want = 1 - np.exp(-x) * sum(x**k / math.factorial(k) for k in range(a))
        np.testing.assert_allclose(
            lucid.igamma(T(np.full_like(x, a), np.float64), T(x, np.float64)).numpy(), want, rtol=1e-10, atol=1e-14
        )
        np.testing.assert_allclose(
            lucid.igammac(T(np.full_like(x, a), np.float64), T(x, np.float64)).numpy(), 1 - want, rtol=1e-8, atol=1e-14
        )
    # P(1/2, x) = erf(sqrt x)
    np.testing.assert_allclose(
        lucid.special.gammainc(T(np.full_like(x, 0.5), np.float64), T(x, np.float64)).numpy(),
        np.vectorize(math.erf)(np.sqrt(x)),
        rtol=1e-12,
    )
    edge = lucid.igamma(T([0.0, 0.0, 1.0, -1.0, 2.0]), T([0.0, 1.0, 0.0, 1.0, np.inf])).numpy()
    np.testing.assert_array_equal(edge, [np.nan, 1.0, 0.0, np.nan, 1.0])
    a = np.array([0.7, 2.5, 4.0])
    xs = np.array([0.5, 3.0, 2.2])
    check_grads(lucid.igamma, lambda p, q: np.array([_igamma_series(u, v) for u, v in zip(p, q)]), [a, xs], [1])


def _igamma_series(a, x):
    term = 1 / a
    s = term
    for n in range(1, 400):
        term *= x / (a + n)
        s += term
    return s * math.exp(a * math.log(x) - x - math.lgamma(a))


# ---- rounding, sign and the Python-composed functions ---------------------------------------------


def test_rounding_and_sign_keep_integer_dtypes():
    i = lucid.tensor([3, -4, 0])
    for name in ("floor", "ceil", "trunc", "round", "sign"):
        r = getattr(lucid, name)(i)
        assert r.dtype == lucid.int64, name
    np.testing.assert_array_equal(lucid.sign(i).numpy(), [1, -1, 0])
    np.testing.assert_array_equal(lucid.sgn(T([-2.0, 0.0, np.nan])).numpy(), [-1.0, 0.0, np.nan])
    b = lucid.tensor([True, False])
    assert lucid.sign(b).dtype == lucid.bool_
    for name in ("floor", "ceil", "trunc"):
        with pytest.raises(TypeError, match="bool"):
            getattr(lucid, name)(b)
    x = lucid.tensor([1.7, -1.2])
    assert x.floor_() is x
    np.testing.assert_array_equal(x.numpy(), [1.0, -2.0])


def test_round_to_decimals():
    x = RNG.standard_normal(100).astype(np.float32) * 100
    for d in (1, 2, -1, -2):
        got = lucid.round(T(x), decimals=d).numpy()
        if d > 0:
            want = np.round(x.astype(np.float32) * np.float32(10**d)) / np.float32(10**d)
        else:
            want = np.round(x / np.float32(10**-d)) * np.float32(10**-d)
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert lucid.round(lucid.tensor([15]), decimals=-1).dtype == lucid.int64
    y = T(x)
    assert y.round_(decimals=1) is y


def test_signbit_frac_reciprocal_square():
    x = np.array([-1.5, -0.0, 0.0, 2.25, np.inf, -np.inf], np.float32)
    np.testing.assert_array_equal(lucid.signbit(T(x)).numpy(), np.signbit(x))
    np.testing.assert_array_equal(lucid.signbit(lucid.tensor([-3, 0, 2])).numpy(), [True, False, False])
    np.testing.assert_array_equal(lucid.signbit(lucid.tensor([True])).numpy(), [False])
    v = RNG.standard_normal(50).astype(np.float32) * 5
    np.testing.assert_allclose(lucid.frac(T(v)).numpy(), v - np.trunc(v), rtol=1e-6, atol=1e-7)
    with pytest.raises(TypeError, match="floating"):
        lucid.frac(lucid.tensor([1]))
    np.testing.assert_allclose(lucid.reciprocal(T(v)).numpy(), 1 / v, rtol=1e-6)
    assert lucid.reciprocal(lucid.tensor([2])).dtype == lucid.float32
    np.testing.assert_array_equal(lucid.square(lucid.tensor([3, -4])).numpy(), [9, 16])
    assert lucid.square(lucid.tensor([True])).dtype == lucid.int64
    check_grads(lucid.frac, lambda a: a - np.trunc(a), [v.astype(np.float64)[np.abs(v - np.round(v)) > 0.05]])
    check_grads(lucid.reciprocal, lambda a: 1 / a, [np.array([0.5, -2.0, 3.0])])
    check_grads(lucid.square, np.square, [v.astype(np.float64)[:6]])


def test_angle_conversions_logit_and_nan_to_num():
    v = RNG.standard_normal(40).astype(np.float32) * 90
    np.testing.assert_allclose(lucid.deg2rad(T(v)).numpy(), np.deg2rad(v), rtol=1e-6)
    np.testing.assert_allclose(lucid.rad2deg(T(v)).numpy(), np.rad2deg(v), rtol=1e-6)
    assert lucid.deg2rad(lucid.tensor([180])).dtype == lucid.float32
    p = np.linspace(0.01, 0.99, 30)
    np.testing.assert_allclose(lucid.logit(T(p)).numpy(), np.log(p / (1 - p)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        lucid.logit(T([0.0, 1.0]), eps=0.1).numpy(), [np.log(0.1 / 0.9), np.log(0.9 / 0.1)], rtol=1e-6
    )
    check_grads(lucid.logit, lambda a: np.log(a / (1 - a)), [p[::5]])
    x = T([np.nan, np.inf, -np.inf, 1.5])
    np.testing.assert_array_equal(
        lucid.nan_to_num(x).numpy(), np.nan_to_num(np.array([np.nan, np.inf, -np.inf, 1.5], np.float32))
    )
    np.testing.assert_array_equal(lucid.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-3.0).numpy(), [1.0, 2.0, -3.0, 1.5])
    np.testing.assert_array_equal(lucid.nan_to_num(lucid.tensor([1, 2])).numpy(), [1, 2])
    t = lucid.tensor([np.nan, 2.0], requires_grad=True)
    lucid.nan_to_num(t).sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), [0.0, 1.0])
    np.testing.assert_array_equal(lucid.isposinf(x).numpy(), [False, True, False, False])
    np.testing.assert_array_equal(lucid.isneginf(x).numpy(), [False, False, True, False])
    np.testing.assert_array_equal(lucid.isposinf(lucid.tensor([1])).numpy(), [False])
    np.testing.assert_array_equal(lucid.isreal(x).numpy(), [True] * 4)


def test_identities_of_real_tensors():
    x = T([-2.0, 0.0, 3.0, np.nan])
    for name in ("real", "conj", "resolve_conj", "resolve_neg", "positive"):
        assert getattr(lucid, name)(x) is x, name
    assert lucid.conj_physical(x) is x
    np.testing.assert_allclose(lucid.angle(x).numpy(), [np.pi, 0.0, 0.0, np.nan])
    assert lucid.angle(lucid.tensor([-1])).dtype == lucid.float32
    with pytest.raises(TypeError, match="bool"):
        lucid.positive(lucid.tensor([True]))


def test_frexp_and_ldexp():
    x = np.concatenate(
        [RNG.standard_normal(60) * 1e3, [0.0, 1.0, 0.5, 8.0, np.float32(8) - np.float32(2**-21), 1e-30, -3e20]]
    ).astype(np.float32)
    m, e = lucid.frexp(T(x))
    wm, we = np.frexp(x)
    assert e.dtype == lucid.int32
    np.testing.assert_array_equal(m.numpy(), wm)
    np.testing.assert_array_equal(e.numpy(), we)
    with pytest.raises(TypeError, match="floating"):
        lucid.frexp(lucid.tensor([1]))
    np.testing.assert_array_equal(lucid.ldexp(T(wm), lucid.tensor(we.astype(np.int64))).numpy(), x)
    assert lucid.ldexp(lucid.tensor([3]), lucid.tensor([2])).dtype == lucid.float32


def test_float_power_rsub_lerp_addcmul_addcdiv():
    a, b = RNG.random(20) + 0.5, RNG.standard_normal(20)
    r = lucid.float_power(T(a), T(b))
    assert r.dtype == lucid.float64
    np.testing.assert_allclose(r.numpy(), np.float_power(a.astype(np.float32), b.astype(np.float32)), rtol=1e-12)
    assert lucid.float_power(lucid.tensor([2]), 3).dtype == lucid.float64
    d = T(a, np.float64)
    assert d.float_power_(2) is d
    np.testing.assert_allclose(d.numpy(), a**2, rtol=1e-12)
    with pytest.raises(RuntimeError, match="float64"):
        T(a).float_power_(2)
    np.testing.assert_allclose(
        lucid.rsub(T(a), T(b), alpha=2).numpy(), b.astype(np.float32) - 2 * a.astype(np.float32), rtol=1e-6
    )
    np.testing.assert_allclose(lucid.rsub(T(a), 1.0).numpy(), 1 - a.astype(np.float32), rtol=1e-6)
    w = RNG.random(20)
    np.testing.assert_allclose(lucid.lerp(T(a), T(b), T(w)).numpy(), a + w * (b - a), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(lucid.lerp(T(a), T(b), 1.0).numpy(), b.astype(np.float32))
    check_grads(lambda x, y, z: lucid.lerp(x, y, z), lambda x, y, z: x + z * (y - x), [a[:5], b[:5], w[:5]])
    np.testing.assert_allclose(lucid.addcmul(T(a), T(b), T(w), value=0.5).numpy(), a + 0.5 * b * w, rtol=1e-5)
    np.testing.assert_allclose(lucid.addcdiv(T(a), T(b), T(w + 0.5), value=2).numpy(), a + 2 * b / (w + 0.5), rtol=1e-5)
    check_grads(
        lambda x, y, z: lucid.addcdiv(x, y, z, value=0.5), lambda x, y, z: x + 0.5 * y / z, [a[:4], b[:4], w[:4] + 0.5]
    )
    with pytest.raises(RuntimeError, match="integer division"):
        lucid.addcdiv(T(a[:2]), lucid.tensor([1, 2]), lucid.tensor([3, 4]))


def test_clamp_with_tensor_bounds():
    x = RNG.standard_normal((4, 5)).astype(np.float32)
    lo = RNG.standard_normal((1, 5)).astype(np.float32) - 0.5
    hi = lo + 1
    np.testing.assert_array_equal(lucid.clamp(T(x), T(lo), T(hi)).numpy(), np.minimum(np.maximum(x, lo), hi))
    np.testing.assert_array_equal(lucid.clamp(T(x), min=T(lo)).numpy(), np.maximum(x, lo))
    np.testing.assert_array_equal(lucid.clamp_max(T(x), T(hi)).numpy(), np.minimum(x, hi))
    np.testing.assert_array_equal(lucid.clamp_min(T(x), 0.0).numpy(), np.maximum(x, 0))
    np.testing.assert_array_equal(lucid.clamp(T(x), T(lo), 0.25).numpy(), np.minimum(np.maximum(x, lo), 0.25))
    np.testing.assert_array_equal(lucid.clamp(T([1.0, np.nan]), T([np.nan, 0.0])).numpy(), [np.nan, np.nan])
    # The gradient reaches x inside the bounds and at a bound exactly, the bound where it clamps.
    t = lucid.tensor([-2.0, 0.5, 1.0, 3.0], requires_grad=True)
    b = lucid.tensor([0.0, 0.0, 1.0, 1.0], requires_grad=True)
    lucid.clamp(t, max=b).sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), [1.0, 0.0, 1.0, 0.0])
    np.testing.assert_array_equal(b.grad.numpy(), [0.0, 1.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="at least one"):
        lucid.clamp(T(x))


def test_out_and_in_place_forms():
    x, y = binary_inputs("atan2", 10)
    out = lucid.empty(10)
    assert lucid.atan2(T(x), T(y), out=out) is out
    np.testing.assert_allclose(out.numpy(), np.arctan2(x, y), rtol=1e-6)
    t = T(x)
    assert t.atan2_(T(y)) is t
    np.testing.assert_allclose(t.numpy(), np.arctan2(x, y), rtol=1e-6)
    t = T(x)
    t.fmod_(2.0)
    np.testing.assert_allclose(t.numpy(), np.fmod(x, 2.0), rtol=1e-6)
    i = lucid.tensor([7, -7])
    i %= 3
    np.testing.assert_array_equal(i.numpy(), [1, 2])
    i <<= 2
    np.testing.assert_array_equal(i.numpy(), [4, 8])
    i = lucid.tensor([5, 9])
    with pytest.raises(RuntimeError, match="can't be cast"):
        i.atan2_(lucid.tensor([1, 1]))  # a float result does not fit an integer tensor
    t = T(np.abs(x) + 1)
    t.polygamma_(1)
    np.testing.assert_allclose(t.numpy(), lucid.polygamma(1, T(np.abs(x) + 1)).numpy())


@pytest.mark.parametrize(
    "name", ["atan2", "copysign", "fmod", "remainder", "floor_divide", "fmax", "fmin", "hypot", "logaddexp"]
)
def test_binary_ops_on_metal_agree_with_the_host(name):
    x, y = binary_inputs(name, 300)
    x[:3], y[:3] = [np.nan, 0.0, -0.0], [1.0, np.nan, 2.0]
    for dtype in (np.float32, ml_dtypes.bfloat16):
        a, b = x.astype(dtype), y.astype(dtype)
        host = getattr(lucid, name)(lucid.tensor(a), lucid.tensor(b)).numpy().astype(np.float64)
        metal = getattr(lucid, name)(lucid.tensor(a, device="metal"), lucid.tensor(b, device="metal"))
        assert metal.device == "metal"
        got = metal.numpy().astype(np.float64)
        np.testing.assert_allclose(got, host, rtol=1e-6 if dtype is np.float32 else 8e-3, atol=1e-6)
        assert np.array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(host[~np.isnan(host)]))
    a = RNG.integers(-60, 60, 200)
    b = RNG.integers(-70, 70, 200)
    b[b == 0] = 3
    for fn in (
        lucid.fmod,
        lucid.remainder,
        lucid.floor_divide,
        lucid.fmax,
        lucid.gcd,
        lucid.lcm,
        lucid.bitwise_left_shift,
        lucid.bitwise_right_shift,
        lambda p, q: lucid.div(p, q, rounding_mode="trunc"),
    ):
        for dtype in (np.int32, np.int64):
            host = fn(lucid.tensor(a.astype(dtype)), lucid.tensor(b.astype(dtype)))
            metal = fn(lucid.tensor(a.astype(dtype), device="metal"), lucid.tensor(b.astype(dtype), device="metal"))
            assert metal.dtype == host.dtype
            np.testing.assert_array_equal(metal.numpy(), host.numpy())


def test_numpy_names_of_the_inverse_hyperbolic_functions_and_trunc():
    x = T([0.3, -0.6])
    np.testing.assert_array_equal(lucid.arcsinh(x).numpy(), lucid.asinh(x).numpy())
    np.testing.assert_array_equal(x.arctanh().numpy(), lucid.atanh(x).numpy())
    # (within an ulp: the host loop for the CPU at hand rounds as libm does, or one ulp apart)
    np.testing.assert_allclose(lucid.arccosh(x + 2).numpy(), np.arccosh((x + 2).numpy()), rtol=2.5e-7, atol=0)
    np.testing.assert_array_equal(lucid.fix(T([1.7, -1.7])).numpy(), [1.0, -1.0])
