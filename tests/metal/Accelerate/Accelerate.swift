// An emulation of the part of Apple's Accelerate framework that lucid's CPU backend uses
// (Backends/CPU/BLAS+Accelerate.swift), for the check build on Linux (`make metal-emulated`),
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

// cblas.h: cblas_sgemm. C = alpha · op(A) · op(B) + beta · C.
public func cblas_sgemm(_ __Order: CBLAS_ORDER, _ __TransA: CBLAS_TRANSPOSE, _ __TransB: CBLAS_TRANSPOSE,
                        _ __M: Int32, _ __N: Int32, _ __K: Int32, _ __alpha: Float,
                        _ __A: UnsafePointer<Float>!, _ __lda: Int32, _ __B: UnsafePointer<Float>!, _ __ldb: Int32,
                        _ __beta: Float, _ __C: UnsafeMutablePointer<Float>!, _ __ldc: Int32) {
    let transposes = [CblasNoTrans, CblasTrans, CblasConjTrans]
    guard __Order == CblasRowMajor || __Order == CblasColMajor else { blasMisuse("cblas_sgemm", 1, "order \(__Order.rawValue)") }
    guard transposes.contains(__TransA) else { blasMisuse("cblas_sgemm", 2, "transpose \(__TransA.rawValue)") }
    guard transposes.contains(__TransB) else { blasMisuse("cblas_sgemm", 3, "transpose \(__TransB.rawValue)") }
    guard __M >= 0 else { blasMisuse("cblas_sgemm", 4, "M = \(__M)") }
    guard __N >= 0 else { blasMisuse("cblas_sgemm", 5, "N = \(__N)") }
    guard __K >= 0 else { blasMisuse("cblas_sgemm", 6, "K = \(__K)") }
    // The leading dimensions: at least the stored rows' length (row-major) or columns' (column-major).
    let rowMajor = __Order == CblasRowMajor
    let aT = __TransA != CblasNoTrans, bT = __TransB != CblasNoTrans
    let aRows = aT ? __K : __M, aCols = aT ? __M : __K
    let bRows = bT ? __N : __K, bCols = bT ? __K : __N
    let needA = max(1, rowMajor ? aCols : aRows), needB = max(1, rowMajor ? bCols : bRows)
    let needC = max(1, rowMajor ? __N : __M)
    guard __lda >= needA else { blasMisuse("cblas_sgemm", 9, "lda = \(__lda) < \(needA)") }
    guard __ldb >= needB else { blasMisuse("cblas_sgemm", 11, "ldb = \(__ldb) < \(needB)") }
    guard __ldc >= needC else { blasMisuse("cblas_sgemm", 14, "ldc = \(__ldc) < \(needC)") }
    if __M == 0 || __N == 0 { return }
    guard let c = __C else { blasMisuse("cblas_sgemm", 13, "C is NULL") }
    if __K > 0 {
        guard __A != nil else { blasMisuse("cblas_sgemm", 8, "A is NULL") }
        guard __B != nil else { blasMisuse("cblas_sgemm", 10, "B is NULL") }
    }
    scipy_cblas_sgemm(rowMajor ? CblasRowMajor_ : CblasColMajor_, aT ? CblasTrans_ : CblasNoTrans_,
                      bT ? CblasTrans_ : CblasNoTrans_, blasint(__M), blasint(__N), blasint(__K), __alpha, __A,
                      blasint(__lda), __B, blasint(__ldb), __beta, c, blasint(__ldc))
}

// OpenBLAS's own enum constants, under other names here (the public ones above are Apple's).
private let CblasRowMajor_ = CBLAS.CblasRowMajor
private let CblasColMajor_ = CBLAS.CblasColMajor
private let CblasTrans_ = CBLAS.CblasTrans
private let CblasNoTrans_ = CBLAS.CblasNoTrans
