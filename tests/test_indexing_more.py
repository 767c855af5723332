"""Indexing ops beyond subscripts: nonzero and its relatives, scatter's reductions, the index_*
and masked_* ops, take, put and unravel_index, against numpy, with gradients against finite
differences and errors by type and message."""

import numpy as np
import pytest

import lucid
from _helpers import BF16, numeric_grads

REDUCE = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}


def _arr(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _distinct(*shape, seed=0):
    """Values at least 0.5 apart (so that a finite difference never reorders them), near 1 in
    size (so that products stay moderate)."""
    n = int(np.prod(shape))
    return (np.random.default_rng(seed).permutation(n) * 0.5 / max(n, 1) * 2 + 0.5).astype(np.float32).reshape(shape)


def check_grads(fn, *arrays, atol=2e-2):
    """Autograd's gradients of sum(w * fn(...)) against central differences, for every input."""
    ts = [lucid.tensor(a, requires_grad=True) for a in arrays]
    out = fn(*ts)
    w = np.random.default_rng(1).standard_normal(out.shape).astype(np.float32)
    (out * lucid.tensor(w)).sum().backward()
    want = numeric_grads(fn, [a.copy() for a in arrays], w, eps=1e-3)
    for t, g in zip(ts, want):
        got = np.zeros_like(g) if t.grad is None else t.grad.numpy()
        np.testing.assert_allclose(got, g, rtol=2e-2, atol=atol)


# ---- nonzero and its relatives --------------------------------------------------------------------


def test_nonzero_of_a_zero_dim_tensor_has_no_coordinates():
    assert lucid.nonzero(lucid.tensor(2.0)).shape == (1, 0)
    assert lucid.nonzero(lucid.tensor(0.0)).shape == (0, 0)
    assert lucid.tensor(0.0).nonzero().dtype == lucid.int64
    (only,) = lucid.nonzero(lucid.tensor(3.0), as_tuple=True)
    np.testing.assert_array_equal(only.numpy(), [0])
    assert lucid.argwhere(lucid.tensor(1)).shape == (1, 0)


@pytest.mark.parametrize("shape", [(5,), (4, 5), (3, 1, 4), (3, 0, 2)])
def test_nonzero_argwhere_and_nonzero_static_as_numpy(shape):
    a = (np.random.default_rng(0).random(shape) > 0.5).astype(np.float32)
    want = np.argwhere(a)
    np.testing.assert_array_equal(lucid.nonzero(lucid.tensor(a)).numpy(), want)
    np.testing.assert_array_equal(lucid.argwhere(lucid.tensor(a)).numpy(), want)
    out = lucid.zeros(0, dtype=lucid.int64)
    lucid.nonzero(lucid.tensor(a), out=out)
    np.testing.assert_array_equal(out.numpy(), want)
    for size in (0, 2, len(want) + 3):
        got = lucid.nonzero_static(lucid.tensor(a), size=size, fill_value=-7)
        padded = np.full((size, len(shape)), -7)
        padded[: min(size, len(want))] = want[:size]
        np.testing.assert_array_equal(got.numpy(), padded)
    with pytest.raises(RuntimeError, match="non-negative"):
        lucid.nonzero_static(lucid.tensor(a), size=-1)


# ---- gather and scatter -------------------------------------------------------------------------------


def test_gather_and_scatter_take_int32_indices():
    a = _arr(4, 3)
    idx = np.array([[0, 3, 1], [2, 2, 0]])
    got = lucid.gather(lucid.tensor(a), 0, lucid.tensor(idx, dtype=lucid.int32))
    np.testing.assert_array_equal(got.numpy(), np.take_along_axis(a, idx, 0))
    src = _arr(2, 3, seed=1)
    unique = np.array([[0, 3, 1], [2, 1, 0]])
    want = a.copy()
    np.put_along_axis(want, unique, src, 0)
    got = lucid.scatter(lucid.tensor(a), 0, lucid.tensor(unique, dtype=lucid.int32), lucid.tensor(src))
    np.testing.assert_array_equal(got.numpy(), want)


def test_scatter_multiply_and_add_reduce():
    a = _arr(3, 4)
    idx = np.array([[0, 1, 2, 0], [0, 2, 2, 1]])
    src = _arr(2, 4, seed=1)
    mul, add = a.astype(np.float64).copy(), a.astype(np.float64).copy()
    for (i, j), k in np.ndenumerate(idx):
        mul[k, j] *= src[i, j]
        add[k, j] += src[i, j]
    x = lucid.tensor(a)
    np.testing.assert_allclose(
        lucid.scatter(x, 0, lucid.tensor(idx), lucid.tensor(src), reduce="multiply").numpy(), mul, rtol=1e-6
    )
    np.testing.assert_allclose(x.scatter(0, lucid.tensor(idx), lucid.tensor(src), reduce="add").numpy(), add, rtol=1e-6)
    y = lucid.tensor(a)
    assert y.scatter_(0, lucid.tensor(idx), 2.0, reduce="multiply") is y
    twice = a.copy()
    for (i, j), k in np.ndenumerate(idx):
        twice[k, j] *= 2
    np.testing.assert_allclose(y.numpy(), twice, rtol=1e-6)


def _scatter_reduce_ref(a, dim, idx, src, reduce, include_self):
    out = a.astype(np.float64).copy()
    groups = {}
    for pos in np.ndindex(idx.shape):
        target = list(pos)
        target[dim] = idx[pos]
        groups.setdefault(tuple(target), []).append(src[pos])
    for target, values in groups.items():
        out[target] = REDUCE[reduce](([a[target]] if include_self else []) + values)
    return out


@pytest.mark.parametrize("reduce", list(REDUCE))
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_reduce_as_numpy(reduce, include_self, dim):
    a, src = _distinct(4, 5), _distinct(4, 3, seed=1)
    idx = np.random.default_rng(2).integers(0, a.shape[dim], size=(3, 3))
    got = lucid.scatter_reduce(
        lucid.tensor(a), dim, lucid.tensor(idx), lucid.tensor(src), reduce, include_self=include_self
    )
    want = _scatter_reduce_ref(a, dim % 2, idx, src[:3, :3], reduce, include_self)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    check_grads(
        lambda x, s: lucid.scatter_reduce(x, dim, lucid.tensor(idx), s, reduce, include_self=include_self), a, src
    )


def test_scatter_reduce_ties_split_the_gradient_and_integers_floor_the_mean():
    x = lucid.tensor([1.0, 5.0], requires_grad=True)
    s = lucid.tensor([3.0, 3.0, 5.0], requires_grad=True)
    out = lucid.scatter_reduce(x, 0, lucid.tensor([0, 0, 1]), s, "amax")
    np.testing.assert_array_equal(out.numpy(), [3.0, 5.0])
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.5])
    np.testing.assert_array_equal(s.grad.numpy(), [0.5, 0.5, 0.5])
    a = lucid.tensor([0, 0, 10])
    ints = lucid.tensor([-3, 2, 5, 6])
    idx = lucid.tensor([0, 0, 1, 1])
    np.testing.assert_array_equal(a.scatter_reduce(0, idx, ints, "mean").numpy(), [-1, 3, 10])
    np.testing.assert_array_equal(a.scatter_reduce(0, idx, ints, "amax", include_self=False).numpy(), [2, 6, 10])
    y = lucid.tensor([1.0, 2.0])
    assert y.scatter_reduce_(0, lucid.tensor([1, 1]), lucid.tensor([3.0, 4.0]), "prod") is y
    np.testing.assert_array_equal(y.numpy(), [1.0, 24.0])


def test_scatter_reduce_errors():
    x = lucid.zeros(3)
    with pytest.raises(ValueError, match="reduce must be one of"):
        lucid.scatter_reduce(x, 0, lucid.tensor([0]), lucid.ones(1), "max")
    with pytest.raises(RuntimeError, match="same dtype"):
        lucid.scatter_reduce(x, 0, lucid.tensor([0]), lucid.ones(1, dtype=lucid.float64), "sum")
    with pytest.raises(IndexError, match="out of bounds"):
        lucid.scatter_reduce(x, 0, lucid.tensor([3]), lucid.ones(1), "sum")
    with pytest.raises(TypeError, match="int64 or int32"):
        lucid.scatter_reduce(x, 0, lucid.tensor([0.0]), lucid.ones(1), "sum")
    with pytest.raises(TypeError, match="src must be a lucid.Tensor"):
        lucid.scatter_reduce(x, 0, lucid.tensor([0]), 1.0, "sum")


# ---- the index_* ops ------------------------------------------------------------------------------------


def _index_reduce_ref(a, dim, idx, src, reduce, include_self):
    out = np.moveaxis(a.astype(np.float64).copy(), dim, 0)
    s = np.moveaxis(src, dim, 0)
    groups = {}
    for i, k in enumerate(idx):
        groups.setdefault(k, []).append(s[i])
    for k, values in groups.items():
        stack = ([out[k]] if include_self else []) + values
        out[k] = REDUCE[reduce](np.stack(stack), axis=0)
    return np.moveaxis(out, 0, dim)


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce_as_numpy(reduce, include_self):
    a, src = _distinct(3, 5), _distinct(3, 6, seed=1)
    idx = np.array([0, 4, 0, 2, 4, 0])
    got = lucid.index_reduce(
        lucid.tensor(a), 1, lucid.tensor(idx), lucid.tensor(src), reduce, include_self=include_self
    )
    np.testing.assert_allclose(got.numpy(), _index_reduce_ref(a, 1, idx, src, reduce, include_self), rtol=1e-5)
    check_grads(lambda x, s: x.index_reduce(1, lucid.tensor(idx), s, reduce, include_self=include_self), a, src)
    y = lucid.tensor(a)
    assert y.index_reduce_(1, lucid.tensor(idx), lucid.tensor(src), reduce, include_self=include_self) is y
    np.testing.assert_allclose(y.numpy(), got.numpy())


def test_index_reduce_errors():
    with pytest.raises(ValueError, match="reduce must be one of"):
        lucid.index_reduce(lucid.zeros(3), 0, lucid.tensor([0]), lucid.ones(1), "sum")
    with pytest.raises(RuntimeError, match="source of shape"):
        lucid.index_reduce(lucid.zeros(3, 2), 0, lucid.tensor([0, 1]), lucid.ones(2, 3), "prod")
    with pytest.raises(IndexError, match="1-D"):
        lucid.index_reduce(lucid.zeros(3), 0, lucid.tensor([[0]]), lucid.ones(1), "prod")


def test_index_add_copy_fill_as_numpy():
    a, src = _arr(4, 3), _arr(4, 2, seed=1)
    idx = np.array([2, 0])
    add = a.copy()
    np.add.at(add, (slice(None), idx), -2 * src)
    np.testing.assert_allclose(
        lucid.index_add(lucid.tensor(a), 1, lucid.tensor(idx), lucid.tensor(src), alpha=-2).numpy(), add, rtol=1e-6
    )
    copy = a.copy()
    copy[:, idx] = src
    np.testing.assert_array_equal(
        lucid.index_copy(lucid.tensor(a), -1, lucid.tensor(idx), lucid.tensor(src)).numpy(), copy
    )
    filled = a.copy()
    filled[[3, 1]] = 7.5
    np.testing.assert_array_equal(lucid.tensor(a).index_fill(0, lucid.tensor([3, 1]), 7.5).numpy(), filled)
    out = lucid.zeros(4, 3)
    lucid.index_copy(lucid.tensor(a), 1, lucid.tensor(idx), lucid.tensor(src), out=out)
    np.testing.assert_array_equal(out.numpy(), copy)
    check_grads(lambda x, s: lucid.index_add(x, 1, lucid.tensor(idx), s, alpha=3), a, src)
    check_grads(lambda x, s: lucid.index_copy(x, 1, lucid.tensor(idx), s), a, src)


def test_index_ops_on_zero_dim_tensors_and_a_tensor_fill_value():
    x = lucid.tensor(2.0)
    assert lucid.index_add(x, 0, lucid.tensor([0]), lucid.tensor(3.0), alpha=2).item() == 8.0
    assert lucid.index_copy(x, 0, lucid.tensor([0]), lucid.tensor(5.0)).item() == 5.0
    assert x.index_fill(0, lucid.tensor([0]), -1.0).item() == -1.0
    assert x.item() == 2.0
    t = lucid.ones(3, requires_grad=True)
    v = lucid.tensor(2.0, requires_grad=True)
    y = lucid.index_fill(t, 0, lucid.tensor([0, 2]), v)
    np.testing.assert_array_equal(y.numpy(), [2.0, 1.0, 2.0])
    y.sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), [0.0, 1.0, 0.0])
    assert v.grad.item() == 2.0
    with pytest.raises(RuntimeError, match="0-d tensor"):
        lucid.index_fill(t, 0, lucid.tensor([0]), lucid.ones(2))
    with pytest.raises(RuntimeError, match="source of shape"):
        lucid.index_copy(lucid.zeros(3, 2), 0, lucid.tensor([0, 1]), lucid.ones(3, 2))


# ---- the masked_* ops --------------------------------------------------------------------------------


@pytest.mark.parametrize("shape,mask_shape", [((4, 5), (4, 5)), ((4, 5), (5,)), ((5,), (4, 5)), ((), ()), ((4, 5), ())])
def test_masked_fill_select_scatter_as_numpy(shape, mask_shape):
    a = _arr(*shape)
    m = np.random.default_rng(3).random(mask_shape) > 0.4
    full = np.broadcast_shapes(a.shape, m.shape)
    ab, mb = np.broadcast_to(a, full), np.broadcast_to(m, full)
    x, mask = lucid.tensor(a), lucid.tensor(m)
    np.testing.assert_array_equal(lucid.masked_fill(x, mask, 10).numpy(), np.where(mb, 10, ab))
    want_select = ab[mb] if full else np.atleast_1d(ab)[np.atleast_1d(mb)]
    np.testing.assert_array_equal(lucid.masked_select(x, mask).numpy(), want_select)
    src = _arr(*(full or (1,)), seed=4)
    scattered = ab.copy()
    scattered[mb] = src.reshape(-1)[: mb.sum()]
    np.testing.assert_array_equal(lucid.masked_scatter(x, mask, lucid.tensor(src)).numpy(), scattered)
    check_grads(lambda t, s: lucid.masked_scatter(t, mask, s), a, src)
    check_grads(lambda t: lucid.masked_select(t, mask), a)
    check_grads(lambda t, v: lucid.masked_fill(t, mask, v), a, np.array(1.5, dtype=np.float32))


def test_masked_ops_in_place_bfloat16_and_errors():
    a = _arr(3, 4).astype(BF16)
    m = np.random.default_rng(0).random((3, 4)) > 0.5
    src = _arr(3, 4, seed=1).astype(BF16)
    want = a.copy()
    want[m] = src.reshape(-1)[: m.sum()]
    x = lucid.tensor(a)
    assert x.masked_scatter_(lucid.tensor(m), lucid.tensor(src)) is x
    np.testing.assert_array_equal(x.numpy(), want)
    assert x.masked_select(lucid.tensor(m)).dtype == lucid.bfloat16
    with pytest.raises(TypeError, match="bool tensor"):
        lucid.masked_select(x, lucid.ones(3, 4))
    with pytest.raises(RuntimeError, match="does not broadcast"):
        lucid.masked_select(x, lucid.ones(2, dtype=lucid.bool_))
    with pytest.raises(RuntimeError, match="true elements but source only"):
        lucid.masked_scatter(lucid.zeros(4), lucid.ones(4, dtype=lucid.bool_), lucid.zeros(3))
    with pytest.raises(RuntimeError, match="0-d tensor"):
        lucid.masked_fill(lucid.zeros(4), lucid.ones(4, dtype=lucid.bool_), lucid.zeros(2))
    with pytest.raises(RuntimeError, match="broadcasts self"):
        lucid.zeros(4).masked_scatter_(lucid.ones(2, 4, dtype=lucid.bool_), lucid.zeros(8))


# ---- take, put, unravel_index ------------------------------------------------------------------------


def test_take_and_take_along_dim_as_numpy():
    a = _arr(3, 4)
    idx = np.array([[0, -1], [5, 11]])
    np.testing.assert_array_equal(lucid.take(lucid.tensor(a), lucid.tensor(idx)).numpy(), np.take(a, idx))
    along = np.array([[0, 3], [1, -1], [2, 2]])
    want = np.take_along_axis(a, along % 4, 1)
    np.testing.assert_array_equal(lucid.take_along_dim(lucid.tensor(a), lucid.tensor(along), 1).numpy(), want)
    np.testing.assert_array_equal(lucid.tensor(a).take_along_dim(lucid.tensor([[2]]), 0).numpy(), a[2:3])
    np.testing.assert_array_equal(
        lucid.take_along_dim(lucid.tensor(a), lucid.tensor([1, 7])).numpy(), a.reshape(-1)[[1, 7]]
    )
    check_grads(lambda t: lucid.take(t, lucid.tensor([[1, 1], [0, -1]])), a)
    check_grads(lambda t: lucid.take_along_dim(t, lucid.tensor(along), 1), a)
    with pytest.raises(IndexError, match="out of range"):
        lucid.take(lucid.tensor(a), lucid.tensor([12]))
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        lucid.take_along_dim(lucid.tensor(a), lucid.tensor([0]), 0)


def test_put_as_numpy_and_gradients():
    a = _arr(3, 3)
    idx = np.array([0, 4, -1])
    src = _arr(3, seed=1)
    want = a.copy()
    np.put(want, idx, src)
    np.testing.assert_array_equal(lucid.put(lucid.tensor(a), lucid.tensor(idx), lucid.tensor(src)).numpy(), want)
    acc = a.copy().reshape(-1)
    np.add.at(acc, [1, 1, 8], src)
    got = lucid.tensor(a).put(lucid.tensor([1, 1, 8]), lucid.tensor(src), accumulate=True)
    np.testing.assert_allclose(got.numpy(), acc.reshape(3, 3), rtol=1e-6)
    y = lucid.tensor(a)
    assert y.put_(lucid.tensor(idx), lucid.tensor(src)) is y
    np.testing.assert_array_equal(y.numpy(), want)
    check_grads(lambda t, s: lucid.put(t, lucid.tensor(idx), s), a, src)
    check_grads(lambda t, s: lucid.put(t, lucid.tensor([1, 1, 8]), s, True), a, src)
    with pytest.raises(RuntimeError, match="index has 2 elements but source 3"):
        lucid.put(lucid.tensor(a), lucid.tensor([0, 1]), lucid.tensor(src))


def test_unravel_index_as_numpy_and_wrapping():
    flat = np.array([[0, 7, 19], [3, 11, 12]])
    for shape in ((4, 5), (2, 2, 5), 20):
        got = lucid.unravel_index(lucid.tensor(flat), shape)
        for g, w in zip(got, np.unravel_index(flat, shape)):
            np.testing.assert_array_equal(g.numpy(), w)
    assert [int(c) for c in lucid.unravel_index(lucid.tensor(-1), (2, 3))] == [1, 2]
    assert [int(c) for c in lucid.unravel_index(lucid.tensor(7), (2, 3))] == [0, 1]
    assert lucid.unravel_index(lucid.tensor(3), ()) == ()
    assert [int(c) for c in lucid.unravel_index(lucid.tensor(5), (1, 2**63 - 1))] == [0, 5]
    with pytest.raises(TypeError, match="integer tensor"):
        lucid.unravel_index(lucid.tensor(1.0), (2, 3))
    with pytest.raises(ValueError, match="negative"):
        lucid.unravel_index(lucid.tensor(1), (2, -3))
    with pytest.raises(RuntimeError, match="does not fit in int64"):
        lucid.unravel_index(lucid.tensor(1), (2**62, 4))


def test_fill_and_zero_():
    x = lucid.tensor(_arr(2, 3), requires_grad=True)
    y = lucid.fill(x, True)
    assert y.dtype == lucid.float32
    np.testing.assert_array_equal(y.numpy(), np.ones((2, 3)))
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((2, 3)))
    np.testing.assert_array_equal(lucid.fill(lucid.zeros(2, dtype=lucid.int64), lucid.tensor(4)).numpy(), [4, 4])
    v = lucid.tensor(2.0, requires_grad=True)
    (lucid.fill(lucid.ones(3), v) * lucid.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert v.grad.item() == 6.0
    z = lucid.ones(3)
    assert lucid.zero_(z) is z
    np.testing.assert_array_equal(z.numpy(), np.zeros(3))
    with pytest.raises(TypeError, match="input must be a lucid.Tensor"):
        lucid.fill([1.0], 2.0)


def test_unsafe_masked_index_and_its_accumulating_put():
    a = _arr(4, 4)
    rows = np.array([[0], [3], [9], [-2]])
    cols = np.array([[1, 2, 7]])
    mask = np.broadcast_to(rows < 4, (4, 3)) & np.broadcast_to(cols < 4, (4, 3))
    want = np.where(mask, a[np.clip(rows, -4, 3), np.clip(cols, -4, 3)], -1.5)
    idx = [lucid.tensor(rows), lucid.tensor(cols)]
    got = lucid._unsafe_masked_index(lucid.tensor(a), lucid.tensor(mask), idx, -1.5)
    np.testing.assert_array_equal(got.numpy(), want)
    check_grads(lambda t: lucid._unsafe_masked_index(t, lucid.tensor(mask), idx, -1.5), a)
    v = _arr(4, 3, seed=1)
    acc = a.copy()
    np.add.at(
        acc,
        (np.broadcast_to(np.clip(rows, -4, 3), (4, 3)), np.broadcast_to(np.clip(cols, -4, 3), (4, 3))),
        np.where(mask, v, 0),
    )
    got = lucid._unsafe_masked_index_put_accumulate(lucid.tensor(a), lucid.tensor(mask), idx, lucid.tensor(v))
    np.testing.assert_allclose(got.numpy(), acc, rtol=1e-6)
    check_grads(lambda t, s: lucid._unsafe_masked_index_put_accumulate(t, lucid.tensor(mask), idx, s), a, v)
    with pytest.raises(TypeError, match="bool tensor"):
        lucid._unsafe_masked_index(lucid.tensor(a), lucid.ones(4, 3), idx, 0.0)
    with pytest.raises(TypeError, match="at most 2"):
        lucid._unsafe_masked_index(lucid.tensor(a), lucid.tensor(mask), idx * 2, 0.0)


def test_put_into_a_non_contiguous_view_writes_its_base():
    base = lucid.zeros(3, 4)
    view = base.t()
    view.put_(lucid.tensor([0, 1, 5]), lucid.tensor([1.0, 2.0, 3.0]))
    want = np.zeros((4, 3), dtype=np.float32)
    want.reshape(-1)[[0, 1, 5]] = [1.0, 2.0, 3.0]
    np.testing.assert_array_equal(base.numpy(), want.T)


@pytest.mark.parametrize("dtype", [BF16, np.float64])
@pytest.mark.parametrize("reduce", list(REDUCE))
def test_scatter_reduce_in_other_float_dtypes(dtype, reduce):
    a, src = _distinct(3, 4).astype(dtype), _distinct(3, 4, seed=1).astype(dtype)
    idx = np.random.default_rng(2).integers(0, 3, size=(3, 4))
    got = lucid.scatter_reduce(lucid.tensor(a), 0, lucid.tensor(idx), lucid.tensor(src), reduce)
    assert got.dtype == lucid.tensor(a).dtype
    want = _scatter_reduce_ref(a.astype(np.float64), 0, idx, src.astype(np.float64), reduce, True)
    tol = 1e-2 if dtype == BF16 else 1e-12
    np.testing.assert_allclose(got.numpy().astype(np.float64), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("index_shape", [(0,), (2, 0), (0, 3, 1)])
def test_gather_with_an_empty_index_of_any_ndim_gives_an_empty_result_of_its_shape(index_shape):
    x = lucid.tensor(np.arange(5, dtype=np.float32), requires_grad=True)
    got = lucid.gather(x, 0, lucid.zeros(index_shape, dtype=lucid.int64))
    assert got.shape == index_shape and got.dtype == lucid.float32
    (got.sum() + (x * 2).sum()).backward()  # in the input's graph, with a zero gradient
    np.testing.assert_array_equal(x.grad.numpy(), np.full(5, 2.0, np.float32))


def test_gather_checks_a_non_empty_index_and_the_dim_of_an_empty_one():
    x = lucid.randn(5)
    with pytest.raises(ValueError, match="as many dimensions"):
        lucid.gather(x, 0, lucid.zeros((2, 1), dtype=lucid.int64))
    with pytest.raises(IndexError, match="out of range"):
        lucid.gather(x, 2, lucid.zeros((2, 0), dtype=lucid.int64))
