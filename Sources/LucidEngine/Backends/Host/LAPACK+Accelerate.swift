#if canImport(Accelerate)
import Accelerate

/// The LAPACK routines the linear-algebra kernels use, from Accelerate's CLAPACK interface,
/// on column-major matrices. Each returns LAPACK's `info`: 0 on success, > 0 for a numerical
/// failure the routine describes. The routines that take a workspace are asked its size
/// first (lwork = -1), as LAPACK documents.
private func flag(_ c: Character) -> CChar { CChar(truncatingIfNeeded: c.asciiValue ?? 0) }

/// Runs `call` with a workspace of the size a first call with `lwork = -1` asks for.
private func withWorkspace<R: BinaryFloatingPoint>(
    _: R.Type, _ call: (UnsafeMutablePointer<R>, UnsafeMutablePointer<__CLPK_integer>) -> __CLPK_integer
) -> Int32 {
    var query = R(0), lwork: __CLPK_integer = -1
    let asked = call(&query, &lwork)
    if asked != 0 { return Int32(asked) }
    lwork = __CLPK_integer(max(1, Int(query)))
    var work = [R](repeating: 0, count: Int(lwork))
    return Int32(
        work.withUnsafeMutableBufferPointer { w -> __CLPK_integer in
            guard let p = w.baseAddress else { return -1 }
            return call(p, &lwork)
        })
}

extension Float: LAPACKReal {
    static func getrf(
        _ m: Int32, _ n: Int32, _ a: UnsafeMutablePointer<Float>, _ lda: Int32,
        _ ipiv: UnsafeMutablePointer<Int32>
    ) -> Int32 {
        var m = __CLPK_integer(m), n = __CLPK_integer(n), lda = __CLPK_integer(lda), info: __CLPK_integer = 0
        var piv = [__CLPK_integer](repeating: 0, count: Int(min(m, n)))
        sgetrf_(&m, &n, a, &lda, &piv, &info)
        for i in piv.indices { ipiv[i] = Int32(piv[i]) }
        return Int32(info)
    }
    static func trtrs(
        upper: Bool, transpose: Bool, unit: Bool, _ n: Int32, _ nrhs: Int32, _ a: UnsafeMutablePointer<Float>,
        _ lda: Int32, _ b: UnsafeMutablePointer<Float>, _ ldb: Int32
    ) -> Int32 {
        var uplo = flag(upper ? "U" : "L"), trans = flag(transpose ? "T" : "N"), diag = flag(unit ? "U" : "N")
        var n = __CLPK_integer(n), nrhs = __CLPK_integer(nrhs), lda = __CLPK_integer(lda), ldb = __CLPK_integer(ldb)
        var info: __CLPK_integer = 0
        strtrs_(&uplo, &trans, &diag, &n, &nrhs, a, &lda, b, &ldb, &info)
        return Int32(info)
    }
    static func potrf(upper: Bool, _ n: Int32, _ a: UnsafeMutablePointer<Float>, _ lda: Int32) -> Int32 {
        var uplo = flag(upper ? "U" : "L"), n = __CLPK_integer(n), lda = __CLPK_integer(lda), info: __CLPK_integer = 0
        spotrf_(&uplo, &n, a, &lda, &info)
        return Int32(info)
    }
    static func syevd(
        vectors: Bool, upper: Bool, _ n: Int32, _ a: UnsafeMutablePointer<Float>, _ lda: Int32,
        _ w: UnsafeMutablePointer<Float>
    ) -> Int32 {
        var jobz = flag(vectors ? "V" : "N"), uplo = flag(upper ? "U" : "L")
        var n = __CLPK_integer(n), lda = __CLPK_integer(lda)
        var liwork = __CLPK_integer(vectors ? 5 * Int(n) + 3 : 1)
        var iwork = [__CLPK_integer](repeating: 0, count: Int(liwork))
        return withWorkspace(Float.self) { work, lwork in
            var info: __CLPK_integer = 0
            ssyevd_(&jobz, &uplo, &n, a, &lda, w, work, lwork, &iwork, &liwork, &info)
            return info
        }
    }
    static func gesdd(
        job: Character, _ m: Int32, _ n: Int32, _ a: UnsafeMutablePointer<Float>, _ lda: Int32,
        _ s: UnsafeMutablePointer<Float>, _ u: UnsafeMutablePointer<Float>, _ ldu: Int32,
        _ vt: UnsafeMutablePointer<Float>, _ ldvt: Int32
    ) -> Int32 {
        var jobz = flag(job), m = __CLPK_integer(m), n = __CLPK_integer(n), lda = __CLPK_integer(lda)
        var ldu = __CLPK_integer(ldu), ldvt = __CLPK_integer(ldvt)
        var iwork = [__CLPK_integer](repeating: 0, count: 8 * Int(max(1, min(m, n))))
        return withWorkspace(Float.self) { work, lwork in
            var info: __CLPK_integer = 0
            sgesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, lwork, &iwork, &info)
            return info
        }
    }
    static func geqrf(
        _ m: Int32, _ n: Int32, _ a: UnsafeMutablePointer<Float>, _ lda: Int32,
        _ tau: UnsafeMutablePointer<Float>
    ) -> Int32 {
        var m = __CLPK_integer(m), n = __CLPK_integer(n), lda = __CLPK_integer(lda)
        return withWorkspace(Float.self) { work, lwork in
            var info: __CLPK_integer = 0
            sgeqrf_(&m, &n, a, &lda, tau, work, lwork, &info)
            return info
        }
    }
    static func orgqr(
        _ m: Int32, _ n: Int32, _ k: Int32, _ a: UnsafeMutablePointer<Float>, _ lda: Int32,
        _ tau: UnsafeMutablePointer<Float>
    ) -> Int32 {
        var m = __CLPK_integer(m), n = __CLPK_integer(n), k = __CLPK_integer(k), lda = __CLPK_integer(lda)
        return withWorkspace(Float.self) { work, lwork in
            var info: __CLPK_integer = 0
            sorgqr_(&m, &n, &k, a, &lda, tau, work, lwork, &info)
            return info
        }
    }
    static func sytrf(_ n: Int32, _ a: UnsafeMutablePointer<Float>, _ lda: Int32, _ ipiv: UnsafeMutablePointer<Int32>) -> Int32 {
        var uplo = flag("L"), n = __CLPK_integer(n), lda = __CLPK_integer(lda)
        var piv = [__CLPK_integer](repeating: 0, count: Int(n))
        let info = withWorkspace(Float.self) { work, lwork in
            var info: __CLPK_integer = 0
            ssytrf_(&uplo, &n, a, &lda, &piv, work, lwork, &info)
            return info
        }
        for i in piv.indices { ipiv[i] = Int32(piv[i]) }
        return info
    }
    static func sytrs(
        _ n: Int32, _ nrhs: Int32, _ a: UnsafeMutablePointer<Float>, _ lda: Int32,
        _ ipiv: UnsafeMutablePointer<Int32>, _ b: UnsafeMutablePointer<Float>, _ ldb: Int32
    ) -> Int32 {
        var uplo = flag("L"), n = __CLPK_integer(n), nrhs = __CLPK_integer(nrhs), lda = __CLPK_integer(lda)
        var ldb = __CLPK_integer(ldb), info: __CLPK_integer = 0
        var piv = (0..<Int(n)).map { __CLPK_integer(ipiv[$0]) }
        ssytrs_(&uplo, &n, &nrhs, a, &lda, &piv, b, &ldb, &info)
        return Int32(info)
    }
}

extension Double: LAPACKReal {
    static func getrf(
        _ m: Int32, _ n: Int32, _ a: UnsafeMutablePointer<Double>, _ lda: Int32,
        _ ipiv: UnsafeMutablePointer<Int32>
    ) -> Int32 {
        var m = __CLPK_integer(m), n = __CLPK_integer(n), lda = __CLPK_integer(lda), info: __CLPK_integer = 0
        var piv = [__CLPK_integer](repeating: 0, count: Int(min(m, n)))
        dgetrf_(&m, &n, a, &lda, &piv, &info)
        for i in piv.indices { ipiv[i] = Int32(piv[i]) }
        return Int32(info)
    }
    static func trtrs(
        upper: Bool, transpose: Bool, unit: Bool, _ n: Int32, _ nrhs: Int32, _ a: UnsafeMutablePointer<Double>,
        _ lda: Int32, _ b: UnsafeMutablePointer<Double>, _ ldb: Int32
    ) -> Int32 {
        var uplo = flag(upper ? "U" : "L"), trans = flag(transpose ? "T" : "N"), diag = flag(unit ? "U" : "N")
        var n = __CLPK_integer(n), nrhs = __CLPK_integer(nrhs), lda = __CLPK_integer(lda), ldb = __CLPK_integer(ldb)
        var info: __CLPK_integer = 0
        dtrtrs_(&uplo, &trans, &diag, &n, &nrhs, a, &lda, b, &ldb, &info)
        return Int32(info)
    }
    static func potrf(upper: Bool, _ n: Int32, _ a: UnsafeMutablePointer<Double>, _ lda: Int32) -> Int32 {
        var uplo = flag(upper ? "U" : "L"), n = __CLPK_integer(n), lda = __CLPK_integer(lda), info: __CLPK_integer = 0
        dpotrf_(&uplo, &n, a, &lda, &info)
        return Int32(info)
    }
    static func syevd(
        vectors: Bool, upper: Bool, _ n: Int32, _ a: UnsafeMutablePointer<Double>, _ lda: Int32,
        _ w: UnsafeMutablePointer<Double>
    ) -> Int32 {
        var jobz = flag(vectors ? "V" : "N"), uplo = flag(upper ? "U" : "L")
        var n = __CLPK_integer(n), lda = __CLPK_integer(lda)
        var liwork = __CLPK_integer(vectors ? 5 * Int(n) + 3 : 1)
        var iwork = [__CLPK_integer](repeating: 0, count: Int(liwork))
        return withWorkspace(Double.self) { work, lwork in
            var info: __CLPK_integer = 0
            dsyevd_(&jobz, &uplo, &n, a, &lda, w, work, lwork, &iwork, &liwork, &info)
            return info
        }
    }
    static func gesdd(
        job: Character, _ m: Int32, _ n: Int32, _ a: UnsafeMutablePointer<Double>, _ lda: Int32,
        _ s: UnsafeMutablePointer<Double>, _ u: UnsafeMutablePointer<Double>, _ ldu: Int32,
        _ vt: UnsafeMutablePointer<Double>, _ ldvt: Int32
    ) -> Int32 {
        var jobz = flag(job), m = __CLPK_integer(m), n = __CLPK_integer(n), lda = __CLPK_integer(lda)
        var ldu = __CLPK_integer(ldu), ldvt = __CLPK_integer(ldvt)
        var iwork = [__CLPK_integer](repeating: 0, count: 8 * Int(max(1, min(m, n))))
        return withWorkspace(Double.self) { work, lwork in
            var info: __CLPK_integer = 0
            dgesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, lwork, &iwork, &info)
            return info
        }
    }
    static func geqrf(
        _ m: Int32, _ n: Int32, _ a: UnsafeMutablePointer<Double>, _ lda: Int32,
        _ tau: UnsafeMutablePointer<Double>
    ) -> Int32 {
        var m = __CLPK_integer(m), n = __CLPK_integer(n), lda = __CLPK_integer(lda)
        return withWorkspace(Double.self) { work, lwork in
            var info: __CLPK_integer = 0
            dgeqrf_(&m, &n, a, &lda, tau, work, lwork, &info)
            return info
        }
    }
    static func orgqr(
        _ m: Int32, _ n: Int32, _ k: Int32, _ a: UnsafeMutablePointer<Double>, _ lda: Int32,
        _ tau: UnsafeMutablePointer<Double>
    ) -> Int32 {
        var m = __CLPK_integer(m), n = __CLPK_integer(n), k = __CLPK_integer(k), lda = __CLPK_integer(lda)
        return withWorkspace(Double.self) { work, lwork in
            var info: __CLPK_integer = 0
            dorgqr_(&m, &n, &k, a, &lda, tau, work, lwork, &info)
            return info
        }
    }
    static func sytrf(_ n: Int32, _ a: UnsafeMutablePointer<Double>, _ lda: Int32, _ ipiv: UnsafeMutablePointer<Int32>) -> Int32 {
        var uplo = flag("L"), n = __CLPK_integer(n), lda = __CLPK_integer(lda)
        var piv = [__CLPK_integer](repeating: 0, count: Int(n))
        let info = withWorkspace(Double.self) { work, lwork in
            var info: __CLPK_integer = 0
            dsytrf_(&uplo, &n, a, &lda, &piv, work, lwork, &info)
            return info
        }
        for i in piv.indices { ipiv[i] = Int32(piv[i]) }
        return info
    }
    static func sytrs(
        _ n: Int32, _ nrhs: Int32, _ a: UnsafeMutablePointer<Double>, _ lda: Int32,
        _ ipiv: UnsafeMutablePointer<Int32>, _ b: UnsafeMutablePointer<Double>, _ ldb: Int32
    ) -> Int32 {
        var uplo = flag("L"), n = __CLPK_integer(n), nrhs = __CLPK_integer(nrhs), lda = __CLPK_integer(lda)
        var ldb = __CLPK_integer(ldb), info: __CLPK_integer = 0
        var piv = (0..<Int(n)).map { __CLPK_integer(ipiv[$0]) }
        dsytrs_(&uplo, &n, &nrhs, a, &lda, &piv, b, &ldb, &info)
        return Int32(info)
    }
}
#endif
