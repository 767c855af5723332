#if !canImport(Accelerate) && canImport(CBLAS)
import CBLAS

/// Single- and double-precision GEMM from OpenBLAS, row-major: C[m×n] = op(A)[m×k] · op(B)[k×n]. It is the
/// build of the scipy-openblas32 package, whose symbols carry a `scipy_` prefix.
enum BLAS {
    static let name = "OpenBLAS"

    static func setThreads(_ n: Int) { scipy_openblas_set_num_threads(Int32(n)) }

    static func sgemm(
        transA: Bool, transB: Bool, m: Int, n: Int, k: Int,
        a: UnsafePointer<Float>, lda: Int, b: UnsafePointer<Float>, ldb: Int,
        c: UnsafeMutablePointer<Float>, ldc: Int
    ) {
        scipy_cblas_sgemm(
            CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
            blasint(m), blasint(n), blasint(k), 1, a, blasint(lda), b, blasint(ldb), 0, c, blasint(ldc))
    }

    static func dgemm(
        transA: Bool, transB: Bool, m: Int, n: Int, k: Int,
        a: UnsafePointer<Double>, lda: Int, b: UnsafePointer<Double>, ldb: Int,
        c: UnsafeMutablePointer<Double>, ldc: Int
    ) {
        scipy_cblas_dgemm(
            CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
            blasint(m), blasint(n), blasint(k), 1, a, blasint(lda), b, blasint(ldb), 0, c, blasint(ldc))
    }
}
#endif
