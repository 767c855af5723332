"""lucid.masked against numpy (masked elements replaced by each op's identity), gradients
against central differences (masked elements get none), and errors."""

import numpy as np
import pytest

import lucid
from lucid import masked
from _helpers import numeric_grads

F64 = lucid.float64


def data(seed=0):
    g = np.random.default_rng(seed)
    x = g.standard_normal((3, 4, 5))
    m = g.random((3, 4, 5)) > 0.4
    m[1, 2, :] = False  # one slice fully masked out along the last dim
    return x, m


def close(t, want, rtol=1e-6, atol=1e-7):
    np.testing.assert_allclose(np.asarray(t.detach().numpy(), dtype=np.float64), want, rtol=rtol, atol=atol)


def T(a):
    return lucid.tensor(a, dtype=F64) if np.asarray(a).dtype.kind == "f" else lucid.tensor(a)


def check_grads(fn, x, mask):
    leaf = T(x).requires_grad_()
    out = fn(leaf)
    weights = np.random.default_rng(9).standard_normal(tuple(out.shape))
    finite = np.isfinite(out.detach().numpy())
    weights = np.where(finite, weights, 0.0)  # where a slice is fully masked the result is not differentiable
    (lucid.where(T(finite), out, 0.0) * T(weights)).sum().backward()
    (want,) = numeric_grads(lambda t: lucid.where(T(finite), fn(t), 0.0), [x.copy()], weights, eps=1e-6, dtype=F64)
    np.testing.assert_allclose(leaf.grad.numpy(), want, rtol=1e-5, atol=1e-6)
    assert (leaf.grad.numpy()[~np.broadcast_to(mask, x.shape)] == 0).all()


@pytest.mark.parametrize("dim", [None, 0, -1, (0, 2)])
def test_sum_prod_amax_amin_mean(dim):
    x, m = data()
    axis = dim if not isinstance(dim, tuple) else dim
    t, tm = T(x), T(m)
    close(masked.sum(t, dim, mask=tm), np.where(m, x, 0).sum(axis))
    close(masked.prod(t, dim, mask=tm, keepdim=True), np.where(m, x, 1).prod(axis, keepdims=True))
    close(masked.amax(t, dim, mask=tm), np.where(m, x, -np.inf).max(axis))
    close(masked.amin(t, dim, mask=tm), np.where(m, x, np.inf).min(axis))
    with np.errstate(all="ignore"):
        want = np.where(m, x, 0).sum(axis) / m.sum(axis)
    close(masked.mean(t, dim, mask=tm), want)
    close(masked.sum(t, dim), x.sum(axis))
    for fn in (masked.sum, masked.prod, masked.amax, masked.mean):
        check_grads(lambda a: fn(a, dim, mask=tm), x, m)


def test_mask_broadcasts_and_dtypes():
    x, _ = data()
    row = np.array([True, False, True, True, False])
    close(masked.sum(T(x), -1, mask=T(row)), (x * row).sum(-1))
    r = masked.sum(lucid.tensor([[1, 2], [3, 4]], dtype=lucid.int32), mask=lucid.tensor([True, False]))
    assert r.dtype is lucid.int64 and r.item() == 4
    assert masked.amax(T(x), mask=T(row)).dtype is F64
    assert masked.sum(T(x), 1, dtype=lucid.float32).dtype is lucid.float32


def test_argmax_argmin_are_in_the_input_dtype():
    x, m = data(1)
    r = masked.argmax(T(x), -1, mask=T(m))
    assert r.dtype is F64
    np.testing.assert_array_equal(r.numpy(), np.where(m, x, -np.inf).argmax(-1))
    np.testing.assert_array_equal(masked.argmin(T(x), 0, mask=T(m)).numpy(), np.where(m, x, np.inf).argmin(0))
    assert masked.argmax(T(x), mask=T(m), dtype=lucid.int64).item() == np.where(m, x, -np.inf).argmax()


def test_cumsum_cumprod_median_logsumexp_logaddexp():
    x, m = data(2)
    t, tm = T(x), T(m)
    close(masked.cumsum(t, 1, mask=tm), np.cumsum(np.where(m, x, 0), 1))
    close(masked.cumprod(t, -1, mask=tm), np.cumprod(np.where(m, x, 1), -1))
    with np.errstate(all="ignore"):
        sorted_ = np.sort(np.where(m, x, np.nan), -1)
        k = (m.sum(-1) - 1) // 2
        want = np.where(m.sum(-1) > 0, np.take_along_axis(sorted_, np.maximum(k, 0)[..., None], -1)[..., 0], np.nan)
        close(masked.median(t, -1, mask=tm), want)
        close(masked.logsumexp(t, (1, 2), mask=tm), np.log(np.where(m, np.exp(x), 0).sum((1, 2))))
    y, my = data(3)
    close(
        masked.logaddexp(t, T(y), input_mask=tm, other_mask=T(my)),
        np.logaddexp(np.where(m, x, -np.inf), np.where(my, y, -np.inf)),
    )
    for fn in (
        lambda a: masked.cumprod(a, 1, mask=tm),
        lambda a: masked.median(a, 2, mask=tm),
        lambda a: masked.logsumexp(a, 0, mask=tm),
    ):
        check_grads(fn, x, m)


@pytest.mark.parametrize("ord", [2.0, 1, 3, float("inf"), float("-inf"), 0])
def test_norm_and_normalize(ord):
    x, m = data(4)
    t, tm = T(x), T(m)
    a = np.abs(x)
    fill = np.inf if ord == float("-inf") else 0.0
    v = np.where(m, a, fill)
    with np.errstate(all="ignore"):
        want = {float("inf"): v.max(-1), float("-inf"): v.min(-1), 0: (v != 0).sum(-1)}.get(
            ord, (v**ord).sum(-1) ** (1.0 / ord) if ord else None
        )
    close(masked.norm(t, ord, -1, mask=tm), want)
    got = masked.normalize(t, ord, -1, mask=tm)
    close(got, np.where(m, x, 0) / np.maximum(want, 1e-12)[..., None])
    if ord not in (0, float("-inf")):
        check_grads(lambda z: masked.norm(z, ord, -1, mask=tm), x, m)


@pytest.mark.parametrize("correction", [0, 1, 2.5])
def test_var_std(correction):
    x, m = data(5)
    t, tm = T(x), T(m)
    n = m.sum(1, keepdims=True)
    with np.errstate(all="ignore"):
        mean = np.where(m, x, 0).sum(1, keepdims=True) / n
        var = (np.where(m, (x - mean) ** 2, 0).sum(1)) / np.maximum(n[:, 0] - correction, 0)
    close(masked.var(t, 1, correction=correction, mask=tm), var)
    close(masked.std(t, 1, correction=correction, mask=tm), np.sqrt(var))
    close(masked.var(t, unbiased=False), x.var())
    # A slice masked out entirely has a NaN mean, whose gradient is NaN (as PyTorch's): the gradients
    # are checked with a mask that keeps at least 4 elements of every slice.
    kept = m | (np.arange(5) < 4)
    check_grads(lambda z: masked.var(z, 2, correction=correction, mask=T(kept)), x, kept)
    # (std's gradient is infinite where a slice keeps one element: checked without a mask)
    check_grads(lambda z: masked.std(z, 2, correction=correction), x, np.ones_like(m))
    with pytest.raises(TypeError, match=r"pass either unbiased or correction"):
        masked.var(t, unbiased=True, correction=1)


def test_softmax_log_softmax_softmin():
    x, m = data(6)
    t, tm = T(x), T(m)
    e = np.where(m, np.exp(x - x.max(-1, keepdims=True)), 0)
    with np.errstate(all="ignore"):
        want = e / e.sum(-1, keepdims=True)
    close(masked.softmax(t, -1, mask=tm), want)
    with np.errstate(all="ignore"):
        close(masked.log_softmax(t, -1, mask=tm), np.log(want))
    e = np.where(m, np.exp(-x + x.min(-1, keepdims=True)), 0)
    with np.errstate(all="ignore"):
        close(masked.softmin(t, -1, mask=tm), e / e.sum(-1, keepdims=True))
    check_grads(lambda z: masked.softmax(z, 0, mask=tm), x, m)


def test_masked_errors():
    x, m = data()
    with pytest.raises(IndexError, match=r"masked.sum\(\): mask of shape \(1, 3, 4, 5\) has more dimensions"):
        masked.sum(T(x), mask=lucid.ones(1, 3, 4, 5, dtype=lucid.bool_))
    with pytest.raises(RuntimeError, match=r"does not broadcast to the input's shape"):
        masked.sum(T(x), mask=lucid.ones(3, dtype=lucid.bool_))
    with pytest.raises(IndexError, match=r"masked.amax\(\): dim 3 is out of range"):
        masked.amax(T(x), 3)
    with pytest.raises(RuntimeError, match=r"dim -3 appears more than once"):
        masked.sum(T(x), (0, -3))
    with pytest.raises(ValueError, match=r"masked.mean\(\): expected a floating-point dtype"):
        masked.mean(lucid.tensor([1, 2]))
    with pytest.raises(TypeError, match=r"masked.sum\(\): input must be a lucid.Tensor"):
        masked.sum([1.0])
