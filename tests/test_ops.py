"""Tensor ops against numpy: matmul, linear, reductions (sum/mean, max/min/argmax/amax,
var/std, logsumexp), shape ops, and the error paths of mixed devices and unsupported operands.
The elementwise ops are in test_elementwise.py."""

import operator

import ml_dtypes
import numpy as np
import pytest

import lucid
import lucid.nn.functional as F
from _helpers import (
    DEVICES,
    F32,
    LUCID_OF,
    NP_OF,
    T,
    arrays_from,
    assert_bits_equal,
    randf,
    scalar_tensor,
    shape_in_message,
    ulps,
)

pytestmark = pytest.mark.filterwarnings("ignore::lucid.metal.MetalFallbackWarning")

arr = arrays_from(np.random.default_rng(11))


def rng(seed=0):
    return np.random.default_rng(seed)


# ---- device mixing ----------------------------------------------------------------------------


def test_mixing_devices_raises_naming_both():
    c, m = lucid.ones(2, 2), lucid.ones(2, 2, device="metal")
    for f in (
        lambda: c + m,
        lambda: m * c,
        lambda: c - m,
        lambda: c / m,
        lambda: c @ m,
        lambda: m @ c,
        lambda: F.linear(c, m),
        lambda: F.linear(c, c, lucid.ones(2, device="metal")),
    ):
        with pytest.raises(RuntimeError) as e:
            f()
        assert "cpu" in str(e.value) and "metal" in str(e.value), str(e.value)


# ---- matmul -----------------------------------------------------------------------------------

MATMUL_SHAPES = [
    ((5,), (5,)),
    ((4,), (4, 3)),
    ((3, 4), (4,)),
    ((3, 4), (4, 5)),
    ((2, 3, 4), (2, 4, 5)),
    ((2, 3, 4), (4, 5)),
    ((3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 2)),
    ((1, 3, 4), (6, 4, 2)),
    ((4,), (2, 4, 5)),
    ((2, 3, 4), (4,)),
    ((2, 2, 1, 3), (1, 2, 3, 6)),
    ((1, 1), (1, 1)),
    ((0, 3), (3, 4)),
    ((2, 0), (0, 3)),
    ((3, 0), (0,)),
    ((0,), (0,)),
    ((2, 0, 3), (3, 4)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul_float32(device, sa, sb):
    a, b = randf(sa, 1), randf(sb, 2)
    got = lucid.tensor(a, device=device) @ lucid.tensor(b, device=device)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert got.shape == want.shape
    assert got.dtype is lucid.float32 and got.device == device
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        lucid.matmul(lucid.tensor(a, device=device), lucid.tensor(b, device=device)).numpy(), want, rtol=1e-5, atol=1e-5
    )


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
    np.testing.assert_allclose(
        ta.grad.numpy(), (g.astype(np.float64) @ b.T.astype(np.float64)).T, rtol=1e-5, atol=1e-5 * np.sqrt(n)
    )
    np.testing.assert_allclose(
        tb.grad.numpy(), (a.T.astype(np.float64) @ g.astype(np.float64)).T, rtol=1e-5, atol=1e-5 * np.sqrt(m)
    )
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


@pytest.mark.parametrize(
    "sa,sb",
    [
        ((2, 3), (4, 5)),
        ((3,), (4,)),
        ((2, 3), (2,)),
        ((5,), (4, 3)),
        ((2, 3, 4), (5, 4)),
        ((2, 3, 4), (3, 4, 5)),
        ((2, 1, 3, 4), (3, 4, 4, 5)),
    ],
)
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


def test_matmul_operator_and_its_reflection_take_tensors_only():
    a, b = randf((3, 4), 5), randf((4, 2), 6)
    la, lb = lucid.tensor(a), lucid.tensor(b)
    np.testing.assert_allclose(lb.__rmatmul__(la).numpy(), a @ b, rtol=1e-6, atol=1e-6)
    assert la.__matmul__(2) is NotImplemented and la.__rmatmul__(b) is NotImplemented
    with pytest.raises(TypeError):
        la @ 2
    with pytest.raises(TypeError):
        2 @ la


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


@pytest.mark.parametrize(
    "x,w,b",
    [
        ((3, 4), (5, 3), None),
        ((3, 4), (5,), None),
        ((3, 4), (5, 4, 1), None),
        ((3, 4), (5, 4), (4,)),
        ((3, 4), (5, 4), (1, 5)),
        ((), (5, 4), None),
    ],
)
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


@pytest.mark.parametrize(
    "shape,dim",
    [
        ((10007,), None),
        ((3, 9000), 1),
        ((130, 1, 37), 0),
        ((2, 150, 1, 70), (1, 2)),
        ((5, 1, 4099), (1, 2)),
        ((4, 3, 5), (0, 2)),
    ],
)
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
    np.testing.assert_allclose(
        t.mean((0, 2), keepdim=True).numpy(), p.astype(np.float64).mean((0, 2), keepdims=True), rtol=1e-6, atol=1e-6
    )


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
    a = rng(8).integers(0 if dt == "bool" else -(2**31), 2 if dt == "bool" else 2**31 - 1, (50, 7)).astype(NP_OF[dt])
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


def test_max_min_with_and_without_dim():
    a = arr(3, 5)
    t = T(a)
    assert t.max().item() == a.max() and t.min().item() == a.min()
    v, i = t.max(1)
    np.testing.assert_array_equal(v.numpy(), a.max(1))
    np.testing.assert_array_equal(i.numpy(), a.argmax(1))
    v, i = t.min(0, keepdim=True)
    np.testing.assert_array_equal(v.numpy(), a.min(0, keepdims=True))
    np.testing.assert_array_equal(i.numpy(), a.argmin(0)[None])
    assert t.argmax().item() == a.argmax()
    np.testing.assert_array_equal(t.argmin(-1).numpy(), a.argmin(-1))
    np.testing.assert_array_equal(t.amax((0, 1)).numpy(), a.max())
    np.testing.assert_array_equal(T(a.astype(np.int64)).amax(0).numpy(), a.astype(np.int64).max(0))
    assert i.dtype == lucid.int64


def test_max_propagates_nan_and_rejects_empty():
    a = np.array([[1.0, np.nan, 3.0]], np.float32)
    assert np.isnan(T(a).max().item())
    assert T(a).argmax().item() == 1
    with pytest.raises(IndexError, match="zero-size"):
        lucid.zeros(0, 3).max(0)
    with pytest.raises(IndexError):
        lucid.zeros(0).max()


def test_max_gradients():
    a = np.array([[1.0, 5.0, 5.0], [2.0, 0.0, 1.0]], np.float32)
    x = T(a, requires_grad=True)
    x.max().backward()  # the tie shares the gradient
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 0.5, 0.5], [0, 0, 0]])
    x.grad = None
    x.max(1).values.sum().backward()  # the first index takes it
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 1, 0], [1, 0, 0]])


@pytest.mark.parametrize("dim,correction,keepdim", [(None, 1, False), (1, 0, False), ((0, 2), 1, True), (-1, 2, False)])
def test_var_std(dim, correction, keepdim):
    a = arr(3, 4, 5)
    axis = dim if dim is None or isinstance(dim, int) else tuple(dim)
    np.testing.assert_allclose(
        T(a).var(dim, keepdim=keepdim, correction=correction).numpy(),
        a.astype(np.float64).var(axis=axis, ddof=correction, keepdims=keepdim),
        rtol=1e-5,
    )
    np.testing.assert_allclose(
        T(a).std(dim, keepdim=keepdim, correction=correction).numpy(),
        a.astype(np.float64).std(axis=axis, ddof=correction, keepdims=keepdim),
        rtol=1e-5,
    )
    np.testing.assert_allclose(T(a).var(dim, unbiased=False).numpy(), a.astype(np.float64).var(axis=axis), rtol=1e-5)


def test_var_under_autocast_is_float32_and_ints_are_refused():
    x = T(arr(8), device="metal").half()
    with lucid.amp.autocast("metal"):
        assert x.var().dtype == lucid.float32
    with pytest.raises(TypeError, match="floating point"):
        T(np.arange(4)).var()


def test_logsumexp_is_stable():
    a = arr(4, 6) * 50
    want = np.log(np.exp(a.astype(np.float64) - a.max(1, keepdims=True)).sum(1)) + a.max(1)
    np.testing.assert_allclose(T(a).logsumexp(1).numpy(), want, rtol=1e-5)
    np.testing.assert_allclose(
        lucid.logsumexp(T(a), (0, 1), keepdim=True).numpy(),
        np.log(np.exp(a.astype(np.float64) - a.max()).sum()) + a.max(),
        rtol=1e-5,
    )
    inf = np.array([[-np.inf, -np.inf], [np.inf, 0.0]], np.float32)
    np.testing.assert_array_equal(T(inf).logsumexp(1).numpy(), [-np.inf, np.inf])


def test_bfloat16_max_and_compare():
    a = arr(4, 4).astype(ml_dtypes.bfloat16)
    t = T(a)
    assert t.max().dtype == lucid.bfloat16
    assert t.max().item() == float(a.astype(np.float32).max())
    np.testing.assert_array_equal((t > 0).numpy(), a.astype(np.float32) > 0)


@pytest.mark.parametrize(
    "shape,dims",
    [
        ((8, 64, 32, 32), (0, 2, 3)),
        ((3, 5, 7, 9), (0, 3)),
        ((3, 5, 7, 9), (0, 2, 3)),
        ((2, 1, 4, 16), (0, 3)),
        ((4, 6, 1, 10), (0, 2, 3)),
        ((5, 2, 3, 8, 9), (0, 1, 3, 4)),
    ],
)
def test_sums_around_a_kept_block_match_numpy(shape, dims):
    a = arr(*shape, offset=0.5)
    np.testing.assert_allclose(T(a).sum(dims).numpy(), a.astype(np.float64).sum(dims), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(
        T(a).mean(dims, keepdim=True).numpy(), a.astype(np.float64).mean(dims, keepdims=True), rtol=1e-5, atol=1e-6
    )


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


_LAYOUT_DTYPES = [
    ("bool", np.bool_),
    ("int32", np.int32),
    ("int64", np.int64),
    ("float16", np.float16),
    ("bfloat16", ml_dtypes.bfloat16),
    ("float32", np.float32),
]


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
        np.testing.assert_array_equal(
            got.numpy().view(np.uint8), np.ascontiguousarray(want).view(np.uint8), err_msg=label
        )


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
    for start, length in ((1, 2**63 - 1), (2**63 - 1, 1), (-1, 2), (0, -1)):
        with pytest.raises(IndexError, match="out of range"):
            t.narrow(1, start, length)
    assert t.narrow(1, -1, 1).shape == (2, 1)
    # An empty tensor's other dimensions are bounded too: their strides must fit in int64.
    for shape in ((0, 2**62), (2**40, 0, 2**40)):
        with pytest.raises(ValueError, match="too many elements"):
            lucid.zeros(0).reshape(*shape)
        with pytest.raises(ValueError, match="too many elements"):
            lucid.zeros(*shape)
    assert lucid.zeros(0).reshape(0, 2**30, 0, 2**5).shape == (0, 2**30, 0, 2**5)
    with pytest.raises(ValueError, match="does not fit in int64"):
        t * 2**70


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
    huge = 2**64
    for f in (
        lambda: t.reshape(huge + 6),
        lambda: t.view(huge + 2, 3),
        lambda: t.sum(huge),
        lambda: t.mean((huge + 1,)),
        lambda: t.transpose(huge, 1),
        lambda: t.permute(huge + 1, huge),
    ):
        with pytest.raises((ValueError, IndexError, OverflowError)):
            f()
