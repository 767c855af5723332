"""Sparse COO tensors on the CPU: against their dense equivalents in numpy, with gradients."""

import numpy as np
import pytest

import lucid

I = [[0, 1, 1, 2, 1], [2, 0, 2, 1, 0]]  # (1, 0) twice
V = np.array([3.0, 4.0, 5.0, 6.0, -1.0], dtype=np.float32)


def dense_of(indices, values, shape):
    a = np.zeros(shape, dtype=np.float64)
    np.add.at(a, tuple(np.array(indices)), values)
    return a


def test_to_dense_adds_repeated_positions_and_coalesce_sums_them_once():
    s = lucid.sparse_coo_tensor(I, V, (3, 4))
    assert s.is_sparse and s.shape == (3, 4) and s._nnz() == 5 and not s.is_coalesced()
    np.testing.assert_array_equal(s.to_dense().numpy(), dense_of(I, V, (3, 4)))
    c = s.coalesce()
    assert c.is_coalesced() and c._nnz() == 4
    np.testing.assert_array_equal(c.indices().numpy(), [[0, 1, 1, 2], [2, 0, 2, 1]])
    np.testing.assert_array_equal(c.values().numpy(), [3.0, 3.0, 5.0, 6.0])
    np.testing.assert_array_equal(c.to_dense().numpy(), s.to_dense().numpy())
    with pytest.raises(RuntimeError, match="coalesce"):
        s.indices()


@pytest.mark.parametrize("k", [None, 1, 3])
def test_spmm_matches_the_dense_product_and_its_gradients(k):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4,) if k is None else (4, k)).astype(np.float32)
    g = rng.standard_normal((3,) if k is None else (3, k)).astype(np.float32)
    values = lucid.tensor(V, requires_grad=True)
    dense = lucid.tensor(x, requires_grad=True)
    y = lucid.spmm(lucid.sparse_coo_tensor(I, values, (3, 4)), dense)
    a = dense_of(I, V, (3, 4))
    np.testing.assert_allclose(y.detach().numpy(), a @ x, rtol=1e-5, atol=1e-6)
    (y * lucid.tensor(g)).sum().backward()
    np.testing.assert_allclose(dense.grad.numpy(), a.T @ g, rtol=1e-5, atol=1e-6)
    rows, cols = np.array(I)
    want = (g[rows] * x[cols]) if k is None else (g[rows] * x[cols]).sum(1)
    np.testing.assert_allclose(values.grad.numpy(), want, rtol=1e-5, atol=1e-6)


def test_the_product_spellings_agree():
    s = lucid.sparse_coo_tensor(I, V, (3, 4))
    x = lucid.tensor(np.arange(8, dtype=np.float32).reshape(4, 2))
    want = dense_of(I, V, (3, 4)) @ x.numpy()
    for y in (s @ x, lucid.mm(s, x), lucid.matmul(s, x), lucid.sparse.mm(s, x), s.mm(x)):
        np.testing.assert_allclose(y.numpy(), want, rtol=1e-6)
    left = lucid.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_allclose((left @ s).numpy(), left.numpy() @ dense_of(I, V, (3, 4)), rtol=1e-6)
    np.testing.assert_array_equal(s.t().to_dense().numpy(), dense_of(I, V, (3, 4)).T)


def test_to_sparse_keeps_the_non_zeros_and_their_gradients():
    a = np.array([[0.0, 1.5, 0.0], [-2.0, 0.0, 3.0]], dtype=np.float32)
    x = lucid.tensor(a, requires_grad=True)
    s = x.to_sparse()
    assert s.is_coalesced() and s._nnz() == 3
    np.testing.assert_array_equal(s.to_dense().detach().numpy(), a)
    (s.values() * lucid.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 1, 0], [2, 0, 3]])


def test_legacy_constructor_and_inferred_size():
    s = lucid.sparse.FloatTensor(lucid.tensor(I), lucid.tensor(V))
    assert s.shape == (3, 3) and s.dtype == lucid.float32


def test_wrong_arguments_are_clear_errors():
    with pytest.raises(TypeError, match="CPU-only"):
        lucid.sparse_coo_tensor(I, V, (3, 4), device="metal")
    with pytest.raises(TypeError, match="CPU-only"):
        lucid.tensor([[1.0]], device="metal").to_sparse()
    with pytest.raises(ValueError, match="out of bounds"):
        lucid.sparse_coo_tensor(I, V, (2, 4))
    with pytest.raises(ValueError, match="one value per position"):
        lucid.sparse_coo_tensor(I, V[:3], (3, 4))
    with pytest.raises(TypeError, match="integers"):
        lucid.sparse_coo_tensor(np.zeros((2, 5), np.float32), V)
    with pytest.raises(RuntimeError, match="cannot multiply"):
        lucid.spmm(lucid.sparse_coo_tensor(I, V, (3, 4)), lucid.zeros(3, 2))
    with pytest.raises(TypeError, match="input must be a lucid.Tensor"):
        lucid.mm([[1.0]], lucid.zeros(1, 1))


def test_to_sparse_takes_sparse_dim_equal_to_ndim_and_refuses_hybrid_or_other_layouts():
    a = np.array([[0.0, 1.5, 0.0], [-2.0, 0.0, 3.0]], dtype=np.float32)
    x = lucid.tensor(a, requires_grad=True)
    s = x.to_sparse(2)
    (s.to_dense() * lucid.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.where(a != 0, np.arange(6).reshape(2, 3), 0))
    with pytest.raises(NotImplementedError, match="sparse_dim=1"):
        x.to_sparse(1)
    with pytest.raises(NotImplementedError, match="COO"):
        x.to_sparse(layout="sparse_csr")
