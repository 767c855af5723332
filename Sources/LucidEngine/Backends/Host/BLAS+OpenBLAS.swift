#if !canImport(Accelerate) && canImport(CBLAS)
import CBLAS

/// Single- and double-precision GEMM from OpenBLAS, row-major: C[m×n] = op(A)[m×k] · op(B)[k×n]. It is the
/// build of the scipy-openblas32 package, whose symbols carry a `scipy_` prefix.
enum BLAS {
    static let name = "OpenBLAS"

    /// Whether the engine splits a large product over its own pool (`HostGEMM.product`), each
    /// part one call on the thread that runs it. OpenBLAS's own threads would spin for a while
    /// after each product they share, and beside the engine's pool (oneDNN's OpenMP threads,
    /// which the engine's loops share) they would take its cores: its loops would run late
    /// and judge the process contended (`lucid_host_solo`).
    static let splitsProducts = true

    /// Keeps every call on the calling thread (see `splitsProducts`): set once per process, when
    /// the first host backend is made, before any product.
    static let configured: Void = scipy_openblas_set_num_threads(1)

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
