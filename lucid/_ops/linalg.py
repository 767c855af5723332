"""Linear algebra (``torch.linalg`` and the top-level ``det``, ``svd``, ``lu`` …), with
`LinalgMethods`.

The engine factors matrices with LAPACK (LU, Cholesky, symmetric eigen, SVD, QR) and solves
triangular systems, with the gradients of those; everything here is composed from them and
from ordinary ops, so autograd comes from the parts. Matrices are float32 or float64, batched
over leading dimensions; "metal" tensors run on the host's LAPACK over the same memory.
"""

from __future__ import annotations

import math
from collections import namedtuple
from functools import reduce as _fold

import numpy as np

from .. import _C
from .._core import TensorBase, result, tensor_arg
from .._types import as_index, float64, int32, int64
from .composed import eye
from .creation import tensor, zeros, zeros_like
from .elementwise import matmul, maximum, where
from .reduce import amax, amin, sum
from .shape import cat, diagonal as _diagonal, reshape, stack, tril, triu, unbind
from .writes import returned

__all__ = [
    "cross",
    "det",
    "logdet",
    "slogdet",
    "inverse",
    "pinverse",
    "svd",
    "lu",
    "lu_solve",
    "lu_unpack",
    "triangular_solve",
    "cholesky",
    "cholesky_inverse",
    "cholesky_solve",
    "geqrf",
    "ormqr",
    "matrix_exp",
    "svd_lowrank",
    "pca_lowrank",
    "qr",
    "matrix_power",
    "orgqr",
]

# Result types named as PyTorch's torch.return_types.
LUFactorResult = namedtuple("linalg_lu_factor", ["LU", "pivots"])
LUFactorExResult = namedtuple("linalg_lu_factor_ex", ["LU", "pivots", "info"])
PLUResult = namedtuple("linalg_lu", ["P", "L", "U"])
LUUnpackResult = namedtuple("lu_unpack", ["P", "L", "U"])
CholeskyExResult = namedtuple("linalg_cholesky_ex", ["L", "info"])
InvExResult = namedtuple("linalg_inv_ex", ["inverse", "info"])
SolveExResult = namedtuple("linalg_solve_ex", ["result", "info"])
SlogdetResult = namedtuple("linalg_slogdet", ["sign", "logabsdet"])
TopSlogdetResult = namedtuple("slogdet", ["sign", "logabsdet"])
EighResult = namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])
SVDResult = namedtuple("linalg_svd", ["U", "S", "Vh"])
TopSVDResult = namedtuple("svd", ["U", "S", "V"])
QRResult = namedtuple("linalg_qr", ["Q", "R"])
TopQRResult = namedtuple("qr", ["Q", "R"])
LstsqResult = namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])
TriangularSolveResult = namedtuple("triangular_solve", ["solution", "cloned_coefficient"])
GeqrfResult = namedtuple("geqrf", ["a", "tau"])
PolarResult = namedtuple("linalg_polar", ["U", "H"])


# ---- helpers ------------------------------------------------------------------------------------


def _matrix(A, fn, what="A", square=False):
    """`A`, a tensor of at least two dimensions (square when asked) of a floating dtype."""
    tensor_arg(A, fn, what)
    if not A.dtype.is_floating_point:
        raise TypeError(f"{fn}(): expected {what} of a floating-point dtype (float32 or float64), got {A.dtype}")
    if A.ndim < 2:
        raise ValueError(f"{fn}(): {what} must have at least 2 dimensions, got shape {tuple(A.shape)}")
    if square and A.shape[-1] != A.shape[-2]:
        raise ValueError(f"{fn}(): {what} must be batches of square matrices, got shape {tuple(A.shape)}")
    return A


def _eye_like(A, n=None, m=None):
    n = A.shape[-1] if n is None else n
    return eye(n, m, dtype=A.dtype, device=A.device)


def _mT(A):
    return A.transpose(-2, -1)


def _product(xs, like):
    """The product of the tensors `xs` (1 when there are none), a chain of multiplications."""
    xs = list(xs)
    return _fold(lambda a, b: a * b, xs) if xs else zeros(like.shape, dtype=like.dtype, device=like.device) + 1


def _tied(out, *sources):
    """`out` plus zero times each source's sum: the same values, with the (zero) gradient
    PyTorch records for results that do not depend on the entries of their inputs."""
    for src in sources:
        out = out + 0 * src.sum()
    return out


def _sign(x):
    """-1, 0 or 1 by the sign of x, in x's dtype (no gradient)."""
    return (x > 0).to(x.dtype) - (x < 0).to(x.dtype)


def _check_info(info, fn, message):
    """Raises RuntimeError(message) when any info is non-zero (the engine's LAPACK info)."""
    bad = np.nonzero(info.numpy().reshape(-1))[0]
    if bad.size:
        where_ = f" (batch element {int(bad[0])})" if info.ndim else ""
        raise RuntimeError(f"{fn}: {message}{where_}")


def _permutation(pivots, m, like):
    """The permutation matrices P ([..., m, m], like's dtype) with A = P @ L @ U, from LAPACK's
    1-based row swaps."""
    piv = pivots.numpy()
    k = piv.shape[-1]
    flat = piv.reshape(int(np.prod(piv.shape[:-1])), k)
    out = np.zeros((flat.shape[0], m, m))
    for b, swaps in enumerate(flat):
        rows = np.arange(m)
        for i, p in enumerate(swaps):
            j = int(p) - 1
            if not 0 <= j < m:
                raise ValueError(
                    f"lu_unpack(): pivot {int(p)} is out of range for a matrix of {m} rows "
                    "(pivots are 1-based row numbers, as linalg.lu_factor returns them)"
                )
            rows[i], rows[j] = rows[j], rows[i]
        out[b, rows, np.arange(m)] = 1
    return tensor(out.reshape(piv.shape[:-1] + (m, m)), dtype=like.dtype, device=like.device)


def _check_pivots(LU, pivots, fn):
    tensor_arg(pivots, fn, "pivots")
    if pivots.dtype != int32:
        raise TypeError(f"{fn}(): pivots must be int32 (as linalg.lu_factor returns them), got {pivots.dtype}")
    k = min(LU.shape[-2], LU.shape[-1])
    if tuple(pivots.shape) != tuple(LU.shape[:-2]) + (k,):
        raise ValueError(
            f"{fn}(): pivots of shape {tuple(pivots.shape)} do not match LU of shape {tuple(LU.shape)} "
            f"(expected {tuple(LU.shape[:-2]) + (k,)})"
        )


def _uplo(UPLO, fn):
    if UPLO not in ("L", "U", "l", "u"):
        raise ValueError(f"{fn}(): UPLO must be 'L' or 'U', got {UPLO!r}")
    return UPLO.upper() == "U"


def _no_driver(driver, fn):
    if driver is not None:
        raise RuntimeError(
            f"{fn}: keyword argument `driver=` is only supported on CUDA inputs with the cuSOLVER backend"
        )


# ---- factorizations -----------------------------------------------------------------------------


def lu_factor_ex(A, *, pivot=True, check_errors=False, out=None):
    """The LU factorization with partial pivoting of A ([..., m, n]) packed in one matrix (L below
    the diagonal with an implied unit diagonal, U on and above), the 1-based row swaps (int32)
    and LAPACK's info (int32; k > 0 when U[k-1, k-1] is zero)."""
    _matrix(A, "linalg.lu_factor_ex")
    if not pivot:
        raise RuntimeError("linalg.lu_factor_ex: LU without pivoting is not implemented on the CPU")
    lu_, piv, info = _C.linalg_lu_factor(A._h, bool(check_errors))
    return returned(LUFactorExResult(result(lu_), result(piv), result(info)), out, "linalg.lu_factor_ex")


def lu_factor(A, *, pivot=True, out=None):
    """The packed LU factorization and pivots of A (see :func:`lu_factor_ex`); RuntimeError when
    A is singular."""
    _matrix(A, "linalg.lu_factor")
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    lu_, piv, _ = _C.linalg_lu_factor(A._h, True)
    return returned(LUFactorResult(result(lu_), result(piv)), out, "linalg.lu_factor")


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, out=None):
    """P, L and U of a packed LU factorization (A = P @ L @ U); the parts not asked for are empty."""
    _matrix(LU_data, "lu_unpack", "LU_data")
    _check_pivots(LU_data, LU_pivots, "lu_unpack")
    m, n = LU_data.shape[-2], LU_data.shape[-1]
    k = min(m, n)
    empty = zeros(0, dtype=LU_data.dtype, device=LU_data.device)
    if unpack_data:
        L = tril(LU_data[..., :, :k], -1) + _eye_like(LU_data, m, k)
        U = triu(LU_data[..., :k, :])
    else:
        L = U = empty
    P = _permutation(LU_pivots, m, LU_data) if unpack_pivots else empty
    return returned(LUUnpackResult(P, L, U), out, "lu_unpack")


def linalg_lu(A, *, pivot=True, out=None):
    """A = P @ L @ U: the permutation P, unit lower-triangular L ([..., m, k]) and upper-triangular
    U ([..., k, n]), k = min(m, n)."""
    _matrix(A, "linalg.lu")
    if not pivot:
        raise RuntimeError("linalg.lu: LU without pivoting is not implemented on the CPU")
    lu_, piv, _ = lu_factor_ex(A)
    return returned(PLUResult(*lu_unpack(lu_, piv)), out, "linalg.lu")


def lu(A, pivot=True, get_infos=False, out=None):
    """torch.lu: the packed LU factorization and pivots of A (and LAPACK's infos with
    ``get_infos``)."""
    _matrix(A, "lu")
    r = lu_factor_ex(A, pivot=pivot, check_errors=not get_infos)
    res = tuple(r) if get_infos else (r.LU, r.pivots)
    return returned(res, out, "lu")


def _lu_solve(LU, pivots, B, left, adjoint):
    m = LU.shape[-1]
    P = _permutation(pivots, m, LU)
    if left and not adjoint:  # X = U⁻¹ L⁻¹ Pᵀ B
        y = solve_triangular(LU, matmul(_mT(P), B), upper=False, unitriangular=True)
        return solve_triangular(LU, y, upper=True)
    if left:  # Aᵀ X = B with Aᵀ = Uᵀ Lᵀ Pᵀ: X = P L⁻ᵀ U⁻ᵀ B
        y = solve_triangular(_mT(LU), B, upper=False)
        return matmul(P, solve_triangular(_mT(LU), y, upper=True, unitriangular=True))
    if not adjoint:  # X A = B: X = B U⁻¹ L⁻¹ Pᵀ
        y = solve_triangular(LU, B, upper=True, left=False)
        return matmul(solve_triangular(LU, y, upper=False, left=False, unitriangular=True), _mT(P))
    # X Aᵀ = B: X = B P L⁻ᵀ U⁻ᵀ
    y = solve_triangular(_mT(LU), matmul(B, P), upper=True, left=False, unitriangular=True)
    return solve_triangular(_mT(LU), y, upper=False, left=False)


def linalg_lu_solve(LU, pivots, B, *, left=True, adjoint=False, out=None):
    """X with A @ X = B (``left``) or X @ A = B (A transposed with ``adjoint``), for A given by
    its packed LU factorization and pivots."""
    _matrix(LU, "linalg.lu_solve", "LU", square=True)
    _matrix(B, "linalg.lu_solve", "B")
    _check_pivots(LU, pivots, "linalg.lu_solve")
    return returned(_lu_solve(LU, pivots, B, left, adjoint), out, "linalg.lu_solve")


def lu_solve(b, LU_data, LU_pivots, *, out=None):
    """torch.lu_solve: X with A @ X = b for A given by its packed LU factorization."""
    return returned(linalg_lu_solve(LU_data, LU_pivots, b), out, "lu_solve")


def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    """X with A @ X = B (``left``) or X @ A = B for triangular A (only its ``upper`` or lower
    triangle is read; a unit diagonal assumed with ``unitriangular``); batch dimensions
    broadcast."""
    tensor_arg(A, "linalg.solve_triangular", "A")
    tensor_arg(B, "linalg.solve_triangular", "B")
    return returned(
        result(_C.linalg_solve_triangular(A._h, B._h, bool(upper), bool(left), bool(unitriangular))),
        out,
        "linalg.solve_triangular",
    )


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False, *, out=None):
    """torch.triangular_solve: X with op(A) @ X = b (op transposes with ``transpose``), and a copy
    of A."""
    tensor_arg(A, "triangular_solve", "A")
    coefficient = _mT(A) if transpose else A
    x = solve_triangular(coefficient, b, upper=bool(upper) != bool(transpose), unitriangular=unitriangular)
    return returned(TriangularSolveResult(x, A.clone()), out, "triangular_solve")


def cholesky_ex(A, *, upper=False, check_errors=False, out=None):
    """The Cholesky factor of symmetric positive-definite A (L with A = L @ L.mT, or U with
    A = U.mT @ U) and LAPACK's info (k > 0 when the leading minor of order k is not
    positive-definite)."""
    tensor_arg(A, "linalg.cholesky_ex", "A")
    L, info = _C.linalg_cholesky(A._h, bool(upper), bool(check_errors))
    return returned(CholeskyExResult(result(L), result(info)), out, "linalg.cholesky_ex")


def linalg_cholesky(A, *, upper=False, out=None):
    """The Cholesky factor of symmetric positive-definite A; RuntimeError when A is not."""
    tensor_arg(A, "linalg.cholesky", "A")
    L, _ = _C.linalg_cholesky(A._h, bool(upper), True)
    return returned(result(L), out, "linalg.cholesky")


def cholesky(input, upper=False, *, out=None):
    """torch.cholesky: the Cholesky factor of symmetric positive-definite ``input``."""
    return returned(linalg_cholesky(input, upper=upper), out, "cholesky")


def cholesky_inverse(input, upper=False, *, out=None):
    """The inverse of A = L @ L.mT (or U.mT @ U) from its Cholesky factor."""
    L = _matrix(input, "cholesky_inverse", "input", square=True)
    # Through the whole of L, as PyTorch's gradient (which does not mask a triangle) reads it.
    A = matmul(_mT(L), L) if upper else matmul(L, _mT(L))
    return returned(inv(A), out, "cholesky_inverse")


def cholesky_solve(B, L, upper=False, *, out=None):
    """X with A @ X = B for A = L @ L.mT (or U.mT @ U) given by its Cholesky factor."""
    _matrix(L, "cholesky_solve", "L", square=True)
    _matrix(B, "cholesky_solve", "B")
    A = matmul(_mT(L), L) if upper else matmul(L, _mT(L))
    return returned(solve(A, B), out, "cholesky_solve")


def eigh(A, UPLO="L", *, out=None):
    """The eigenvalues (ascending) and orthonormal eigenvectors (columns) of symmetric A, read
    from its lower (``UPLO="L"``) or upper triangle."""
    tensor_arg(A, "linalg.eigh", "A")
    w, v = _C.linalg_eigh(A._h, _uplo(UPLO, "linalg.eigh"), True)
    return returned(EighResult(result(w), result(v)), out, "linalg.eigh")


def eigvalsh(A, UPLO="L", *, out=None):
    """The eigenvalues (ascending) of symmetric A, read from one triangle."""
    tensor_arg(A, "linalg.eigvalsh", "A")
    w, _ = _C.linalg_eigh(A._h, _uplo(UPLO, "linalg.eigvalsh"), False)
    return returned(result(w), out, "linalg.eigvalsh")


def linalg_svd(A, full_matrices=True, *, driver=None, out=None):
    """A = U @ diag(S) @ Vh with S descending; U and Vh square with ``full_matrices``."""
    tensor_arg(A, "linalg.svd", "A")
    _no_driver(driver, "linalg.svd")
    u, s, vh = _C.linalg_svd(A._h, bool(full_matrices), True)
    return returned(SVDResult(result(u), result(s), result(vh)), out, "linalg.svd")


def svdvals(A, *, driver=None, out=None):
    """The singular values of A, descending."""
    tensor_arg(A, "linalg.svdvals", "A")
    _no_driver(driver, "linalg.svdvals")
    _, s, _ = _C.linalg_svd(A._h, False, False)
    return returned(result(s), out, "linalg.svdvals")


def svd(input, some=True, compute_uv=True, *, out=None):
    """torch.svd: input = U @ diag(S) @ V.mT (V, not Vh); U and V square unless ``some``. Without
    ``compute_uv``, U and V are zero matrices of the full sizes."""
    A = tensor_arg(input, "svd")
    if not compute_uv:
        S = svdvals(A)
        m, n = A.shape[-2], A.shape[-1]
        batch = tuple(A.shape[:-2])
        U = zeros(batch + (m, m), dtype=A.dtype, device=A.device)
        V = zeros(batch + (n, n), dtype=A.dtype, device=A.device)
        return returned(TopSVDResult(U, S, V), out, "svd")
    U, S, Vh = linalg_svd(A, full_matrices=not some)
    return returned(TopSVDResult(U, S, _mT(Vh)), out, "svd")


_QR_MODES = _C.codes("lucid_qr_mode", "LUCID_QR_")


def linalg_qr(A, mode="reduced", *, out=None):
    """A = Q @ R, Q with orthonormal columns and R upper triangular: ``mode`` "reduced" (Q
    [..., m, k], R [..., k, n]), "complete" (Q square) or "r" (R alone; Q empty)."""
    tensor_arg(A, "linalg.qr", "A")
    if mode not in _QR_MODES:
        raise ValueError(f"linalg.qr(): mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    q, r = _C.linalg_qr(A._h, _QR_MODES[mode])
    Q = result(q) if q else zeros(0, dtype=A.dtype, device=A.device)
    return returned(QRResult(Q, result(r)), out, "linalg.qr")


def qr(input, some=True, *, out=None):
    """torch.qr: the reduced (``some``) or complete QR decomposition."""
    Q, R = linalg_qr(input, "reduced" if some else "complete")
    return returned(TopQRResult(Q, R), out, "qr")


def geqrf(input, *, out=None):
    """LAPACK's geqrf: R and the Householder reflectors packed in ``a``, their scales in ``tau``."""
    tensor_arg(input, "geqrf")
    a, tau = _C.linalg_geqrf(input._h)
    return returned(GeqrfResult(result(a), result(tau)), out, "geqrf")


def _householder(A, tau, columns):
    """The first `columns` columns of H_1 … H_k, H_i = I - tau_i v_i v_iᵀ with v_i the i-th
    reflector below A's diagonal (and 1 on it)."""
    m, k = A.shape[-2], tau.shape[-1]
    batch = tuple(A.shape[:-2])
    Q = _eye_like(A, m).expand(*batch, m, m) if batch else _eye_like(A, m)
    rows = np.arange(m)
    for i in range(k):
        below = tensor((rows > i).astype(np.float64), dtype=A.dtype, device=A.device)
        unit = tensor((rows == i).astype(np.float64), dtype=A.dtype, device=A.device)
        v = A[..., :, i] * below + unit  # [..., m]
        Qv = matmul(Q, v.unsqueeze(-1))  # [..., m, 1]
        Q = Q - (tau[..., i].unsqueeze(-1).unsqueeze(-1) * Qv) * v.unsqueeze(-2)
    return _tied(Q[..., :, :columns], A, tau)


def householder_product(A, tau, *, out=None):
    """The first n columns of the product of the k Householder reflectors stored below A's
    diagonal ([..., m, n], m >= n >= k) with scales tau ([..., k]) (LAPACK's orgqr)."""
    _matrix(A, "linalg.householder_product")
    tensor_arg(tau, "linalg.householder_product", "tau")
    m, n = A.shape[-2], A.shape[-1]
    if m < n:
        raise ValueError(
            f"linalg.householder_product(): A must have at least as many rows as columns, got shape {tuple(A.shape)}"
        )
    if tau.ndim != A.ndim - 1 or tuple(tau.shape[:-1]) != tuple(A.shape[:-2]) or tau.shape[-1] > n:
        raise ValueError(
            f"linalg.householder_product(): tau of shape {tuple(tau.shape)} does not fit A of shape "
            f"{tuple(A.shape)} (expected [..., k] with k <= {n} and A's batch dimensions)"
        )
    if tau.dtype != A.dtype:
        raise TypeError(f"linalg.householder_product(): expected tau of A's dtype {A.dtype}, got {tau.dtype}")
    return returned(_householder(A, tau, n), out, "linalg.householder_product")


def orgqr(input, tau):
    """torch.orgqr: :func:`householder_product`."""
    return householder_product(input, tau)


def ormqr(input, input2, input3, left=True, transpose=False, *, out=None):
    """op(Q) @ input3 (``left``) or input3 @ op(Q), Q the product of the Householder reflectors
    of (input, input2) as geqrf returns them (op transposes with ``transpose``)."""
    _matrix(input, "ormqr", "input")
    tensor_arg(input2, "ormqr", "input2")
    _matrix(input3, "ormqr", "input3")
    m = input.shape[-2]
    if input2.shape[-1] > min(m, input.shape[-1]) + (0 if m >= input.shape[-1] else 0):
        raise ValueError(
            f"ormqr(): tau of shape {tuple(input2.shape)} has more reflectors than input of shape "
            f"{tuple(input.shape)} holds"
        )
    rows = input3.shape[-2] if left else input3.shape[-1]
    if rows != m:
        raise ValueError(
            f"ormqr(): input3 of shape {tuple(input3.shape)} does not fit Q of order {m} "
            f"({'left' if left else 'right'} multiplication)"
        )
    A = input
    if A.shape[-1] < m:  # the reflectors of a wide or square input span its first columns only
        A = cat([A, zeros(tuple(A.shape[:-1]) + (m - A.shape[-1],), dtype=A.dtype, device=A.device)], -1)
    Q = _householder(A[..., :, :m], input2, m)
    Q = _mT(Q) if transpose else Q
    return returned(matmul(Q, input3) if left else matmul(input3, Q), out, "ormqr")


# ---- solves, inverses, determinants ---------------------------------------------------------------


def _vector_rhs(A, B):
    """Whether B is a (batch of) vector(s) for A @ X = B, as PyTorch decides."""
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def solve_ex(A, B, *, left=True, check_errors=False, out=None):
    """X with A @ X = B (``left``) or X @ A = B, and LAPACK's info (k > 0 when A is singular)."""
    _matrix(A, "linalg.solve_ex", square=True)
    tensor_arg(B, "linalg.solve_ex", "B")
    vector = left and _vector_rhs(A, B)
    rhs = B.unsqueeze(-1) if vector else B
    if rhs.ndim < 2:
        raise ValueError(f"linalg.solve_ex(): B must have at least 1 dimension, got shape {tuple(B.shape)}")
    LU, pivots, info = lu_factor_ex(A)
    if check_errors:
        _check_info(info, "linalg.solve_ex", "the solver failed because the input matrix is singular")
    X = _lu_solve(LU, pivots, rhs, left, False)
    return returned(SolveExResult(X.squeeze(-1) if vector else X, info), out, "linalg.solve_ex")


def solve(A, B, *, left=True, out=None):
    """X with A @ X = B (``left``) or X @ A = B for square A (batch dimensions broadcast; a vector
    B gives a vector X); RuntimeError when A is singular."""
    _matrix(A, "linalg.solve", square=True)
    X, _ = solve_ex(A, B, left=left, check_errors=True)
    return returned(X, out, "linalg.solve")


def inv_ex(A, *, check_errors=False, out=None):
    """The inverse of square A and LAPACK's info (k > 0 when A is singular)."""
    _matrix(A, "linalg.inv_ex", square=True)
    X, info = solve_ex(A, _eye_like(A).expand(*A.shape), check_errors=check_errors)
    return returned(InvExResult(X, info), out, "linalg.inv_ex")


def inv(A, *, out=None):
    """The inverse of square A; RuntimeError when A is singular."""
    _matrix(A, "linalg.inv", square=True)
    X, info = solve_ex(A, _eye_like(A).expand(*A.shape))
    _check_info(info, "linalg.inv", "the diagonal element of U is zero, so the matrix is singular")
    return returned(X, out, "linalg.inv")


def inverse(input, *, out=None):
    """torch.inverse: :func:`linalg.inv`."""
    return returned(inv(input), out, "inverse")


def _lu_parts(A, fn):
    _matrix(A, fn, square=True)
    LU, pivots, _ = lu_factor_ex(A)
    d = _diagonal(LU, 0, -2, -1)
    piv = pivots.numpy()
    # Each swap of two distinct rows flips the determinant's sign.
    swaps = (piv != np.arange(1, piv.shape[-1] + 1)).sum(-1)
    perm_sign = tensor(1.0 - 2.0 * (swaps % 2), dtype=A.dtype, device=A.device)
    return d, perm_sign


def det(A, *, out=None):
    """The determinant of square A (from its LU factorization)."""
    d, perm_sign = _lu_parts(A, "linalg.det")
    # The sum of the (maybe empty) diagonal ties a 0 x 0 determinant to A, with gradient 0.
    return returned(perm_sign * _product(unbind(d, -1), perm_sign) + 0 * sum(d, -1), out, "linalg.det")


def linalg_slogdet(A, *, out=None):
    """The sign (0 for a singular A) and the log of the absolute value of the determinant."""
    d, perm_sign = _lu_parts(A, "linalg.slogdet")
    # The sign is piecewise constant: its gradient is 0, recorded as PyTorch records it.
    sign = perm_sign * _product(unbind(_sign(d.detach()), -1), perm_sign) + 0 * sum(d, -1)
    # Added one by one: the engine's compensated sum makes NaN of -inf (a zero pivot) plus a finite.
    logs = unbind(d.abs().log(), -1)
    logabs = _fold(lambda a, b: a + b, logs) if logs else 0 * sum(d, -1)
    return returned(SlogdetResult(sign, logabs), out, "linalg.slogdet")


def logdet(input):
    """The log of the determinant: NaN for a negative one, -inf for zero."""
    sign, logabs = linalg_slogdet(input)
    return where(sign < 0, float("nan"), logabs)


def slogdet(input, *, out=None):
    """torch.slogdet: the sign and log-magnitude of the determinant (see :func:`linalg.slogdet`)."""
    s, l = linalg_slogdet(input)
    return returned(TopSlogdetResult(s, l), out, "slogdet")


# ---- norms, conditions, ranks -------------------------------------------------------------------


def _norm_dtype(x, dtype, fn):
    tensor_arg(x, fn, "x" if fn == "linalg.vector_norm" else "A")
    if dtype is not None:
        x = x.to(dtype)
    if not x.dtype.is_floating_point:
        raise TypeError(f"{fn}(): expected a floating-point input, got {x.dtype}")
    return x


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    """The ord-norm of x's elements over ``dim`` (all by default): 2 Euclidean, inf/-inf the
    largest/smallest magnitude, 0 the count of non-zeros, any other number
    ``sum(|x|**ord)**(1/ord)``. Gradients at zero are 0, as PyTorch's subgradients."""
    x = _norm_dtype(x, dtype, "linalg.vector_norm")
    if isinstance(ord, (str, bool)) or not isinstance(ord, (int, float)):
        raise ValueError(f"linalg.vector_norm(): ord must be a number, got {ord!r}")
    if isinstance(dim, int):
        dim = (dim,)
    if x.numel() == 0 and ord < 0 or (x.numel() == 0 and math.isinf(ord)):
        raise RuntimeError(
            f"linalg.vector_norm(): cannot compute the {ord} norm of an empty tensor, as the operation has no identity"
        )
    a = x.abs()
    if ord == float("inf") or ord == float("-inf"):
        # The gradient goes to the extreme elements, shared evenly among ties (PyTorch's).
        ext = (amax if ord > 0 else amin)(a.detach(), dim, True) if a.ndim else a.detach()
        mask = (a.detach() == ext).to(x.dtype)
        count = sum(mask, dim, True)
        r = sum(a * mask / count, dim, keepdim) if a.ndim else a
    elif ord == 0:
        r = sum((a != 0).to(x.dtype), dim, keepdim) + 0 * sum(a, dim, keepdim)
    elif ord == 1:
        r = sum(a, dim, keepdim)
    elif ord < 0:
        # A zero element makes the norm 0 (|0|**ord is infinite); its gradient is then 0 too.
        zero = (a == 0).to(x.dtype)
        has_zero = amax(zero, dim, keepdim) > 0 if a.ndim else zero > 0
        s = sum(where(zero > 0, 1.0, a) ** ord, dim, keepdim)
        r = where(has_zero, 0.0, s ** (1.0 / ord))
    else:
        s = sum(a * a if ord == 2 else a**ord, dim, keepdim)
        # The root of a zero sum has an infinite derivative: taken of 1 there and masked.
        nonzero = s > 0
        safe = where(nonzero, s, 1.0)
        r = where(nonzero, safe.sqrt() if ord == 2 else safe ** (1.0 / ord), 0.0)
    return returned(r, out, "linalg.vector_norm")


def _matrix_dims(A, dim, fn):
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise ValueError(f"{fn}(): dim must be a 2-tuple of ints, got {dim!r}")
    d0, d1 = (A._wrap_dim(d, fn) for d in dim)
    if d0 == d1:
        raise ValueError(f"{fn}(): dims must be different, got {dim!r}")
    return d0, d1


def _to_end(A, d0, d1):
    order = [d for d in range(A.ndim) if d not in (d0, d1)] + [d0, d1]
    return A.permute(*order)


def _keep(r, d0, d1, keepdim):
    if keepdim:
        for d in sorted((d0, d1)):
            r = r.unsqueeze(d)
    return r


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):
    """The ord-norm of the matrices over dims ``dim``: "fro", "nuc", inf/-inf (max/min row sum
    of magnitudes), 1/-1 (max/min column sum), 2/-2 (largest/smallest singular value)."""
    A = _norm_dtype(A, dtype, "linalg.matrix_norm")
    if A.ndim < 2:
        raise ValueError(f"linalg.matrix_norm(): A must have at least 2 dimensions, got shape {tuple(A.shape)}")
    d0, d1 = _matrix_dims(A, dim, "linalg.matrix_norm")
    if ord == "fro":
        r = vector_norm(A, 2, (d0, d1), keepdim)
    elif ord == "nuc":
        r = _keep(sum(svdvals(_to_end(A, d0, d1)), -1), d0, d1, keepdim)
    elif ord in (2, -2):
        s = svdvals(_to_end(A, d0, d1))
        r = _keep(s[..., 0] if ord == 2 else s[..., -1], d0, d1, keepdim)
    elif ord in (1, -1, float("inf"), float("-inf")):
        along, across = (d0, d1) if ord in (1, -1) else (d1, d0)
        sums = sum(A.abs(), along, True)
        r = (amax if ord > 0 else amin)(sums, across, True)
        if not keepdim:
            r = r.squeeze((d0, d1))
    else:
        raise ValueError(f"linalg.matrix_norm(): ord must be 'fro', 'nuc', inf, -inf, 1, -1, 2 or -2, got {ord!r}")
    return returned(r, out, "linalg.matrix_norm")


def norm(A, ord=None, dim=None, keepdim=False, *, out=None, dtype=None):
    """A vector norm (``dim`` an int, or a 1-D A) or a matrix norm (``dim`` a 2-tuple, or a 2-D A),
    as torch.linalg.norm; without ``ord`` the 2-norm of all elements."""
    tensor_arg(A, "linalg.norm", "A")
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) == 2:
        r = matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    elif dim is not None or ord is None:
        if isinstance(ord, str):
            raise ValueError(f"linalg.norm(): ord {ord!r} is a matrix norm; give dim as a 2-tuple")
        r = vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
    elif A.ndim == 1:
        if isinstance(ord, str):
            raise ValueError(f"linalg.norm(): ord {ord!r} is a matrix norm, but A is 1-D")
        r = vector_norm(A, ord, None, keepdim, dtype=dtype)
    elif A.ndim == 2:
        r = matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    else:
        raise RuntimeError(
            f"linalg.norm(): with ord={ord!r} and no dim, A must be 1-D or 2-D, got shape {tuple(A.shape)}"
        )
    return returned(r, out, "linalg.norm")


def cond(A, p=None, *, out=None):
    """The condition number of A in the p-norm (None/2: largest over smallest singular value)."""
    _matrix(A, "linalg.cond")
    if p in (None, 2, -2):
        s = svdvals(A)
        r = s[..., 0] / s[..., -1] if p != -2 else s[..., -1] / s[..., 0]
    elif p in ("fro", "nuc", 1, -1, float("inf"), float("-inf")):
        _matrix(A, "linalg.cond", square=True)
        r = matrix_norm(A, p) * matrix_norm(inv(A), p)
    else:
        raise ValueError(f"linalg.cond(): p must be None, 'fro', 'nuc', inf, -inf, 1, -1, 2 or -2, got {p!r}")
    return returned(r, out, "linalg.cond")


def _per_matrix(v):
    """A tolerance given per matrix (a tensor of the batch's shape) beside the last dimension."""
    return v.unsqueeze(-1) if isinstance(v, TensorBase) else v


def _tolerance(S_max, A, atol, rtol):
    """max(atol, rtol · S_max) with PyTorch's defaults: rtol = eps · max(m, n), or 0 when only
    atol is given (and, as a number, positive)."""
    if rtol is None:
        given = atol is not None and (isinstance(atol, TensorBase) or atol > 0)
        rtol = (
            0.0
            if given
            else float(np.finfo(np.float64 if A.dtype == float64 else np.float32).eps) * max(A.shape[-2], A.shape[-1])
        )
    tol = S_max * _per_matrix(rtol)
    if atol is not None:
        tol = maximum(tol, _per_matrix(atol) if isinstance(atol, TensorBase) else zeros_like(tol) + atol)
    return tol


def _pinv_value(A, atol, rtol, hermitian):
    """The pseudo-inverse of A (no graph): singular values (eigenvalue magnitudes) at or below
    the tolerance count as zero."""
    if hermitian:
        L, V = eigh(A)
        mag = L.abs()
        big = amax(mag, -1, True) if mag.shape[-1] else sum(mag, -1, True)
        keep = mag > _tolerance(big, A, atol, rtol)
        inv_l = where(keep, 1.0 / where(keep, L, 1.0), 0.0)
        return matmul(V * inv_l.unsqueeze(-2), _mT(V))
    U, S, Vh = linalg_svd(A, full_matrices=False)
    big = S[..., :1] if S.shape[-1] else sum(S, -1, True)
    keep = S > _tolerance(big, A, atol, rtol)
    inv_s = where(keep, 1.0 / where(keep, S, 1.0), 0.0)
    return matmul(_mT(Vh) * inv_s.unsqueeze(-2), _mT(U))


def _with_pinv_gradient(A, P):
    """P (= pinv(A), without a graph) as a function of A whose gradient is the pseudo-inverse's
    derivative at constant rank, as PyTorch's:
    dP = -P·dA·P + P·Pᵀ·dAᵀ·(I - A·P) + (I - P·A)·dAᵀ·Pᵀ·P, written with dA = A - A.detach(),
    which is zero in value."""
    A0 = A.detach()
    D = A - A0
    I_m, I_n = _eye_like(A, A.shape[-2]), _eye_like(A, A.shape[-1])
    return (
        P
        - matmul(matmul(P, D), P)
        + matmul(matmul(P, _mT(P)), matmul(_mT(D), I_m - matmul(A0, P)))
        + matmul(matmul(I_n - matmul(P, A0), _mT(D)), matmul(_mT(P), P))
    )


def pinv(A, *, atol=None, rtol=None, hermitian=False, out=None):
    """The Moore-Penrose pseudo-inverse of A, from its SVD (eigendecomposition with
    ``hermitian``), singular values at or below max(atol, rtol · largest) taken as zero."""
    _matrix(A, "linalg.pinv", square=hermitian)
    P = _pinv_value(A.detach(), atol, rtol, hermitian)
    if A.requires_grad and _C.is_grad_enabled():
        P = _with_pinv_gradient(A, P)
    return returned(P, out, "linalg.pinv")


def pinverse(input, rcond=1e-15):
    """torch.pinverse: :func:`linalg.pinv` with rtol = rcond."""
    return pinv(input, rtol=rcond)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False, out=None):
    """The number of singular values (eigenvalue magnitudes with ``hermitian``) above
    max(atol, rtol · largest) (int64)."""
    _matrix(A, "linalg.matrix_rank")
    s = eigvalsh(A).abs() if hermitian else svdvals(A)
    s = s.detach()
    big = amax(s, -1, True) if s.shape[-1] else zeros(tuple(s.shape[:-1]) + (1,), dtype=s.dtype, device=s.device)
    tol = _tolerance(big, A, atol, rtol)
    return returned(sum((s > tol).to(int64), -1), out, "linalg.matrix_rank")


def lstsq(A, B, rcond=None, *, driver=None):
    """The least-squares solution X of A @ X ≈ B (minimum-norm for rank-deficient A), with the
    squared residuals (for m > n at full rank, drivers other than "gelsy"), the effective rank
    (not for "gels") and the singular values ("gelsd", "gelss")."""
    _matrix(A, "linalg.lstsq")
    tensor_arg(B, "linalg.lstsq", "B")
    if driver is None:
        driver = "gelsy"
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError(
            f"torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss), got {driver!r}"
        )
    if B.dtype != A.dtype:
        raise TypeError(f"torch.linalg.lstsq: expected A and B of one dtype, got {A.dtype} and {B.dtype}")
    vector = B.ndim == A.ndim - 1
    if not (vector or B.ndim == A.ndim):
        raise ValueError(
            f"torch.linalg.lstsq: A of shape {tuple(A.shape)} and B of shape {tuple(B.shape)}: B must "
            "have A's number of dimensions, or one fewer"
        )
    rhs = B.unsqueeze(-1) if vector else B
    m, n = A.shape[-2], A.shape[-1]
    if rhs.shape[-2] != m:
        raise ValueError(
            f"torch.linalg.lstsq: A of shape {tuple(A.shape)} and B of shape {tuple(B.shape)} have "
            "different numbers of rows"
        )
    eps = float(np.finfo(np.float64 if A.dtype == float64 else np.float32).eps)
    rtol = eps * max(m, n) if rcond is None or rcond < 0 else rcond
    # The minimum-norm solution pinv(A) @ B, with pinv's gradient (PyTorch's lstsq backward).
    X = matmul(pinv(A, rtol=rtol), rhs)
    S = svdvals(A.detach())
    big = S[..., :1] if S.shape[-1] else sum(S, -1, True)
    rank = sum((S > big * rtol).to(int64), -1)
    # Empty results that PyTorch records as differentiable: zero-element slices of the inputs.
    empty = A.reshape(-1)[:0] + B.reshape(-1)[:0]
    residuals = empty
    if driver != "gelsy" and m > n and rank.numel() and bool((rank == n).all()):
        residuals = sum((matmul(A, X) - rhs) ** 2, -2)
    if vector:
        X = X.squeeze(-1)
        if residuals.numel():
            residuals = residuals.squeeze(-1)
    rank_out = rank if driver != "gels" else zeros(0, dtype=int64, device=A.device)
    sv = S if driver in ("gelsd", "gelss") else empty
    return LstsqResult(X, residuals, rank_out, sv)


# ---- products and other compositions ------------------------------------------------------------


def matrix_power(A, n, *, out=None):
    """A raised to the integer power n (the inverse's power for n < 0; the identity for 0)."""
    _matrix(A, "linalg.matrix_power", square=True)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"linalg.matrix_power(): n must be an integer, got {type(n).__name__}")
    n = int(n)
    if n == 0:
        r = _eye_like(A).expand(*A.shape) + 0 * A
    else:
        base = inv(A) if n < 0 else A
        r, n = None, abs(n)
        while n:
            if n & 1:
                r = base if r is None else matmul(r, base)
            n >>= 1
            if n:
                base = matmul(base, base)
    return returned(r, out, "linalg.matrix_power")


def multi_dot(tensors, *, out=None):
    """The product of the matrices in ``tensors`` (the first may be a row vector and the last a
    column vector, which are then squeezed)."""
    ts = list(tensors)
    if len(ts) < 2:
        raise ValueError(f"linalg.multi_dot(): expected at least 2 tensors, got {len(ts)}")
    for i, t in enumerate(ts):
        tensor_arg(t, "linalg.multi_dot", f"tensors[{i}]")
        ok = t.ndim == 2 or (t.ndim == 1 and i in (0, len(ts) - 1))
        if not ok:
            raise ValueError(
                f"linalg.multi_dot(): tensor {i} must be 2-D{' (or 1-D)' if i in (0, len(ts) - 1) else ''}, "
                f"got shape {tuple(t.shape)}"
            )
    first_vec, last_vec = ts[0].ndim == 1, ts[-1].ndim == 1
    mats = [ts[0].unsqueeze(0) if first_vec else ts[0]] + ts[1:-1] + [ts[-1].unsqueeze(-1) if last_vec else ts[-1]]
    r = mats[0]
    for t in mats[1:]:
        r = matmul(r, t)
    if first_vec:
        r = r.squeeze(0)
    if last_vec:
        r = r.squeeze(-1)
    return returned(r, out, "linalg.multi_dot")


def vander(x, N=None):
    """The Vandermonde matrix of x ([..., n]): columns x**0, x**1, … x**(N-1) ([..., n, N])."""
    tensor_arg(x, "linalg.vander", "x")
    if x.ndim == 0:
        x = x.reshape(1)
    N = x.shape[-1] if N is None else as_index(N)
    if N < 0:
        raise ValueError(f"linalg.vander(): N must be non-negative, got {N}")
    if N == 0:
        return zeros(tuple(x.shape) + (0,), dtype=x.dtype, device=x.device)
    cols = [x * 0 + 1]
    for _ in range(N - 1):
        cols.append(cols[-1] * x)
    return stack(cols, -1)


def vecdot(x, y, *, dim=-1, out=None):
    """The dot product of x and y along ``dim`` (batch dimensions broadcast)."""
    tensor_arg(x, "linalg.vecdot", "x")
    tensor_arg(y, "linalg.vecdot", "y")
    return returned(sum(x * y, dim), out, "linalg.vecdot")


def _cross(input, other, dim, fn):
    tensor_arg(input, fn, "input")
    tensor_arg(other, fn, "other")
    if input.ndim != other.ndim:
        raise RuntimeError(
            f"{fn}(): input and other must have the same number of dimensions, got shapes "
            f"{tuple(input.shape)} and {tuple(other.shape)}"
        )
    a, b = input + 0 * other, other + 0 * input  # broadcast to one shape
    d = a._wrap_dim(dim, fn)
    if a.shape[d] != 3:
        raise ValueError(
            f"{fn}(): dimension {dim} must have size 3, got shapes {tuple(input.shape)} and {tuple(other.shape)}"
        )
    a0, a1, a2 = unbind(a, d)
    b0, b1, b2 = unbind(b, d)
    return stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], d)


def linalg_cross(input, other, *, dim=-1, out=None):
    """The cross product of 3-vectors along ``dim`` (batch dimensions broadcast)."""
    return returned(_cross(input, other, dim, "linalg.cross"), out, "linalg.cross")


def cross(input, other, dim=None, *, out=None):
    """torch.cross: the cross product along ``dim`` (by default the first dimension of size 3)."""
    tensor_arg(input, "cross", "input")
    if dim is None:
        sizes = (input + 0 * other).shape if isinstance(other, type(input)) else input.shape
        dim = next((i for i, s in enumerate(sizes) if s == 3), None)
        if dim is None:
            raise ValueError(f"cross(): no dimension of size 3 in input of shape {tuple(input.shape)}")
    return returned(_cross(input, other, dim, "cross"), out, "cross")


def linalg_diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """The view of A's diagonals over dims dim1 and dim2 (:func:`lucid.diagonal` with other
    defaults)."""
    tensor_arg(A, "linalg.diagonal", "A")
    return _diagonal(A, offset, dim1, dim2)


def tensorinv(A, ind=2, *, out=None):
    """The inverse of A seen as a matrix of its first ``ind`` dimensions by the rest."""
    tensor_arg(A, "linalg.tensorinv", "A")
    ind = as_index(ind)
    if ind <= 0:
        raise ValueError(f"linalg.tensorinv(): ind must be a positive integer, got {ind}")
    rows, cols = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    p, q = int(np.prod(rows)), int(np.prod(cols))
    if p != q:
        raise ValueError(
            f"linalg.tensorinv(): the product of the first {ind} dimensions ({p}) must equal that of "
            f"the rest ({q}), got shape {tuple(A.shape)}"
        )
    return returned(reshape(inv(reshape(A, p, q)), *(cols + rows)), out, "linalg.tensorinv")


def tensorsolve(A, B, dims=None, *, out=None):
    """X with tensordot(A, X, X.ndim) = B: A's dimensions beyond B's (after moving ``dims`` to
    the end) are X's shape."""
    tensor_arg(A, "linalg.tensorsolve", "A")
    tensor_arg(B, "linalg.tensorsolve", "B")
    if dims is not None:
        moved = [A._wrap_dim(d, "linalg.tensorsolve") for d in dims]
        A = A.permute(*([d for d in range(A.ndim) if d not in moved] + moved))
    xshape = tuple(A.shape[B.ndim :])
    p, q = int(np.prod(B.shape)), int(np.prod(xshape))
    if int(np.prod(A.shape[: B.ndim])) != p or p != q:
        raise ValueError(
            f"linalg.tensorsolve(): A of shape {tuple(A.shape)} does not fit B of shape "
            f"{tuple(B.shape)} (A's first {B.ndim} dimensions must hold as many elements as B, and "
            "the rest as many again)"
        )
    return returned(reshape(solve(reshape(A, p, q), reshape(B, p)), *xshape), out, "linalg.tensorsolve")


def matrix_exp(A):
    """The matrix exponential of square A (scaling and squaring over a Taylor series)."""
    _matrix(A, "linalg.matrix_exp", square=True)
    n = A.shape[-1]
    if A.numel() == 0:
        return A.clone()
    norm1 = float(np.max(np.abs(A.detach().numpy()).sum(-2))) if n else 0.0
    squarings = max(0, int(math.ceil(math.log2(norm1))) + 1) if norm1 > 0.5 else 0
    # In float64 (and back): the series and the squarings lose less than float32 would.
    X = A.to(float64) / (2.0**squarings)
    I = _eye_like(X)
    # Horner's form of sum_{j<=18} X^j / j!: accurate to float64 for |X| <= 1/2.
    r = I + X / 18.0
    for j in range(17, 0, -1):
        r = I + matmul(X, r) / float(j)
    for _ in range(squarings):
        r = matmul(r, r)
    return r.to(A.dtype)


def matrix_sqrth(A):
    """The symmetric positive-definite square root of symmetric positive-definite A (from its
    lower triangle)."""
    L, V = eigh(A)
    return matmul(V * L.sqrt().unsqueeze(-2), _mT(V))


def polar(A, *, out=None):
    """The polar decomposition A = U @ H (m >= n): U with orthonormal columns, H symmetric
    positive-semidefinite, from the SVD."""
    _matrix(A, "linalg.polar")
    if A.shape[-2] < A.shape[-1]:
        raise ValueError(f"linalg.polar(): A must have at least as many rows as columns, got shape {tuple(A.shape)}")
    W, S, Vh = linalg_svd(A, full_matrices=False)
    U = matmul(W, Vh)
    H = matmul(_mT(Vh) * S.unsqueeze(-2), Vh)
    return returned(PolarResult(U, H), out, "linalg.polar")


def svd_lowrank(A, q=6, niter=2, M=None):
    """An approximate rank-q SVD of A (- M) by a randomized range finder: U [..., m, q],
    S [..., q], V [..., n, q]."""
    from .creation import randn

    _matrix(A, "svd_lowrank")
    X = A if M is None else A - M
    m, n = X.shape[-2], X.shape[-1]
    q = min(as_index(q), m, n)
    G = randn(*(tuple(X.shape[:-2]) + (n, q)), dtype=X.dtype, device=X.device)
    Q = linalg_qr(matmul(X, G)).Q
    for _ in range(as_index(niter)):
        Q = linalg_qr(matmul(X, linalg_qr(matmul(_mT(X), Q)).Q)).Q
    U, S, Vh = linalg_svd(matmul(_mT(Q), X), full_matrices=False)
    return matmul(Q, U), S, _mT(Vh)


def pca_lowrank(A, q=None, center=True, niter=2):
    """Principal components of A by :func:`svd_lowrank`, the columns' means removed first with
    ``center``."""
    _matrix(A, "pca_lowrank")
    m, n = A.shape[-2], A.shape[-1]
    q = min(6, m, n) if q is None else as_index(q)
    X = A - A.mean(-2, keepdim=True) if center else A
    return svd_lowrank(X, q, niter)


LDLFactorResult = namedtuple("linalg_ldl_factor", ["LD", "pivots"])
LDLFactorExResult = namedtuple("linalg_ldl_factor_ex", ["LD", "pivots", "info"])


def ldl_factor_ex(A, *, hermitian=False, check_errors=False, out=None):
    """The Bunch-Kaufman factorization A = P L D Lᵀ Pᵀ of symmetric A (its lower triangle read)
    as LAPACK's sytrf packs it, its pivots (int32, negative for 2 x 2 blocks of D) and info
    (k > 0 when D[k-1, k-1] is zero). Real matrices: ``hermitian`` changes nothing."""
    tensor_arg(A, "linalg.ldl_factor_ex", "A")
    ld, piv, info = _C.linalg_ldl_factor(A._h, bool(check_errors))
    return returned(LDLFactorExResult(result(ld), result(piv), result(info)), out, "linalg.ldl_factor_ex")


def ldl_factor(A, *, hermitian=False, out=None):
    """The packed LDLᵀ factorization and pivots of symmetric A (see :func:`ldl_factor_ex`);
    RuntimeError when D is singular."""
    tensor_arg(A, "linalg.ldl_factor", "A")
    ld, piv, _ = _C.linalg_ldl_factor(A._h, True)
    return returned(LDLFactorResult(result(ld), result(piv)), out, "linalg.ldl_factor")


def ldl_solve(LD, pivots, B, *, hermitian=False, out=None):
    """X with A @ X = B for symmetric A given by :func:`ldl_factor`'s LD and pivots."""
    tensor_arg(LD, "linalg.ldl_solve", "LD")
    tensor_arg(pivots, "linalg.ldl_solve", "pivots")
    tensor_arg(B, "linalg.ldl_solve", "B")
    return returned(result(_C.linalg_ldl_solve(LD._h, pivots._h, B._h)), out, "linalg.ldl_solve")


class LinalgMethods:
    """Tensor's linear-algebra methods."""

    __slots__ = ()

    det, logdet, inverse, pinverse, cholesky_inverse, matrix_exp = (
        det,
        logdet,
        inverse,
        pinverse,
        cholesky_inverse,
        matrix_exp,
    )
    cholesky, lu, svd, qr, geqrf, ormqr, orgqr = cholesky, lu, svd, qr, geqrf, ormqr, orgqr
    matrix_power, cross, slogdet = matrix_power, cross, slogdet

    def cholesky_solve(self, input2, upper=False):
        return cholesky_solve(self, input2, upper)

    def lu_solve(self, LU_data, LU_pivots):
        return lu_solve(self, LU_data, LU_pivots)

    def triangular_solve(self, A, upper=True, transpose=False, unitriangular=False):
        return triangular_solve(self, A, upper, transpose, unitriangular)
