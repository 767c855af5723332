#if canImport(Accelerate)
import Accelerate

/// Single- and double-precision GEMM from Accelerate, row-major: C[m×n] = op(A)[m×k] · op(B)[k×n].
enum BLAS {
    static let name = "Accelerate"

    /// Accelerate threads each product itself, on its own pool (VECLIB_MAXIMUM_THREADS at
    /// launch): the engine calls it once per product.
    static let splitsProducts = false

    /// Nothing to set up: Accelerate threads its own products.
    static let configured: Void = ()

    static func sgemm(
        transA: Bool, transB: Bool, m: Int, n: Int, k: Int,
        a: UnsafePointer<Float>, lda: Int, b: UnsafePointer<Float>, ldb: Int,
        c: UnsafeMutablePointer<Float>, ldc: Int
    ) {
        cblas_sgemm(
            CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
            Int32(m), Int32(n), Int32(k), 1, a, Int32(lda), b, Int32(ldb), 0, c, Int32(ldc))
    }

    static func dgemm(
        transA: Bool, transB: Bool, m: Int, n: Int, k: Int,
        a: UnsafePointer<Double>, lda: Int, b: UnsafePointer<Double>, ldb: Int,
        c: UnsafeMutablePointer<Double>, ldc: Int
    ) {
        cblas_dgemm(
            CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
            Int32(m), Int32(n), Int32(k), 1, a, Int32(lda), b, Int32(ldb), 0, c, Int32(ldc))
    }
}
#endif
