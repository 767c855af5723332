"""``lucid.linalg``: PyTorch's ``torch.linalg`` over the engine's LAPACK factorizations (see
``lucid/_ops/linalg.py``)."""

from ._ops.elementwise import matmul
from ._ops.linalg import (cholesky_ex, cond, det, eigh, eigvalsh, householder_product, inv, inv_ex, ldl_factor,
                          ldl_factor_ex, ldl_solve, lstsq, lu_factor, lu_factor_ex, matrix_exp, matrix_norm,
                          matrix_power, matrix_rank, matrix_sqrth, multi_dot, norm, pinv, polar, solve, solve_ex,
                          solve_triangular, svdvals, tensorinv, tensorsolve, vander, vecdot, vector_norm)
from ._ops.linalg import linalg_cholesky as cholesky
from ._ops.linalg import linalg_cross as cross
from ._ops.linalg import linalg_diagonal as diagonal
from ._ops.linalg import linalg_lu as lu
from ._ops.linalg import linalg_lu_solve as lu_solve
from ._ops.linalg import linalg_qr as qr
from ._ops.linalg import linalg_slogdet as slogdet
from ._ops.linalg import linalg_svd as svd

__all__ = ["cholesky", "cholesky_ex", "cond", "cross", "det", "diagonal", "eigh", "eigvalsh", "householder_product",
           "inv", "inv_ex", "ldl_factor", "ldl_factor_ex", "ldl_solve", "lstsq", "lu", "lu_factor", "lu_factor_ex",
           "lu_solve", "matmul", "matrix_exp", "matrix_norm", "matrix_power", "matrix_rank", "matrix_sqrth",
           "multi_dot", "norm", "pinv", "polar", "qr", "slogdet", "solve", "solve_ex", "solve_triangular", "svd",
           "svdvals", "tensorinv", "tensorsolve", "vander", "vecdot", "vector_norm"]
