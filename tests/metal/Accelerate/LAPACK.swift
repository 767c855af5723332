// The part of vecLib's CLAPACK interface (clapack.h, without ACCELERATE_NEW_LAPACK: 32-bit
// integers, every argument by pointer, column-major) that lucid's CPU backend uses
// (Backends/Host/LAPACK+Accelerate.swift), done by the Linux build's OpenBLAS through LAPACKE.
// A workspace query (lwork = -1) answers 1, and the call then lets LAPACKE size its own
// workspace; an lwork below 1 otherwise is refused as LAPACK refuses it.

import CBLAS

public typealias __CLPK_integer = Int32
public typealias __CLPK_real = Float
public typealias __CLPK_doublereal = Double

private let colMajor: Int32 = 102

/// Stops on an argument LAPACK rejects (its xerbla), naming the routine and the position.
private func lapackMisuse(_ routine: String, _ position: Int, _ why: String) -> Never {
    fatalError("Accelerate emulation: parameter \(position) of \(routine) is invalid: \(why)")
}

/// Whether the call is a workspace query; refuses a workspace size below 1 otherwise.
private func isQuery<R: BinaryFloatingPoint>(
    _ routine: String, _ position: Int, _ work: UnsafeMutablePointer<R>?,
    _ lwork: UnsafeMutablePointer<__CLPK_integer>?
) -> Bool {
    guard let lwork, let work else { lapackMisuse(routine, position, "WORK or LWORK is NULL") }
    if lwork.pointee == -1 {
        work.pointee = 1
        return true
    }
    guard lwork.pointee >= 1 else { lapackMisuse(routine, position, "LWORK = \(lwork.pointee)") }
    return false
}

private func leading(_ routine: String, _ position: Int, _ ld: __CLPK_integer, rows: __CLPK_integer) {
    guard ld >= max(1, rows) else { lapackMisuse(routine, position, "leading dimension \(ld) < max(1, \(rows))") }
}

// clapack.h: sgetrf_ / dgetrf_, LU factorization with partial pivoting.
public func sgetrf_(
    _ m: UnsafeMutablePointer<__CLPK_integer>!, _ n: UnsafeMutablePointer<__CLPK_integer>!,
    _ a: UnsafeMutablePointer<__CLPK_real>!, _ lda: UnsafeMutablePointer<__CLPK_integer>!,
    _ ipiv: UnsafeMutablePointer<__CLPK_integer>!, _ info: UnsafeMutablePointer<__CLPK_integer>!
) -> Int32 {
    leading("sgetrf_", 4, lda.pointee, rows: m.pointee)
    info.pointee = scipy_LAPACKE_sgetrf_work(colMajor, m.pointee, n.pointee, a, lda.pointee, ipiv)
    return 0
}

public func dgetrf_(
    _ m: UnsafeMutablePointer<__CLPK_integer>!, _ n: UnsafeMutablePointer<__CLPK_integer>!,
    _ a: UnsafeMutablePointer<__CLPK_doublereal>!, _ lda: UnsafeMutablePointer<__CLPK_integer>!,
    _ ipiv: UnsafeMutablePointer<__CLPK_integer>!, _ info: UnsafeMutablePointer<__CLPK_integer>!
) -> Int32 {
    leading("dgetrf_", 4, lda.pointee, rows: m.pointee)
    info.pointee = scipy_LAPACKE_dgetrf_work(colMajor, m.pointee, n.pointee, a, lda.pointee, ipiv)
    return 0
}

// clapack.h: strtrs_ / dtrtrs_, triangular solves.
public func strtrs_(
    _ uplo: UnsafeMutablePointer<CChar>!, _ trans: UnsafeMutablePointer<CChar>!,
    _ diag: UnsafeMutablePointer<CChar>!, _ n: UnsafeMutablePointer<__CLPK_integer>!,
    _ nrhs: UnsafeMutablePointer<__CLPK_integer>!, _ a: UnsafeMutablePointer<__CLPK_real>!,
    _ lda: UnsafeMutablePointer<__CLPK_integer>!, _ b: UnsafeMutablePointer<__CLPK_real>!,
    _ ldb: UnsafeMutablePointer<__CLPK_integer>!, _ info: UnsafeMutablePointer<__CLPK_integer>!
) -> Int32 {
    leading("strtrs_", 7, lda.pointee, rows: n.pointee)
    leading("strtrs_", 9, ldb.pointee, rows: n.pointee)
    info.pointee = scipy_LAPACKE_strtrs_work(
        colMajor, uplo.pointee, trans.pointee, diag.pointee, n.pointee, nrhs.pointee,
        a, lda.pointee, b, ldb.pointee)
    return 0
}

public func dtrtrs_(
    _ uplo: UnsafeMutablePointer<CChar>!, _ trans: UnsafeMutablePointer<CChar>!,
    _ diag: UnsafeMutablePointer<CChar>!, _ n: UnsafeMutablePointer<__CLPK_integer>!,
    _ nrhs: UnsafeMutablePointer<__CLPK_integer>!, _ a: UnsafeMutablePointer<__CLPK_doublereal>!,
    _ lda: UnsafeMutablePointer<__CLPK_integer>!, _ b: UnsafeMutablePointer<__CLPK_doublereal>!,
    _ ldb: UnsafeMutablePointer<__CLPK_integer>!, _ info: UnsafeMutablePointer<__CLPK_integer>!
) -> Int32 {
    leading("dtrtrs_", 7, lda.pointee, rows: n.pointee)
    leading("dtrtrs_", 9, ldb.pointee, rows: n.pointee)
    info.pointee = scipy_LAPACKE_dtrtrs_work(
        colMajor, uplo.pointee, trans.pointee, diag.pointee, n.pointee, nrhs.pointee,
        a, lda.pointee, b, ldb.pointee)
    return 0
}

// clapack.h: spotrf_ / dpotrf_, Cholesky factorization.
public func spotrf_(
    _ uplo: UnsafeMutablePointer<CChar>!, _ n: UnsafeMutablePointer<__CLPK_integer>!,
    _ a: UnsafeMutablePointer<__CLPK_real>!, _ lda: UnsafeMutablePointer<__CLPK_integer>!,
    _ info: UnsafeMutablePointer<__CLPK_integer>!
) -> Int32 {
    leading("spotrf_", 4, lda.pointee, rows: n.pointee)
    info.pointee = scipy_LAPACKE_spotrf_work(colMajor, uplo.pointee, n.pointee, a, lda.pointee)
    return 0
}

public func dpotrf_(
    _ uplo: UnsafeMutablePointer<CChar>!, _ n: UnsafeMutablePointer<__CLPK_integer>!,
    _ a: UnsafeMutablePointer<__CLPK_doublereal>!, _ lda: UnsafeMutablePointer<__CLPK_integer>!,
    _ info: UnsafeMutablePointer<__CLPK_integer>!
) -> Int32 {
    leading("dpotrf_", 4, lda.pointee, rows: n.pointee)
    info.pointee = scipy_LAPACKE_dpotrf_work(colMajor, uplo.pointee, n.pointee, a, lda.pointee)
    return 0
}

// clapack.h: ssyevd_ / dsyevd_, symmetric eigendecomposition (divide and conquer).
public func ssyevd_(
    _ jobz: UnsafeMutablePointer<CChar>!, _ uplo: UnsafeMutablePointer<CChar>!,
    _ n: UnsafeMutablePointer<__CLPK_integer>!, _ a: UnsafeMutablePointer<__CLPK_real>!,
    _ lda: UnsafeMutablePointer<__CLPK_integer>!, _ w: UnsafeMutablePointer<__CLPK_real>!,
    _ work: UnsafeMutablePointer<__CLPK_real>!, _ lwork: UnsafeMutablePointer<__CLPK_integer>!,
    _ iwork: UnsafeMutablePointer<__CLPK_integer>!, _ liwork: UnsafeMutablePointer<__CLPK_integer>!,
    _ info: UnsafeMutablePointer<__CLPK_integer>!
) -> Int32 {
    leading("ssyevd_", 5, lda.pointee, rows: n.pointee)
    if isQuery("ssyevd_", 8, work, lwork) { info.pointee = 0; return 0 }
    info.pointee = scipy_LAPACKE_ssyevd(colMajor, jobz.pointee, uplo.pointee, n.pointee, a, lda.pointee, w)
    return 0
}

public func dsyevd_(
    _ jobz: UnsafeMutablePointer<CChar>!, _ uplo: UnsafeMutablePointer<CChar>!,
    _ n: UnsafeMutablePointer<__CLPK_integer>!, _ a: UnsafeMutablePointer<__CLPK_doublereal>!,
    _ lda: UnsafeMutablePointer<__CLPK_integer>!, _ w: UnsafeMutablePointer<__CLPK_doublereal>!,
    _ work: UnsafeMutablePointer<__CLPK_doublereal>!, _ lwork: UnsafeMutablePointer<__CLPK_integer>!,
    _ iwork: UnsafeMutablePointer<__CLPK_integer>!, _ liwork: UnsafeMutablePointer<__CLPK_integer>!,
    _ info: UnsafeMutablePointer<__CLPK_integer>!
) -> Int32 {
    leading("dsyevd_", 5, lda.pointee, rows: n.pointee)
    if isQuery("dsyevd_", 8, work, lwork) { info.pointee = 0; return 0 }
    info.pointee = scipy_LAPACKE_dsyevd(colMajor, jobz.pointee, uplo.pointee, n.pointee, a, lda.pointee, w)
    return 0
}

// clapack.h: sgesdd_ / dgesdd_, singular value decomposition (divide and conquer).
public func sgesdd_(
    _ jobz: UnsafeMutablePointer<CChar>!, _ m: UnsafeMutablePointer<__CLPK_integer>!,
    _ n: UnsafeMutablePointer<__CLPK_integer>!, _ a: UnsafeMutablePointer<__CLPK_real>!,
    _ lda: UnsafeMutablePointer<__CLPK_integer>!, _ s: UnsafeMutablePointer<__CLPK_real>!,
    _ u: UnsafeMutablePointer<__CLPK_real>!, _ ldu: UnsafeMutablePointer<__CLPK_integer>!,
    _ vt: UnsafeMutablePointer<__CLPK_real>!, _ ldvt: UnsafeMutablePointer<__CLPK_integer>!,
    _ work: UnsafeMutablePointer<__CLPK_real>!, _ lwork: UnsafeMutablePointer<__CLPK_integer>!,
    _ iwork: UnsafeMutablePointer<__CLPK_integer>!, _ info: UnsafeMutablePointer<__CLPK_integer>!
) -> Int32 {
    leading("sgesdd_", 5, lda.pointee, rows: m.pointee)
    if isQuery("sgesdd_", 12, work, lwork) { info.pointee = 0; return 0 }
    info.pointee = scipy_LAPACKE_sgesdd(
        colMajor, jobz.pointee, m.pointee, n.pointee, a, lda.pointee, s, u, ldu.pointee,
        vt, ldvt.pointee)
    return 0
}

public func dgesdd_(
    _ jobz: UnsafeMutablePointer<CChar>!, _ m: UnsafeMutablePointer<__CLPK_integer>!,
    _ n: UnsafeMutablePointer<__CLPK_integer>!, _ a: UnsafeMutablePointer<__CLPK_doublereal>!,
    _ lda: UnsafeMutablePointer<__CLPK_integer>!, _ s: UnsafeMutablePointer<__CLPK_doublereal>!,
    _ u: UnsafeMutablePointer<__CLPK_doublereal>!, _ ldu: UnsafeMutablePointer<__CLPK_integer>!,
    _ vt: UnsafeMutablePointer<__CLPK_doublereal>!, _ ldvt: UnsafeMutablePointer<__CLPK_integer>!,
    _ work: UnsafeMutablePointer<__CLPK_doublereal>!, _ lwork: UnsafeMutablePointer<__CLPK_integer>!,
    _ iwork: UnsafeMutablePointer<__CLPK_integer>!, _ info: UnsafeMutablePointer<__CLPK_integer>!
) -> Int32 {
    leading("dgesdd_", 5, lda.pointee, rows: m.pointee)
    if isQuery("dgesdd_", 12, work, lwork) { info.pointee = 0; return 0 }
    info.pointee = scipy_LAPACKE_dgesdd(
        colMajor, jobz.pointee, m.pointee, n.pointee, a, lda.pointee, s, u, ldu.pointee,
        vt, ldvt.pointee)
    return 0
}

// clapack.h: sgeqrf_ / dgeqrf_, QR factorization into Householder reflectors.
public func sgeqrf_(
    _ m: UnsafeMutablePointer<__CLPK_integer>!, _ n: UnsafeMutablePointer<__CLPK_integer>!,
    _ a: UnsafeMutablePointer<__CLPK_real>!, _ lda: UnsafeMutablePointer<__CLPK_integer>!,
    _ tau: UnsafeMutablePointer<__CLPK_real>!, _ work: UnsafeMutablePointer<__CLPK_real>!,
    _ lwork: UnsafeMutablePointer<__CLPK_integer>!, _ info: UnsafeMutablePointer<__CLPK_integer>!
) -> Int32 {
    leading("sgeqrf_", 4, lda.pointee, rows: m.pointee)
    if isQuery("sgeqrf_", 7, work, lwork) { info.pointee = 0; return 0 }
    info.pointee = scipy_LAPACKE_sgeqrf(colMajor, m.pointee, n.pointee, a, lda.pointee, tau)
    return 0
}

public func dgeqrf_(
    _ m: UnsafeMutablePointer<__CLPK_integer>!, _ n: UnsafeMutablePointer<__CLPK_integer>!,
    _ a: UnsafeMutablePointer<__CLPK_doublereal>!, _ lda: UnsafeMutablePointer<__CLPK_integer>!,
    _ tau: UnsafeMutablePointer<__CLPK_doublereal>!, _ work: UnsafeMutablePointer<__CLPK_doublereal>!,
    _ lwork: UnsafeMutablePointer<__CLPK_integer>!, _ info: UnsafeMutablePointer<__CLPK_integer>!
) -> Int32 {
    leading("dgeqrf_", 4, lda.pointee, rows: m.pointee)
    if isQuery("dgeqrf_", 7, work, lwork) { info.pointee = 0; return 0 }
    info.pointee = scipy_LAPACKE_dgeqrf(colMajor, m.pointee, n.pointee, a, lda.pointee, tau)
    return 0
}

// clapack.h: sorgqr_ / dorgqr_, the orthogonal factor from Householder reflectors.
public func sorgqr_(
    _ m: UnsafeMutablePointer<__CLPK_integer>!, _ n: UnsafeMutablePointer<__CLPK_integer>!,
    _ k: UnsafeMutablePointer<__CLPK_integer>!, _ a: UnsafeMutablePointer<__CLPK_real>!,
    _ lda: UnsafeMutablePointer<__CLPK_integer>!, _ tau: UnsafeMutablePointer<__CLPK_real>!,
    _ work: UnsafeMutablePointer<__CLPK_real>!, _ lwork: UnsafeMutablePointer<__CLPK_integer>!,
    _ info: UnsafeMutablePointer<__CLPK_integer>!
) -> Int32 {
    leading("sorgqr_", 5, lda.pointee, rows: m.pointee)
    if isQuery("sorgqr_", 8, work, lwork) { info.pointee = 0; return 0 }
    info.pointee = scipy_LAPACKE_sorgqr(colMajor, m.pointee, n.pointee, k.pointee, a, lda.pointee, tau)
    return 0
}

public func dorgqr_(
    _ m: UnsafeMutablePointer<__CLPK_integer>!, _ n: UnsafeMutablePointer<__CLPK_integer>!,
    _ k: UnsafeMutablePointer<__CLPK_integer>!, _ a: UnsafeMutablePointer<__CLPK_doublereal>!,
    _ lda: UnsafeMutablePointer<__CLPK_integer>!, _ tau: UnsafeMutablePointer<__CLPK_doublereal>!,
    _ work: UnsafeMutablePointer<__CLPK_doublereal>!, _ lwork: UnsafeMutablePointer<__CLPK_integer>!,
    _ info: UnsafeMutablePointer<__CLPK_integer>!
) -> Int32 {
    leading("dorgqr_", 5, lda.pointee, rows: m.pointee)
    if isQuery("dorgqr_", 8, work, lwork) { info.pointee = 0; return 0 }
    info.pointee = scipy_LAPACKE_dorgqr(colMajor, m.pointee, n.pointee, k.pointee, a, lda.pointee, tau)
    return 0
}

// clapack.h: ssytrf_, the Bunch-Kaufman LDLᵀ factorization of a symmetric matrix.
public func ssytrf_(
    _ uplo: UnsafeMutablePointer<CChar>!, _ n: UnsafeMutablePointer<__CLPK_integer>!,
    _ a: UnsafeMutablePointer<__CLPK_real>!, _ lda: UnsafeMutablePointer<__CLPK_integer>!,
    _ ipiv: UnsafeMutablePointer<__CLPK_integer>!, _ work: UnsafeMutablePointer<__CLPK_real>!,
    _ lwork: UnsafeMutablePointer<__CLPK_integer>!, _ info: UnsafeMutablePointer<__CLPK_integer>!
) -> Int32 {
    leading("ssytrf_", 4, lda.pointee, rows: n.pointee)
    if isQuery("ssytrf_", 7, work, lwork) { info.pointee = 0; return 0 }
    info.pointee = scipy_LAPACKE_ssytrf(colMajor, uplo.pointee, n.pointee, a, lda.pointee, ipiv)
    return 0
}

// clapack.h: ssytrs_, solves with ssytrf_'s factorization.
public func ssytrs_(
    _ uplo: UnsafeMutablePointer<CChar>!, _ n: UnsafeMutablePointer<__CLPK_integer>!,
    _ nrhs: UnsafeMutablePointer<__CLPK_integer>!, _ a: UnsafeMutablePointer<__CLPK_real>!,
    _ lda: UnsafeMutablePointer<__CLPK_integer>!, _ ipiv: UnsafeMutablePointer<__CLPK_integer>!,
    _ b: UnsafeMutablePointer<__CLPK_real>!, _ ldb: UnsafeMutablePointer<__CLPK_integer>!,
    _ info: UnsafeMutablePointer<__CLPK_integer>!
) -> Int32 {
    leading("ssytrs_", 5, lda.pointee, rows: n.pointee)
    leading("ssytrs_", 8, ldb.pointee, rows: n.pointee)
    info.pointee = scipy_LAPACKE_ssytrs_work(
        colMajor, uplo.pointee, n.pointee, nrhs.pointee, a, lda.pointee, ipiv, b,
        ldb.pointee)
    return 0
}

// clapack.h: dsytrf_, the Bunch-Kaufman LDLᵀ factorization of a symmetric matrix.
public func dsytrf_(
    _ uplo: UnsafeMutablePointer<CChar>!, _ n: UnsafeMutablePointer<__CLPK_integer>!,
    _ a: UnsafeMutablePointer<__CLPK_doublereal>!, _ lda: UnsafeMutablePointer<__CLPK_integer>!,
    _ ipiv: UnsafeMutablePointer<__CLPK_integer>!, _ work: UnsafeMutablePointer<__CLPK_doublereal>!,
    _ lwork: UnsafeMutablePointer<__CLPK_integer>!, _ info: UnsafeMutablePointer<__CLPK_integer>!
) -> Int32 {
    leading("dsytrf_", 4, lda.pointee, rows: n.pointee)
    if isQuery("dsytrf_", 7, work, lwork) { info.pointee = 0; return 0 }
    info.pointee = scipy_LAPACKE_dsytrf(colMajor, uplo.pointee, n.pointee, a, lda.pointee, ipiv)
    return 0
}

// clapack.h: dsytrs_, solves with dsytrf_'s factorization.
public func dsytrs_(
    _ uplo: UnsafeMutablePointer<CChar>!, _ n: UnsafeMutablePointer<__CLPK_integer>!,
    _ nrhs: UnsafeMutablePointer<__CLPK_integer>!, _ a: UnsafeMutablePointer<__CLPK_doublereal>!,
    _ lda: UnsafeMutablePointer<__CLPK_integer>!, _ ipiv: UnsafeMutablePointer<__CLPK_integer>!,
    _ b: UnsafeMutablePointer<__CLPK_doublereal>!, _ ldb: UnsafeMutablePointer<__CLPK_integer>!,
    _ info: UnsafeMutablePointer<__CLPK_integer>!
) -> Int32 {
    leading("dsytrs_", 5, lda.pointee, rows: n.pointee)
    leading("dsytrs_", 8, ldb.pointee, rows: n.pointee)
    info.pointee = scipy_LAPACKE_dsytrs_work(
        colMajor, uplo.pointee, n.pointee, nrhs.pointee, a, lda.pointee, ipiv, b,
        ldb.pointee)
    return 0
}
