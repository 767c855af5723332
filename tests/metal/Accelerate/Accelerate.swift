// An emulation of the part of Apple's Accelerate framework that lucid's CPU backend uses
// (Backends/Host/BLAS+Accelerate.swift), for the check build on Linux (`make metal-emulated`),
// so that the Apple-only source compiles and runs here. The declarations follow vecLib's
// cblas.h as Swift imports it (without ACCELERATE_NEW_LAPACK: 32-bit integers); the work is
// done by the Linux build's OpenBLAS (scipy-openblas32).
//
// As strict as the reference BLAS: an argument the BLAS would reject (cblas_xerbla) stops the
// process with a message naming it, instead of multiplying garbage.

import CBLAS

// cblas.h: enum CBLAS_ORDER
public struct CBLAS_ORDER: RawRepresentable, Equatable, Sendable {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public init(_ rawValue: UInt32) { self.rawValue = rawValue }
}

// cblas.h: enum CBLAS_TRANSPOSE
public struct CBLAS_TRANSPOSE: RawRepresentable, Equatable, Sendable {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public init(_ rawValue: UInt32) { self.rawValue = rawValue }
}

public let CblasRowMajor = CBLAS_ORDER(101)
public let CblasColMajor = CBLAS_ORDER(102)
public let CblasNoTrans = CBLAS_TRANSPOSE(111)
public let CblasTrans = CBLAS_TRANSPOSE(112)
public let CblasConjTrans = CBLAS_TRANSPOSE(113)

/// Stops on an argument the BLAS rejects: parameter `position` (1-based, as cblas_xerbla
/// numbers them) of `routine`.
func blasMisuse(_ routine: String, _ position: Int, _ why: String) -> Never {
    fatalError("Accelerate emulation: parameter \(position) of \(routine) is invalid: \(why)")
}

/// Checks a GEMM call's arguments as the reference BLAS does; false when there is nothing to
/// multiply (M or N is 0).
private func checkGEMM(
    _ routine: String, _ order: CBLAS_ORDER, _ transA: CBLAS_TRANSPOSE, _ transB: CBLAS_TRANSPOSE,
    _ m: Int32, _ n: Int32, _ k: Int32, _ a: UnsafeRawPointer?, _ lda: Int32,
    _ b: UnsafeRawPointer?, _ ldb: Int32, _ c: UnsafeMutableRawPointer?, _ ldc: Int32
) -> Bool {
    let transposes = [CblasNoTrans, CblasTrans, CblasConjTrans]
    guard order == CblasRowMajor || order == CblasColMajor else { blasMisuse(routine, 1, "order \(order.rawValue)") }
    guard transposes.contains(transA) else { blasMisuse(routine, 2, "transpose \(transA.rawValue)") }
    guard transposes.contains(transB) else { blasMisuse(routine, 3, "transpose \(transB.rawValue)") }
    guard m >= 0 else { blasMisuse(routine, 4, "M = \(m)") }
    guard n >= 0 else { blasMisuse(routine, 5, "N = \(n)") }
    guard k >= 0 else { blasMisuse(routine, 6, "K = \(k)") }
    // The leading dimensions: at least the stored rows' length (row-major) or columns' (column-major).
    let rowMajor = order == CblasRowMajor
    let aT = transA != CblasNoTrans, bT = transB != CblasNoTrans
    let aRows = aT ? k : m, aCols = aT ? m : k
    let bRows = bT ? n : k, bCols = bT ? k : n
    let needA = max(1, rowMajor ? aCols : aRows), needB = max(1, rowMajor ? bCols : bRows)
    let needC = max(1, rowMajor ? n : m)
    guard lda >= needA else { blasMisuse(routine, 9, "lda = \(lda) < \(needA)") }
    guard ldb >= needB else { blasMisuse(routine, 11, "ldb = \(ldb) < \(needB)") }
    guard ldc >= needC else { blasMisuse(routine, 14, "ldc = \(ldc) < \(needC)") }
    if m == 0 || n == 0 { return false }
    guard c != nil else { blasMisuse(routine, 13, "C is NULL") }
    if k > 0 {
        guard a != nil else { blasMisuse(routine, 8, "A is NULL") }
        guard b != nil else { blasMisuse(routine, 10, "B is NULL") }
    }
    return true
}

// cblas.h: cblas_sgemm. C = alpha · op(A) · op(B) + beta · C.
public func cblas_sgemm(
    _ __Order: CBLAS_ORDER, _ __TransA: CBLAS_TRANSPOSE, _ __TransB: CBLAS_TRANSPOSE,
    _ __M: Int32, _ __N: Int32, _ __K: Int32, _ __alpha: Float,
    _ __A: UnsafePointer<Float>!, _ __lda: Int32, _ __B: UnsafePointer<Float>!, _ __ldb: Int32,
    _ __beta: Float, _ __C: UnsafeMutablePointer<Float>!, _ __ldc: Int32
) {
    guard checkGEMM("cblas_sgemm", __Order, __TransA, __TransB, __M, __N, __K, __A, __lda, __B, __ldb, __C, __ldc)
    else { return }
    scipy_cblas_sgemm(
        __Order == CblasRowMajor ? CblasRowMajor_ : CblasColMajor_,
        __TransA != CblasNoTrans ? CblasTrans_ : CblasNoTrans_, __TransB != CblasNoTrans ? CblasTrans_ : CblasNoTrans_,
        blasint(__M), blasint(__N), blasint(__K), __alpha, __A, blasint(__lda), __B, blasint(__ldb), __beta,
        __C, blasint(__ldc))
}

// cblas.h: cblas_dgemm, the same in double precision.
public func cblas_dgemm(
    _ __Order: CBLAS_ORDER, _ __TransA: CBLAS_TRANSPOSE, _ __TransB: CBLAS_TRANSPOSE,
    _ __M: Int32, _ __N: Int32, _ __K: Int32, _ __alpha: Double,
    _ __A: UnsafePointer<Double>!, _ __lda: Int32, _ __B: UnsafePointer<Double>!, _ __ldb: Int32,
    _ __beta: Double, _ __C: UnsafeMutablePointer<Double>!, _ __ldc: Int32
) {
    guard checkGEMM("cblas_dgemm", __Order, __TransA, __TransB, __M, __N, __K, __A, __lda, __B, __ldb, __C, __ldc)
    else { return }
    scipy_cblas_dgemm(
        __Order == CblasRowMajor ? CblasRowMajor_ : CblasColMajor_,
        __TransA != CblasNoTrans ? CblasTrans_ : CblasNoTrans_, __TransB != CblasNoTrans ? CblasTrans_ : CblasNoTrans_,
        blasint(__M), blasint(__N), blasint(__K), __alpha, __A, blasint(__lda), __B, blasint(__ldb), __beta,
        __C, blasint(__ldc))
}

// OpenBLAS's own enum constants, under other names here (the public ones above are Apple's).
private let CblasRowMajor_ = CBLAS.CblasRowMajor
private let CblasColMajor_ = CBLAS.CblasColMajor
private let CblasTrans_ = CBLAS.CblasTrans
private let CblasNoTrans_ = CBLAS.CblasNoTrans
