#if !canImport(Accelerate) && canImport(CBLAS)
import CBLAS

/// The LAPACK routines the linear-algebra kernels use, from OpenBLAS (scipy-openblas32, whose
/// symbols carry a `scipy_` prefix) through its LAPACKE interface, on column-major matrices.
/// Each returns LAPACK's `info`: 0 on success, > 0 for a numerical failure the routine
/// describes (a zero pivot, a minor that is not positive definite, no convergence).
private let colMajor: Int32 = 102

private func flag(_ c: Character) -> CChar { CChar(truncatingIfNeeded: c.asciiValue ?? 0) }

extension Float: LAPACKReal {
    static func getrf(
        _ m: Int32, _ n: Int32, _ a: UnsafeMutablePointer<Float>, _ lda: Int32,
        _ ipiv: UnsafeMutablePointer<Int32>
    ) -> Int32 {
        scipy_LAPACKE_sgetrf(colMajor, m, n, a, lda, ipiv)
    }
    static func trtrs(
        upper: Bool, transpose: Bool, unit: Bool, _ n: Int32, _ nrhs: Int32, _ a: UnsafeMutablePointer<Float>,
        _ lda: Int32, _ b: UnsafeMutablePointer<Float>, _ ldb: Int32
    ) -> Int32 {
        scipy_LAPACKE_strtrs(
            colMajor, flag(upper ? "U" : "L"), flag(transpose ? "T" : "N"), flag(unit ? "U" : "N"),
            n, nrhs, a, lda, b, ldb)
    }
    static func potrf(upper: Bool, _ n: Int32, _ a: UnsafeMutablePointer<Float>, _ lda: Int32) -> Int32 {
        scipy_LAPACKE_spotrf(colMajor, flag(upper ? "U" : "L"), n, a, lda)
    }
    static func syevd(
        vectors: Bool, upper: Bool, _ n: Int32, _ a: UnsafeMutablePointer<Float>, _ lda: Int32,
        _ w: UnsafeMutablePointer<Float>
    ) -> Int32 {
        scipy_LAPACKE_ssyevd(colMajor, flag(vectors ? "V" : "N"), flag(upper ? "U" : "L"), n, a, lda, w)
    }
    static func gesdd(
        job: Character, _ m: Int32, _ n: Int32, _ a: UnsafeMutablePointer<Float>, _ lda: Int32,
        _ s: UnsafeMutablePointer<Float>, _ u: UnsafeMutablePointer<Float>, _ ldu: Int32,
        _ vt: UnsafeMutablePointer<Float>, _ ldvt: Int32
    ) -> Int32 {
        scipy_LAPACKE_sgesdd(colMajor, flag(job), m, n, a, lda, s, u, ldu, vt, ldvt)
    }
    static func geqrf(
        _ m: Int32, _ n: Int32, _ a: UnsafeMutablePointer<Float>, _ lda: Int32,
        _ tau: UnsafeMutablePointer<Float>
    ) -> Int32 {
        scipy_LAPACKE_sgeqrf(colMajor, m, n, a, lda, tau)
    }
    static func orgqr(
        _ m: Int32, _ n: Int32, _ k: Int32, _ a: UnsafeMutablePointer<Float>, _ lda: Int32,
        _ tau: UnsafeMutablePointer<Float>
    ) -> Int32 {
        scipy_LAPACKE_sorgqr(colMajor, m, n, k, a, lda, tau)
    }
    static func sytrf(_ n: Int32, _ a: UnsafeMutablePointer<Float>, _ lda: Int32, _ ipiv: UnsafeMutablePointer<Int32>) -> Int32 {
        scipy_LAPACKE_ssytrf(colMajor, flag("L"), n, a, lda, ipiv)
    }
    static func sytrs(
        _ n: Int32, _ nrhs: Int32, _ a: UnsafeMutablePointer<Float>, _ lda: Int32,
        _ ipiv: UnsafeMutablePointer<Int32>, _ b: UnsafeMutablePointer<Float>, _ ldb: Int32
    ) -> Int32 {
        scipy_LAPACKE_ssytrs(colMajor, flag("L"), n, nrhs, a, lda, ipiv, b, ldb)
    }
}

extension Double: LAPACKReal {
    static func getrf(
        _ m: Int32, _ n: Int32, _ a: UnsafeMutablePointer<Double>, _ lda: Int32,
        _ ipiv: UnsafeMutablePointer<Int32>
    ) -> Int32 {
        scipy_LAPACKE_dgetrf(colMajor, m, n, a, lda, ipiv)
    }
    static func trtrs(
        upper: Bool, transpose: Bool, unit: Bool, _ n: Int32, _ nrhs: Int32, _ a: UnsafeMutablePointer<Double>,
        _ lda: Int32, _ b: UnsafeMutablePointer<Double>, _ ldb: Int32
    ) -> Int32 {
        scipy_LAPACKE_dtrtrs(
            colMajor, flag(upper ? "U" : "L"), flag(transpose ? "T" : "N"), flag(unit ? "U" : "N"),
            n, nrhs, a, lda, b, ldb)
    }
    static func potrf(upper: Bool, _ n: Int32, _ a: UnsafeMutablePointer<Double>, _ lda: Int32) -> Int32 {
        scipy_LAPACKE_dpotrf(colMajor, flag(upper ? "U" : "L"), n, a, lda)
    }
    static func syevd(
        vectors: Bool, upper: Bool, _ n: Int32, _ a: UnsafeMutablePointer<Double>, _ lda: Int32,
        _ w: UnsafeMutablePointer<Double>
    ) -> Int32 {
        scipy_LAPACKE_dsyevd(colMajor, flag(vectors ? "V" : "N"), flag(upper ? "U" : "L"), n, a, lda, w)
    }
    static func gesdd(
        job: Character, _ m: Int32, _ n: Int32, _ a: UnsafeMutablePointer<Double>, _ lda: Int32,
        _ s: UnsafeMutablePointer<Double>, _ u: UnsafeMutablePointer<Double>, _ ldu: Int32,
        _ vt: UnsafeMutablePointer<Double>, _ ldvt: Int32
    ) -> Int32 {
        scipy_LAPACKE_dgesdd(colMajor, flag(job), m, n, a, lda, s, u, ldu, vt, ldvt)
    }
    static func geqrf(
        _ m: Int32, _ n: Int32, _ a: UnsafeMutablePointer<Double>, _ lda: Int32,
        _ tau: UnsafeMutablePointer<Double>
    ) -> Int32 {
        scipy_LAPACKE_dgeqrf(colMajor, m, n, a, lda, tau)
    }
    static func orgqr(
        _ m: Int32, _ n: Int32, _ k: Int32, _ a: UnsafeMutablePointer<Double>, _ lda: Int32,
        _ tau: UnsafeMutablePointer<Double>
    ) -> Int32 {
        scipy_LAPACKE_dorgqr(colMajor, m, n, k, a, lda, tau)
    }
    static func sytrf(_ n: Int32, _ a: UnsafeMutablePointer<Double>, _ lda: Int32, _ ipiv: UnsafeMutablePointer<Int32>) -> Int32 {
        scipy_LAPACKE_dsytrf(colMajor, flag("L"), n, a, lda, ipiv)
    }
    static func sytrs(
        _ n: Int32, _ nrhs: Int32, _ a: UnsafeMutablePointer<Double>, _ lda: Int32,
        _ ipiv: UnsafeMutablePointer<Int32>, _ b: UnsafeMutablePointer<Double>, _ ldb: Int32
    ) -> Int32 {
        scipy_LAPACKE_dsytrs(colMajor, flag("L"), n, nrhs, a, lda, ipiv, b, ldb)
    }
}
#endif
