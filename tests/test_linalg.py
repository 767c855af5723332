"""lucid.linalg and the top-level linear algebra (det, svd, lu, cholesky …): values against
numpy.linalg and the factorizations' identities, gradients against finite differences in
float64, batched and empty shapes, the errors of singular, non-square and mistyped inputs, and
"metal" tensors (run on the host's LAPACK)."""

import numpy as np
import pytest

import lucid
from _helpers import numeric_grads

LA = lucid.linalg
F64 = lucid.float64
pytestmark = pytest.mark.filterwarnings("ignore::lucid.metal.MetalFallbackWarning")


def rng(seed=0):
    return np.random.default_rng(seed)


def well(shape, seed=0, dtype=np.float64):
    """Random square matrices, well conditioned (a multiple of the identity added)."""
    a = rng(seed).standard_normal(shape)
    return (a + shape[-1] * np.eye(shape[-1])).astype(dtype)


def spd(shape, seed=0, dtype=np.float64):
    a = rng(seed).standard_normal(shape)
    return (a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def t(a, dtype=None, **kw):
    a = np.asarray(a)
    return lucid.tensor(a, dtype=dtype or (F64 if a.dtype == np.float64 else lucid.float32), **kw)


def close(got, want, tol=1e-5):
    got = got.numpy() if hasattr(got, "numpy") else got
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def check_grads(fn, arrays, tol=1e-5, eps=1e-6):
    """Analytic gradients of sum(fn(*arrays) * w) (float64) against central differences."""
    ins = [t(a).requires_grad_() for a in arrays]
    out = fn(*ins)
    w = rng(99).standard_normal(tuple(out.shape))
    (out * t(w)).sum().backward()
    want = numeric_grads(fn, [a.copy() for a in arrays], w, eps=eps, dtype=F64)
    for x, g in zip(ins, want):
        np.testing.assert_allclose(x.grad.numpy(), g, rtol=tol, atol=tol)


# ---- values -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(4, 4), (3, 2, 5, 5), (1, 1)])
def test_det_slogdet_logdet_inv_agree_with_numpy(dtype, shape):
    a = well(shape, 1, dtype) * np.where(rng(2).random(shape[:-2] + (1, 1)) < 0.5, -1, 1).astype(dtype)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    x = t(a)
    close(LA.det(x), np.linalg.det(a), tol * 10)
    sign, logabs = LA.slogdet(x)
    want_sign, want_log = np.linalg.slogdet(a)
    close(sign, want_sign, 0)
    close(logabs, want_log, tol)
    assert str(sign.dtype) == str(x.dtype) and str(logabs.dtype) == str(x.dtype)
    close(lucid.logdet(x), np.where(want_sign > 0, want_log, np.nan), tol)
    close(LA.inv(x), np.linalg.inv(a), tol)
    close(x.inverse(), np.linalg.inv(a), tol)
    close(x.det(), np.linalg.det(a), tol * 10)
    assert tuple(lucid.slogdet(x).logabsdet.shape) == shape[:-2]


def test_det_of_empty_and_singular_matrices():
    close(LA.det(t(np.zeros((0, 0)))), 1.0)
    close(LA.det(t(np.zeros((2, 0, 0)))), [1.0, 1.0])
    sing = np.array([[1.0, 2.0], [2.0, 4.0]])
    close(LA.det(t(sing)), 0.0)
    sign, logabs = LA.slogdet(t(sing))
    assert sign.item() == 0 and logabs.item() == -np.inf


@pytest.mark.parametrize("left", [True, False])
def test_solve_matrix_vector_and_broadcast_right_hand_sides(left):
    a = well((2, 4, 4), 3)
    b = rng(4).standard_normal((2, 4, 3) if left else (2, 3, 4))
    want = (
        np.linalg.solve(a, b)
        if left
        else np.swapaxes(np.linalg.solve(np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)
    )
    close(LA.solve(t(a), t(b), left=left), want, 1e-10)
    v = rng(5).standard_normal(4)
    close(LA.solve(t(a[0]), t(v)), np.linalg.solve(a[0], v), 1e-10)
    vb = rng(6).standard_normal((2, 4))
    close(LA.solve(t(a), t(vb)), np.linalg.solve(a, vb[..., None])[..., 0], 1e-10)
    # One matrix against a batch of right-hand sides.
    bb = rng(7).standard_normal((3, 4, 2))
    close(LA.solve(t(a[0]), t(bb)), np.linalg.solve(a[0], bb), 1e-10)
    x, info = LA.solve_ex(t(a), t(b), left=left)
    close(x, want, 1e-10)
    assert info.dtype == lucid.int32 and info.numpy().tolist() == [0, 0]


def lu_reference(a):
    """LU with partial pivoting (the first largest magnitude in each column), packed, and the
    1-based pivots, as LAPACK's getrf."""
    a = a.astype(np.float64).copy()
    m, n = a.shape
    piv = []
    for k in range(min(m, n)):
        p = k + int(np.argmax(np.abs(a[k:, k])))
        piv.append(p + 1)
        a[[k, p]] = a[[p, k]]
        if a[k, k] != 0:
            a[k + 1 :, k] /= a[k, k]
            a[k + 1 :, k + 1 :] -= np.outer(a[k + 1 :, k], a[k, k + 1 :])
    return a, np.array(piv, dtype=np.int32)


@pytest.mark.parametrize("shape", [(5, 5), (3, 5), (5, 3), (2, 4, 4)])
def test_lu_factor_lu_and_unpack_agree_with_partial_pivoting(shape):
    a = rng(8).standard_normal(shape)
    LU, piv = LA.lu_factor(t(a))
    flat_a = a.reshape((-1,) + shape[-2:])
    ref = [lu_reference(m) for m in flat_a]
    close(LU.numpy().reshape(flat_a.shape), np.stack([r[0] for r in ref]), 1e-10)
    assert piv.dtype == lucid.int32
    assert piv.numpy().reshape(len(ref), -1).tolist() == [r[1].tolist() for r in ref]
    P, L, U = LA.lu(t(a))
    close(P @ L @ U, a, 1e-10)
    k = min(shape[-2:])
    assert tuple(L.shape) == shape[:-2] + (shape[-2], k) and tuple(U.shape) == shape[:-2] + (k, shape[-1])
    P2, L2, U2 = lucid.lu_unpack(LU, piv)
    close(P2, P.numpy(), 0)
    close(L2, L.numpy(), 0)
    LU3, piv3, info = LA.lu_factor_ex(t(a))
    assert info.numpy().reshape(-1).tolist() == [0] * len(ref)
    LU4, piv4 = lucid.lu(t(a))
    close(LU4, LU.numpy(), 0)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve_every_side_and_transpose(left, adjoint):
    a = well((2, 4, 4), 9)
    b = rng(10).standard_normal((2, 4, 3) if left else (2, 3, 4))
    LU, piv = LA.lu_factor(t(a))
    op = np.swapaxes(a, -1, -2) if adjoint else a
    want = (
        np.linalg.solve(op, b)
        if left
        else np.swapaxes(np.linalg.solve(np.swapaxes(op, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)
    )
    close(LA.lu_solve(LU, piv, t(b), left=left, adjoint=adjoint), want, 1e-10)
    if left and not adjoint:
        close(lucid.lu_solve(t(b), LU, piv), want, 1e-10)


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [True, False])
def test_solve_triangular_reads_one_triangle(upper, left, unit):
    a = well((3, 4, 4), 11)
    tri = np.triu(a) if upper else np.tril(a)
    if unit:
        tri = tri - tri * np.eye(4) + np.eye(4)
    b = rng(12).standard_normal((3, 4, 2) if left else (3, 2, 4))
    want = (
        np.linalg.solve(tri, b)
        if left
        else np.swapaxes(np.linalg.solve(np.swapaxes(tri, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)
    )
    # The other triangle (and the diagonal when unit) holds garbage that must not be read.
    close(LA.solve_triangular(t(a), t(b), upper=upper, left=left, unitriangular=unit), want, 1e-10)
    if left:
        x, coeff = lucid.triangular_solve(t(b), t(a), upper=upper, unitriangular=unit)
        close(x, want, 1e-10)
        close(coeff, a, 0)
        xt, _ = lucid.triangular_solve(
            t(b), t(np.swapaxes(a, -1, -2)), upper=not upper, transpose=True, unitriangular=unit
        )
        close(xt, want, 1e-10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cholesky_lower_and_upper(dtype):
    a = spd((2, 5, 5), 13, dtype)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    L = LA.cholesky(t(a))
    close(L, np.linalg.cholesky(a), tol)
    U = LA.cholesky(t(a), upper=True)
    close(U, np.swapaxes(np.linalg.cholesky(a), -1, -2), tol)
    close(t(a).cholesky(), np.linalg.cholesky(a), tol)
    L2, info = LA.cholesky_ex(t(a))
    assert info.numpy().tolist() == [0, 0]
    close(lucid.cholesky_inverse(L), np.linalg.inv(a), tol * 10)
    close(lucid.cholesky_inverse(U, upper=True), np.linalg.inv(a), tol * 10)
    b = rng(14).standard_normal((2, 5, 2)).astype(dtype)
    close(lucid.cholesky_solve(t(b), L), np.linalg.solve(a, b), tol * 10)


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_and_eigvalsh(uplo):
    a = rng(15).standard_normal((3, 5, 5))
    sym = (
        np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2)
        if uplo == "L"
        else np.triu(a) + np.swapaxes(np.triu(a, 1), -1, -2)
    )
    w, v = LA.eigh(t(a), UPLO=uplo)
    close(w, np.linalg.eigvalsh(sym), 1e-10)
    vn = v.numpy()
    close(sym @ vn, vn * w.numpy()[..., None, :], 1e-10)
    close(np.swapaxes(vn, -1, -2) @ vn, np.broadcast_to(np.eye(5), vn.shape), 1e-10)
    close(LA.eigvalsh(t(a), UPLO=uplo), np.linalg.eigvalsh(sym), 1e-10)


@pytest.mark.parametrize("shape", [(4, 6), (6, 4), (2, 5, 5), (3, 0)])
@pytest.mark.parametrize("full", [True, False])
def test_svd_factors_reconstruct_and_match_numpy(shape, full):
    a = rng(16).standard_normal(shape)
    U, S, Vh = LA.svd(t(a), full_matrices=full)
    m, n = shape[-2:]
    k = min(m, n)
    assert tuple(U.shape) == shape[:-2] + (m, m if full else k)
    assert tuple(Vh.shape) == shape[:-2] + (n if full else k, n)
    close(S, np.linalg.svd(a, compute_uv=False), 1e-10)
    recon = (U.numpy()[..., :, :k] * S.numpy()[..., None, :]) @ Vh.numpy()[..., :k, :]
    close(recon, a, 1e-10)
    close(LA.svdvals(t(a)), np.linalg.svd(a, compute_uv=False), 1e-10)
    U2, S2, V2 = lucid.svd(t(a), some=not full)
    close(V2, np.swapaxes(Vh.numpy(), -1, -2), 0)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_modes(shape, mode):
    a = rng(17).standard_normal(shape)
    Q, R = LA.qr(t(a), mode=mode)
    m, n = shape[-2:]
    k = min(m, n)
    _, r_np = np.linalg.qr(a, mode="reduced" if mode != "complete" else "complete")
    close(np.abs(R.numpy()), np.abs(r_np), 1e-10)
    close(R.numpy(), np.triu(R.numpy()), 0)
    if mode == "r":
        assert Q.numel() == 0
        return
    close(Q @ R, a, 1e-10)
    qn = Q.numpy()
    cols = m if mode == "complete" else k
    assert qn.shape[-1] == cols
    close(np.swapaxes(qn, -1, -2) @ qn, np.broadcast_to(np.eye(cols), shape[:-2] + (cols, cols)), 1e-10)


def test_geqrf_householder_product_and_ormqr():
    a = rng(18).standard_normal((5, 3))
    packed, tau = lucid.geqrf(t(a))
    Q = LA.householder_product(packed, tau)
    R = np.triu(packed.numpy()[:3])
    close(Q.numpy() @ R, a, 1e-10)
    c = rng(19).standard_normal((5, 2))
    q_full, _ = np.linalg.qr(a, mode="complete")
    q_ours = lucid.ormqr(packed, tau, t(np.eye(5))).numpy()
    close(q_ours[:, :3], Q.numpy(), 1e-10)
    close(lucid.ormqr(packed, tau, t(c)), q_ours @ c, 1e-10)
    close(lucid.ormqr(packed, tau, t(c), transpose=True), q_ours.T @ c, 1e-10)
    close(lucid.ormqr(packed, tau, t(c.T), left=False), c.T @ q_ours, 1e-10)
    close(np.abs(q_ours.T @ q_full), np.abs(np.diag(np.diag(q_ours.T @ q_full))), 1e-10)


def test_pinv_matrix_rank_lstsq_against_numpy():
    a = rng(20).standard_normal((2, 5, 3))
    close(LA.pinv(t(a)), np.linalg.pinv(a), 1e-10)
    close(lucid.pinverse(t(a)), np.linalg.pinv(a), 1e-10)
    low = rng(21).standard_normal((4, 2)) @ rng(22).standard_normal((2, 4))
    close(LA.pinv(t(low)), np.linalg.pinv(low), 1e-8)
    assert LA.matrix_rank(t(low)).item() == 2 and LA.matrix_rank(t(low)).dtype == lucid.int64
    sym = low + low.T
    close(LA.pinv(t(sym), hermitian=True), np.linalg.pinv(sym, hermitian=True), 1e-8)
    assert LA.matrix_rank(t(sym), hermitian=True).item() == np.linalg.matrix_rank(sym, hermitian=True)
    assert LA.matrix_rank(t(low), atol=1e3).item() == 0
    b = rng(23).standard_normal((2, 5, 2))
    sol, res, rank, sv = LA.lstsq(t(a), t(b), driver="gelsd")
    want = [np.linalg.lstsq(a[i], b[i], rcond=None) for i in range(2)]
    close(sol, np.stack([w[0] for w in want]), 1e-10)
    close(res, np.stack([w[1] for w in want]), 1e-10)
    assert rank.numpy().tolist() == [3, 3]
    close(sv, np.stack([w[3] for w in want]), 1e-10)
    sol2, res2, _, sv2 = LA.lstsq(t(a), t(b))
    close(sol2, sol.numpy(), 1e-10)
    assert res2.numel() == 0 and sv2.numel() == 0


@pytest.mark.parametrize("ord", ["fro", "nuc", 1, -1, 2, -2, float("inf"), float("-inf")])
def test_matrix_norm_every_order(ord):
    a = rng(24).standard_normal((3, 4, 5))
    want = np.stack([np.linalg.norm(m, ord) for m in a])
    close(LA.matrix_norm(t(a), ord), want, 1e-10)
    close(LA.norm(t(a), ord, dim=(-2, -1)), want, 1e-10)
    kept = LA.matrix_norm(t(a), ord, dim=(0, 2), keepdim=True)
    assert tuple(kept.shape) == (1, 4, 1)
    close(kept.numpy()[0, :, 0], [np.linalg.norm(a[:, i, :], ord) for i in range(4)], 1e-10)
    if ord == "nuc":
        close(lucid.norm(t(a[0]), p="nuc"), np.linalg.norm(a[0], "nuc"), 1e-10)
        close(lucid.norm(t(a), p="nuc", dim=(1, 2)), want, 1e-10)


@pytest.mark.parametrize("ord", [2, 1, 0, 3.5, -1, -2.5, float("inf"), float("-inf")])
def test_vector_norm_every_order(ord):
    x = rng(25).standard_normal((3, 6))
    close(LA.vector_norm(t(x), ord, dim=1), np.linalg.norm(x, ord, axis=1), 1e-10)
    close(LA.vector_norm(t(x), ord), np.linalg.norm(x.reshape(-1), ord), 1e-10)
    close(LA.norm(t(x[0]), ord), np.linalg.norm(x[0], ord), 1e-10)
    assert LA.vector_norm(t(x), ord, dtype=lucid.float32).dtype == lucid.float32


def test_cond_matrix_power_multi_dot_vander_vecdot_cross():
    a = well((2, 4, 4), 26)
    for p in [None, 2, -2, "fro", "nuc", 1, -1, float("inf"), float("-inf")]:
        close(LA.cond(t(a), p), np.linalg.cond(a, p), 1e-8)
    for n in [0, 1, 2, 5, -1, -3]:
        close(LA.matrix_power(t(a), n), np.linalg.matrix_power(a, n), 1e-8)
        close(t(a).matrix_power(n), np.linalg.matrix_power(a, n), 1e-8)
    ms = [rng(27 + i).standard_normal(s) for i, s in enumerate([(3,), (3, 4), (4, 2), (2,)])]
    close(LA.multi_dot([t(m) for m in ms]), np.linalg.multi_dot(ms), 1e-10)
    x = rng(31).standard_normal((2, 4))
    close(LA.vander(t(x)), np.stack([np.vander(r, increasing=True) for r in x]), 1e-10)
    close(LA.vander(t(x), N=6), np.stack([np.vander(r, 6, increasing=True) for r in x]), 1e-10)
    y = rng(32).standard_normal((2, 4))
    close(LA.vecdot(t(x), t(y)), (x * y).sum(-1), 1e-10)
    u, v = rng(33).standard_normal((4, 3)), rng(34).standard_normal((4, 3))
    close(LA.cross(t(u), t(v)), np.cross(u, v), 1e-10)
    close(lucid.cross(t(u.T), t(v.T)), np.cross(u.T, v.T, axis=0), 1e-10)
    close(t(u).cross(t(v), dim=1), np.cross(u, v), 1e-10)
    close(LA.diagonal(t(a), offset=1), np.diagonal(a, 1, -2, -1), 0)


def test_tensorinv_tensorsolve_matrix_exp_sqrth_polar():
    a = well((6, 6), 35).reshape(2, 3, 6)
    close(LA.tensorinv(t(a), ind=2), np.linalg.tensorinv(a, ind=2), 1e-10)
    b = rng(36).standard_normal((2, 3))
    close(LA.tensorsolve(t(a), t(b)), np.linalg.tensorsolve(a, b), 1e-10)
    s = spd((4, 4), 37) / 4
    w, v = np.linalg.eigh(s)
    close(LA.matrix_exp(t(s)), (v * np.exp(w)) @ v.T, 1e-10)
    g = rng(38).standard_normal((2, 4, 4)) * 3
    e, e_neg = LA.matrix_exp(t(g)).numpy(), lucid.matrix_exp(t(-g)).numpy()
    close(e @ e_neg, np.broadcast_to(np.eye(4), g.shape), 1e-8)
    r = LA.matrix_sqrth(t(s)).numpy()
    close(r @ r, s, 1e-10)
    m = rng(39).standard_normal((5, 3))
    U, H = LA.polar(t(m))
    close(U @ H, m, 1e-10)
    close(U.numpy().T @ U.numpy(), np.eye(3), 1e-10)


def test_lowrank_approximations_have_the_shapes_and_recover_low_rank_matrices():
    a = rng(40).standard_normal((8, 3)) @ rng(41).standard_normal((3, 6))
    U, S, V = lucid.svd_lowrank(t(a), q=3)
    assert tuple(U.shape) == (8, 3) and tuple(S.shape) == (3,) and tuple(V.shape) == (6, 3)
    close((U.numpy() * S.numpy()) @ V.numpy().T, a, 1e-8)
    close(S, np.linalg.svd(a, compute_uv=False)[:3], 1e-8)
    U2, S2, V2 = lucid.pca_lowrank(t(a), q=2)
    assert tuple(U2.shape) == (8, 2) and tuple(V2.shape) == (6, 2)


def test_out_arguments_and_result_names():
    a = well((3, 3), 42)
    o = lucid.zeros(3, 3, dtype=F64)
    assert LA.inv(t(a), out=o) is o
    close(o, np.linalg.inv(a), 1e-10)
    res = LA.eigh(t(spd((3, 3), 43)))
    assert res.eigenvalues is res[0] and res.eigenvectors is res[1]
    assert LA.svd(t(a)).Vh is not None and LA.qr(t(a)).R is not None and LA.slogdet(t(a)).logabsdet is not None


# ---- gradients ----------------------------------------------------------------------------------


def test_gradients_of_det_slogdet_inv_solve():
    a = well((2, 3, 3), 44)
    check_grads(LA.det, [a])
    check_grads(lambda x: LA.slogdet(x).logabsdet, [a])
    check_grads(LA.inv, [a])
    b = rng(45).standard_normal((2, 3, 2))
    check_grads(LA.solve, [a, b])
    check_grads(lambda x, y: LA.solve(x, y, left=False), [a, rng(46).standard_normal((2, 2, 3))])


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3)])
def test_gradient_of_lu_factor(shape):
    a = rng(47).standard_normal(shape)
    check_grads(lambda x: LA.lu_factor(x).LU, [a])
    if shape[0] == shape[1]:
        b = rng(48).standard_normal((shape[0], 2))
        check_grads(lambda x, y: LA.lu_solve(*LA.lu_factor(x), y), [a, b])


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("left", [True, False])
def test_gradient_of_solve_triangular(upper, left):
    a = well((3, 3), 49)
    b = rng(50).standard_normal((3, 2) if left else (2, 3))
    tri = (lambda x: lucid.triu(x)) if upper else (lambda x: lucid.tril(x))
    check_grads(lambda x, y: LA.solve_triangular(tri(x), y, upper=upper, left=left), [a, b])


def test_gradients_of_cholesky_eigh_svd_qr():
    s = rng(51).standard_normal((4, 4))
    sym = lambda x: x @ x.mT + 4 * lucid.eye(4, dtype=F64)  # noqa: E731
    check_grads(lambda x: LA.cholesky(sym(x)), [s])
    check_grads(lambda x: LA.cholesky(sym(x), upper=True), [s])
    # Sign-invariant functions of the eigenvectors and singular vectors.
    check_grads(lambda x: LA.eigvalsh(x + x.mT), [s])
    check_grads(lambda x: LA.eigh(x + x.mT).eigenvectors ** 2, [s])
    m = rng(52).standard_normal((4, 3))
    check_grads(LA.svdvals, [m])
    check_grads(lambda x: LA.svd(x, full_matrices=False).U ** 2, [m])
    check_grads(lambda x: LA.svd(x, full_matrices=False).Vh ** 2, [m.T.copy()])
    for shape in [(5, 3), (3, 5), (4, 4)]:
        a = rng(53).standard_normal(shape)
        check_grads(lambda x: LA.qr(x).Q, [a])
        check_grads(lambda x: LA.qr(x).R, [a])


def test_gradients_of_the_compositions():
    a = rng(54).standard_normal((4, 3))
    check_grads(LA.pinv, [a])
    check_grads(lambda x: LA.lstsq(x, x[:, :2] * 2 + 1).solution, [a])
    check_grads(lambda x: LA.matrix_norm(x, "nuc"), [a])
    check_grads(lambda x: LA.matrix_norm(x, 2), [a])
    check_grads(lambda x: LA.vector_norm(x, 3.5, dim=1), [a])
    check_grads(lambda x: LA.matrix_exp(x[:3] / 2), [a])
    packed, tau = lucid.geqrf(t(a))
    check_grads(LA.householder_product, [packed.numpy(), tau.numpy()])
    check_grads(lambda x: lucid.cholesky_inverse(lucid.tril(x[:3]) + 3 * lucid.eye(3, dtype=F64)), [a])


def test_norm_gradients_at_zero_are_zero():
    for ord in [2, 3.5, -3.5, 1, float("inf")]:
        x = lucid.zeros(5, dtype=F64, requires_grad=True)
        LA.vector_norm(x, ord).backward()
        assert x.grad.numpy().tolist() == [0.0] * 5, ord


# ---- errors -------------------------------------------------------------------------------------


def test_singular_and_indefinite_inputs_raise_or_report():
    sing = t(np.array([[1.0, 2.0], [2.0, 4.0]]))
    with pytest.raises(RuntimeError, match="singular"):
        LA.inv(sing)
    with pytest.raises(RuntimeError, match="singular"):
        LA.solve(sing, t(np.ones(2)))
    with pytest.raises(RuntimeError, match="singular"):
        LA.lu_factor(sing)
    _, info = LA.inv_ex(sing)
    assert info.item() == 2
    assert LA.lu_factor_ex(sing).info.item() == 2
    with pytest.raises(RuntimeError, match="singular"):
        LA.inv_ex(sing, check_errors=True)
    bad = t(np.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(RuntimeError, match="positive-definite"):
        LA.cholesky(bad)
    assert LA.cholesky_ex(bad).info.item() == 2
    with pytest.raises(RuntimeError, match="positive-definite"):
        LA.cholesky_ex(bad, check_errors=True)


def test_wrong_shapes_dtypes_and_arguments_raise():
    with pytest.raises(ValueError, match="square"):
        LA.inv(t(np.ones((2, 3))))
    with pytest.raises(ValueError, match="square"):
        LA.cholesky(t(np.ones((2, 3))))
    with pytest.raises(ValueError, match="square"):
        LA.eigh(t(np.ones((2, 3))))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        LA.det(t(np.ones(3)))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        LA.svd(t(np.ones(3)))
    with pytest.raises(TypeError, match="float32 or float64"):
        LA.svd(lucid.ones(2, 2, dtype=lucid.int64))
    with pytest.raises(TypeError, match="float32 or float64"):
        LA.cholesky(lucid.eye(2).half())
    with pytest.raises(TypeError, match="floating-point"):
        LA.inv(lucid.ones(2, 2, dtype=lucid.int32))
    with pytest.raises(ValueError, match="incompatible shapes"):
        LA.solve_triangular(t(np.eye(3)), t(np.ones((2, 2))), upper=True)
    with pytest.raises(TypeError, match="one dtype"):
        LA.solve_triangular(t(np.eye(2)), lucid.ones(2, 2), upper=True)
    with pytest.raises(ValueError, match="UPLO"):
        LA.eigh(t(np.eye(2)), UPLO="X")
    with pytest.raises(ValueError, match="mode"):
        LA.qr(t(np.eye(2)), mode="full")
    with pytest.raises(RuntimeError, match="driver"):
        LA.svd(t(np.eye(2)), driver="gesvd")
    with pytest.raises(RuntimeError, match="without pivoting"):
        LA.lu_factor(t(np.eye(2)), pivot=False)
    with pytest.raises(RuntimeError, match="not differentiable"):
        LA.qr(t(np.ones((3, 2))).requires_grad_(), mode="complete")
    with pytest.raises(ValueError, match="size 3"):
        LA.cross(t(np.ones((2, 4))), t(np.ones((2, 4))))
    with pytest.raises(ValueError, match="ord"):
        LA.matrix_norm(t(np.eye(2)), 3)
    with pytest.raises(TypeError, match="integer"):
        LA.matrix_power(t(np.eye(2)), 1.5)
    with pytest.raises(TypeError, match="int32"):
        lucid.lu_unpack(t(np.eye(2)), lucid.ones(2, dtype=lucid.int64))
    with pytest.raises(ValueError, match="out of range"):
        lucid.lu_unpack(t(np.eye(2)), lucid.tensor([5, 2], dtype=lucid.int32))
    with pytest.raises(RuntimeError, match="driver"):
        LA.lstsq(t(np.eye(2)), t(np.eye(2)), driver="gesv")


def test_operands_on_two_devices_raise():
    with pytest.raises(RuntimeError, match="cpu") as e:
        LA.solve_triangular(lucid.eye(2), lucid.ones(2, 1, device="metal"), upper=True)
    assert "metal" in str(e.value)


# ---- metal ----------------------------------------------------------------------------------------


def test_metal_tensors_run_on_the_host_lapack_and_are_counted():
    a = well((2, 4, 4), 55, np.float32)
    before = lucid.metal.host_fallback_counts()
    x = t(a, device="metal")
    for fn, want in [
        (LA.det, np.linalg.det(a)),
        (LA.inv, np.linalg.inv(a)),
        (LA.svdvals, np.linalg.svd(a, compute_uv=False)),
    ]:
        r = fn(x)
        assert r.device == x.device
        close(r.cpu(), want, 1e-4)
    s = spd((4, 4), 56, np.float32)
    close(LA.cholesky(t(s, device="metal")).cpu(), np.linalg.cholesky(s), 1e-4)
    close(LA.eigvalsh(t(s, device="metal")).cpu(), np.linalg.eigvalsh(s), 1e-4)
    Q, R = LA.qr(x)
    close((Q @ R).cpu(), a, 1e-4)
    after = lucid.metal.host_fallback_counts()
    if not lucid.metal.is_available():
        return  # the host fallback serves "metal": nothing falls back from a GPU
    assert after.get("linalg.lu_factor_ex", 0) > before.get("linalg.lu_factor_ex", 0)
    g = t(a, device="metal").requires_grad_()
    LA.det(g).sum().backward()
    close(g.grad.cpu(), np.linalg.det(a)[:, None, None] * np.swapaxes(np.linalg.inv(a), -1, -2), 1e-3)


def ldl_reconstruct(ld, piv):
    """P L D Lᵀ Pᵀ from sytrf's lower packing and pivots (LAPACK's documented layout)."""
    n = ld.shape[0]
    A = np.eye(n)  # accumulates U = P1 L1 P2 L2 …, with D, as A = U D Uᵀ
    D = np.zeros((n, n))
    U = np.eye(n)
    k = 0
    while k < n:
        if piv[k] > 0:
            p = piv[k] - 1
            Pk = np.eye(n)
            Pk[[k, p]] = Pk[[p, k]]
            Lk = np.eye(n)
            Lk[k + 1 :, k] = ld[k + 1 :, k]
            U = U @ Pk @ Lk
            D[k, k] = ld[k, k]
            k += 1
        else:
            p = -piv[k] - 1
            Pk = np.eye(n)
            Pk[[k + 1, p]] = Pk[[p, k + 1]]
            Lk = np.eye(n)
            Lk[k + 2 :, k : k + 2] = ld[k + 2 :, k : k + 2]
            U = U @ Pk @ Lk
            D[k : k + 2, k : k + 2] = [[ld[k, k], ld[k + 1, k]], [ld[k + 1, k], ld[k + 1, k + 1]]]
            k += 2
    del A
    return U @ D @ U.T


def test_ldl_factor_and_solve():
    a = rng(60).standard_normal((2, 5, 5))
    sym = a + np.swapaxes(a, -1, -2)
    LD, piv = LA.ldl_factor(t(sym))
    assert piv.dtype == lucid.int32 and tuple(piv.shape) == (2, 5)
    ld = LD.numpy()
    close(np.triu(ld, 1), np.zeros_like(ld), 0)
    for i in range(2):
        close(ldl_reconstruct(ld[i], piv.numpy()[i]), sym[i], 1e-10)
    b = rng(61).standard_normal((2, 5, 3))
    close(LA.ldl_solve(LD, piv, t(b)), np.linalg.solve(sym, b), 1e-10)
    close(LA.ldl_solve(LD, piv, t(b[0])), np.linalg.solve(sym, b[0]), 1e-10)
    _, _, info = LA.ldl_factor_ex(t(sym))
    assert info.numpy().tolist() == [0, 0]
    zero = t(np.zeros((2, 2)))
    assert LA.ldl_factor_ex(zero).info.item() == 1
    with pytest.raises(RuntimeError, match="singular"):
        LA.ldl_factor(zero)
    with pytest.raises(TypeError, match="int32"):
        LA.ldl_solve(LD, piv.to(lucid.int64), t(b))
    with pytest.raises(ValueError, match="out of range"):
        LA.ldl_solve(LD, lucid.full((2, 5), 9, dtype=lucid.int32), t(b))


def test_a_zero_on_the_triangle_diagonal_gives_infinities_as_substitution_does():
    a = np.array([[1.0, 2.0], [0.0, 0.0]])
    b = np.array([[1.0], [1.0]])
    x = LA.solve_triangular(t(a), t(b), upper=True).numpy()
    # 0·y = 1 makes y infinite, and x = 1 - 2y then -inf.
    assert x[1, 0] == np.inf and x[0, 0] == -np.inf
    sol, info = LA.solve_ex(t(np.array([[1.0, 2.0], [2.0, 4.0]])), t(b))
    assert info.item() == 2 and not np.isfinite(sol.numpy()).all()
