"""Ops against numpy: arithmetic, matmul, linear, reductions, shape ops, broadcasting, type
promotion and the error paths."""

import operator
import re

import ml_dtypes
import numpy as np
import pytest

import lucid
import lucid.nn.functional as F
from _helpers import DEVICES, assert_bits_equal, randf, ulps

pytestmark = pytest.mark.filterwarnings("ignore::lucid.metal.MetalFallbackWarning")

F32, F16, BF16 = np.float32, np.float16, ml_dtypes.bfloat16
NP_OF = {"float32": F32, "float16": F16, "bfloat16": BF16, "int32": np.int32, "int64": np.int64, "bool": np.bool_}
LUCID_OF = {"float32": lucid.float32, "float16": lucid.float16, "bfloat16": lucid.bfloat16,
            "int32": lucid.int32, "int64": lucid.int64, "bool": lucid.bool_}

BINARY = [("add", operator.add), ("sub", operator.sub), ("mul", operator.mul), ("div", operator.truediv)]


def rng(seed=0):
    return np.random.default_rng(seed)


def scalar_tensor(value, dtype, device="cpu"):
    """A 0-d tensor (lucid.full with an empty shape)."""
    return lucid.full((), value, dtype=dtype, device=device)


def shape_in_message(shape, message):
    body = ", ".join(str(s) for s in shape)
    return f"[{body}]" in message or f"({body})" in message or (len(shape) == 1 and f"({body},)" in message)


# ---- elementwise arithmetic -------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,op", BINARY)
def test_float32_tensor_tensor(device, name, op):
    a, b = randf((4, 5), 1), randf((4, 5), 2)
    b[0, 0] = 0.0
    got = op(lucid.tensor(a, device=device), lucid.tensor(b, device=device))
    assert got.dtype is lucid.float32 and got.device == device and got.shape == (4, 5)
    with np.errstate(all="ignore"):
        assert_bits_equal(got.numpy(), op(a, b))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,op", BINARY)
@pytest.mark.parametrize("s", [2.5, -0.1, 3, True])
def test_float32_tensor_scalar_and_reflected(device, name, op, s):
    a = randf((3, 4), 3)
    a[0, 0] = 0.0
    t = lucid.tensor(a, device=device)
    sv = np.float32(s)
    with np.errstate(all="ignore"):
        assert_bits_equal(op(t, s).numpy(), op(a, sv))
        assert_bits_equal(op(s, t).numpy(), op(sv, a))
    assert op(t, s).dtype is lucid.float32
    assert op(s, t).dtype is lucid.float32


@pytest.mark.parametrize("device", DEVICES)
def test_method_forms(device):
    a, b = randf((3,), 4), randf((3,), 5)
    ta, tb = lucid.tensor(a, device=device), lucid.tensor(b, device=device)
    assert_bits_equal(ta.add(tb).numpy(), a + b)
    assert_bits_equal(ta.sub(tb).numpy(), a - b)
    assert_bits_equal(ta.mul(tb).numpy(), a * b)
    assert_bits_equal(ta.div(tb).numpy(), a / b)
    np.testing.assert_allclose(ta.matmul(tb).numpy(), a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5)
    assert_bits_equal((+ta).numpy(), a)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dt", ["int32", "int64"])
def test_integer_arithmetic(device, dt):
    npt = NP_OF[dt]
    a = rng(6).integers(-1000, 1000, (3, 4)).astype(npt)
    b = rng(7).integers(1, 50, (3, 4)).astype(npt)
    ta, tb = lucid.tensor(a, device=device), lucid.tensor(b, device=device)
    for op in (operator.add, operator.sub, operator.mul):
        r = op(ta, tb)
        assert r.dtype is LUCID_OF[dt]
        np.testing.assert_array_equal(r.numpy(), op(a, b))
        r = op(ta, 7)
        assert r.dtype is LUCID_OF[dt]
        np.testing.assert_array_equal(r.numpy(), op(a, npt(7)))
        np.testing.assert_array_equal(op(7, ta).numpy(), op(npt(7), a))
    np.testing.assert_array_equal((-ta).numpy(), -a)
    np.testing.assert_array_equal(ta.relu().numpy(), np.maximum(a, 0))


@pytest.mark.parametrize("device", DEVICES)
def test_integer_division_gives_float32(device):
    a = np.array([7, -7, 1, 0, 0, 2**40 + 1], dtype=np.int64)
    b = np.array([2, 2, 3, 5, 0, 3], dtype=np.int64)
    with np.errstate(all="ignore"):
        want = a.astype(np.float32) / b.astype(np.float32)
        r = lucid.tensor(a, device=device) / lucid.tensor(b, device=device)
        assert r.dtype is lucid.float32
        assert_bits_equal(r.numpy(), want)
        a32 = a[:5].astype(np.int32)
        r = lucid.tensor(a32, device=device) / lucid.tensor(b[:5].astype(np.int32), device=device)
        assert r.dtype is lucid.float32
        assert_bits_equal(r.numpy(), a32.astype(np.float32) / b[:5].astype(np.float32))
        r = lucid.tensor(a32, device=device) / 2
        assert r.dtype is lucid.float32
        assert_bits_equal(r.numpy(), a32.astype(np.float32) / np.float32(2))
        r = 3 / lucid.tensor(a32, device=device)
        assert r.dtype is lucid.float32
        assert_bits_equal(r.numpy(), np.float32(3) / a32.astype(np.float32))


@pytest.mark.parametrize("device", DEVICES)
def test_bool_arithmetic(device):
    a = np.array([True, False, True, False])
    b = np.array([True, True, False, False])
    ta, tb = lucid.tensor(a, device=device), lucid.tensor(b, device=device)
    r = ta + tb
    assert r.dtype is lucid.bool_
    np.testing.assert_array_equal(r.numpy(), a | b)
    r = ta * tb
    assert r.dtype is lucid.bool_
    np.testing.assert_array_equal(r.numpy(), a & b)
    r = ta / tb
    assert r.dtype is lucid.float32
    with np.errstate(all="ignore"):
        assert_bits_equal(r.numpy(), a.astype(np.float32) / b.astype(np.float32))
    r = ta + 3
    assert r.dtype is lucid.int64
    np.testing.assert_array_equal(r.numpy(), a.astype(np.int64) + 3)
    r = ta * 2.5
    assert r.dtype is lucid.float32
    assert_bits_equal(r.numpy(), a.astype(np.float32) * np.float32(2.5))
    r = ta + True
    assert r.dtype is lucid.bool_
    np.testing.assert_array_equal(r.numpy(), a | True)


@pytest.mark.parametrize("device", DEVICES)
def test_bool_subtraction_and_negation_raise(device):
    t = lucid.tensor([True, False], device=device)
    with pytest.raises(TypeError):
        t - t
    with pytest.raises(TypeError):
        t - True
    with pytest.raises(TypeError):
        True - t
    with pytest.raises(TypeError):
        -t


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16"])
def test_unary_minus_and_relu(device, dt):
    a = np.array([-2.5, -0.0, 0.0, 1.5, np.nan, -np.inf, np.inf, -1e-3], dtype=np.float32).astype(NP_OF[dt])
    t = lucid.tensor(a, device=device)
    neg = (-t).numpy()
    assert neg.dtype == a.dtype
    np.testing.assert_array_equal(neg.view(np.uint8), (-a).view(np.uint8))  # sign bit flips, -0.0 included
    r = t.relu()
    assert r.dtype is LUCID_OF[dt]
    got = r.numpy().astype(np.float64)
    want = np.where(np.isnan(a.astype(np.float64)), np.nan, np.maximum(a.astype(np.float64), 0.0))
    np.testing.assert_array_equal(got, want)
    assert np.isnan(got[4])
    np.testing.assert_array_equal(F.relu(t).numpy().astype(np.float64), want)


# ---- low precision: compute in float32, round once -------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("name,op", BINARY)
def test_low_precision_elementwise_rounds_once(device, dt, name, op):
    npt = NP_OF[dt]
    a = (randf(4096, 11) * 50).astype(npt)
    b = (randf(4096, 12) * 3).astype(npt)
    b[:3] = 0
    ta, tb = lucid.tensor(a, device=device), lucid.tensor(b, device=device)
    with np.errstate(all="ignore"):
        want = op(a.astype(F32), b.astype(F32)).astype(npt)
        got = op(ta, tb)
        assert got.dtype is LUCID_OF[dt]
        assert_bits_equal(got.numpy(), want)
        for s in (0.1, 3, -7.25):
            got = op(ta, s)
            assert got.dtype is LUCID_OF[dt]
            assert_bits_equal(got.numpy(), op(a.astype(F32), np.float32(s)).astype(npt))
            got = op(s, ta)
            assert got.dtype is LUCID_OF[dt]
            assert_bits_equal(got.numpy(), op(np.float32(s), a.astype(F32)).astype(npt))


@pytest.mark.parametrize("device", DEVICES)
def test_float16_plus_bfloat16_is_float32(device):
    a, b = randf(1000, 1, F16), randf(1000, 2, BF16)
    r = lucid.tensor(a, device=device) + lucid.tensor(b, device=device)
    assert r.dtype is lucid.float32
    assert_bits_equal(r.numpy(), a.astype(F32) + b.astype(F32))


@pytest.mark.parametrize("device", DEVICES)
def test_int32_plus_float16_is_float16(device):
    a = rng(3).integers(-3000, 3000, 500).astype(np.int32)
    b = randf(500, 4, F16)
    r = lucid.tensor(a, device=device) + lucid.tensor(b, device=device)
    assert r.dtype is lucid.float16
    assert_bits_equal(r.numpy(), (a.astype(F16).astype(F32) + b.astype(F32)).astype(F16))


# ---- type promotion ---------------------------------------------------------------------------

_ORDER = ["bool", "int32", "int64", "float16", "bfloat16", "float32"]


def _torch_promote(a, b):
    """torch.promote_types over lucid's dtypes."""
    if a == b:
        return a
    cat = {"bool": 0, "int32": 1, "int64": 1, "float16": 2, "bfloat16": 2, "float32": 2}
    if cat[a] != cat[b]:
        return a if cat[a] > cat[b] else b
    if cat[a] == 1:
        return "int64"
    return "float32"  # float16 with bfloat16, or either with float32


@pytest.mark.parametrize("a", _ORDER)
@pytest.mark.parametrize("b", _ORDER)
def test_tensor_tensor_promotion_table(a, b):
    x = lucid.ones(3, dtype=LUCID_OF[a])
    y = lucid.ones(3, dtype=LUCID_OF[b])
    r = x * y
    want = _torch_promote(a, b)
    assert r.dtype is LUCID_OF[want], (a, b, r.dtype)
    np.testing.assert_array_equal(r.numpy().astype(np.float64), np.ones(3))


@pytest.mark.parametrize("dt,scalar,want", [
    ("float16", 2.5, "float16"), ("bfloat16", 2.5, "bfloat16"), ("float32", 2.5, "float32"),
    ("int32", 2.5, "float32"), ("int64", 2.5, "float32"), ("bool", 2.5, "float32"),
    ("int32", 2, "int32"), ("int64", 2, "int64"), ("bool", 2, "int64"), ("float16", 2, "float16"),
    ("int32", True, "int32"), ("float16", True, "float16"), ("bool", True, "bool"),
])
def test_tensor_scalar_promotion(dt, scalar, want):
    t = lucid.ones(2, dtype=LUCID_OF[dt])
    assert (t + scalar).dtype is LUCID_OF[want]
    assert (scalar + t).dtype is LUCID_OF[want]
    assert (t * scalar).dtype is LUCID_OF[want]
    np.testing.assert_array_equal((t * scalar).numpy().astype(np.float64), np.full(2, float(scalar)))


@pytest.mark.parametrize("dim_dt,zero_dt,want", [
    ("float16", "float32", "float16"), ("bfloat16", "float32", "bfloat16"), ("int32", "int64", "int32"),
    ("int32", "float32", "float32"), ("int32", "float16", "float16"), ("bool", "int32", "int32"),
    ("float16", "int64", "float16"), ("bool", "float16", "float16"),
])
def test_dimensioned_tensors_outrank_zero_dim(dim_dt, zero_dt, want):
    x = lucid.ones(3, dtype=LUCID_OF[dim_dt])
    z = scalar_tensor(2, LUCID_OF[zero_dt])
    assert z.ndim == 0
    assert (x + z).dtype is LUCID_OF[want]
    assert (z + x).dtype is LUCID_OF[want]


def test_zero_dim_with_zero_dim_promotes_fully():
    a = scalar_tensor(1.5, lucid.float16)
    b = scalar_tensor(2.0, lucid.float32)
    assert (a + b).dtype is lucid.float32
    assert (a + b).shape == ()
    c = scalar_tensor(1, lucid.int32)
    d = scalar_tensor(2, lucid.int64)
    assert (c + d).dtype is lucid.int64


@pytest.mark.parametrize("device", DEVICES)
def test_float16_plus_zero_dim_float32_values(device):
    a = randf(100, 9, F16)
    z = scalar_tensor(0.1, lucid.float32, device)
    r = lucid.tensor(a, device=device) + z
    assert r.dtype is lucid.float16
    z16 = np.float32(0.1).astype(F16)
    assert_bits_equal(r.numpy(), (a.astype(F32) + z16.astype(F32)).astype(F16))


@pytest.mark.parametrize("device", DEVICES)
def test_int32_plus_int64_values(device):
    a = rng(1).integers(-2**31, 2**31 - 1, 100).astype(np.int32)
    b = rng(2).integers(-2**40, 2**40, 100).astype(np.int64)
    r = lucid.tensor(a, device=device) + lucid.tensor(b, device=device)
    assert r.dtype is lucid.int64
    np.testing.assert_array_equal(r.numpy(), a.astype(np.int64) + b)


# ---- broadcasting -----------------------------------------------------------------------------

BROADCASTS = [((3, 1), (1, 4)), ((2, 3, 4), (4,)), ((4,), (2, 3, 4)), ((2, 1, 4), (3, 1)), ((5,), ()),
              ((), (2, 3)), ((), ()), ((0, 3), (1, 3)), ((1,), (0,)), ((2, 1, 1, 3), (4, 1))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("sa,sb", BROADCASTS)
@pytest.mark.parametrize("name,op", BINARY[:3])
def test_broadcasting(device, sa, sb, name, op):
    a, b = randf(sa, 1), randf(sb, 2)
    ta = lucid.tensor(a, device=device) if a.ndim else scalar_tensor(float(a), lucid.float32, device)
    tb = lucid.tensor(b, device=device) if b.ndim else scalar_tensor(float(b), lucid.float32, device)
    got = op(ta, tb)
    want = op(a, b)
    assert got.shape == want.shape
    assert_bits_equal(got.numpy(), np.asarray(want, dtype=np.float32))


@pytest.mark.parametrize("sa,sb", [((2, 3), (4,)), ((2, 3), (3, 2)), ((4, 1, 3), (2, 2)), ((0,), (2,))])
def test_broadcast_errors_name_both_shapes(sa, sb):
    with pytest.raises(ValueError) as e:
        lucid.zeros(sa) + lucid.zeros(sb)
    msg = str(e.value)
    assert shape_in_message(sa, msg) and shape_in_message(sb, msg), msg


# ---- device mixing ----------------------------------------------------------------------------

def test_mixing_devices_raises_naming_both():
    c, m = lucid.ones(2, 2), lucid.ones(2, 2, device="metal")
    for f in (lambda: c + m, lambda: m * c, lambda: c - m, lambda: c / m, lambda: c @ m, lambda: m @ c,
              lambda: F.linear(c, m), lambda: F.linear(c, c, lucid.ones(2, device="metal"))):
        with pytest.raises(RuntimeError) as e:
            f()
        assert "cpu" in str(e.value) and "metal" in str(e.value), str(e.value)


# ---- matmul -----------------------------------------------------------------------------------

MATMUL_SHAPES = [((5,), (5,)), ((4,), (4, 3)), ((3, 4), (4,)), ((3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)),
                 ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((1, 3, 4), (6, 4, 2)),
                 ((4,), (2, 4, 5)), ((2, 3, 4), (4,)), ((2, 2, 1, 3), (1, 2, 3, 6)), ((1, 1), (1, 1)),
                 ((0, 3), (3, 4)), ((2, 0), (0, 3)), ((3, 0), (0,)), ((0,), (0,)), ((2, 0, 3), (3, 4))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul_float32(device, sa, sb):
    a, b = randf(sa, 1), randf(sb, 2)
    got = lucid.tensor(a, device=device) @ lucid.tensor(b, device=device)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert got.shape == want.shape
    assert got.dtype is lucid.float32 and got.device == device
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(lucid.matmul(lucid.tensor(a, device=device), lucid.tensor(b, device=device)).numpy(),
                               want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_matmul_zero_inner_dimension_gives_zeros(device):
    r = lucid.zeros(2, 0, device=device) @ lucid.zeros(0, 3, device=device)
    assert r.shape == (2, 3)
    np.testing.assert_array_equal(r.numpy(), np.zeros((2, 3), np.float32))
    r = lucid.ones(0, 3, device=device) @ lucid.ones(3, 4, device=device)
    assert r.shape == (0, 4)
    r = lucid.ones(0, device=device) @ lucid.ones(0, device=device)
    assert r.shape == ()
    assert r.item() == 0.0
    for dt in (lucid.float16, lucid.bfloat16, lucid.int64):
        r = lucid.ones(2, 0, dtype=dt, device=device) @ lucid.ones(0, 3, dtype=dt, device=device)
        assert r.dtype is dt
        np.testing.assert_array_equal(r.numpy().astype(np.float64), np.zeros((2, 3)))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("m,k,n", [(16, 16, 16), (17, 16, 16), (1, 4096, 1), (64, 1, 64), (3, 1000, 2)])
def test_small_and_blas_sized_matmuls_agree_with_numpy(device, m, k, n):
    # m·n·k up to 4096 runs a plain loop on the host, larger products BLAS: both against
    # float64, with transposed (strided) operands and gradients too.
    a, b = randf((k, m), 5).T, randf((n, k), 6).T
    ta = lucid.tensor(np.ascontiguousarray(a.T), device=device, requires_grad=True)
    tb = lucid.tensor(np.ascontiguousarray(b.T), device=device, requires_grad=True)
    got = ta.T @ tb.T
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5 * np.sqrt(k))
    g = randf((m, n), 7)
    got.backward(lucid.tensor(g, device=device))
    np.testing.assert_allclose(ta.grad.numpy(), (g.astype(np.float64) @ b.T.astype(np.float64)).T, rtol=1e-5,
                               atol=1e-5 * np.sqrt(n))
    np.testing.assert_allclose(tb.grad.numpy(), (a.T.astype(np.float64) @ g.astype(np.float64)).T, rtol=1e-5,
                               atol=1e-5 * np.sqrt(m))
    special = lucid.tensor([[np.inf, 1.0], [np.nan, 0.0]], device=device) @ lucid.tensor([[1.0], [2.0]], device=device)
    r = special.numpy()
    assert r[0, 0] == np.inf and np.isnan(r[1, 0])


@pytest.mark.parametrize("device", DEVICES)
def test_matmul_non_contiguous_operands(device):
    a, b = randf((4, 3), 1), randf((5, 4), 2)
    ta, tb = lucid.tensor(a, device=device), lucid.tensor(b, device=device)
    assert not ta.T.is_contiguous()
    np.testing.assert_allclose((ta.T @ tb.T).numpy(), a.T @ b.T, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose((tb @ ta).numpy(), b @ a, rtol=1e-5, atol=1e-6)
    c = randf((2, 3, 4, 5), 3)
    d = randf((2, 3, 4, 6), 4)
    tc, td = lucid.tensor(c, device=device), lucid.tensor(d, device=device)
    # batch dims permuted, matrix dims transposed
    got = tc.permute(1, 0, 3, 2) @ td.permute(1, 0, 2, 3)
    want = np.transpose(c, (1, 0, 3, 2)) @ np.transpose(d, (1, 0, 2, 3))
    assert got.shape == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
    v = randf((3, 2), 5)
    tv = lucid.tensor(v, device=device).transpose(0, 1)  # (2, 3) non-contiguous
    np.testing.assert_allclose((tv @ ta.T.T.T).numpy(), v.T @ a.T, rtol=1e-5, atol=1e-6)
    col = lucid.tensor(randf((4, 1), 6), device=device)
    np.testing.assert_allclose((col.T @ ta).numpy(), randf((4, 1), 6).T @ a, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dt", ["int32", "int64"])
def test_matmul_integers(device, dt):
    a = rng(1).integers(-20, 20, (2, 3, 4)).astype(NP_OF[dt])
    b = rng(2).integers(-20, 20, (4, 5)).astype(NP_OF[dt])
    r = lucid.tensor(a, device=device) @ lucid.tensor(b, device=device)
    assert r.dtype is LUCID_OF[dt]
    np.testing.assert_array_equal(r.numpy(), a @ b)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("sa,sb", [((8, 16), (16, 9)), ((3, 5, 64), (64, 7)), ((33,), (33, 4)), ((40,), (40,))])
def test_low_precision_matmul_accumulates_in_float32(device, dt, sa, sb):
    npt = NP_OF[dt]
    a, b = randf(sa, 21, npt), randf(sb, 22, npt)
    got = lucid.tensor(a, device=device) @ lucid.tensor(b, device=device)
    assert got.dtype is LUCID_OF[dt]
    want = np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(npt)
    assert got.shape == want.shape
    d = ulps(got.numpy(), want, npt)
    assert d.max() <= 1, f"max {d.max()} ulps"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_low_precision_matmul_does_not_accumulate_in_16_bits(device, dt):
    n = 4096  # a 16-bit running sum of ones stalls long before 4096
    x = lucid.ones(1, n, dtype=LUCID_OF[dt], device=device)
    y = lucid.ones(n, 1, dtype=LUCID_OF[dt], device=device)
    assert (x @ y).item() == float(n)
    xs = lucid.tensor(np.full((1, 3000), 1.0, np.float32), device=device).to(LUCID_OF[dt])
    ys = lucid.tensor(np.full((3000, 1), 0.1, np.float32), device=device).to(LUCID_OF[dt])
    want = np.float32(np.float32(0.1).astype(NP_OF[dt]).astype(np.float64) * 3000).astype(NP_OF[dt])
    assert ulps((xs @ ys).numpy().reshape(()), want, NP_OF[dt]) <= 1


@pytest.mark.parametrize("sa,sb", [((2, 3), (4, 5)), ((3,), (4,)), ((2, 3), (2,)), ((5,), (4, 3)),
                                   ((2, 3, 4), (5, 4)), ((2, 3, 4), (3, 4, 5)), ((2, 1, 3, 4), (3, 4, 4, 5))])
def test_matmul_misaligned_shapes(sa, sb):
    with pytest.raises(ValueError) as e:
        lucid.ones(*sa) @ lucid.ones(*sb)
    msg = str(e.value)
    assert shape_in_message(sa, msg) and shape_in_message(sb, msg), msg


def test_matmul_zero_dim_raises():
    z = lucid.zeros(())
    for a, b in ((z, z), (z, lucid.ones(3)), (lucid.ones(3), z), (lucid.ones(2, 2), z)):
        with pytest.raises(ValueError):
            a @ b


def test_matmul_dtype_mismatch_raises_type_error():
    a = lucid.ones(2, 2)
    for other in (lucid.float16, lucid.bfloat16, lucid.int32, lucid.int64):
        with pytest.raises(TypeError):
            a @ lucid.ones(2, 2, dtype=other)
    with pytest.raises(TypeError):
        lucid.ones(2, 2, dtype=lucid.bool_) @ lucid.ones(2, 2, dtype=lucid.bool_)


# ---- linear -----------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("xshape", [(4,), (3, 4), (2, 3, 4), (0, 4)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_linear_matches_numpy(device, xshape, with_bias):
    x, w, b = randf(xshape, 1), randf((5, 4), 2), randf((5,), 3)
    tx, tw = lucid.tensor(x, device=device), lucid.tensor(w, device=device)
    tb = lucid.tensor(b, device=device) if with_bias else None
    got = F.linear(tx, tw, tb)
    want = x.astype(np.float64) @ w.T.astype(np.float64) + (b if with_bias else 0)
    assert got.shape == want.shape
    assert got.device == device and got.dtype is lucid.float32
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_linear_low_precision(device, dt):
    npt = NP_OF[dt]
    x, w, b = randf((6, 32), 1, npt), randf((5, 32), 2, npt), randf((5,), 3, npt)
    got = F.linear(lucid.tensor(x, device=device), lucid.tensor(w, device=device), lucid.tensor(b, device=device))
    assert got.dtype is LUCID_OF[dt]
    want = (x.astype(F32) @ w.astype(F32).T + b.astype(F32)).astype(npt)
    assert ulps(got.numpy(), want, npt).max() <= 1


def test_linear_with_zero_in_features_gives_bias():
    b = randf((3,), 4)
    r = F.linear(lucid.zeros(2, 0), lucid.zeros(3, 0), lucid.tensor(b))
    np.testing.assert_array_equal(r.numpy(), np.broadcast_to(b, (2, 3)))


def test_linear_non_contiguous_input():
    x, w = randf((4, 3), 1), randf((2, 4), 2)
    got = F.linear(lucid.tensor(x).T, lucid.tensor(w))
    np.testing.assert_allclose(got.numpy(), x.T @ w.T, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("x,w,b", [((3, 4), (5, 3), None), ((3, 4), (5,), None), ((3, 4), (5, 4, 1), None),
                                   ((3, 4), (5, 4), (4,)), ((3, 4), (5, 4), (1, 5)), ((), (5, 4), None)])
def test_linear_bad_shapes(x, w, b):
    with pytest.raises(ValueError):
        F.linear(lucid.zeros(x), lucid.zeros(w), None if b is None else lucid.zeros(b))


def test_linear_dtype_mismatch_and_non_tensors():
    with pytest.raises(TypeError):
        F.linear(lucid.ones(2, 3), lucid.ones(4, 3, dtype=lucid.float16))
    with pytest.raises(TypeError):
        F.linear(lucid.ones(2, 3), lucid.ones(4, 3), lucid.ones(4, dtype=lucid.bfloat16))
    with pytest.raises(TypeError):
        F.linear(np.ones((2, 3), np.float32), lucid.ones(4, 3))


# ---- reductions -------------------------------------------------------------------------------

DIMS = [None, 0, 1, 2, -1, -3, (0, 2), (2, 0), (-1, 0), (0, 1, 2), ()]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_and_mean_float32(device, dim, keepdim):
    a = randf((2, 3, 4), 5)
    t = lucid.tensor(a, device=device)
    axis = None if dim == () else dim
    for name in ("sum", "mean"):
        got = getattr(t, name)(dim=dim, keepdim=keepdim)
        want = getattr(a.astype(np.float64), name)(axis=axis, keepdims=keepdim)
        assert got.shape == np.shape(want), (name, got.shape, np.shape(want))
        assert got.dtype is lucid.float32
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape,dim", [((10007,), None), ((3, 9000), 1), ((130, 1, 37), 0), ((2, 150, 1, 70), (1, 2)),
                                       ((5, 1, 4099), (1, 2)), ((4, 3, 5), (0, 2))])
def test_sum_and_mean_of_long_runs_stay_accurate(shape, dim):
    # Runs longer than the contiguous kernels' blocks (4096 values, 64 rows), offset so that
    # float32 rounding of a naive running sum would show.
    a = randf(shape, 7) + 100
    t = lucid.tensor(a)
    for name in ("sum", "mean"):
        want = getattr(a.astype(np.float64), name)(axis=dim)
        np.testing.assert_allclose(getattr(t, name)(dim=dim).numpy(), want, rtol=2e-6)
    a[0, ...] = np.inf if a.ndim > 1 else a[0]
    a[-1] = np.nan
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(lucid.tensor(a).sum(dim=dim).numpy(), a.astype(np.float64).sum(axis=dim), rtol=2e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_reductions_of_non_contiguous_input(device):
    a = randf((3, 4, 5), 6)
    t = lucid.tensor(a, device=device).permute(2, 0, 1)
    p = np.transpose(a, (2, 0, 1))
    np.testing.assert_allclose(t.sum(1).numpy(), p.astype(np.float64).sum(1), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(t.mean((0, 2), keepdim=True).numpy(), p.astype(np.float64).mean((0, 2), keepdims=True),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_reductions_of_empty_and_zero_dim(device):
    z = lucid.zeros(0, 3, device=device)
    s = z.sum(0)
    assert s.shape == (3,)
    np.testing.assert_array_equal(s.numpy(), np.zeros(3, np.float32))
    assert z.sum().item() == 0.0
    with np.errstate(all="ignore"):
        assert np.isnan(z.mean().item())
    c = scalar_tensor(2.5, lucid.float32, device)
    assert c.sum().shape == ()
    assert c.sum().item() == 2.5
    assert c.sum(0).item() == 2.5
    assert c.mean(-1).item() == 2.5
    with pytest.raises(IndexError):
        c.sum(1)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dt", ["int32", "int64", "bool"])
def test_integer_sums_are_int64(device, dt):
    a = rng(8).integers(0 if dt == "bool" else -2**31, 2 if dt == "bool" else 2**31 - 1, (50, 7)).astype(NP_OF[dt])
    t = lucid.tensor(a, device=device)
    for dim in (None, 0, 1, (0, 1)):
        r = t.sum(dim)
        assert r.dtype is lucid.int64
        np.testing.assert_array_equal(r.numpy(), a.astype(np.int64).sum(axis=dim))
    with pytest.raises(TypeError):
        t.mean()
    with pytest.raises(TypeError):
        t.mean(0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_low_precision_reductions_keep_dtype(device, dt):
    npt = NP_OF[dt]
    a = (randf((64, 33), 9) * 4).astype(npt)
    t = lucid.tensor(a, device=device)
    for name in ("sum", "mean"):
        for dim in (None, 0, 1):
            r = getattr(t, name)(dim)
            assert r.dtype is LUCID_OF[dt]
            want = getattr(a.astype(np.float64), name)(axis=dim).astype(npt)
            assert ulps(r.numpy(), want, npt).max() <= 1
    # 4096 ones: a 16-bit accumulator would stall
    assert lucid.ones(4096, dtype=LUCID_OF[dt], device=device).sum().item() == 4096.0


@pytest.mark.parametrize("bad", [3, -4, (0, 5), (-4,)])
def test_reduction_bad_dims_raise_index_error(bad):
    t = lucid.zeros(2, 3, 4)
    for name in ("sum", "mean"):
        with pytest.raises(IndexError) as e:
            getattr(t, name)(bad)
        wrong = bad if isinstance(bad, int) else [d for d in bad if not -3 <= d < 3][0]
        assert str(wrong) in str(e.value)


@pytest.mark.parametrize("dims", [(0, 0), (1, -2), (2, 0, 2)])
def test_reduction_repeated_dims_raise_value_error(dims):
    t = lucid.zeros(2, 3, 4)
    for name in ("sum", "mean"):
        with pytest.raises(ValueError):
            getattr(t, name)(dims)


# ---- shape ops --------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(6, 4), (-1,), (2, -1, 3), (24,), (4, 3, 2), (1, 24, 1), (-1, 8)])
def test_reshape_and_view(device, shape):
    a = randf((2, 3, 4), 1)
    t = lucid.tensor(a, device=device)
    want = a.reshape(shape)
    for f in (t.reshape, t.view):
        r = f(*shape)
        assert r.shape == want.shape
        assert_bits_equal(r.numpy(), want)
        assert_bits_equal(f(shape).numpy(), want)
    assert_bits_equal(t.reshape(list(shape)).numpy(), want)


@pytest.mark.parametrize("device", DEVICES)
def test_reshape_of_non_contiguous_copies_in_logical_order(device):
    a = randf((3, 4), 2)
    t = lucid.tensor(a, device=device).T
    r = t.reshape(12)
    assert_bits_equal(r.numpy(), a.T.reshape(12))
    assert_bits_equal(t.reshape(2, 6).numpy(), a.T.reshape(2, 6))
    assert_bits_equal(t.flatten().numpy(), a.T.flatten())
    b = randf((2, 3, 4), 3)
    p = lucid.tensor(b, device=device).permute(1, 0, 2)
    v = p.view(3, 2, 2, 2)  # splitting the contiguous last dim is a valid view
    assert_bits_equal(v.numpy(), np.transpose(b, (1, 0, 2)).reshape(3, 2, 2, 2))


def test_view_of_transposed_tensor_raises():
    t = lucid.zeros(3, 4).T
    with pytest.raises(RuntimeError) as e:
        t.view(12)
    assert "reshape" in str(e.value)
    with pytest.raises(RuntimeError):
        lucid.zeros(2, 3, 4).permute(0, 2, 1).view(2, 12)


@pytest.mark.parametrize("shape", [(5,), (2, 5), (-1, 5), (-1, -1), (0, -1), (2, -2)])
def test_reshape_invalid_shapes(shape):
    t = lucid.zeros(2, 3, 4)
    with pytest.raises(ValueError):
        t.reshape(*shape)
    with pytest.raises(ValueError):
        t.view(*shape)


def test_reshape_zero_size():
    t = lucid.zeros(0, 3)
    assert t.reshape(3, 0).shape == (3, 0)
    assert t.reshape(0).shape == (0,)
    assert t.reshape(-1, 3).shape == (0, 3)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("d0,d1", [(0, 1), (1, 0), (0, 2), (-1, -2), (1, 1), (-3, 2)])
def test_transpose(device, d0, d1):
    a = randf((2, 3, 4), 4)
    r = lucid.tensor(a, device=device).transpose(d0, d1)
    want = np.swapaxes(a, d0, d1)
    assert r.shape == want.shape
    assert_bits_equal(r.numpy(), want)
    assert r.stride() == tuple(s // a.itemsize for s in want.strides)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("perm", [(0, 1, 2), (2, 0, 1), (1, 2, 0), (-1, 0, -2), (2, 1, 0)])
def test_permute(device, perm):
    a = randf((2, 3, 4), 5)
    t = lucid.tensor(a, device=device)
    want = np.transpose(a, perm)
    for r in (t.permute(*perm), t.permute(perm), t.permute(list(perm))):
        assert r.shape == want.shape
        assert_bits_equal(r.numpy(), want)
        assert r.stride() == tuple(s // a.itemsize for s in want.strides)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(), (5,), (3, 4), (2, 3, 4)])
def test_T(device, shape):
    a = randf(shape, 6)
    t = lucid.tensor(a, device=device) if shape else scalar_tensor(float(a), lucid.float32, device)
    r = t.T
    assert r.shape == a.T.shape
    assert_bits_equal(r.numpy(), np.asarray(a.T, dtype=np.float32))
    assert_bits_equal(r.T.numpy(), np.asarray(a, dtype=np.float32))


@pytest.mark.parametrize("device", DEVICES)
def test_contiguous_and_is_contiguous(device):
    a = randf((3, 4), 7)
    t = lucid.tensor(a, device=device)
    assert t.is_contiguous()
    assert t.contiguous() is t
    tt = t.T
    assert not tt.is_contiguous()
    c = tt.contiguous()
    assert c.is_contiguous()
    assert c.shape == (4, 3)
    assert c.stride() == (3, 1)
    assert_bits_equal(c.numpy(), np.ascontiguousarray(a.T))
    assert lucid.zeros(1, 4).T.is_contiguous()  # size-1 dims do not matter
    assert lucid.zeros(3, 1).T.is_contiguous()
    assert not lucid.zeros(2, 3, 4).permute(1, 0, 2).is_contiguous()
    assert lucid.zeros(2, 3, 4).permute(1, 0, 2).contiguous().is_contiguous()
    assert t.reshape(2, 6).is_contiguous()


_LAYOUT_DTYPES = [("bool", np.bool_), ("int32", np.int32), ("int64", np.int64), ("float16", np.float16),
                  ("bfloat16", ml_dtypes.bfloat16), ("float32", np.float32)]


@pytest.mark.parametrize("name, np_type", _LAYOUT_DTYPES)
@pytest.mark.parametrize("device", DEVICES)
def test_contiguous_copies_every_layout_bit_for_bit(device, name, np_type):
    # Same-dtype copies move element bits run by run: block runs, repeated elements (stride
    # 0) and strided walks must all land where numpy puts them.
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((4, 5, 6)) * 100).astype(np_type)
    t = lucid.tensor(a, device=device)
    cases = {
        "transpose": (t.permute(2, 0, 1), a.transpose(2, 0, 1)),
        "step slice": (t[:, ::2, 1::3], a[:, ::2, 1::3]),
        "scalar broadcast": (t[1, 2, 3].expand(3, 4, 5), np.broadcast_to(a[1, 2, 3], (3, 4, 5))),
        "row broadcast": (t[0, 0].expand(7, 6), np.broadcast_to(a[0, 0], (7, 6))),
        "middle broadcast": (t[:, :1, :].expand(4, 3, 6), np.broadcast_to(a[:, :1, :], (4, 3, 6))),
    }
    for label, (view, want) in cases.items():
        got = view.contiguous()
        assert got.is_contiguous() and got.dtype == getattr(lucid, name), label
        np.testing.assert_array_equal(got.numpy().view(np.uint8), np.ascontiguousarray(want).view(np.uint8),
                                      err_msg=label)


def test_fill_matches_numpy_for_each_dtype():
    for name, np_type in _LAYOUT_DTYPES:
        for value in (0, 1, -3):
            got = lucid.full((5, 7), value, dtype=getattr(lucid, name)).numpy()
            np.testing.assert_array_equal(got.view(np.uint8), np.full((5, 7), value, dtype=np_type).view(np.uint8))


def test_shape_op_errors():
    t = lucid.zeros(2, 3)
    with pytest.raises(IndexError) as e:
        t.transpose(0, 2)
    assert "2" in str(e.value)
    with pytest.raises(IndexError) as e:
        t.transpose(-3, 0)
    assert "-3" in str(e.value)
    with pytest.raises(IndexError) as e:
        t.permute(0, 5)
    assert "5" in str(e.value)
    with pytest.raises(ValueError):
        t.permute(0, 0)
    with pytest.raises(ValueError):
        t.permute(1, -1)
    with pytest.raises(ValueError):
        t.permute(0)
    with pytest.raises(ValueError):
        t.permute(0, 1, 2)
    with pytest.raises(TypeError):
        t.transpose(0.5, 1)
    with pytest.raises(TypeError):
        t.reshape(2.0, 3)
    for start, length in ((1, 2 ** 63 - 1), (2 ** 63 - 1, 1), (-1, 2), (0, -1)):
        with pytest.raises(IndexError, match="out of range"):
            t.narrow(1, start, length)
    assert t.narrow(1, -1, 1).shape == (2, 1)
    # An empty tensor's other dimensions are bounded too: their strides must fit in int64.
    for shape in ((0, 2 ** 62), (2 ** 40, 0, 2 ** 40)):
        with pytest.raises(ValueError, match="too many elements"):
            lucid.zeros(0).reshape(*shape)
        with pytest.raises(ValueError, match="too many elements"):
            lucid.zeros(*shape)
    assert lucid.zeros(0).reshape(0, 2 ** 30, 0, 2 ** 5).shape == (0, 2 ** 30, 0, 2 ** 5)
    with pytest.raises(ValueError, match="does not fit in int64"):
        t * 2 ** 70


def test_views_keep_dtype_and_device():
    for dt in (lucid.float16, lucid.bfloat16, lucid.int32, lucid.bool_):
        t = lucid.zeros(2, 3, dtype=dt, device="metal")
        for r in (t.T, t.reshape(6), t.view(3, 2), t.transpose(0, 1), t.permute(1, 0), t.T.contiguous()):
            assert r.dtype is dt and r.device == "metal"


# ---- unsupported operands ----------------------------------------------------------------------

@pytest.mark.parametrize("other", ["a", None, [1, 2], object(), 1 + 2j])
def test_unsupported_operands_raise_type_error(other):
    t = lucid.ones(2)
    for op in (operator.add, operator.sub, operator.mul, operator.truediv):
        with pytest.raises(TypeError):
            op(t, other)
        with pytest.raises(TypeError):
            op(other, t)
    with pytest.raises(TypeError):
        t @ other


@pytest.mark.parametrize("other", [3, 2.5, True])
def test_matmul_with_scalar_raises_type_error(other):
    t = lucid.ones(2, 2)
    with pytest.raises(TypeError):
        t @ other
    with pytest.raises(TypeError):
        other @ t


def test_out_of_range_python_ints_in_shape_and_dim_arguments_raise():
    t = lucid.zeros(2, 3)
    huge = 2 ** 64
    for f in (lambda: t.reshape(huge + 6), lambda: t.view(huge + 2, 3), lambda: t.sum(huge),
              lambda: t.mean((huge + 1,)), lambda: t.transpose(huge, 1), lambda: t.permute(huge + 1, huge)):
        with pytest.raises((ValueError, IndexError, OverflowError)):
            f()
