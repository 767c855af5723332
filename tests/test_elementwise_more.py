"""pow, maximum/minimum, clamp, where, comparisons and logical ops against numpy; the new
reductions (max/min/argmax/amax, var/std, logsumexp)."""

import ml_dtypes
import numpy as np
import pytest

import lucid

rng = np.random.default_rng(11)


def arr(*shape, dtype=np.float32, offset=0.0):
    return (rng.standard_normal(shape) + offset).astype(dtype)


def T(a, **kw):
    return lucid.tensor(a, **kw)


@pytest.mark.parametrize("op,npop", [("__eq__", np.equal), ("__ne__", np.not_equal), ("__lt__", np.less),
                                     ("__le__", np.less_equal), ("__gt__", np.greater), ("__ge__", np.greater_equal)])
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
    for got, want in (((ta & tb), a & b), ((ta | tb), a | b), ((ta ^ tb), a ^ b), ((~ta), ~a), ((ta & True), a & True),
                      ((False | ta), a), ((True ^ ta), ~a)):
        assert got.dtype == lucid.bool_ and got.device == device
        np.testing.assert_array_equal(got.numpy(), want)
    info = np.iinfo(np.int64)
    i = np.array([[5, -3, 12, info.max], [info.min, 0, -1, 7]], np.int64)
    j = np.array([3, 6, -10, 1], np.int32)
    ti, tj = T(i, device=device), T(j, device=device)
    cases = [(ti & tj, i & j), (ti | tj, i | j), (ti ^ tj, i ^ j), (~ti, ~i), (~tj, ~j), (ti & 6, i & 6), (9 | ti, 9 | i),
             (ti ^ -1, ~i), (tj & T(b, device=device), j & b)]
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
    np.testing.assert_allclose((T(a) ** T(b)).numpy(), a ** b, rtol=1e-5)
    np.testing.assert_allclose((T(a) ** 2.5).numpy(), a ** 2.5, rtol=1e-5)
    np.testing.assert_allclose((2.0 ** T(b)).numpy(), 2.0 ** b, rtol=1e-5)
    ia = np.arange(-3, 4, dtype=np.int64)
    got = T(ia) ** 3
    assert got.dtype == lucid.int64
    np.testing.assert_array_equal(got.numpy(), ia ** 3)
    with pytest.raises(RuntimeError, match="negative integer powers"):
        T(ia) ** -1


def test_pow_is_float32_under_autocast():
    x = T(arr(4), device="metal").half()
    with lucid.amp.autocast("metal"):
        assert (x ** 2).dtype == lucid.float32


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


# ---- reductions -------------------------------------------------------------------------

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
    np.testing.assert_allclose(T(a).var(dim, keepdim=keepdim, correction=correction).numpy(),
                               a.astype(np.float64).var(axis=axis, ddof=correction, keepdims=keepdim), rtol=1e-5)
    np.testing.assert_allclose(T(a).std(dim, keepdim=keepdim, correction=correction).numpy(),
                               a.astype(np.float64).std(axis=axis, ddof=correction, keepdims=keepdim), rtol=1e-5)
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
    np.testing.assert_allclose(lucid.logsumexp(T(a), (0, 1), keepdim=True).numpy(),
                               np.log(np.exp(a.astype(np.float64) - a.max()).sum()) + a.max(), rtol=1e-5)
    inf = np.array([[-np.inf, -np.inf], [np.inf, 0.0]], np.float32)
    np.testing.assert_array_equal(T(inf).logsumexp(1).numpy(), [-np.inf, np.inf])


def test_bfloat16_max_and_compare():
    a = arr(4, 4).astype(ml_dtypes.bfloat16)
    t = T(a)
    assert t.max().dtype == lucid.bfloat16
    assert t.max().item() == float(a.astype(np.float32).max())
    np.testing.assert_array_equal((t > 0).numpy(), a.astype(np.float32) > 0)


@pytest.mark.parametrize("sa,sb", [((8, 16, 8, 8), (1, 16, 1, 1)), ((4, 3, 5), (5,)), ((64, 512), (1, 512)),
                                   ((2, 3, 16, 16), (2, 3, 1, 1)), ((64, 1), (64, 128)), ((3, 1, 40), (3, 7, 40))])
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


@pytest.mark.parametrize("shape,dims", [((8, 64, 32, 32), (0, 2, 3)), ((3, 5, 7, 9), (0, 3)), ((3, 5, 7, 9), (0, 2, 3)),
                                        ((2, 1, 4, 16), (0, 3)), ((4, 6, 1, 10), (0, 2, 3)),
                                        ((5, 2, 3, 8, 9), (0, 1, 3, 4))])
def test_sums_around_a_kept_block_match_numpy(shape, dims):
    a = arr(*shape, offset=0.5)
    np.testing.assert_allclose(T(a).sum(dims).numpy(), a.astype(np.float64).sum(dims), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(T(a).mean(dims, keepdim=True).numpy(), a.astype(np.float64).mean(dims, keepdims=True),
                               rtol=1e-5, atol=1e-6)
