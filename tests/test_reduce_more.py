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


@pytest.mark.parametrize(
    "fn,shapes,np_fn",
    [
        (lucid.addmm, [(2, 4), (2, 3), (3, 4)], lambda i, a, b: i + a @ b),
        (lucid.addmv, [(2,), (2, 3), (3,)], lambda i, a, b: i + a @ b),
        (lucid.addr, [(2, 3), (2,), (3,)], lambda i, a, b: i + np.outer(a, b)),
        (lucid.baddbmm, [(2, 3, 4), (2, 3, 5), (2, 5, 4)], lambda i, a, b: i + a @ b),
        (lucid.addbmm, [(3, 4), (2, 3, 5), (2, 5, 4)], lambda i, a, b: i + (a @ b).sum(0)),
    ],
)
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
    v, m = lucid.var_mean(t, unbiased=False)
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
    with pytest.raises(ValueError, match=r"topk\(\): k \(2\)"):
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
    for fn in (
        lambda x: lucid.median(x, 1).values,
        lambda x: lucid.kthvalue(x, 2, 0).values,
        lucid.median,
        lambda x: lucid.mode(x, 1).values,
    ):
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


# ---- scans ------------------------------------------------------------------------------------


def test_cumprod_values_dtypes_and_gradients_through_zeros():
    a = randn(4, 6)
    a[1, 2] = 0.0
    a[2, 1] = a[2, 4] = 0.0
    t = lucid.tensor(a)
    for d in (0, 1, -1):
        close(lucid.cumprod(t, d), np.cumprod(a, d))
    close(t.cumprod(1), np.cumprod(a, 1))
    r = lucid.cumprod(lucid.tensor([1, 2, 3], dtype=lucid.int32), 0)
    assert r.dtype is lucid.int64 and r.tolist() == [1, 2, 6]
    assert lucid.cumprod(lucid.tensor([1.0, 2.0]), 0, dtype=F64).dtype is F64
    assert lucid.cumprod(lucid.tensor(3.0), 0).item() == 3.0
    check_grads(lambda x: lucid.cumprod(x, 1), a)
    with pytest.raises(IndexError):
        lucid.cumprod(t, 2)


def test_cummax_cummin():
    a = np.array([1.0, 1.0, np.nan, 2.0, np.nan, 0.5])
    v, i = lucid.cummax(lucid.tensor(a), 0)
    np.testing.assert_array_equal(i.numpy(), [0, 1, 2, 2, 4, 4])
    np.testing.assert_array_equal(np.isnan(v.numpy()), [False, False, True, True, True, True])
    b = randn(5, 4)
    v, i = lucid.cummax(lucid.tensor(b), 0)
    close(v, np.maximum.accumulate(b, 0))
    v, i = lucid.tensor(b).cummin(1)
    close(v, np.minimum.accumulate(b, 1))
    np.testing.assert_array_equal(np.take_along_axis(b, i.numpy(), 1), np.minimum.accumulate(b, 1))
    check_grads(lambda x: lucid.cummax(x, 0).values, b)


def test_logcumsumexp_is_stable_and_differentiable():
    a = randn(3, 5)
    close(lucid.logcumsumexp(lucid.tensor(a), 1), np.logaddexp.accumulate(a, 1))
    wide = np.array([-200.0, 0.0, 500.0, -1000.0])  # exp of these over- or underflows
    close(lucid.logcumsumexp(lucid.tensor(wide), 0), np.logaddexp.accumulate(wide))
    close(lucid.tensor(a).logcumsumexp(0), np.logaddexp.accumulate(a, 0))
    check_grads(lambda x: lucid.logcumsumexp(x, 1), a)
    with pytest.raises(TypeError, match=r"logcumsumexp\(\): expected a floating-point input"):
        lucid.logcumsumexp(lucid.tensor([1, 2]), 0)


# ---- differences and integrals ----------------------------------------------------------------


def test_diff():
    a = randn(4, 6)
    t = lucid.tensor(a)
    close(lucid.diff(t), np.diff(a))
    close(t.diff(2, 0), np.diff(a, 2, 0))
    p, q = randn(4, 1, seed=2), randn(4, 2, seed=3)
    close(lucid.diff(t, 3, 1, lucid.tensor(p), lucid.tensor(q)), np.diff(a, 3, 1, prepend=p, append=q))
    assert lucid.diff(t, 9).shape == (4, 0)
    np.testing.assert_array_equal(lucid.diff(lucid.tensor([True, False, False])).numpy(), [True, False])
    with pytest.raises(RuntimeError, match=r"diff\(\): expected a tensor with at least one dimension"):
        lucid.diff(lucid.tensor(1.0))
    check_grads(lambda x, y: lucid.diff(x, 2, 1, append=y), a, q)


@pytest.mark.parametrize("edge_order", [1, 2])
def test_gradient_against_numpy(edge_order):
    a = randn(5, 6)
    t = lucid.tensor(a)
    for got, want in zip(lucid.gradient(t, edge_order=edge_order), np.gradient(a, edge_order=edge_order)):
        close(got, want)
    (got,) = lucid.gradient(t, spacing=2.0, dim=1, edge_order=edge_order)
    close(got, np.gradient(a, 2.0, axis=1, edge_order=edge_order))
    xs = np.array([0.0, 0.5, 1.5, 1.7, 3.0])
    got = lucid.gradient(t, spacing=[lucid.tensor(xs)], dim=0, edge_order=edge_order)[0]
    close(got, np.gradient(a, xs, axis=0, edge_order=edge_order))
    got = lucid.gradient(t, spacing=[2.0, 0.5], edge_order=edge_order)
    for g, w in zip(got, np.gradient(a, 2.0, 0.5, edge_order=edge_order)):
        close(g, w)
    check_grads(lambda x: lucid.gradient(x, spacing=[lucid.tensor(xs, dtype=F64)], dim=0, edge_order=edge_order)[0], a)


def test_gradient_errors():
    with pytest.raises(RuntimeError, match=r"gradient\(\): each dimension needs at least edge_order \+ 1 = 3"):
        lucid.gradient(lucid.ones(2, 4), edge_order=2)
    with pytest.raises(ValueError, match=r"edge_order must be 1 or 2"):
        lucid.gradient(lucid.ones(5), edge_order=3)
    with pytest.raises(RuntimeError, match=r"expected 2 spacings"):
        lucid.gradient(lucid.ones(3, 3), spacing=[1.0])


def test_trapezoid_trapz_cumulative_trapezoid():
    y, x = randn(3, 5), np.sort(randn(5, seed=1))
    t = lucid.tensor(y)
    close(lucid.trapezoid(t), np.trapezoid(y))
    close(lucid.trapezoid(t, lucid.tensor(x)), np.trapezoid(y, x))
    close(lucid.trapz(t, dx=0.5, dim=0), np.trapezoid(y, dx=0.5, axis=0))
    x2 = np.sort(randn(3, 5, seed=2), 1)
    close(lucid.trapezoid(t, lucid.tensor(x2)), np.trapezoid(y, x2))
    want = np.cumsum((y[:, 1:] + y[:, :-1]) / 2 * np.diff(x), 1)
    close(lucid.cumulative_trapezoid(t, lucid.tensor(x)), want)
    close(lucid.cumulative_trapezoid(t, dx=2.0, dim=0), np.cumsum((y[1:] + y[:-1]) / 2 * 2.0, 0))
    with pytest.raises(TypeError, match=r"pass x or dx, not both"):
        lucid.trapezoid(t, lucid.tensor(x), dx=1.0)
    with pytest.raises(RuntimeError, match=r"x has 4 points where y has 5"):
        lucid.trapezoid(t, lucid.ones(4))
    check_grads(lambda a, b: lucid.cumulative_trapezoid(a, b), y, x)
    check_grads(lambda a, b: lucid.trapezoid(a, b), y, x2)


# ---- distances and statistics -----------------------------------------------------------------


@pytest.mark.parametrize("p", [0.0, 1.0, 1.5, 2.0, 3.0, float("inf")])
def test_cdist_and_dist(p):
    a, b = randn(2, 4, 3), randn(2, 5, 3, seed=1)
    diff = np.abs(a[:, :, None, :] - b[:, None, :, :])
    want = {0.0: (diff != 0).sum(-1), float("inf"): diff.max(-1)}.get(p, (diff**p).sum(-1) ** (1 / p if p else 1))
    close(lucid.cdist(lucid.tensor(a), lucid.tensor(b), p), want)
    if p not in (0.0,):
        check_grads(lambda x, y: lucid.cdist(x, y, p), a, b)
    c, d = randn(3, 4), randn(4, seed=2)
    want = {0.0: np.count_nonzero(c - d), float("inf"): np.abs(c - d).max()}.get(
        p, (np.abs(c - d) ** p).sum() ** (1 / p if p else 1)
    )
    close(lucid.dist(lucid.tensor(c), lucid.tensor(d), p), want)


def test_cdist_errors():
    with pytest.raises(RuntimeError, match=r"cdist\(\): x1 and x2 must have the same number of columns"):
        lucid.cdist(lucid.ones(2, 3), lucid.ones(2, 4))
    with pytest.raises(RuntimeError, match=r"cdist\(\): x2 must have at least 2 dimensions"):
        lucid.cdist(lucid.ones(2, 3), lucid.ones(3))
    with pytest.raises(RuntimeError, match=r"p must be non-negative"):
        lucid.cdist(lucid.ones(2, 3), lucid.ones(2, 3), -1.0)


def test_cov_and_corrcoef():
    a = randn(3, 6)
    t = lucid.tensor(a)
    close(lucid.cov(t), np.cov(a))
    close(t.cov(correction=0), np.cov(a, ddof=0))
    fw, aw = np.array([1, 2, 1, 3, 1, 2]), rng(4).uniform(0.5, 2.0, 6)
    got = lucid.cov(t, fweights=lucid.tensor(fw), aweights=lucid.tensor(aw))
    close(got, np.cov(a, fweights=fw, aweights=aw))
    close(lucid.cov(t, correction=2, aweights=lucid.tensor(aw)), np.cov(a, ddof=2, aweights=aw))
    close(lucid.cov(lucid.tensor(a[0])), np.cov(a[0]))
    close(lucid.corrcoef(t), np.corrcoef(a))
    close(t.corrcoef(), np.corrcoef(a))
    check_grads(lambda x, w: lucid.cov(x, aweights=w), a, aw)
    check_grads(lucid.corrcoef, a)
    with pytest.raises(ValueError, match=r"cov\(\): expected a 1-D or 2-D input"):
        lucid.cov(lucid.ones(2, 2, 2))
    with pytest.raises(TypeError, match=r"fweights must be integers"):
        lucid.cov(t, fweights=lucid.ones(6))
    with pytest.raises(RuntimeError, match=r"aweights cannot be negative"):
        lucid.cov(t, aweights=-lucid.ones(6))


def test_renorm():
    a = randn(4, 3, 2) * 3
    for p, maxnorm, dim in ((2, 1.0, 0), (1, 2.0, 1), (float("inf"), 0.5, -1)):
        t = lucid.tensor(a)
        moved = np.moveaxis(a, dim, 0).reshape(a.shape[dim], -1)
        norms = np.linalg.norm(moved, ord=p, axis=1)
        factor = np.where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)
        shape = [1] * 3
        shape[dim] = -1
        close(lucid.renorm(t, p, dim, maxnorm), a * factor.reshape(shape))
        x = t.clone()
        assert x.renorm_(p, dim, maxnorm) is x
        close(x, a * factor.reshape(shape))
    check_grads(lambda x: lucid.renorm(x, 2, 1, 1.0), a)
    with pytest.raises(RuntimeError, match=r"renorm\(\): p must be positive"):
        lucid.renorm(lucid.ones(2, 2), 0, 0, 1.0)


# ---- contractions -----------------------------------------------------------------------------


def test_tensordot():
    a, b = randn(2, 3, 4), randn(3, 4, 5, seed=1)
    close(lucid.tensordot(lucid.tensor(a), lucid.tensor(b)), np.tensordot(a, b))
    close(
        lucid.tensordot(lucid.tensor(a), lucid.tensor(b), dims=([1, 2], [0, 1])), np.tensordot(a, b, ([1, 2], [0, 1]))
    )
    close(lucid.tensordot(lucid.tensor(a), lucid.tensor(b), dims=0), np.tensordot(a, b, 0))
    check_grads(lambda x, y: lucid.tensordot(x, y, dims=([2, 1], [1, 0])), a, b)
    with pytest.raises(RuntimeError, match=r"contracted dimensions 2 of a \(size 4\) and 0 of b \(size 3\) differ"):
        lucid.tensordot(lucid.tensor(a), lucid.tensor(b), dims=1)


@pytest.mark.parametrize(
    "equation,shapes",
    [
        ("ij,jk->ik", [(2, 3), (3, 4)]),
        ("ij,jk", [(2, 3), (3, 4)]),
        ("i->", [(3,)]),
        ("ii->i", [(3, 3)]),
        ("ii", [(3, 3)]),
        ("iji->j", [(2, 3, 2)]),
        ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
        ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
        ("i...->...", [(3, 2, 4)]),
        ("i,j->ij", [(3,), (4,)]),
        ("ijk,ik->j", [(2, 3, 4), (2, 4)]),
        ("...ik, ...j -> ij", [(2, 2, 3), (3,)]),
        ("ba", [(2, 3)]),
        ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
        ("bij,bjk->bik", [(1, 2, 3), (4, 3, 5)]),
        ("ij,kl->", [(2, 3), (4, 5)]),
        ("ijk,jl->il", [(2, 3, 4), (3, 5)]),
        ("ab,bc,ca->", [(2, 3), (3, 4), (4, 2)]),
        ("i,i,i->i", [(4,), (4,), (4,)]),
        ("...j,j->...", [(2, 3, 4), (4,)]),
    ],
)
def test_einsum_against_numpy(equation, shapes):
    arrays = [randn(*s, seed=k) for k, s in enumerate(shapes)]
    # numpy does not sum over "..." when the output leaves it out; with its dims named, it does.
    np_equation = "zik,j->ij" if equation.startswith("...ik, ...j") else equation.replace(" ", "")
    want = np.einsum(np_equation, *arrays)
    close(lucid.einsum(equation, *[lucid.tensor(a) for a in arrays]), want)
    close(lucid.einsum(equation, [lucid.tensor(a) for a in arrays]), want)
    check_grads(lambda *xs: lucid.einsum(equation, *xs), *arrays)


def test_einsum_contracts_pairwise_without_a_large_intermediate():
    a, b = randn(8, 200, 300), randn(8, 300, 200, seed=1)
    # As a broadcast product this would hold 8 * 200 * 300 * 200 elements.
    close(lucid.einsum("bij,bjk->bik", lucid.tensor(a), lucid.tensor(b)), a @ b, rtol=1e-9, atol=1e-9)


def test_einsum_errors():
    with pytest.raises(ValueError, match=r"einsum\(\): the equation has 2 operands, 1 were given"):
        lucid.einsum("ij,jk->ik", lucid.ones(2, 2))
    with pytest.raises(ValueError, match=r"term 'ijk' has 3 labels for an operand of 2 dimensions"):
        lucid.einsum("ijk->i", lucid.ones(2, 2))
    with pytest.raises(RuntimeError, match=r"label 'j' has sizes 3 and 4"):
        lucid.einsum("ij,jk->ik", lucid.ones(2, 3), lucid.ones(4, 2))
    with pytest.raises(ValueError, match=r"output label 'z' appears in no operand"):
        lucid.einsum("ij->z", lucid.ones(2, 3))
    with pytest.raises(TypeError, match=r"equation must be a string"):
        lucid.einsum(lucid.ones(2), "i")


# ---- histograms, counts and searches ----------------------------------------------------------


def test_histc():
    a = rng(3).uniform(-2, 2, 50).astype(np.float32)
    t = lucid.tensor(a)
    r = lucid.histc(t, bins=8, min=-1, max=1)
    assert r.dtype is lucid.float32 and r.shape == (8,)
    np.testing.assert_array_equal(r.numpy(), np.histogram(a, 8, (-1, 1))[0])
    np.testing.assert_array_equal(t.histc(5).numpy(), np.histogram(a, 5)[0])  # the data's range
    np.testing.assert_array_equal(lucid.histc(lucid.tensor([2.0, 2.0]), 2).numpy(), [0.0, 2.0])  # range 1..3
    with pytest.raises(RuntimeError, match=r"histc\(\): bins must be positive"):
        lucid.histc(t, 0)
    with pytest.raises(RuntimeError, match=r"histc\(\): expected a floating-point input"):
        lucid.histc(lucid.tensor([1, 2]))


def test_histogram_and_histogramdd_against_numpy():
    a = randn(40).astype(np.float32)
    w = rng(5).uniform(0, 1, 40).astype(np.float32)
    hist, edges = lucid.histogram(lucid.tensor(a), 6, weight=lucid.tensor(w), density=True)
    want_hist, want_edges = np.histogram(a, 6, weights=w, density=True)
    close(hist, want_hist, rtol=1e-5)
    close(edges, want_edges, rtol=1e-6)
    e = np.array([-1.0, 0.0, 0.5, 2.0], dtype=np.float32)
    hist, edges = lucid.histogram(lucid.tensor(a), lucid.tensor(e))
    np.testing.assert_array_equal(hist.numpy(), np.histogram(a, e)[0])
    hist, _ = lucid.histogram(lucid.tensor(a), 4, range=(0.0, 1.0))
    np.testing.assert_array_equal(hist.numpy(), np.histogram(a, 4, (0.0, 1.0))[0])
    _, edges = lucid.histogram(lucid.zeros(0), 2)
    np.testing.assert_array_equal(edges.numpy(), [0.0, 0.5, 1.0])
    pts = randn(30, 2).astype(np.float32)
    hist, edges = lucid.histogramdd(lucid.tensor(pts), [3, 4])
    want_hist, want_edges = np.histogramdd(pts, [3, 4])
    np.testing.assert_array_equal(hist.numpy(), want_hist)
    for got, want in zip(edges, want_edges):
        close(got, want, rtol=1e-6)
    with pytest.raises(ValueError, match=r"histogramdd\(\): expected 2 bin counts"):
        lucid.histogramdd(lucid.tensor(pts), [3])
    with pytest.raises(RuntimeError, match=r"weight must have the input's shape"):
        lucid.histogram(lucid.tensor(a), 3, weight=lucid.ones(3))


def test_bincount():
    v = np.array([0, 3, 1, 3, 3])
    np.testing.assert_array_equal(lucid.bincount(lucid.tensor(v)).numpy(), np.bincount(v))
    r = lucid.tensor(v).bincount(minlength=7)
    assert r.dtype is lucid.int64 and r.tolist() == np.bincount(v, minlength=7).tolist()
    r = lucid.bincount(lucid.tensor(v), lucid.tensor([1, 2, 3, 4, 5]))
    assert r.dtype is lucid.float64 and r.tolist() == [1.0, 3.0, 0.0, 11.0]
    assert lucid.bincount(lucid.tensor(v), lucid.ones(5)).dtype is lucid.float32
    with pytest.raises(RuntimeError, match=r"bincount\(\): input must be non-negative"):
        lucid.bincount(lucid.tensor([1, -1]))
    with pytest.raises(RuntimeError, match=r"bincount\(\): expected a 1-D integer tensor"):
        lucid.bincount(lucid.ones(3))


def test_searchsorted_and_bucketize():
    seq = np.sort(randn(8)).astype(np.float32)
    vals = randn(3, 4, seed=1).astype(np.float32)
    vals[0, 0] = seq[2]  # on an edge: left and right differ
    for right in (False, True):
        side = "right" if right else "left"
        r = lucid.searchsorted(lucid.tensor(seq), lucid.tensor(vals), right=right)
        assert r.dtype is lucid.int64
        np.testing.assert_array_equal(r.numpy(), np.searchsorted(seq, vals, side))
        r = lucid.bucketize(lucid.tensor(vals), lucid.tensor(seq), right=right, out_int32=True)
        assert r.dtype is lucid.int32
        np.testing.assert_array_equal(r.numpy(), np.searchsorted(seq, vals, side))
    rows = np.sort(randn(3, 6, seed=2), 1)
    got = lucid.searchsorted(lucid.tensor(rows), lucid.tensor(vals), side="right")
    np.testing.assert_array_equal(got.numpy(), [np.searchsorted(r, v, "right") for r, v in zip(rows, vals)])
    shuffled = rng(7).permutation(seq)
    got = lucid.searchsorted(lucid.tensor(shuffled), lucid.tensor(vals), sorter=lucid.argsort(lucid.tensor(shuffled)))
    np.testing.assert_array_equal(got.numpy(), np.searchsorted(seq, vals))
    assert lucid.searchsorted(lucid.tensor(seq), 0.0).shape == ()
    with pytest.raises(RuntimeError, match=r"side='left' contradicts right=True"):
        lucid.searchsorted(lucid.tensor(seq), lucid.tensor(vals), right=True, side="left")
    with pytest.raises(RuntimeError, match=r"the leading dimensions"):
        lucid.searchsorted(lucid.tensor(rows), lucid.ones(2, 4))
    with pytest.raises(RuntimeError, match=r"bucketize\(\): boundaries must be 1-D"):
        lucid.bucketize(lucid.tensor(vals), lucid.tensor(rows))


def test_isin_and_unique_consecutive():
    a, b = np.array([1, 5, 2, 7, 5]), np.array([5, 7, 9])
    np.testing.assert_array_equal(lucid.isin(lucid.tensor(a), lucid.tensor(b)).numpy(), np.isin(a, b))
    np.testing.assert_array_equal(lucid.isin(lucid.tensor(a), 5, invert=True).numpy(), a != 5)
    with pytest.raises(TypeError, match=r"isin\(\): elements or test_elements must be a lucid.Tensor"):
        lucid.isin(1, [1])
    x = np.array([1, 1, 2, 2, 3, 1, 1, 2])
    out, inverse, counts = lucid.unique_consecutive(lucid.tensor(x), return_inverse=True, return_counts=True)
    assert out.tolist() == [1, 2, 3, 1, 2] and counts.tolist() == [2, 2, 1, 2, 1]
    assert inverse.tolist() == [0, 0, 1, 1, 2, 3, 3, 4]
    m = np.array([[1, 1], [1, 1], [2, 2], [1, 1]])
    out, counts = lucid.tensor(m).unique_consecutive(return_counts=True, dim=0)
    assert out.tolist() == [[1, 1], [2, 2], [1, 1]] and counts.tolist() == [2, 1, 1]


# ---- random samplers --------------------------------------------------------------------------

N = 200_000


def _moments(t):
    v = t.numpy().astype(np.float64)
    return v.mean(), v.std()


def test_normal_forms_moments_and_gradients():
    lucid.manual_seed(0)
    m, s = _moments(lucid.normal(1.5, 0.5, (N,)))
    assert abs(m - 1.5) < 0.01 and abs(s - 0.5) < 0.01
    mean = lucid.full((N,), -2.0).requires_grad_()
    std = lucid.full((N,), 3.0).requires_grad_()
    r = lucid.normal(mean, std)
    m, s = _moments(r)
    assert abs(m + 2.0) < 0.05 and abs(s - 3.0) < 0.05
    r.sum().backward()
    np.testing.assert_array_equal(mean.grad.numpy(), np.ones(N, np.float32))
    np.testing.assert_allclose(std.grad.numpy(), (r.detach().numpy() + 2.0) / 3.0, rtol=1e-4, atol=1e-4)
    assert lucid.normal(lucid.zeros(1, 3), lucid.ones(4, 1)).shape == (4, 3)
    assert lucid.normal(0.0, lucid.ones(2)).shape == (2,)
    assert lucid.normal(0.0, 1.0, (2,), dtype=lucid.float64).dtype is lucid.float64
    with pytest.raises(RuntimeError, match=r"normal\(\): std must be non-negative"):
        lucid.normal(lucid.zeros(2), -1.0)
    with pytest.raises(TypeError, match=r"normal\(\): with a number mean and std, give a size"):
        lucid.normal(0.0, 1.0)


def test_bernoulli_forms():
    lucid.manual_seed(1)
    p = lucid.full((N,), 0.3).requires_grad_()
    r = lucid.bernoulli(p)
    assert set(np.unique(r.detach().numpy())) <= {0.0, 1.0} and abs(r.detach().numpy().mean() - 0.3) < 0.01
    r.sum().backward()
    np.testing.assert_array_equal(p.grad.numpy(), np.zeros(N, np.float32))
    assert abs(lucid.zeros(N).bernoulli(0.8).numpy().mean() - 0.8) < 0.01
    x = lucid.zeros(N)
    assert x.bernoulli_(0.25) is x and abs(x.numpy().mean() - 0.25) < 0.01
    with pytest.raises(RuntimeError, match=r"probabilities must be in \[0, 1\]"):
        lucid.bernoulli(lucid.tensor([1.5]))


@pytest.mark.parametrize(
    "method,args,mean,var",
    [
        ("exponential_", (2.0,), 0.5, 0.25),
        ("geometric_", (0.25,), 4.0, 12.0),
        ("log_normal_", (0.5, 0.4), np.exp(0.5 + 0.08), (np.exp(0.16) - 1) * np.exp(1.0 + 0.16)),
        ("uniform_", (-1.0, 3.0), 1.0, 16 / 12),
        ("normal_", (2.0, 0.5), 2.0, 0.25),
    ],
)
def test_in_place_distributions_have_their_moments(method, args, mean, var):
    lucid.manual_seed(2)
    x = lucid.zeros(N)
    assert getattr(x, method)(*args) is x
    m, s = _moments(x)
    assert abs(m - mean) < 0.02 * max(1.0, mean) and abs(s * s - var) < 0.03 * max(1.0, var), (m, s * s)


def test_cauchy_quartiles_and_errors():
    lucid.manual_seed(3)
    x = lucid.zeros(N).cauchy_(-2.0, 0.5).numpy()
    q1, q2, q3 = np.quantile(x, [0.25, 0.5, 0.75])
    assert abs(q2 + 2.0) < 0.01 and abs(q1 + 2.5) < 0.02 and abs(q3 + 1.5) < 0.02
    with pytest.raises(RuntimeError, match=r"cauchy_ expects sigma > 0.0"):
        lucid.zeros(2).cauchy_(0.0, 0.0)
    with pytest.raises(RuntimeError, match=r"exponential_ expects lambda > 0.0"):
        lucid.zeros(2).exponential_(-1.0)
    with pytest.raises(RuntimeError, match=r"geometric_ expects p to be in \(0, 1\)"):
        lucid.zeros(2).geometric_(1.5)
    with pytest.raises(RuntimeError, match=r"log_normal_ expects std > 0.0"):
        lucid.zeros(2).log_normal_(0.0, 0.0)
    with pytest.raises(TypeError, match=r"exponential_\(\): expected a floating-point tensor"):
        lucid.zeros(2, dtype=lucid.int64).exponential_()


def test_randint_like_and_reproducibility():
    t = lucid.zeros(N)
    r = lucid.randint_like(t, 2, 10)
    assert r.dtype is lucid.float32 and r.shape == (N,)
    v = r.numpy()
    assert v.min() == 2 and v.max() == 9 and np.all(v == np.round(v))
    assert abs(v.mean() - 5.5) < 0.02
    assert lucid.randint_like(t, 5, dtype=lucid.int64).numpy().max() == 4
    draws = []
    for _ in range(2):
        lucid.manual_seed(42)
        draws.append(
            np.concatenate(
                [
                    lucid.normal(0.0, 1.0, (5,)).numpy(),
                    lucid.zeros(5).exponential_().numpy(),
                    lucid.bernoulli(lucid.full((5,), 0.5)).numpy(),
                    lucid.randint_like(lucid.zeros(5), 100).numpy(),
                ]
            )
        )
    np.testing.assert_array_equal(draws[0], draws[1])
    g = lucid.Generator().manual_seed(7)
    a = lucid.normal(0.0, 1.0, (4,), generator=g).numpy()
    b = lucid.normal(0.0, 1.0, (4,), generator=lucid.Generator().manual_seed(7)).numpy()
    np.testing.assert_array_equal(a, b)


# ---- out= -------------------------------------------------------------------------------------


def test_out_forms():
    a = randn(3, 4)
    t = lucid.tensor(a)
    out = lucid.zeros(3, 4, dtype=F64)
    assert lucid.cumprod(t, 1, out=out) is out
    close(out, np.cumprod(a, 1))
    values, indices = lucid.zeros(3, 4, dtype=F64), lucid.zeros(3, 4, dtype=lucid.int64)
    r = lucid.cummax(t, 1, out=(values, indices))
    assert r[0] is values and r[1] is indices
    close(values, np.maximum.accumulate(a, 1))
    v, i = lucid.zeros(3, dtype=F64), lucid.zeros(3, dtype=lucid.int64)
    lucid.median(t, 1, out=(v, i))
    close(v, np.sort(a, 1)[:, 1])
    out = lucid.zeros(3, dtype=F64)
    lucid.quantile(t, 0.5, 1, out=out)
    close(out, np.quantile(a, 0.5, 1))
    out = lucid.zeros((), dtype=F64)
    lucid.prod(t, out=out)
    close(out, np.prod(a))
    out = lucid.zeros(5)
    lucid.histc(lucid.tensor(a, dtype=lucid.float32), 5, out=out)
    np.testing.assert_array_equal(out.numpy(), np.histogram(a.astype(np.float32), 5)[0])
    out = lucid.zeros(3, 4, dtype=F64)
    assert lucid.renorm(t, 1, 0, 1.0, out=out) is out
    norms = np.abs(a).sum(1, keepdims=True)
    close(out, a * np.where(norms > 1.0, 1.0 / (norms + 1e-7), 1.0))
    out = lucid.zeros(1, 3, 3, dtype=F64)
    assert lucid.bmm(t.reshape(1, 3, 4), t.reshape(1, 3, 4).mT, out=out) is out
    close(out, (a @ a.T)[None])
    with pytest.raises(RuntimeError, match=r"cumprod\(\): functions with out=... arguments don't support automatic"):
        lucid.cumprod(lucid.tensor(a, requires_grad=True), 0, out=lucid.zeros(3, 4, dtype=F64))


def test_softmax_and_log_softmax_take_dtype():
    a = randn(3, 4).astype(np.float32)
    t = lucid.tensor(a)
    e = np.exp(a.astype(np.float64) - a.max(1, keepdims=True))
    r = lucid.softmax(t, 1, dtype=F64)
    assert r.dtype is F64
    close(r, e / e.sum(1, keepdims=True))
    r = t.log_softmax(-1, dtype=F64)
    assert r.dtype is F64
    close(r, np.log(e / e.sum(1, keepdims=True)))
    x = lucid.tensor(a, requires_grad=True)
    lucid.softmax(x, 0, dtype=F64).sum().backward()
    assert x.grad.dtype is lucid.float32


@pytest.mark.parametrize("sa,sb", [((2, 3), (4, 1)), ((2, 3), (4, 1, 2)), ((3,), (2,)), ((), (2, 2))])
def test_kron(sa, sb):
    a, b = randn(*sa), randn(*sb, seed=1)
    close(lucid.kron(lucid.tensor(a), lucid.tensor(b)), np.kron(a, b))
    close(lucid.tensor(a).kron(lucid.tensor(b)), np.kron(a, b))
    check_grads(lucid.kron, a, b)
    with pytest.raises(TypeError, match=r"kron\(\): other must be a lucid.Tensor"):
        lucid.kron(lucid.tensor(a), 2.0)


def test_normal_and_windows_take_the_strided_layout_only():
    assert lucid.normal(0.0, 1.0, (2,), layout=lucid.strided).shape == (2,)
    with pytest.raises(ValueError, match=r"normal\(\): only the strided layout is supported"):
        lucid.normal(0.0, 1.0, (2,), layout=lucid.sparse_coo)
    with pytest.raises(ValueError, match=r"hann\(\): only the strided layout is supported"):
        lucid.signal.windows.hann(3, layout=lucid.sparse_coo)


# ---- 16-bit floats ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["bfloat16", "float16"])
def test_products_and_reductions_in_16_bit_floats(name):
    import ml_dtypes

    np_type = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16}[name]
    dtype = getattr(lucid, name)
    a = (rng(1).uniform(0.5, 1.5, (2, 3, 4))).astype(np_type)
    b = (rng(2).uniform(0.5, 1.5, (2, 4, 3))).astype(np_type)
    ta, tb = lucid.tensor(a, dtype=dtype), lucid.tensor(b, dtype=dtype)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    tol = dict(rtol=2e-2, atol=2e-2)
    for got, want in (
        (lucid.bmm(ta, tb), a32 @ b32),
        (lucid.prod(ta, 2), a32.prod(2)),
        (lucid.cumprod(ta, 1), np.cumprod(a32, 1)),
        (lucid.kron(ta[0], tb[0]), np.kron(a32[0], b32[0])),
        (lucid.einsum("bij,bjk->bik", ta, tb), a32 @ b32),
        (lucid.nansum(ta, 1), a32.sum(1)),
        (lucid.median(ta, 2).values, np.sort(a32, 2)[..., 1]),
    ):
        assert got.dtype is dtype
        np.testing.assert_allclose(got.numpy().astype(np.float32), want, **tol)


def test_sum_to_size():
    a = randn(2, 3, 4)
    t = lucid.tensor(a)
    close(t.sum_to_size(3, 1), a.sum(0).sum(1, keepdims=True))
    close(t.sum_to_size((1, 4)), a.sum(0).sum(0, keepdims=True))
    close(t.sum_to_size([2, 3, 4]), a)
    close(lucid.tensor(2.0).sum_to_size(()), 2.0)
    check_grads(lambda x: x.sum_to_size(1, 3, 1), a)
    with pytest.raises(RuntimeError, match=r"sum_to_size: size \[2, 4\] is not expandable"):
        t.sum_to_size(2, 4)
    with pytest.raises(RuntimeError, match=r"is not expandable"):
        t.sum_to_size(1, 1, 1, 1)


def test_cumsum_of_a_long_dimension_is_a_scan():
    # A product with an n x n triangle would need 40 GB here.
    a = rng(8).standard_normal(100_000)
    t = lucid.tensor(a, requires_grad=True)
    r = lucid.cumsum(t, 0)
    close(r, np.cumsum(a), rtol=1e-9, atol=1e-9)
    r.sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), np.arange(100_000, 0, -1), rtol=1e-12)
    check_grads(lambda x: lucid.cumsum(x, 1), randn(3, 7))
