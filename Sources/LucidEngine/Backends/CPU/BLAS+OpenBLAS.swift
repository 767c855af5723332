#if !canImport(Accelerate) && canImport(CBLAS)
import CBLAS

/// Single-precision GEMM from OpenBLAS, row-major: C[m×n] = op(A)[m×k] · op(B)[k×n].
enum BLAS {
    static let name = "OpenBLAS"

    static func setThreads(_ n: Int) { openblas_set_num_threads(Int32(n)) }

    static func sgemm(transA: Bool, transB: Bool, m: Int, n: Int, k: Int,
                      a: UnsafePointer<Float>, lda: Int, b: UnsafePointer<Float>, ldb: Int,
                      c: UnsafeMutablePointer<Float>, ldc: Int) {
        cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
                    blasint(m), blasint(n), blasint(k), 1, a, blasint(lda), b, blasint(ldb), 0, c, blasint(ldc))
    }
}
#endif
