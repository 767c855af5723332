"""Products (bmm, addmm …, tensordot, einsum), reductions (prod, nansum, aminmax …), scans,
order statistics (median, kthvalue, mode, quantile), histograms and searches, distances and
statistics, and the random samplers: values against numpy, gradients against central
differences, errors by type and message."""

import numpy as np
import pytest

import lucid
from _helpers import numeric_grads

F64 = lucid.float64


def rng(seed=0):
    return np.random.default_rng(seed)


def randn(*shape, seed=0):
    return rng(seed).standard_normal(shape)


def check_grads(fn, *arrays, seed=1, eps=1e-6, atol=1e-6):
    """The gradients lucid's autograd gives `fn` (in float64) against central differences."""
    leaves = [lucid.tensor(a, dtype=F64, requires_grad=True) for a in arrays]
    out = fn(*leaves)
    weights = rng(seed).standard_normal(tuple(out.shape))
    (out * lucid.tensor(weights, dtype=F64)).sum().backward()
    want = numeric_grads(fn, [np.array(a, dtype=np.float64) for a in arrays], weights, eps=eps, dtype=F64)
    for t, w in zip(leaves, want):
        got = np.zeros_like(w) if t.grad is None else t.grad.numpy()
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=atol)


def close(got, want, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(got.numpy(), dtype=np.float64), want, rtol=rtol, atol=atol)


# ---- products ---------------------------------------------------------------------------------

def test_bmm_mv_vdot_inner_values():
    a, b = randn(3, 2, 4), randn(3, 4, 5, seed=1)
    close(lucid.bmm(lucid.tensor(a), lucid.tensor(b)), a @ b)
    m, v = randn(4, 3), randn(3, seed=2)
    close(lucid.mv(lucid.tensor(m), lucid.tensor(v)), m @ v)
    close(lucid.tensor(m).mv(lucid.tensor(v)), m @ v)
    x, y = randn(5), randn(5, seed=3)
    close(lucid.vdot(lucid.tensor(x), lucid.tensor(y)), np.vdot(x, y))
    p, q = randn(2, 3, 4), randn(5, 4, seed=4)
    close(lucid.inner(lucid.tensor(p), lucid.tensor(q)), np.inner(p, q))
    close(lucid.inner(lucid.tensor(2.0), lucid.tensor(q)), 2.0 * q)


@pytest.mark.parametrize("fn,shapes,np_fn", [
    (lucid.addmm, [(2, 4), (2, 3), (3, 4)], lambda i, a, b: i + a @ b),
    (lucid.addmv, [(2,), (2, 3), (3,)], lambda i, a, b: i + a @ b),
    (lucid.addr, [(2, 3), (2,), (3,)], lambda i, a, b: i + np.outer(a, b)),
    (lucid.baddbmm, [(2, 3, 4), (2, 3, 5), (2, 5, 4)], lambda i, a, b: i + a @ b),
    (lucid.addbmm, [(3, 4), (2, 3, 5), (2, 5, 4)], lambda i, a, b: i + (a @ b).sum(0)),
])
def test_scaled_products(fn, shapes, np_fn):
    arrays = [randn(*s, seed=k) for k, s in enumerate(shapes)]
    t = [lucid.tensor(a) for a in arrays]
    close(fn(*t), np_fn(*arrays), atol=1e-5)
    want = 0.5 * arrays[0] + 2.0 * (np_fn(0 * arrays[0], *arrays[1:]))
    close(fn(*t, beta=0.5, alpha=2.0), want, atol=1e-5)
    # beta=0: the input is not read, so NaN in it does not reach the result.
    nan = lucid.full(shapes[0], float("nan"))
    close(fn(nan, *t[1:], beta=0), np_fn(0 * arrays[0], *arrays[1:]), atol=1e-5)
    # A broadcast input, the method, the in-place form and out=.
    close(fn(lucid.tensor(1.5), *t[1:]), np_fn(np.full(shapes[0], 1.5), *arrays[1:]), atol=1e-5)
    close(getattr(t[0], fn.__name__)(*t[1:]), np_fn(*arrays), atol=1e-5)
    x = t[0].clone()
    assert getattr(x, fn.__name__ + "_")(*t[1:], alpha=2.0) is x
    close(x, arrays[0] + 2.0 * np_fn(0 * arrays[0], *arrays[1:]), atol=1e-5)
    out = lucid.zeros(*shapes[0])
    assert fn(*t, out=out) is out
    close(out, np_fn(*arrays), atol=1e-5)
    check_grads(lambda i, a, b: fn(i, a, b, beta=0.7, alpha=-1.3), *arrays)


def test_product_errors():
    with pytest.raises(RuntimeError, match=r"bmm\(\): input must be 3-D"):
        lucid.bmm(lucid.ones(2, 3), lucid.ones(2, 3, 4))
    with pytest.raises(RuntimeError, match=r"bmm\(\): shapes \(2, 2, 3\) and \(2, 4, 4\)"):
        lucid.bmm(lucid.ones(2, 2, 3), lucid.ones(2, 4, 4))
    with pytest.raises(RuntimeError, match=r"mv\(\): vec must be 1-D"):
        lucid.mv(lucid.ones(2, 3), lucid.ones(3, 1))
    with pytest.raises(RuntimeError, match=r"addmm\(\): input of shape \(3, 3\) does not broadcast"):
        lucid.addmm(lucid.ones(3, 3), lucid.ones(2, 2), lucid.ones(2, 2))
    with pytest.raises(RuntimeError, match=r"inner\(\): the last dimensions"):
        lucid.inner(lucid.ones(2, 3), lucid.ones(2))
    with pytest.raises(TypeError, match=r"vdot\(\): input must be a lucid.Tensor"):
        lucid.vdot([1.0], lucid.ones(1))


# ---- reductions -------------------------------------------------------------------------------

def test_prod_values_dtypes_and_zero_gradients():
    a = randn(3, 4, 5)
    a[1, 2, 3] = 0.0
    a[0, 1, :2] = 0.0  # two zeros in one slice
    t = lucid.tensor(a)
    close(lucid.prod(t), np.prod(a))
    for d in (0, 1, 2, -1):
        close(t.prod(d), np.prod(a, axis=d))
        close(lucid.prod(t, d, keepdim=True), np.prod(a, axis=d, keepdims=True))
    assert lucid.prod(lucid.tensor([2, 3, 4], dtype=lucid.int32)).dtype is lucid.int64
    assert lucid.prod(lucid.tensor([2, 3, 4])).item() == 24
    assert lucid.prod(lucid.tensor([True, True])).dtype is lucid.int64
    assert lucid.prod(lucid.tensor([1.5, 2.0]), dtype=F64).dtype is F64
    close(lucid.prod(lucid.zeros(0)), 1.0)
    close(lucid.prod(lucid.zeros(3, 0), 1), np.ones(3))
    for d in (None, 0, 1, 2):
        check_grads(lambda x: lucid.prod(x) if d is None else lucid.prod(x, d), a)


def test_nansum_nanmean():
    a = randn(3, 4)
    a[0, 1] = a[2, 3] = np.nan
    a[1] = np.nan
    t = lucid.tensor(a)
    close(lucid.nansum(t), np.nansum(a))
    close(t.nansum(1), np.nansum(a, 1))
    close(lucid.nansum(t, (0, 1), keepdim=True), np.nansum(a, (0, 1), keepdims=True))
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        want = np.nanmean(a, 1)
    close(lucid.nanmean(t, 1), want)
    close(t.nanmean(0), np.nanmean(a, 0))
    assert lucid.nansum(lucid.tensor([1, 2])).dtype is lucid.int64
    with pytest.raises(TypeError, match=r"nanmean\(\): expected a floating-point input"):
        lucid.nanmean(lucid.tensor([1, 2]))
    g = lucid.tensor(a, requires_grad=True)
    lucid.nansum(g).backward()
    np.testing.assert_array_equal(g.grad.numpy(), np.where(np.isnan(a), 0.0, 1.0).astype(np.float32))
    check_grads(lambda x: lucid.nanmean(x, 0), randn(3, 4))


def test_count_nonzero_and_aminmax():
    a = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])
    t = lucid.tensor(a)
    r = lucid.count_nonzero(t)
    assert r.dtype is lucid.int64 and r.item() == 3
    np.testing.assert_array_equal(lucid.count_nonzero(t, 0).numpy(), np.count_nonzero(a, 0))
    np.testing.assert_array_equal(t.count_nonzero((0, 1)).numpy(), 3)
    b = randn(3, 4, 5)
    lo, hi = lucid.aminmax(lucid.tensor(b))
    close(lo, b.min())
    close(hi, b.max())
    r = lucid.tensor(b).aminmax(dim=1, keepdim=True)
    close(r.min, b.min(1, keepdims=True))
    close(r.max, b.max(1, keepdims=True))
    with pytest.raises(RuntimeError, match=r"aminmax\(\): cannot compute"):
        lucid.aminmax(lucid.zeros(0))


def test_max_min_of_two_tensors():
    a, b = randn(3, 1), randn(4, seed=1)
    close(lucid.max(lucid.tensor(a), lucid.tensor(b)), np.maximum(a, b))
    close(lucid.min(lucid.tensor(a), lucid.tensor(b)), np.minimum(a, b))
    close(lucid.tensor(a).max(lucid.tensor(b)), np.maximum(a, b))
    check_grads(lambda x, y: lucid.max(x, y), a, b)


def test_var_std_positional_unbiased_and_with_mean():
    a = randn(4, 5)
    t = lucid.tensor(a)
    close(lucid.var(t, True), a.var(ddof=1))
    close(lucid.std(t, False), a.std())
    for fn, np_fn in ((lucid.var_mean, np.var), (lucid.std_mean, np.std)):
        v, m = fn(t, 1, keepdim=True)
        close(v, np_fn(a, 1, ddof=1, keepdims=True))
        close(m, a.mean(1, keepdims=True))
        v, m = fn(t, False)
        close(v, np_fn(a))
        v, _ = fn(t, dim=0, correction=2)
        close(v, np_fn(a, 0, ddof=2))
    v, m = t.var_mean(unbiased=False)
    close(v, a.var())
    check_grads(lambda x: lucid.std_mean(x, 0)[0] + lucid.std_mean(x, 0)[1], a)


def test_trace():
    a = randn(3, 5)
    close(lucid.trace(lucid.tensor(a)), np.trace(a))
    close(lucid.tensor(a).trace(), np.trace(a))
    assert lucid.trace(lucid.tensor([[1, 2], [3, 4]], dtype=lucid.int32)).dtype is lucid.int64
    with pytest.raises(RuntimeError, match=r"trace\(\): expected a matrix"):
        lucid.trace(lucid.ones(2, 2, 2))
    check_grads(lucid.trace, a)


def test_norm_zero_carries_a_zero_gradient():
    x = lucid.tensor(np.array([[0.0, 1.0], [2.0, 0.0]]), requires_grad=True)
    r = lucid.norm(x, 0, 1)
    np.testing.assert_array_equal(r.numpy(), [1.0, 1.0])
    r.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((2, 2)))


# ---- ordering ---------------------------------------------------------------------------------

def test_sort_stable_descending_nan_and_0d():
    a = np.array([3.0, np.nan, 1.0, 3.0, -np.inf, np.inf, 1.0])
    t = lucid.tensor(a)
    v, i = lucid.sort(t, stable=True)
    np.testing.assert_array_equal(i.numpy(), np.argsort(np.where(np.isnan(a), np.inf, a), kind="stable"))
    v, i = t.sort(descending=True, stable=True)
    np.testing.assert_array_equal(i.numpy(), [1, 5, 0, 3, 2, 6, 4])
    np.testing.assert_array_equal(lucid.argsort(t, descending=True, stable=True).numpy(), [1, 5, 0, 3, 2, 6, 4])
    v, i = lucid.sort(lucid.tensor(2.0))
    assert v.item() == 2.0 and i.item() == 0 and i.shape == ()
    v, i = lucid.topk(lucid.tensor(2.0), 1)
    assert v.item() == 2.0 and i.shape == ()
    with pytest.raises(RuntimeError, match=r"topk\(\): k \(2\)"):
        lucid.topk(lucid.tensor(2.0), 2)
    b = randn(4, 5)
    close(lucid.msort(lucid.tensor(b)), np.sort(b, 0))
    close(lucid.tensor(b).msort(), np.sort(b, 0))
    check_grads(lucid.msort, b)


def test_kthvalue_median_nanmedian_mode():
    a = randn(5, 7)
    t = lucid.tensor(a)
    v, i = lucid.kthvalue(t, 3, 1)
    close(v, np.sort(a, 1)[:, 2])
    np.testing.assert_array_equal(i.numpy(), np.argsort(a, 1)[:, 2])
    v, i = t.kthvalue(2, 0, keepdim=True)
    assert v.shape == (1, 7)
    with pytest.raises(IndexError, match=r"kthvalue\(\): k \(8\)"):
        lucid.kthvalue(t, 8)
    close(lucid.median(t), np.sort(a.ravel())[(a.size - 1) // 2])
    v, i = lucid.median(t, 1)
    close(v, np.sort(a, 1)[:, 3])
    np.testing.assert_array_equal(a[np.arange(5), i.numpy()], v.numpy())  # where it was
    b = np.array([[1.0, np.nan, 3.0, 2.0], [4.0, 1.0, 2.0, 3.0], [np.nan] * 4])
    v, i = lucid.median(lucid.tensor(b), 1)
    np.testing.assert_array_equal(np.isnan(v.numpy()), [True, False, True])
    assert i.numpy()[0] == 1 and v.numpy()[1] == 2.0
    v, i = lucid.nanmedian(lucid.tensor(b), 1)
    np.testing.assert_array_equal(v.numpy()[:2], [2.0, 2.0])
    assert np.isnan(v.numpy()[2]) and i.numpy()[0] == 3
    assert np.isnan(lucid.median(lucid.tensor(b)).item())
    assert lucid.nanmedian(lucid.tensor(b)).item() == 2.0
    c = np.array([[3.0, 1.0, 3.0, 1.0, 2.0], [5.0, 5.0, 4.0, 4.0, 4.0]])
    v, i = lucid.mode(lucid.tensor(c))
    np.testing.assert_array_equal(v.numpy(), [1.0, 4.0])
    np.testing.assert_array_equal(i.numpy(), [3, 4])  # the last position of the value
    for fn in (lambda x: lucid.median(x, 1).values, lambda x: lucid.kthvalue(x, 2, 0).values, lucid.median,
               lambda x: lucid.mode(x, 1).values):
        check_grads(fn, a)


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile_against_numpy(interpolation):
    a = randn(4, 6)
    q = np.array([0.0, 0.25, 0.5, 0.9, 1.0])
    t = lucid.tensor(a)
    close(lucid.quantile(t, 0.3, interpolation=interpolation), np.quantile(a, 0.3, method=interpolation))
    got = lucid.quantile(t, lucid.tensor(q), 1, keepdim=True, interpolation=interpolation)
    close(got, np.quantile(a, q, axis=1, keepdims=True, method=interpolation))
    b = a.copy()
    b[0, 1] = b[2, :] = np.nan
    got = lucid.nanquantile(lucid.tensor(b), lucid.tensor(q), 1, interpolation=interpolation)
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        want = np.nanquantile(b, q, axis=1, method=interpolation)
    close(got, want)
    assert np.isnan(lucid.quantile(lucid.tensor(b), 0.5, 1).numpy()[[0, 2]]).all()
    check_grads(lambda x: lucid.quantile(x, lucid.tensor(q, dtype=F64), 0, interpolation=interpolation), a)


def test_quantile_gradient_reaches_q_and_errors():
    a = randn(7)
    check_grads(lambda x, q: lucid.quantile(x, q), a, np.array([0.3, 0.65]))
    with pytest.raises(RuntimeError, match=r"quantile\(\): q values must be in \[0, 1\]"):
        lucid.quantile(lucid.ones(3), 1.5)
    with pytest.raises(ValueError, match=r"interpolation must be one of"):
        lucid.quantile(lucid.ones(3), 0.5, interpolation="cubic")
    with pytest.raises(TypeError, match=r"expected a floating-point input"):
        lucid.quantile(lucid.tensor([1, 2]), 0.5)
