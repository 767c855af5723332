"""Shape ops beyond the views: copies of views, stacks and splits, rearrangements, the *_scatter
ops, block matrices and grids, and the factories of the same family, against numpy (and
ml_dtypes for bfloat16), with gradients against finite differences."""

import itertools

import numpy as np
import pytest

import lucid
from _helpers import BF16, numeric_grads


def _arr(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _flat(out):
    """One tensor from an op's result (a tensor or a tuple of them), for a weighted sum."""
    if isinstance(out, tuple):
        return lucid.cat([o.reshape(-1) for o in out]) if out else lucid.zeros(0)
    return out


def check_grads(fn, *arrays, atol=2e-2):
    """Autograd's gradients of sum(w * fn(...)) against central differences, for every input."""
    ts = [lucid.tensor(a, requires_grad=True) for a in arrays]
    out = _flat(fn(*ts))
    w = np.random.default_rng(1).standard_normal(out.shape).astype(np.float32)
    (out * lucid.tensor(w)).sum().backward()
    want = numeric_grads(lambda *xs: _flat(fn(*xs)), [a.copy() for a in arrays], w)
    for t, g in zip(ts, want):
        got = np.zeros_like(g) if t.grad is None else t.grad.numpy()
        np.testing.assert_allclose(got, g, rtol=1e-2, atol=atol)


# ---- copies of views ----------------------------------------------------------------------------

COPIES = [
    ("alias_copy", (), lambda a: a),
    ("diagonal_copy", (1, 0, 2), lambda a: np.diagonal(a, 1, 0, 2)),
    ("expand_copy", ((2, 3, 4, 5),), lambda a: np.broadcast_to(a, (2, 3, 4, 5))),
    ("narrow_copy", (1, 1, 2), lambda a: a[:, 1:3]),
    ("permute_copy", ((2, 0, 1),), lambda a: a.transpose(2, 0, 1)),
    ("squeeze_copy", (), lambda a: a),
    ("transpose_copy", (0, 2), lambda a: a.swapaxes(0, 2)),
    ("unsqueeze_copy", (1,), lambda a: a[:, None]),
    ("view_copy", ((12, 5),), lambda a: a.reshape(12, 5)),
    (
        "as_strided_copy",
        ((2, 2), (1, 2)),
        lambda a: np.lib.stride_tricks.as_strided(a.reshape(-1), (2, 2), (a.itemsize, 2 * a.itemsize)),
    ),
]


@pytest.mark.parametrize("name,args,ref", COPIES, ids=[c[0] for c in COPIES])
@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_copies_of_views_hold_the_values_in_storage_of_their_own(name, args, ref, dtype):
    a = _arr(3, 4, 5).astype(dtype)
    x = lucid.tensor(a)
    got = getattr(lucid, name)(x, *args)
    np.testing.assert_array_equal(got.numpy(), ref(a))
    assert got.dtype == x.dtype
    got.zero_()  # a copy: the input keeps its values
    np.testing.assert_array_equal(x.numpy(), a)


def test_copies_take_out_and_carry_gradients():
    a = _arr(3, 4)
    out = lucid.zeros(4, 3)
    r = lucid.t_copy(lucid.tensor(a), out=out)
    assert r is out
    np.testing.assert_array_equal(out.numpy(), a.T)
    check_grads(lambda x: lucid.transpose_copy(x, 0, 1), a)
    check_grads(lambda x: lucid.expand_copy(x[:1], (2, 3, 4)), a)
    check_grads(lambda x: lucid.unbind_copy(x, 1), a)


def test_copies_of_split_pieces():
    a = _arr(5, 4)
    pieces = lucid.split_with_sizes_copy(lucid.tensor(a), (1, 3, 1))
    for got, want in zip(pieces, np.split(a, [1, 4])):
        np.testing.assert_array_equal(got.numpy(), want)
    views = lucid.split_with_sizes(lucid.tensor(a), [2, 2], 1)
    np.testing.assert_array_equal(views[1].numpy(), a[:, 2:])
    with pytest.raises(RuntimeError, match="add up to the size of dimension"):
        lucid.split_with_sizes(lucid.tensor(a), [2, 2])
    for got, want in zip(lucid.unsafe_split(lucid.tensor(a), 2), np.split(a, [2, 4])):
        np.testing.assert_array_equal(got.numpy(), want)
    for got, want in zip(lucid.unsafe_chunk(lucid.tensor(a), 2, 1), np.split(a, 2, 1)):
        np.testing.assert_array_equal(got.numpy(), want)
    check_grads(lambda x: lucid.split_with_sizes_copy(x, (1, 3, 1)), a)


# ---- regressions ----------------------------------------------------------------------------------


def test_squeeze_of_an_empty_dim_tuple_squeezes_nothing():
    x = lucid.zeros(1, 3, 1)
    assert lucid.squeeze(x, ()).shape == (1, 3, 1)
    assert x.squeeze([]).shape == (1, 3, 1)
    assert lucid.squeeze(x, (0, 2)).shape == (3,)
    assert lucid.squeeze(x).shape == (3,)
    assert lucid.squeeze_copy(x, ()).shape == (1, 3, 1)


def test_cat_skips_one_dimensional_empty_tensors_beside_others():
    a = _arr(2, 3)
    empty = lucid.zeros(0, requires_grad=True)
    x = lucid.tensor(a, requires_grad=True)
    got = lucid.cat([empty, x, empty], 1)
    np.testing.assert_array_equal(got.numpy(), a)
    got.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones_like(a))
    assert lucid.cat([lucid.zeros(0), lucid.zeros(0)]).shape == (0,)
    with pytest.raises(ValueError, match="does not match"):
        lucid.cat([lucid.zeros(0, 2), x], 1)  # only 1-D empties are skipped


# ---- broadcasting ---------------------------------------------------------------------------------


def test_broadcast_shapes_to_and_tensors():
    assert lucid.broadcast_shapes((5, 1), 5) == (5, 5)
    assert lucid.broadcast_shapes((10, 1, 5), (1, 10, 5), ()) == (10, 10, 5)
    assert lucid.broadcast_shapes() == ()
    assert lucid.broadcast_shapes((0, 1, 3), (0, 10, 3)) == (0, 10, 3)
    with pytest.raises(RuntimeError, match="does not broadcast"):
        lucid.broadcast_shapes((2, 3), (4, 3))
    a, b = _arr(3), _arr(2, 1)
    x, y = lucid.broadcast_tensors(lucid.tensor(a), lucid.tensor(b))
    wx, wy = np.broadcast_arrays(a, b)
    np.testing.assert_array_equal(x.numpy(), wx)
    np.testing.assert_array_equal(y.numpy(), wy)
    np.testing.assert_array_equal(lucid.broadcast_to(lucid.tensor(b), (4, 2, 3)).numpy(), np.broadcast_to(b, (4, 2, 3)))
    np.testing.assert_array_equal(lucid.tensor(b).broadcast_to((2, 5)).numpy(), np.broadcast_to(b, (2, 5)))
    check_grads(lambda p, q: lucid.broadcast_tensors(p, q), a, b)


@pytest.mark.parametrize(
    "fn,ref", [(lucid.atleast_1d, np.atleast_1d), (lucid.atleast_2d, np.atleast_2d), (lucid.atleast_3d, np.atleast_3d)]
)
def test_atleast_nd_as_numpy(fn, ref):
    arrays = [np.float32(2.5), _arr(4), _arr(2, 3), _arr(2, 3, 4)]
    for a in arrays:
        got = fn(lucid.tensor(a))
        assert got.shape == ref(a).shape
        np.testing.assert_array_equal(got.numpy(), ref(a))
    many = fn(*[lucid.tensor(a) for a in arrays])
    assert isinstance(many, tuple) and [m.shape for m in many] == [r.shape for r in ref(*arrays)]
    assert isinstance(fn([lucid.tensor(arrays[1])]), tuple)


# ---- stacks and splits ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["hstack", "vstack", "dstack", "column_stack"])
@pytest.mark.parametrize("shape", [(4,), (3, 4), (3, 4, 2)])
def test_stacks_as_numpy(name, shape):
    arrays = [_arr(*shape, seed=s) for s in range(3)]
    got = getattr(lucid, name)([lucid.tensor(a) for a in arrays])
    np.testing.assert_array_equal(got.numpy(), getattr(np, name)(arrays))
    check_grads(lambda *xs: getattr(lucid, name)(xs), *arrays)


def test_stacks_take_out_and_mixed_ranks():
    out = lucid.zeros(2)
    lucid.hstack([lucid.tensor(1.0), lucid.tensor(2.0)], out=out)
    np.testing.assert_array_equal(out.numpy(), [1.0, 2.0])
    a, b = _arr(5), _arr(5, 5)
    np.testing.assert_array_equal(
        lucid.column_stack([lucid.tensor(a), lucid.tensor(b)]).numpy(), np.column_stack([a, b])
    )
    assert lucid.row_stack is lucid.vstack
    with pytest.raises(RuntimeError, match="non-empty"):
        lucid.vstack([])
    with pytest.raises(TypeError, match="sequence of tensors"):
        lucid.hstack(lucid.tensor(a))


@pytest.mark.parametrize("sections", [3, 5, 7, [1, 3], [2, -1], [4, 2], (0, 6)])
def test_tensor_split_as_numpy_array_split(sections):
    a = _arr(6, 4)
    for dim in (0, 1):
        got = lucid.tensor_split(lucid.tensor(a), sections, dim)
        want = np.array_split(a, sections, dim)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w)


def test_tensor_split_by_a_tensor_and_its_errors():
    a = _arr(5, 2)
    got = lucid.tensor(a).tensor_split(lucid.tensor([1, 3]))
    assert [g.shape[0] for g in got] == [1, 2, 2]
    assert [g.shape[0] for g in lucid.tensor_split(lucid.tensor(a), lucid.tensor(2))] == [3, 2]
    with pytest.raises(RuntimeError, match="larger than 0"):
        lucid.tensor_split(lucid.tensor(a), 0)
    with pytest.raises(TypeError, match="integer tensor"):
        lucid.tensor_split(lucid.tensor(a), lucid.tensor([1.0]))
    check_grads(lambda x: lucid.tensor_split(x, 3, 0), a)


@pytest.mark.parametrize("name,ndim", [("hsplit", 2), ("vsplit", 2), ("dsplit", 3)])
def test_hsplit_vsplit_dsplit_as_numpy(name, ndim):
    a = _arr(*(4,) * ndim)
    for sections in (2, [1, 3]):
        got = getattr(lucid, name)(lucid.tensor(a), sections)
        for g, w in zip(got, getattr(np, name)(a, sections)):
            np.testing.assert_array_equal(g.numpy(), w)
    with pytest.raises(RuntimeError, match="not divisible"):
        getattr(lucid, name)(lucid.tensor(a), 3)
    with pytest.raises(RuntimeError, match="at least"):
        getattr(lucid, name)(lucid.tensor(np.float32(1.0)), 1)


# ---- rearrangements -------------------------------------------------------------------------------


@pytest.mark.parametrize("src,dst", [(0, 2), (-1, 0), ([0, 1], [2, 0]), ((0, -1, -2), (-3, -2, -1))])
def test_movedim_as_numpy_moveaxis(src, dst):
    a = _arr(2, 3, 4)
    np.testing.assert_array_equal(lucid.movedim(lucid.tensor(a), src, dst).numpy(), np.moveaxis(a, src, dst))
    np.testing.assert_array_equal(lucid.tensor(a).moveaxis(src, dst).numpy(), np.moveaxis(a, src, dst))


def test_movedim_errors_and_gradient():
    x = lucid.zeros(2, 3)
    with pytest.raises(RuntimeError, match="same number"):
        lucid.movedim(x, (0, 1), (1,))
    with pytest.raises(RuntimeError, match="repeated dim"):
        lucid.movedim(x, (0, 0), (0, 1))
    with pytest.raises(IndexError):
        lucid.movedim(x, 2, 0)
    check_grads(lambda t: lucid.movedim(t, 0, -1), _arr(2, 3, 4))


def test_ravel_fliplr_flipud():
    a = _arr(3, 4, 2)
    np.testing.assert_array_equal(lucid.ravel(lucid.tensor(a).transpose(0, 2)).numpy(), a.transpose(2, 1, 0).ravel())
    np.testing.assert_array_equal(lucid.fliplr(lucid.tensor(a)).numpy(), np.fliplr(a))
    np.testing.assert_array_equal(lucid.flipud(lucid.tensor(a)).numpy(), np.flipud(a))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        lucid.fliplr(lucid.zeros(3))
    with pytest.raises(RuntimeError, match="at least 1 dimension"):
        lucid.flipud(lucid.tensor(1.0))
    check_grads(lucid.fliplr, a)


@pytest.mark.parametrize("k", range(-5, 6))
@pytest.mark.parametrize("dims", [(0, 1), (1, 2), (2, 0), (1, -1)])
def test_rot90_as_numpy(k, dims):
    a = _arr(2, 3, 4)
    np.testing.assert_array_equal(lucid.rot90(lucid.tensor(a), k, dims).numpy(), np.rot90(a, k, dims))


def test_rot90_errors_and_gradient():
    with pytest.raises(RuntimeError, match="dims must be different"):
        lucid.rot90(lucid.zeros(2, 2), 1, (1, 1))
    with pytest.raises(RuntimeError, match="expected 2 dims"):
        lucid.rot90(lucid.zeros(2, 2), 1, (0,))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        lucid.rot90(lucid.zeros(2))
    check_grads(lambda x: lucid.rot90(x, 3), _arr(2, 3))


@pytest.mark.parametrize(
    "shape,reps", [((), (2, 3)), ((2,), ()), ((3, 2), (0,)), ((2,), (1, 3, 2)), ((3, 2), (3, 1, 1)), ((0,), (2, 2))]
)
def test_tile_as_numpy(shape, reps):
    a = _arr(*shape)
    got = lucid.tile(lucid.tensor(a), reps)
    want = np.tile(a, reps) if reps else a
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want)


def test_tile_gradient_and_errors():
    check_grads(lambda x: x.tile((2, 1, 3)), _arr(2, 3))
    with pytest.raises(RuntimeError, match="non-negative"):
        lucid.tile(lucid.zeros(2), (-1,))


@pytest.mark.parametrize(
    "shape,dim,size,step",
    [((10,), 0, 3, 2), ((5, 6), 1, 2, 2), ((4, 5, 3), 1, 4, 1), ((1000,), 0, 2, 27), ((4, 4), 0, 4, 3)],
)
def test_unfold_as_numpy_windows(shape, dim, size, step):
    a = _arr(*shape)
    want = np.lib.stride_tricks.sliding_window_view(a, size, axis=dim)
    want = np.take(want, np.arange(0, want.shape[dim], step), axis=dim)
    np.testing.assert_array_equal(lucid.tensor(a).unfold(dim, size, step).numpy(), want)
    np.testing.assert_array_equal(lucid.unfold_copy(lucid.tensor(a), dim, size, step).numpy(), want)


def test_unfold_zero_dim_errors_and_gradient():
    assert lucid.tensor(2.0).unfold(0, 1, 1).shape == (1,)
    with pytest.raises(RuntimeError, match="does not fit"):
        lucid.zeros(3).unfold(0, 4, 1)
    with pytest.raises(RuntimeError, match="step must be positive"):
        lucid.zeros(3).unfold(0, 1, 0)
    check_grads(lambda x: x.unfold(0, 3, 1), _arr(6))  # overlapping windows add up


# ---- block matrices and grids ---------------------------------------------------------------------


def test_block_diag_as_a_numpy_construction():
    blocks = [_arr(1, 5), _arr(2, 3, seed=1), np.float32(4.0), _arr(3, seed=2)]
    want = np.zeros((5, 12), dtype=np.float32)
    want[0:1, 0:5], want[1:3, 5:8], want[3, 8], want[4, 9:12] = blocks
    np.testing.assert_array_equal(lucid.block_diag(*[lucid.tensor(b) for b in blocks]).numpy(), want)
    mixed = lucid.block_diag(lucid.tensor([[1, 2]]), lucid.tensor([[0.5]]))
    assert mixed.dtype == lucid.float32
    np.testing.assert_array_equal(mixed.numpy(), [[1, 2, 0], [0, 0, 0.5]])
    assert lucid.block_diag().shape == (1, 0)
    with pytest.raises(RuntimeError, match="at most 2"):
        lucid.block_diag(lucid.zeros(1, 1, 1))
    check_grads(lambda a, b: lucid.block_diag(a, b), _arr(2, 2), _arr(3))


@pytest.mark.parametrize("sa,sb", [((2, 3), (4, 5)), ((3,), (2, 2)), ((2, 1, 2), (3,)), ((), (2,))])
def test_kron_as_numpy(sa, sb):
    a, b = _arr(*sa), _arr(*sb, seed=1)
    np.testing.assert_allclose(lucid.kron(lucid.tensor(a), lucid.tensor(b)).numpy(), np.kron(a, b), rtol=1e-6)
    check_grads(lucid.kron, a, b)


@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid_as_numpy(indexing):
    arrays = [_arr(3), _arr(2, seed=1), _arr(4, seed=2)]
    got = lucid.meshgrid(*[lucid.tensor(a) for a in arrays], indexing=indexing)
    for g, w in zip(got, np.meshgrid(*arrays, indexing=indexing)):
        np.testing.assert_array_equal(g.numpy(), w)
    listed = lucid.meshgrid([lucid.tensor(a) for a in arrays[:2]], indexing=indexing)
    assert [g.shape for g in listed] == [w.shape for w in np.meshgrid(*arrays[:2], indexing=indexing)]
    assert lucid.meshgrid(lucid.tensor(1.0), lucid.tensor(arrays[0]))[0].shape == (1, 3)
    check_grads(lambda *xs: lucid.meshgrid(*xs, indexing=indexing), *arrays)


def test_meshgrid_errors():
    with pytest.raises(ValueError, match="indexing"):
        lucid.meshgrid(lucid.zeros(2), indexing="yx")
    with pytest.raises(RuntimeError, match="0-d or 1-D"):
        lucid.meshgrid(lucid.zeros(2, 2))
    with pytest.raises(RuntimeError, match="at least one tensor"):
        lucid.meshgrid()
    with pytest.raises(RuntimeError, match="at least one tensor"):
        lucid.cartesian_prod()


def test_cartesian_prod_and_combinations_as_itertools():
    a, b, c = _arr(2), _arr(3, seed=1), _arr(2, seed=2)
    want = np.array(list(itertools.product(a, b, c)), dtype=np.float32)
    np.testing.assert_array_equal(lucid.cartesian_prod(*map(lucid.tensor, (a, b, c))).numpy(), want)
    np.testing.assert_array_equal(lucid.cartesian_prod(lucid.tensor(a)).numpy(), a)
    x = _arr(4)
    for r in range(0, 5):
        for repl, pick in ((False, itertools.combinations), (True, itertools.combinations_with_replacement)):
            got = lucid.combinations(lucid.tensor(x), r, repl)
            if r == 0:
                assert got.shape == (0,)
                continue
            want = np.array(list(pick(x, r)), dtype=np.float32).reshape(-1, r)
            np.testing.assert_array_equal(got.numpy(), want)
    with pytest.raises(RuntimeError, match="1-D"):
        lucid.combinations(lucid.zeros(2, 2))
    check_grads(lambda t: lucid.combinations(t, 2, True), x)
    check_grads(lucid.cartesian_prod, a, b)


# ---- diagonals and the *_scatter ops ------------------------------------------------------------


def _diag_embed_ref(a, offset, dim1, dim2):
    n = a.shape[-1]
    m = n + abs(offset)
    out = np.zeros(a.shape[:-1] + (m, m), dtype=a.dtype)
    i = np.arange(n)
    out[..., i + max(-offset, 0), i + max(offset, 0)] = a
    return np.moveaxis(out, (-2, -1), (dim1, dim2))


@pytest.mark.parametrize("offset,dim1,dim2", [(0, -2, -1), (2, -2, -1), (-1, -2, -1), (1, 1, 2), (-2, 0, 1), (1, 2, 0)])
def test_diag_embed_as_a_numpy_construction(offset, dim1, dim2):
    a = _arr(3, 4)
    got = lucid.diag_embed(lucid.tensor(a), offset, dim1, dim2)
    np.testing.assert_array_equal(got.numpy(), _diag_embed_ref(a, offset, dim1, dim2))


def test_diag_embed_diagflat_errors_and_gradients():
    with pytest.raises(RuntimeError, match="cannot be identical"):
        lucid.diag_embed(lucid.zeros(2, 2), 0, 1, 1)
    for offset in (-1, 0, 2):
        a = _arr(2, 2)
        np.testing.assert_array_equal(lucid.diagflat(lucid.tensor(a), offset).numpy(), np.diagflat(a, offset))
    np.testing.assert_array_equal(lucid.diagflat(lucid.tensor(3.0)).numpy(), [[3.0]])
    check_grads(lambda x: lucid.diag_embed(x, 1), _arr(2, 3))
    check_grads(lambda x: x.diagflat(-1), _arr(3))


@pytest.mark.parametrize("offset,dim1,dim2", [(0, 0, 1), (2, 0, 1), (-2, 0, 1), (1, 1, 2), (-1, 2, 0)])
def test_diagonal_scatter_as_numpy(offset, dim1, dim2):
    a = _arr(4, 5, 3)
    diag = np.diagonal(a, offset, dim1, dim2)
    src = _arr(*diag.shape, seed=3)
    want = a.copy()
    np.diagonal(want, offset, dim1, dim2).setflags(write=True)
    moved = np.moveaxis(want, (dim1, dim2), (-2, -1))
    n = src.shape[-1]
    i = np.arange(n)
    moved[..., i + max(-offset, 0), i + max(offset, 0)] = src
    got = lucid.diagonal_scatter(lucid.tensor(a), lucid.tensor(src), offset, dim1, dim2)
    np.testing.assert_array_equal(got.numpy(), want)
    check_grads(lambda x, s: lucid.diagonal_scatter(x, s, offset, dim1, dim2), a, src)


def test_select_and_slice_scatter_as_numpy():
    a = _arr(4, 5, 3)
    src = _arr(4, 3, seed=2)
    want = a.copy()
    want[:, -2] = src
    np.testing.assert_array_equal(lucid.select_scatter(lucid.tensor(a), lucid.tensor(src), 1, -2).numpy(), want)
    check_grads(lambda x, s: lucid.select_scatter(x, s, 1, 3), a, src)
    np.testing.assert_array_equal(lucid.select_scatter(lucid.zeros(3), lucid.tensor(2.0), 0, 1).numpy(), [0, 2, 0])
    src = _arr(4, 2, 3, seed=3)
    want = a.copy()
    want[:, 1:5:2] = src
    np.testing.assert_array_equal(lucid.slice_scatter(lucid.tensor(a), lucid.tensor(src), 1, 1, 5, 2).numpy(), want)
    check_grads(lambda x, s: x.slice_scatter(s, 1, 1, None, 2), a, src)
    with pytest.raises(RuntimeError, match="expected src of shape"):
        lucid.slice_scatter(lucid.tensor(a), lucid.zeros(4, 3, 3), 1, 0, 2)
    with pytest.raises(IndexError, match="out of range"):
        lucid.select_scatter(lucid.tensor(a), lucid.zeros(4, 3), 1, 5)
    with pytest.raises(RuntimeError, match="step must be positive"):
        lucid.slice_scatter(lucid.tensor(a), lucid.tensor(a), 0, None, None, 0)


def test_as_strided_scatter_as_numpy():
    a = _arr(3, 3)
    src = _arr(2, 2, seed=1)
    want = a.copy().reshape(-1)
    np.lib.stride_tricks.as_strided(want[1:], (2, 2), (4, 8))[...] = src
    got = lucid.as_strided_scatter(lucid.tensor(a), lucid.tensor(src), (2, 2), (1, 2), 1)
    np.testing.assert_array_equal(got.numpy(), want.reshape(3, 3))
    check_grads(lambda x, s: lucid.as_strided_scatter(x, s, (2, 2), (2, 1)), a, src)
    with pytest.raises(RuntimeError, match="reach outside"):
        lucid.as_strided_scatter(lucid.tensor(a), lucid.tensor(src), (2, 2), (5, 5))


# ---- small methods ----------------------------------------------------------------------------------


def test_sum_to_size_as_numpy_sums():
    a = _arr(2, 3, 4)
    np.testing.assert_allclose(lucid.tensor(a).sum_to_size(3, 1).numpy(), a.sum(axis=(0, 2)).reshape(3, 1), rtol=1e-6)
    np.testing.assert_allclose(
        lucid.tensor(a).sum_to_size((1, 1, 4)).numpy(), a.sum(axis=(0, 1), keepdims=True), rtol=1e-6
    )
    assert lucid.tensor(a).sum_to_size(2, 3, 4).shape == (2, 3, 4)
    with pytest.raises(RuntimeError, match="not expandable"):
        lucid.tensor(a).sum_to_size(2, 4)
    check_grads(lambda x: x.sum_to_size(1, 4), _arr(3, 4))


def test_H_and_mH_are_transposes():
    a = _arr(2, 3, 4)
    np.testing.assert_array_equal(lucid.tensor(a).mH.numpy(), a.swapaxes(-1, -2))
    np.testing.assert_array_equal(lucid.tensor(a[0]).H.numpy(), a[0].T)
    assert lucid.tensor(1.0).H.shape == ()
    with pytest.raises(RuntimeError, match="matrices"):
        lucid.zeros(3).mH
    with pytest.raises(RuntimeError, match="2-D"):
        lucid.tensor(a).H


def test_resize_keeps_elements_in_order_and_pads_with_zeros():
    x = lucid.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert x.resize_(3, 2) is x
    np.testing.assert_array_equal(x.numpy(), np.arange(6).reshape(3, 2))
    x.resize_((4, 2))
    np.testing.assert_array_equal(x.numpy(), np.r_[np.arange(6), 0, 0].reshape(4, 2))
    lucid.resize_as_(x, lucid.zeros(5))
    np.testing.assert_array_equal(x.numpy(), np.arange(5))
    with pytest.raises(RuntimeError, match="requires grad"):
        lucid.zeros(2, requires_grad=True).resize_(3)
    with pytest.raises(RuntimeError, match="negative"):
        x.resize_(-1)


def test_clone_to_and_memory_formats():
    a = _arr(2, 3, 4, 5)
    x = lucid.tensor(a, requires_grad=True)
    y = lucid.clone(x, memory_format=lucid.preserve_format)
    np.testing.assert_array_equal(y.numpy(), a)
    z = x.to(lucid.float64, False, True, memory_format=lucid.channels_last)
    assert z.dtype == lucid.float64 and z.shape == x.shape
    assert x.to(lucid.float32, False, True) is not x
    assert x.to(lucid.float32, True) is x
    (z.sum() + y.sum()).backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full_like(a, 2))
    with pytest.raises(TypeError, match="memory_format"):
        x.clone(memory_format="channels_last")
    with pytest.raises(TypeError, match="non_blocking and copy"):
        x.to(True, lucid.float64)
    for name, dtype in [
        ("float", lucid.float32),
        ("half", lucid.float16),
        ("double", lucid.float64),
        ("bfloat16", lucid.bfloat16),
        ("int", lucid.int32),
        ("long", lucid.int64),
        ("bool", lucid.bool_),
    ]:
        converted = getattr(x.detach(), name)(memory_format=lucid.channels_last)
        assert converted.dtype == dtype and converted.shape == x.shape
    np.testing.assert_array_equal(x.detach().bfloat16(memory_format=lucid.contiguous_format).numpy(), a.astype(BF16))
    assert repr(lucid.contiguous_format) == "lucid.contiguous_format"
    assert x.mT.contiguous(lucid.contiguous_format).is_contiguous()


# ---- factories ----------------------------------------------------------------------------------------


def test_scalar_tensor_and_logspace():
    s = lucid.scalar_tensor(-5)
    assert s.shape == () and s.dtype == lucid.float32 and s.item() == -5.0
    assert lucid.scalar_tensor(2, dtype=lucid.int64).dtype == lucid.int64
    with pytest.raises(TypeError, match="number"):
        lucid.scalar_tensor("1")
    for start, end, steps, base in [(0, -3, 5, 10.0), (4.3, 1.2, 7, 2.0), (1, 0, 2, 1.1), (2, 2, 0, 3.0)]:
        want = np.logspace(start, end, steps, base=base).astype(np.float32)
        np.testing.assert_allclose(lucid.logspace(start, end, steps, base).numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(lucid.logspace(lucid.tensor(0), lucid.tensor(2.0), 3).numpy(), [1, 10, 100])
    assert lucid.logspace(0, 1, 4, dtype=lucid.float64).dtype == lucid.float64
    with pytest.raises(RuntimeError, match="non-negative"):
        lucid.logspace(0, 1, -1)
    with pytest.raises(RuntimeError, match="0-d tensor"):
        lucid.logspace(lucid.zeros(2), 1, 3)


def test_empty_strided_and_empty_permuted_have_their_geometry():
    x = lucid.empty_strided((5, 5, 5), (2, 0, 1))
    assert x.shape == (5, 5, 5) and x.stride() == (2, 0, 1)
    assert lucid.empty_strided((2, 0), (3, 4)).shape == (2, 0)
    y = lucid.zeros(5).new_empty_strided((2, 3), (1, 2), dtype=lucid.float64)
    assert y.dtype == lucid.float64 and y.stride() == (1, 2)
    p = lucid.empty_permuted((1, 3, 5), (2, 1, 0))
    assert p.shape == (1, 3, 5) and p.stride() == (1, 1, 3)
    assert lucid.empty_permuted((2, 3), (0, 1)).is_contiguous()
    with pytest.raises(RuntimeError, match="strides for"):
        lucid.empty_strided((2, 2), (1,))
    with pytest.raises(RuntimeError, match="not a permutation"):
        lucid.empty_permuted((2, 3), (0, 0))


@pytest.mark.parametrize("row,col,offset", [(0, 0, 0), (20, 0, 0), (4, 6, 0), (20, 21, 7), (20, 21, -7), (5, 3, 1)])
def test_tril_and_triu_indices_as_numpy(row, col, offset):
    np.testing.assert_array_equal(
        lucid.tril_indices(row, col, offset).numpy(), np.stack(np.tril_indices(row, offset, col)).reshape(2, -1)
    )
    got = lucid.triu_indices(row, col, offset, dtype=lucid.int32)
    assert got.dtype == lucid.int32
    np.testing.assert_array_equal(got.numpy(), np.stack(np.triu_indices(row, offset, col)).reshape(2, -1))


def test_triangle_indices_errors():
    with pytest.raises(TypeError, match="integer dtype"):
        lucid.tril_indices(3, 3, dtype=lucid.float32)
    with pytest.raises(RuntimeError, match="non-negative"):
        lucid.triu_indices(-1, 3)


def test_resolve_conj_and_resolve_neg_return_the_tensor():
    x = lucid.tensor(_arr(2, 3))
    assert lucid.resolve_conj(x) is x and x.resolve_neg() is x
    with pytest.raises(TypeError, match="lucid.Tensor"):
        lucid.resolve_neg([1.0])


def _chunk_cat_ref(arrays, dim, chunks):
    parts = []
    for a in arrays:
        n = a.shape[dim]
        size = -(-n // chunks)
        pad = [(0, 0)] * a.ndim
        pad[dim] = (0, size * chunks - n)
        padded = np.pad(a, pad)
        parts.append(padded.reshape(a.shape[:dim] + (chunks, -1)))
    return np.concatenate(parts, -1)


@pytest.mark.parametrize(
    "shapes,dim,chunks",
    [
        ([(1, 2, 3), (1, 2, 3)], -1, 5),
        ([(3, 3, 2, 1), (1, 4, 2, 2), (2, 1, 3, 3)], 0, 2),
        ([(2, 3, 3), (2, 3, 1, 2), (2, 3)], 1, 3),
    ],
)
def test_chunk_cat_as_a_numpy_construction(shapes, dim, chunks):
    arrays = [_arr(*s, seed=i) for i, s in enumerate(shapes)]
    got = lucid._chunk_cat([lucid.tensor(a) for a in arrays], dim, chunks)
    np.testing.assert_array_equal(got.numpy(), _chunk_cat_ref(arrays, dim % len(shapes[0]), chunks))
    check_grads(lambda *xs: lucid._chunk_cat(list(xs), dim, chunks), *arrays)


def test_chunk_cat_errors():
    with pytest.raises(RuntimeError, match="leading"):
        lucid._chunk_cat([lucid.zeros(2, 3), lucid.zeros(3, 3)], 1, 2)
    with pytest.raises(RuntimeError, match="at least 1"):
        lucid._chunk_cat([lucid.zeros(2, 3)], 1, 0)


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int16", "int32", "int64", "float32"])
@pytest.mark.parametrize("fn", ["tril", "triu"])
def test_tril_and_triu_keep_the_dtype_as_numpy(fn, dtype):
    a = (np.random.default_rng(3).integers(0, 3, (4, 5)) > 0).astype(dtype)
    got = getattr(lucid, fn)(lucid.tensor(a), 1)
    assert str(got.dtype) == f"lucid.{dtype}"
    np.testing.assert_array_equal(got.numpy(), getattr(np, fn)(a, 1))
