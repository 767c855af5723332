"""Elementwise ops against numpy: arithmetic with its dtype rules (float16/bfloat16 compute in
float32 and round once, type promotion, broadcasting); comparisons, bitwise and logical ops,
pow, maximum/minimum, clamp and where; and the unary math ops (values, dtype rules, autocast
policy and gradients)."""

import math
import operator

import ml_dtypes
import numpy as np
import pytest

import lucid
import lucid.nn as nn
import lucid.nn.functional as F
from _helpers import (
    BF16,
    DEVICES,
    F16,
    F32,
    LUCID_OF,
    NP_OF,
    T,
    arrays_from,
    assert_bits_equal,
    randf,
    scalar_tensor,
    shape_in_message,
)

pytestmark = pytest.mark.filterwarnings("ignore::lucid.metal.MetalFallbackWarning")

BINARY = [("add", operator.add), ("sub", operator.sub), ("mul", operator.mul), ("div", operator.truediv)]

rng = np.random.default_rng(11)
arr = arrays_from(rng)


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
    a = np.random.default_rng(6).integers(-1000, 1000, (3, 4)).astype(npt)
    b = np.random.default_rng(7).integers(1, 50, (3, 4)).astype(npt)
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
    a = np.random.default_rng(3).integers(-3000, 3000, 500).astype(np.int32)
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


@pytest.mark.parametrize(
    "dt,scalar,want",
    [
        ("float16", 2.5, "float16"),
        ("bfloat16", 2.5, "bfloat16"),
        ("float32", 2.5, "float32"),
        ("int32", 2.5, "float32"),
        ("int64", 2.5, "float32"),
        ("bool", 2.5, "float32"),
        ("int32", 2, "int32"),
        ("int64", 2, "int64"),
        ("bool", 2, "int64"),
        ("float16", 2, "float16"),
        ("int32", True, "int32"),
        ("float16", True, "float16"),
        ("bool", True, "bool"),
    ],
)
def test_tensor_scalar_promotion(dt, scalar, want):
    t = lucid.ones(2, dtype=LUCID_OF[dt])
    assert (t + scalar).dtype is LUCID_OF[want]
    assert (scalar + t).dtype is LUCID_OF[want]
    assert (t * scalar).dtype is LUCID_OF[want]
    np.testing.assert_array_equal((t * scalar).numpy().astype(np.float64), np.full(2, float(scalar)))


@pytest.mark.parametrize(
    "dim_dt,zero_dt,want",
    [
        ("float16", "float32", "float16"),
        ("bfloat16", "float32", "bfloat16"),
        ("int32", "int64", "int32"),
        ("int32", "float32", "float32"),
        ("int32", "float16", "float16"),
        ("bool", "int32", "int32"),
        ("float16", "int64", "float16"),
        ("bool", "float16", "float16"),
    ],
)
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
    a = np.random.default_rng(1).integers(-(2**31), 2**31 - 1, 100).astype(np.int32)
    b = np.random.default_rng(2).integers(-(2**40), 2**40, 100).astype(np.int64)
    r = lucid.tensor(a, device=device) + lucid.tensor(b, device=device)
    assert r.dtype is lucid.int64
    np.testing.assert_array_equal(r.numpy(), a.astype(np.int64) + b)


# ---- broadcasting -----------------------------------------------------------------------------

BROADCASTS = [
    ((3, 1), (1, 4)),
    ((2, 3, 4), (4,)),
    ((4,), (2, 3, 4)),
    ((2, 1, 4), (3, 1)),
    ((5,), ()),
    ((), (2, 3)),
    ((), ()),
    ((0, 3), (1, 3)),
    ((1,), (0,)),
    ((2, 1, 1, 3), (4, 1)),
]


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


# ---- comparisons, bitwise and logical ops, pow, maximum/minimum, clamp, where --------------


@pytest.mark.parametrize(
    "op,npop",
    [
        ("__eq__", np.equal),
        ("__ne__", np.not_equal),
        ("__lt__", np.less),
        ("__le__", np.less_equal),
        ("__gt__", np.greater),
        ("__ge__", np.greater_equal),
    ],
)
def test_comparisons_match_numpy(op, npop):
    a = rng.integers(-2, 3, (3, 4)).astype(np.float32)
    b = rng.integers(-2, 3, (4,)).astype(np.float32)
    got = getattr(T(a), op)(T(b))
    assert got.dtype == lucid.bool
    np.testing.assert_array_equal(got.numpy(), npop(a, b))
    np.testing.assert_array_equal(getattr(T(a), op)(1).numpy(), npop(a, 1))
    ia = a.astype(np.int64)
    np.testing.assert_array_equal(getattr(T(ia), op)(0.5).numpy(), npop(ia, 0.5))


def test_reflected_comparison_and_nan():
    a = np.array([1.0, np.nan, 3.0], np.float32)
    np.testing.assert_array_equal((2 < T(a)).numpy(), 2 < a)
    np.testing.assert_array_equal((T(a) == T(a)).numpy(), a == a)
    np.testing.assert_array_equal((T(a) != T(a)).numpy(), a != a)


def test_comparison_has_no_gradient_and_tensors_stay_hashable():
    x = T(arr(3), requires_grad=True)
    assert not (x > 0).requires_grad
    assert len({x, x}) == 1


@pytest.mark.parametrize("device", ["cpu", "metal"])
def test_bitwise_ops_match_numpy_on_bool_and_integers(device):
    a, b = rng.random((3, 4)) > 0.5, rng.random(4) > 0.5  # broadcast
    ta, tb = T(a, device=device), T(b, device=device)
    for got, want in (
        ((ta & tb), a & b),
        ((ta | tb), a | b),
        ((ta ^ tb), a ^ b),
        ((~ta), ~a),
        ((ta & True), a & True),
        ((False | ta), a),
        ((True ^ ta), ~a),
    ):
        assert got.dtype == lucid.bool_ and got.device == device
        np.testing.assert_array_equal(got.numpy(), want)
    info = np.iinfo(np.int64)
    i = np.array([[5, -3, 12, info.max], [info.min, 0, -1, 7]], np.int64)
    j = np.array([3, 6, -10, 1], np.int32)
    ti, tj = T(i, device=device), T(j, device=device)
    cases = [
        (ti & tj, i & j),
        (ti | tj, i | j),
        (ti ^ tj, i ^ j),
        (~ti, ~i),
        (~tj, ~j),
        (ti & 6, i & 6),
        (9 | ti, 9 | i),
        (ti ^ -1, ~i),
        (tj & T(b, device=device), j & b),
    ]
    for got, want in cases:
        assert got.dtype == (lucid.int32 if want.dtype == np.int32 else lucid.int64)
        np.testing.assert_array_equal(got.numpy(), want)
    assert (~tj).dtype == lucid.int32
    for op in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        np.testing.assert_array_equal(getattr(lucid, op)(ti, tj).numpy(), getattr(np, op)(i, j))
    np.testing.assert_array_equal(lucid.bitwise_not(ti).numpy(), ~i)


def test_bitwise_ops_refuse_floats_and_logical_ops_take_truth_values():
    with pytest.raises(TypeError, match="bitwise_and: only integer and bool"):
        T(arr(2)) & T(arr(2))
    with pytest.raises(TypeError, match="bitwise_not: only integer and bool"):
        ~T(arr(2))
    with pytest.raises(TypeError):
        T(np.array([1, 2])) | 1.5
    x, y = np.array([0.0, 2.0, -1.0, 0.0]), np.array([1, 0, 3, 0])
    tx, ty = T(x), T(y)
    np.testing.assert_array_equal(lucid.logical_and(tx, ty).numpy(), np.logical_and(x, y))
    np.testing.assert_array_equal(lucid.logical_or(tx, ty).numpy(), np.logical_or(x, y))
    np.testing.assert_array_equal(lucid.logical_xor(tx, ty).numpy(), np.logical_xor(x, y))
    np.testing.assert_array_equal(lucid.logical_not(tx).numpy(), np.logical_not(x))
    assert tx.logical_and(True).dtype == lucid.bool_


def test_pow_tensor_scalar_and_reflected():
    a = np.abs(arr(3, 4)) + 0.1
    b = arr(4)
    np.testing.assert_allclose((T(a) ** T(b)).numpy(), a**b, rtol=1e-5)
    np.testing.assert_allclose((T(a) ** 2.5).numpy(), a**2.5, rtol=1e-5)
    np.testing.assert_allclose((2.0 ** T(b)).numpy(), 2.0**b, rtol=1e-5)
    ia = np.arange(-3, 4, dtype=np.int64)
    got = T(ia) ** 3
    assert got.dtype == lucid.int64
    np.testing.assert_array_equal(got.numpy(), ia**3)
    with pytest.raises(RuntimeError, match="negative integer powers"):
        T(ia) ** -1


def test_pow_is_float32_under_autocast():
    x = T(arr(4), device="metal").half()
    with lucid.amp.autocast("metal"):
        assert (x**2).dtype == lucid.float32


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_minimum(name):
    a, b = arr(3, 4), arr(3, 1)
    a[0, 0] = np.nan
    got = getattr(lucid, name)(T(a), T(b)).numpy()
    np.testing.assert_array_equal(got, getattr(np, name)(a, b))
    np.testing.assert_array_equal(getattr(T(a), name)(0.25).numpy(), getattr(np, name)(a, np.float32(0.25)))


def test_maximum_gradient_splits_ties():
    x = T(np.array([1.0, 2.0, 3.0], np.float32), requires_grad=True)
    y = T(np.array([1.0, 3.0, 2.0], np.float32), requires_grad=True)
    lucid.maximum(x, y).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.5, 0, 1])
    np.testing.assert_array_equal(y.grad.numpy(), [0.5, 1, 0])


def test_clamp_values_and_gradient_mask():
    a = np.linspace(-2, 2, 9).astype(np.float32)
    x = T(a, requires_grad=True)
    y = x.clamp(-1, 1)
    np.testing.assert_array_equal(y.numpy(), np.clip(a, -1, 1))
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), ((a >= -1) & (a <= 1)).astype(np.float32))
    np.testing.assert_array_equal(x.clamp(min=0.5).numpy(), np.maximum(a, 0.5))
    np.testing.assert_array_equal(x.clamp(max=0.5).numpy(), np.minimum(a, 0.5))
    ia = np.arange(-3, 4)
    assert T(ia).clamp(-1, 1).dtype == lucid.int64
    assert T(ia).clamp(-1.5, 1).dtype == lucid.float32
    with pytest.raises(ValueError, match="at least one"):
        x.clamp()


def test_where_broadcasts_and_routes_gradients():
    c = rng.random((3, 1)) > 0.5
    a, b = arr(3, 4), arr(4)
    x, y = T(a, requires_grad=True), T(b, requires_grad=True)
    out = lucid.where(T(c), x, y)
    np.testing.assert_array_equal(out.numpy(), np.where(c, a, b))
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.broadcast_to(c, (3, 4)).astype(np.float32))
    np.testing.assert_array_equal(y.grad.numpy(), (~np.broadcast_to(c, (3, 4))).sum(0).astype(np.float32))
    np.testing.assert_array_equal(lucid.where(T(c), 1.0, T(b)).numpy(), np.where(c, 1.0, b))
    np.testing.assert_array_equal(lucid.where(T(c), 2, 0).numpy(), np.where(c, 2, 0))
    assert lucid.where(T(c), 2, 0).dtype == lucid.int64
    half = T(a).half()
    assert lucid.where(T(c), half, 0.5).dtype == lucid.float16
    with pytest.raises(TypeError, match="bool tensor"):
        lucid.where(T(a), x, y)
    np.testing.assert_array_equal(T(a).masked_fill(T(c), -1.0).numpy(), np.where(c, -1.0, a))


@pytest.mark.parametrize(
    "sa,sb",
    [
        ((8, 16, 8, 8), (1, 16, 1, 1)),
        ((4, 3, 5), (5,)),
        ((64, 512), (1, 512)),
        ((2, 3, 16, 16), (2, 3, 1, 1)),
        ((64, 1), (64, 128)),
        ((3, 1, 40), (3, 7, 40)),
    ],
)
def test_binary_ops_broadcast_along_runs_match_numpy(sa, sb):
    # Per-channel weights and bias rows take the host's run loops; both operand orders.
    a, b = arr(*sa), arr(*sb, offset=3.0)
    for x, y in ((a, b), (b, a)):
        tx, ty = T(x), T(y)
        np.testing.assert_allclose((tx + ty).numpy(), x + y, rtol=1e-6)
        np.testing.assert_allclose((tx - ty).numpy(), x - y, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose((tx * ty).numpy(), x * y, rtol=1e-6)
        np.testing.assert_allclose((tx / ty).numpy(), x / y, rtol=1e-6)
        np.testing.assert_allclose(lucid.maximum(tx, ty).numpy(), np.maximum(x, y))


# ---- unary math ops ---------------------------------------------------------------------------

_erfc = np.vectorize(math.erfc)

REFERENCE = {
    "exp": (np.exp, lambda t: t.exp()),
    "log": (np.log, lambda t: t.log()),
    "log1p": (np.log1p, lambda t: t.log1p()),
    "sqrt": (np.sqrt, lambda t: t.sqrt()),
    "rsqrt": (lambda x: 1 / np.sqrt(x), lambda t: t.rsqrt()),
    "abs": (np.abs, abs),
    "tanh": (np.tanh, lambda t: t.tanh()),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), lambda t: t.sigmoid()),
    "silu": (lambda x: x / (1 + np.exp(-x)), F.silu),
    # Written without 1 + erf / 1 + tanh, which cancel to 0 in the negative tail.
    "gelu": (lambda x: 0.5 * x * _erfc(-x / np.sqrt(2)), F.gelu),
    "gelu_tanh": (
        lambda x: x / (1 + np.exp(-2 * np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))),
        lambda t: F.gelu(t, approximate="tanh"),
    ),
    "softplus": (lambda x: np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20)))), F.softplus),
    "sin": (np.sin, lambda t: t.sin()),
    "cos": (np.cos, lucid.cos),
    "expm1": (np.expm1, lambda t: t.expm1()),
    "tan": (np.tan, lambda t: t.tan()),
    "asin": (np.arcsin, lucid.arcsin),
    "acos": (np.arccos, lambda t: t.acos()),
    "atan": (np.arctan, lucid.arctan),
    "round": (np.round, lambda t: t.round()),  # numpy's round is also halves to even
    "floor": (np.floor, lambda t: t.floor()),
    "ceil": (np.ceil, lucid.ceil),
    "trunc": (np.trunc, lambda t: t.trunc()),
    "sign": (np.sign, lambda t: t.sign()),
    "erf": (np.vectorize(math.erf), lucid.erf),
    "erfc": (_erfc, lambda t: t.erfc()),
    "lgamma": (np.vectorize(math.lgamma), lambda t: t.lgamma()),
    "log2": (np.log2, lucid.log2),
    "log10": (np.log10, lambda t: t.log10()),
    "exp2": (np.exp2, lambda t: t.exp2()),
    "sinh": (np.sinh, lambda t: t.sinh()),
    "cosh": (np.cosh, lucid.cosh),
    "asinh": (np.arcsinh, lambda t: t.asinh()),
    "acosh": (np.arccosh, lambda t: t.acosh()),
    "atanh": (np.arctanh, lucid.atanh),
    "sinc": (np.sinc, lambda t: t.sinc()),
    "i0": (np.i0, lambda t: t.i0()),
}
POSITIVE = {"log", "log1p", "sqrt", "rsqrt", "log2", "log10"}
# Unary ops whose references are written in tests/test_elementwise_math.py (numpy has none), and
# lucid.special's (tests/test_special.py).
OWN_REFERENCE = {"erfinv", "digamma"}


def inputs(name, n=257):
    x = np.random.default_rng(3).standard_normal(n) * 3
    if name in POSITIVE:
        x = np.abs(x) + 0.05
    if name == "softplus":
        x = np.concatenate([x, [25.0, -30.0]])
    if name in ("asin", "acos", "atanh"):
        x = np.tanh(x) * 0.95
    if name == "acosh":
        x = np.abs(x) + 1.05
    if name == "lgamma":
        x = np.abs(x) + 0.05  # (the poles and sign changes at the negative integers: test_elementwise_math.py)
    if name == "tan":
        x = np.tanh(x / 3) * 1.3  # away from the poles
    if name == "round":
        x = np.concatenate([x, [0.5, 1.5, 2.5, -0.5, -2.5, 1025.0]])
    return x.astype(np.float32)


def test_every_unary_op_of_the_engine_is_a_function_a_method_and_an_in_place_method_checked_here():
    codes = [name for name in lucid._C.codes("lucid_unary_op") if not name.startswith("special_")]
    # (neg and relu: test_unary_minus_and_relu)
    assert set(codes) == set(REFERENCE) | {"neg", "relu"} | OWN_REFERENCE
    for name in codes:
        doc = lucid._C._abi.DOCS[f"LUCID_{name.upper()}"]
        assert getattr(lucid, name).__doc__.startswith(doc) and getattr(lucid.Tensor, name) is getattr(lucid, name)
        x = lucid.tensor([0.5, 2.0])
        want = getattr(lucid, name)(x).numpy()
        assert getattr(x, f"{name}_")() is x
        np.testing.assert_array_equal(x.numpy(), want)


@pytest.mark.parametrize("device", ["cpu", "metal"])
@pytest.mark.parametrize("name", REFERENCE)
def test_values_match_numpy(device, name):
    ref, op = REFERENCE[name]
    x = inputs(name)
    got = op(lucid.tensor(x, device=device))
    assert got.dtype == lucid.float32 and got.device == device
    np.testing.assert_allclose(got.numpy(), ref(x.astype(np.float64)), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("dtype,np_dtype", [(lucid.float16, np.float16), (lucid.bfloat16, ml_dtypes.bfloat16)])
@pytest.mark.parametrize("name", REFERENCE)
def test_low_precision_computes_in_float32_and_rounds_once(dtype, np_dtype, name):
    ref, op = REFERENCE[name]
    x = inputs(name).astype(np_dtype)
    got = op(lucid.tensor(x))
    assert got.dtype == dtype
    want = ref(x.astype(np.float64)).astype(np.float32).astype(np_dtype)
    diff = np.abs(got.numpy().astype(np.float64) - want.astype(np.float64))
    spacing = np.abs(want.astype(np.float64)) * (2.0**-10 if np_dtype is np.float16 else 2.0**-7) + 1e-6
    assert (diff <= spacing).all(), name  # within one unit of the correctly rounded value


def test_integers_promote_except_for_abs():
    i = lucid.tensor([-2, 0, 3])
    assert i.exp().dtype == lucid.float32 and i.sigmoid().dtype == lucid.float32
    np.testing.assert_allclose(i.exp().numpy(), np.exp([-2.0, 0.0, 3.0]), rtol=1e-6)
    assert abs(i).dtype == lucid.int64
    np.testing.assert_array_equal(abs(i).numpy(), [2, 0, 3])
    np.testing.assert_array_equal(lucid.tensor([True, False]).exp().numpy(), np.exp([1.0, 0.0]).astype(np.float32))
    with pytest.raises(TypeError, match="bool"):
        abs(lucid.tensor([True]))


def test_special_values():
    x = lucid.tensor([0.0, -1.0, np.inf, np.nan])
    r = x.log().numpy()
    assert r[0] == -np.inf and np.isnan(r[1]) and r[2] == np.inf and np.isnan(r[3])
    assert np.isnan(x.sqrt().numpy()[1]) and x.rsqrt().numpy()[0] == np.inf
    assert x.exp().numpy()[2] == np.inf and np.isnan(x.tanh().numpy()[3])


def test_sigmoid_and_silu_across_the_range_and_at_special_values():
    x = np.array(
        [-np.inf, -120, -103.5, -88, -20, -1, -1e-30, -0.0, 0.0, 1e-30, 1, 20, 88, 120, np.inf, np.nan], np.float32
    )
    wide = np.concatenate([x, np.linspace(-30, 30, 4001, dtype=np.float32)])
    x64 = wide.astype(np.float64)
    with np.errstate(over="ignore"):
        sig = 1 / (1 + np.exp(-x64))
    t = lucid.tensor(wide, requires_grad=True)
    with np.errstate(over="ignore", invalid="ignore"):
        silu = x64 / (1 + np.exp(-x64))  # PyTorch's form: silu(-inf) is NaN there too
    for got, want in ((t.sigmoid(), sig), (F.silu(t), silu)):
        got = got.detach().numpy()
        assert np.array_equal(np.isnan(got), np.isnan(want))
        ok = ~np.isnan(want)
        # A few ulp; below float32's normal range (x < -87) only absolutely, as there a
        # subnormal sigmoid has few significant bits left.
        np.testing.assert_allclose(got[ok], want[ok], rtol=4e-7, atol=2e-43)
    F.silu(t).sum().backward()
    finite = np.isfinite(x64)
    with np.errstate(invalid="ignore"):  # (inf · 0 at the infinities, which are left out)
        dsilu = sig * (1 + x64 * (1 - sig))
    np.testing.assert_allclose(t.grad.numpy()[finite], dsilu[finite], rtol=2e-6, atol=1e-7)  # O(1) values
    # The strided kernel computes what the contiguous fast path does, bit for bit.
    grid = lucid.tensor(np.linspace(-12, 12, 64 * 33, dtype=np.float32).reshape(64, 33))
    for op in (lambda v: v.sigmoid(), F.silu):
        np.testing.assert_array_equal(op(grid.T).numpy(), op(grid).numpy().T)


def test_float32_policy_under_autocast():
    h = lucid.randn(8, device="metal").half()
    for name in ("exp", "expm1", "log1p", "softplus"):
        assert lucid.amp.policy(name) is lucid.amp.CastPolicy.FLOAT32
    assert lucid.amp.policy("tanh") is lucid.amp.CastPolicy.NONE
    with lucid.amp.autocast():
        assert h.exp().dtype == lucid.float32
        assert F.softplus(h).dtype == lucid.float32
        assert h.tanh().dtype == lucid.float16
        assert F.gelu(h).dtype == lucid.float16


def test_module_functions_and_layers():
    x = lucid.tensor(inputs("tanh", 16))
    for name in ("exp", "tanh", "sigmoid", "abs", "relu"):
        np.testing.assert_array_equal(getattr(lucid, name)(x).numpy(), getattr(x, name)().numpy())
    np.testing.assert_array_equal(nn.GELU()(x).numpy(), F.gelu(x).numpy())
    np.testing.assert_array_equal(nn.GELU("tanh")(x).numpy(), F.gelu(x, approximate="tanh").numpy())
    np.testing.assert_array_equal(nn.SiLU()(x).numpy(), F.silu(x).numpy())
    np.testing.assert_array_equal(nn.Tanh()(x).numpy(), x.tanh().numpy())
    np.testing.assert_array_equal(nn.Sigmoid()(x).numpy(), x.sigmoid().numpy())
    with pytest.raises(ValueError):
        F.gelu(x, approximate="fast")
    with pytest.raises(TypeError):
        lucid.exp(np.ones(2))


@pytest.mark.parametrize("name", REFERENCE)
def test_gradients_match_finite_differences(name):
    _, op = REFERENCE[name]
    x = inputs(name, 24).astype(np.float64)
    x = x[np.abs(x) > 0.05]  # away from abs's kink
    if name == "round":
        x = x[np.abs(x - np.floor(x) - 0.5) > 0.01]  # away from round's jumps
    if name in ("floor", "ceil", "trunc"):
        x = x[np.abs(x - np.round(x)) > 0.01]  # away from the jumps
    t = lucid.tensor(x.astype(np.float32), requires_grad=True)
    w = np.random.default_rng(9).standard_normal(t.shape).astype(np.float32)
    (op(t) * lucid.tensor(w)).sum().backward()
    eps = 1e-3
    num = (
        np.array(
            [
                (
                    (op(lucid.tensor(np.float32(v + eps))).item() - op(lucid.tensor(np.float32(v - eps))).item())
                    / (2 * eps)
                )
                for v in x
            ]
        )
        * w
    )
    np.testing.assert_allclose(t.grad.numpy(), num, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("dtype,np_dtype", [(lucid.float32, np.float32), (lucid.bfloat16, ml_dtypes.bfloat16)])
@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_large_tensors_take_the_vectorised_kernels_at_the_same_accuracy(dtype, np_dtype, name):
    # 100k elements: big enough for the vectorised library kernels where they apply.
    ref, op = REFERENCE[name]
    x = np.tile(inputs(name), 400).astype(np_dtype)
    got = op(lucid.tensor(x))
    assert got.dtype == dtype
    want = ref(x.astype(np.float64))
    if dtype == lucid.float32:
        np.testing.assert_allclose(got.numpy(), want, rtol=2e-6, atol=2e-6)
    else:  # one rounding to bfloat16, at most one step off the correctly rounded value
        rounded = want.astype(np.float32).astype(np_dtype).astype(np.float64)
        step = np.abs(rounded) * 2.0**-7 + 1e-30
        assert (np.abs(got.numpy().astype(np.float64) - rounded) <= step).all()


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_nan_and_infinities_give_the_same_result_in_large_and_small_tensors(name):
    # Large tensors may take a vectorised library kernel: special values must not notice.
    _, op = REFERENCE[name]
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0], np.float32)
    big = np.zeros(40000, np.float32)
    big[:6] = specials
    with np.errstate(all="ignore"):
        small = op(lucid.tensor(specials)).numpy()
        large = op(lucid.tensor(big)).numpy()[:6]
    np.testing.assert_array_equal(large, small)
    assert np.isnan(large[0])  # NaN propagates


@pytest.mark.parametrize("name", ["gelu", "gelu_tanh", "silu", "tanh", "sigmoid", "exp"])
def test_gradients_at_special_values_agree_in_large_and_small_tensors(name):
    _, op = REFERENCE[name]
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, 30.0, -30.0], np.float32)
    big = np.zeros(40000, np.float32)
    big[:8] = specials
    grads = []
    for a in (specials, big):
        t = lucid.tensor(a, requires_grad=True)
        with np.errstate(all="ignore"):
            op(t).sum().backward()
        grads.append(t.grad.numpy()[:8])
    np.testing.assert_array_equal(np.isnan(grads[1]), np.isnan(grads[0]))
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-6, atol=1e-30)


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_a_slice_gives_the_bits_its_contiguous_copy_gives_forward_and_backward(name):
    # Rows of a slice are contiguous runs of a strided tensor: the host takes its vectorised
    # loops over them, which must agree with the contiguous path bit for bit.
    _, op = REFERENCE[name]
    a = inputs(name, 6 * 40)[: 6 * 40].reshape(6, 40)
    base = lucid.tensor(a, requires_grad=True)
    sliced = base[:, 3:35]
    copy = lucid.tensor(a[:, 3:35].copy(), requires_grad=True)
    assert not sliced.is_contiguous()
    np.testing.assert_array_equal(op(sliced).detach().numpy(), op(copy).detach().numpy())
    w = lucid.tensor(np.random.default_rng(4).standard_normal((6, 32)).astype(np.float32))
    (op(sliced) * w).sum().backward()
    (op(copy) * w).sum().backward()
    np.testing.assert_array_equal(base.grad.numpy()[:, 3:35], copy.grad.numpy())
