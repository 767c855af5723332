"""Subscripts (ints, slices with steps, None, ..., integer tensors, bool masks), shape ops,
gather/index_select/embedding: values against numpy and gradients against scatter-adds."""

import numpy as np
import pytest

import lucid

rng = np.random.default_rng(5)
A = rng.standard_normal((4, 5, 6)).astype(np.float32)

KEYS = [
    1,
    -1,
    (1, 2),
    (slice(None), 2),
    (slice(1, None, 2),),
    (slice(None, None, 3), slice(4, 0, 1)),
    (Ellipsis, 1),
    (None, 0),
    (0, None, slice(2, 5)),
    (Ellipsis, None),
    (slice(-3, -1), Ellipsis, slice(None, None, 2)),
    (slice(10, 20),),
    (1, 2, 3),
    (None, Ellipsis, None),
    # steps far beyond the size: one element, and no overflow in the view's stride
    (slice(None, None, 2**62),),
    (slice(None), slice(1, None, 2**63 - 1)),
    (slice(-(2**63), 2**63 - 1, 2**63 - 1), Ellipsis, slice(None, None, 2**40)),
]


@pytest.mark.parametrize("key", KEYS, ids=[repr(k) for k in KEYS])
def test_basic_indexing_matches_numpy(key):
    np.testing.assert_array_equal(lucid.tensor(A)[key].numpy(), A[key])


ADVANCED = [
    lambda t: ([2, 0, 2],),
    lambda t: (slice(None), t([[1, 0], [4, 4]])),
    lambda t: (t([0, 3]), slice(None), t([5, 1])),  # separated: the index dims lead
    lambda t: (slice(None), t([1, 2]), t([3, 4])),  # adjacent: stay in place
    lambda t: (t([-1, -4]),),
    lambda t: (t(A[:, :, 0] > 0),),
    lambda t: (t(A > 0.5),),
    lambda t: (1, t(A[1, :, 0] > 0)),
    lambda t: (Ellipsis, t([0, 5])),
    lambda t: (t([[0], [3]]), t([1, 2])),  # broadcast index arrays
    lambda t: (True,),
    lambda t: (t(np.zeros(0, np.int64)),),
]


@pytest.mark.parametrize("make", ADVANCED, ids=[str(i) for i in range(len(ADVANCED))])
def test_advanced_indexing_matches_numpy(make):
    want = A[make(np.asarray)]
    got = lucid.tensor(A)[make(lucid.tensor)]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize(
    "make",
    [
        lambda t: (slice(1, None, 2), 3),
        lambda t: (t([0, 0, 2]),),
        lambda t: (t(A > 0),),
        lambda t: (slice(None), t([1, 1]), t([2, 2])),
    ],
)
def test_indexing_gradient_scatters_back(make):
    x = lucid.tensor(A, requires_grad=True)
    y = x[make(lucid.tensor)]
    w = rng.standard_normal(y.shape).astype(np.float32)
    (y * lucid.tensor(w)).sum().backward()
    want = np.zeros_like(A)
    np.add.at(want, make(np.asarray), w)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-6)


@pytest.mark.parametrize(
    "key,error",
    [
        (4, IndexError),
        ((0, 0, 0, 0), IndexError),
        ((Ellipsis, Ellipsis), IndexError),
        (slice(None, None, -1), ValueError),
        (1.5, IndexError),
        ("a", IndexError),
    ],
)
def test_bad_subscripts_raise(key, error):
    with pytest.raises(error):
        lucid.tensor(A)[key]


def test_bad_advanced_indices_raise():
    t = lucid.tensor(A)
    with pytest.raises(IndexError, match="out of bounds for dimension 0 with size 4"):
        t[lucid.tensor([0, 4])]
    with pytest.raises(IndexError, match="mask"):
        t[lucid.tensor(np.ones((3, 5), bool))]
    with pytest.raises(IndexError):
        t[lucid.tensor([0.5])]
    with pytest.raises(ValueError, match="broadcast"):
        t[lucid.tensor([0, 1]), lucid.tensor([0, 1, 2])]
    with pytest.raises(IndexError, match="out of bounds"):
        t[4] = 1.0


def test_iteration_and_views_share_storage():
    t = lucid.tensor(A)
    rows = list(t)
    assert len(rows) == 4
    np.testing.assert_array_equal(rows[2].numpy(), A[2])
    assert t[1:3].stride() == t.stride()


# ---- shape ops --------------------------------------------------------------------------


def test_squeeze_unsqueeze_expand_flatten():
    a = rng.standard_normal((2, 1, 3, 1)).astype(np.float32)
    t = lucid.tensor(a)
    assert t.squeeze().shape == (2, 3)
    assert t.squeeze(1).shape == (2, 3, 1)
    assert t.squeeze((1, 3)).shape == (2, 3)
    assert t.squeeze(0).shape == a.shape  # not size 1: left alone
    assert t.unsqueeze(0).shape == (1, 2, 1, 3, 1) and t.unsqueeze(-1).shape == (2, 1, 3, 1, 1)
    np.testing.assert_array_equal(t.expand(2, 4, 3, 5).numpy(), np.broadcast_to(a, (2, 4, 3, 5)))
    np.testing.assert_array_equal(t.expand(7, -1, -1, -1, -1).numpy(), np.broadcast_to(a, (7, 2, 1, 3, 1)))
    assert lucid.tensor(A).flatten().shape == (120,)
    assert lucid.tensor(A).flatten(1).shape == (4, 30)
    assert lucid.tensor(A).flatten(0, 1).shape == (20, 6)
    with pytest.raises(ValueError, match="cannot be expanded"):
        t.expand(3, 1, 3, 1)
    with pytest.raises(IndexError):
        t.unsqueeze(5)


def test_expand_gradient_sums():
    x = lucid.tensor(rng.standard_normal((3, 1)).astype(np.float32), requires_grad=True)
    x.expand(2, 3, 4).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((3, 1), 8.0))


def test_cat_stack_split_chunk():
    a, b = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_array_equal(lucid.cat([lucid.tensor(a), lucid.tensor(b)]).numpy(), np.concatenate([a, b]))
    np.testing.assert_array_equal(lucid.cat([lucid.tensor(a), lucid.tensor(a)], 1).numpy(), np.concatenate([a, a], 1))
    np.testing.assert_array_equal(lucid.stack([lucid.tensor(a)] * 3, -1).numpy(), np.stack([a] * 3, -1))
    t = lucid.tensor(A)
    for got, want in zip(t.split(2, 1), np.split(A, [2, 4], 1)):
        np.testing.assert_array_equal(got.numpy(), want)
    for got, want in zip(t.split([1, 3, 2], 2), np.split(A, [1, 4], 2)):
        np.testing.assert_array_equal(got.numpy(), want)
    pieces = t.chunk(3, 1)
    assert [p.shape[1] for p in pieces] == [2, 2, 1]
    assert len(lucid.tensor(np.arange(5)).chunk(10)) == 5
    with pytest.raises(ValueError, match="do not add up"):
        t.split([1, 1], 0)
    with pytest.raises(ValueError, match="does not match"):
        lucid.cat([lucid.tensor(a), lucid.tensor(b.T)])
    with pytest.raises(ValueError, match="equal shape"):
        lucid.stack([lucid.tensor(a), lucid.tensor(b)])
    with pytest.raises(TypeError, match="sequence"):
        lucid.cat(lucid.tensor(a))


def test_split_and_chunk_with_huge_counts_are_errors_or_exact():
    x = lucid.arange(5)
    for sizes in ([3, 4, 2], [2**62] * 3 + [5], [2**63 - 1, 2], [-1, 6]):
        with pytest.raises(ValueError, match="do not add up"):
            x.split(sizes)
    assert [p.tolist() for p in x.chunk(2**63 - 1)] == [[0], [1], [2], [3], [4]]
    assert [p.tolist() for p in x.split(2**63 - 1)] == [[0, 1, 2, 3, 4]]
    assert [p.shape for p in lucid.zeros(0).chunk(2**63 - 1)] == [(0,)]


def test_cat_promotes_and_routes_gradients():
    x = lucid.tensor(np.ones((2, 2), np.float32), requires_grad=True)
    y = lucid.tensor(np.ones((1, 2), np.float16))
    z = lucid.cat([x, y])
    assert z.dtype == lucid.float32
    assert lucid.cat([lucid.tensor([1, 2]), lucid.tensor([0.5])]).dtype == lucid.float32
    (z * lucid.tensor(np.arange(6, dtype=np.float32).reshape(3, 2))).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 1], [2, 3]])
    s = lucid.stack([x, x * 2], 0)
    x.grad = None
    s.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 2), 3.0))


@pytest.mark.parametrize("device", ["cpu", "metal"])
def test_cat_and_stack_promote_to_the_widest_dtype_in_any_order(device):
    # float32 data must never be narrowed because a bfloat16 tensor came first.
    wide = lucid.tensor(np.array([[1 + 2**-12, 3.0]], np.float32), device=device)
    for low in (lucid.bfloat16, lucid.float16):
        narrow = lucid.ones(1, 2, device=device).to(low)
        for parts in ([narrow, wide], [wide, narrow]):
            joined = lucid.cat(parts)
            assert joined.dtype == lucid.float32
            assert 1 + 2**-12 in joined.numpy()
            assert lucid.stack(parts).dtype == lucid.float32
    assert (
        lucid.cat([lucid.ones(1, device=device).half(), lucid.ones(1, device=device).bfloat16()]).dtype == lucid.float32
    )
    # A CPU float16 scope changes nothing (the spec): still the widest.
    with lucid.amp.autocast("cpu", dtype=lucid.float16):
        assert lucid.cat([lucid.ones(1).bfloat16(), lucid.ones(1)]).dtype == lucid.float32


def test_cat_under_autocast_uses_the_widest_dtype():
    a = lucid.ones(2, 2, device="metal").half()
    b = lucid.ones(2, 2, device="metal")
    with lucid.amp.autocast("metal"):
        assert lucid.cat([a, b]).dtype == lucid.float32
        assert lucid.stack([a, a]).dtype == lucid.float16


# ---- gather / index_select / embedding --------------------------------------------------


def test_gather_and_index_select():
    idx = rng.integers(0, 5, (4, 3, 6))
    np.testing.assert_array_equal(lucid.tensor(A).gather(1, lucid.tensor(idx)).numpy(), np.take_along_axis(A, idx, 1))
    sel = np.array([4, 0, 0, 2])
    np.testing.assert_array_equal(lucid.tensor(A).index_select(1, lucid.tensor(sel)).numpy(), A[:, sel])
    with pytest.raises(IndexError, match="out of bounds"):
        lucid.tensor(A).gather(1, lucid.tensor(np.full((4, 5, 6), 5)))
    with pytest.raises(IndexError, match="out of bounds"):
        lucid.tensor(A).index_select(0, lucid.tensor([-1]))
    with pytest.raises(TypeError, match="integer"):
        lucid.tensor(A).index_select(0, lucid.tensor([0.0]))
    with pytest.raises(ValueError, match="as many dimensions"):
        lucid.tensor(A).gather(0, lucid.tensor([0]))


def test_gather_gradient_accumulates_duplicates():
    x = lucid.tensor(A, requires_grad=True)
    idx = rng.integers(0, 4, (3, 5, 6))
    x.gather(0, lucid.tensor(idx)).sum().backward()
    want = np.zeros_like(A)
    for i, j, k in np.ndindex(idx.shape):
        want[idx[i, j, k], j, k] += 1
    np.testing.assert_array_equal(x.grad.numpy(), want)


def test_embedding_lookup_gradient_and_padding():
    w = rng.standard_normal((6, 3)).astype(np.float32)
    weight = lucid.tensor(w, requires_grad=True)
    ids = np.array([[0, 2, 2], [5, 0, 1]])
    out = lucid.nn.functional.embedding(lucid.tensor(ids), weight, padding_idx=0)
    np.testing.assert_array_equal(out.numpy(), w[ids])
    out.sum().backward()
    counts = np.bincount(ids.ravel(), minlength=6).astype(np.float32)
    counts[0] = 0
    np.testing.assert_array_equal(weight.grad.numpy(), np.repeat(counts[:, None], 3, 1))
    with pytest.raises(IndexError):
        lucid.nn.functional.embedding(lucid.tensor([6]), weight)
    emb = lucid.nn.Embedding(10, 4, padding_idx=3)
    np.testing.assert_array_equal(emb.weight.numpy()[3], 0)
    assert emb(lucid.tensor([[1, 3]])).shape == (1, 2, 4)


def _scatter_reference(a, dim, index, src, add):
    out = a.copy()
    for pos in np.ndindex(*index.shape):
        target = list(pos)
        target[dim] = index[pos]
        value = src[pos] if isinstance(src, np.ndarray) else src
        out[tuple(target)] = out[tuple(target)] + value if add else value
    return out


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_and_scatter_add_match_numpy_and_finite_differences(dim):
    rng = np.random.default_rng(dim + 5)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    src = rng.standard_normal((3, 4)).astype(np.float32)
    d = dim % 2
    shape = (2, 3) if d == 0 else (3, 2)  # smaller than self and src: only those positions
    index = rng.integers(0, a.shape[d], shape)
    unique = np.argsort(rng.random(shape), axis=d) % a.shape[d]  # no position twice along d
    t, s = lucid.tensor(a, requires_grad=True), lucid.tensor(src, requires_grad=True)
    out = t.scatter(dim, lucid.tensor(unique), s)
    np.testing.assert_allclose(out.detach().numpy(), _scatter_reference(a, d, unique, src, False))
    added = lucid.scatter_add(t, dim, lucid.tensor(index), s)
    np.testing.assert_allclose(added.detach().numpy(), _scatter_reference(a, d, index, src, True), rtol=1e-6)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    (added * lucid.tensor(w)).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), w)  # scatter_add passes self's gradient through
    want_src = np.zeros_like(src)
    for pos in np.ndindex(*index.shape):
        target = list(pos)
        target[d] = index[pos]
        want_src[pos] = w[tuple(target)]
    np.testing.assert_allclose(s.grad.numpy(), want_src)
    filled = lucid.tensor(a).scatter_(dim, lucid.tensor(unique), 7.5)
    np.testing.assert_allclose(filled.numpy(), _scatter_reference(a, d, unique, 7.5, False))


def test_scatter_refuses_bad_arguments_by_name():
    t = lucid.zeros(3, 4)
    with pytest.raises(TypeError, match="index must be an int64 or int32 tensor"):
        t.scatter_(0, lucid.tensor([[0.0]]), 1.0)
    with pytest.raises(ValueError, match="index has 1 dimensions"):
        t.scatter_(0, lucid.tensor([0]), 1.0)
    with pytest.raises(ValueError, match="larger than self in dimension 1"):
        t.scatter_(0, lucid.zeros(1, 5, dtype=lucid.int64), 1.0)
    with pytest.raises(ValueError, match="larger than src"):
        t.scatter_(0, lucid.zeros(2, 2, dtype=lucid.int64), lucid.ones(1, 2))
    with pytest.raises(IndexError):
        t.scatter_(0, lucid.tensor([[3]]), 1.0)
    with pytest.raises(ValueError, match="reduce"):
        t.scatter_(0, lucid.tensor([[0]]), 1.0, reduce="mean")


def test_select_is_a_view_of_one_slice():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = lucid.tensor(a)
    for dim in (0, 1, 2, -1):
        for i in (0, -1):
            np.testing.assert_array_equal(t.select(dim, i).numpy(), np.take(a, i, axis=dim))
    s = lucid.select(t, 1, 2)
    s.fill_(-1)
    assert (t.numpy()[:, 2] == -1).all()
    with pytest.raises(IndexError):
        t.select(0, 2)


def test_a_range_indexes_as_the_list_of_its_values():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    x = lucid.tensor(a)
    for key, want in (
        (range(1, 3), a[[1, 2]]),
        (range(0, 4, 2), a[[0, 2]]),
        ((slice(None), range(5, 0, -2)), a[:, [5, 3, 1]]),
    ):
        np.testing.assert_array_equal(x[key].numpy(), want)
    y = lucid.zeros(4, 6)
    y[range(1, 3)] = 1.0
    np.testing.assert_array_equal(y.numpy().sum(1), [0, 6, 6, 0])
