import CHostKernels

/// How the host kernels read and write each dtype. Floating types compute in their `Real`:
/// `Float` for float32 and the 16-bit floats (which widen exactly and round once on store),
/// `Double` for float64. Integer types and bool compute in `Int64` with wrapping arithmetic,
/// bool storing `v != 0` as one byte; their `Real` (`Double`) is what converts them to and
/// from floats.
protocol HostElement {
    associatedtype Stored
    associatedtype Real: HostReal
    static var isFloat: Bool { get }
    static func float(_ p: UnsafePointer<Stored>, _ i: Int) -> Real
    static func setFloat(_ p: UnsafeMutablePointer<Stored>, _ i: Int, _ v: Real)
    static func int(_ p: UnsafePointer<Stored>, _ i: Int) -> Int64
    static func setInt(_ p: UnsafeMutablePointer<Stored>, _ i: Int, _ v: Int64)
}

/// float -> integer the way every caller expects of a cast: truncate toward zero, saturate
/// at the type's range, NaN to zero (never a trap).
@inline(__always)
func truncatingToInt64<R: HostReal>(_ v: R) -> Int64 {
    if v.isNaN { return 0 }
    if v >= 9.223_372_036_854_775_807e18 { return .max }
    if v <= -9.223_372_036_854_775_807e18 { return .min }
    return Int64(v)
}

enum F32Element: HostElement {
    typealias Real = Float
    typealias Stored = Float
    static var isFloat: Bool { true }
    @inline(__always) static func float(_ p: UnsafePointer<Float>, _ i: Int) -> Float { p[i] }
    @inline(__always) static func setFloat(_ p: UnsafeMutablePointer<Float>, _ i: Int, _ v: Float) { p[i] = v }
    @inline(__always) static func int(_ p: UnsafePointer<Float>, _ i: Int) -> Int64 { truncatingToInt64(p[i]) }
    @inline(__always) static func setInt(_ p: UnsafeMutablePointer<Float>, _ i: Int, _ v: Int64) { p[i] = Float(v) }
}

enum F16Element: HostElement {
    typealias Real = Float
    typealias Stored = UInt16
    static var isFloat: Bool { true }
    @inline(__always) static func float(_ p: UnsafePointer<UInt16>, _ i: Int) -> Float { halfToFloat(p[i]) }
    @inline(__always) static func setFloat(_ p: UnsafeMutablePointer<UInt16>, _ i: Int, _ v: Float) { p[i] = floatToHalf(v) }
    @inline(__always) static func int(_ p: UnsafePointer<UInt16>, _ i: Int) -> Int64 { truncatingToInt64(halfToFloat(p[i])) }
    @inline(__always) static func setInt(_ p: UnsafeMutablePointer<UInt16>, _ i: Int, _ v: Int64) { p[i] = floatToHalf(roundedToOddFloat(v)) }
}

enum BF16Element: HostElement {
    typealias Real = Float
    typealias Stored = UInt16
    static var isFloat: Bool { true }
    @inline(__always) static func float(_ p: UnsafePointer<UInt16>, _ i: Int) -> Float { bfloatToFloat(p[i]) }
    @inline(__always) static func setFloat(_ p: UnsafeMutablePointer<UInt16>, _ i: Int, _ v: Float) { p[i] = floatToBFloat(v) }
    @inline(__always) static func int(_ p: UnsafePointer<UInt16>, _ i: Int) -> Int64 { truncatingToInt64(bfloatToFloat(p[i])) }
    @inline(__always) static func setInt(_ p: UnsafeMutablePointer<UInt16>, _ i: Int, _ v: Int64) { p[i] = floatToBFloat(roundedToOddFloat(v)) }
}

enum F64Element: HostElement {
    typealias Stored = Double
    typealias Real = Double
    static var isFloat: Bool { true }
    @inline(__always) static func float(_ p: UnsafePointer<Double>, _ i: Int) -> Double { p[i] }
    @inline(__always) static func setFloat(_ p: UnsafeMutablePointer<Double>, _ i: Int, _ v: Double) { p[i] = v }
    @inline(__always) static func int(_ p: UnsafePointer<Double>, _ i: Int) -> Int64 { truncatingToInt64(p[i]) }
    @inline(__always) static func setInt(_ p: UnsafeMutablePointer<Double>, _ i: Int, _ v: Int64) { p[i] = Double(v) }
}

enum I32Element: HostElement {
    typealias Stored = Int32
    typealias Real = Double
    static var isFloat: Bool { false }
    @inline(__always) static func float(_ p: UnsafePointer<Int32>, _ i: Int) -> Double { Double(p[i]) }
    @inline(__always) static func setFloat(_ p: UnsafeMutablePointer<Int32>, _ i: Int, _ v: Double) {
        p[i] = Int32(clamping: truncatingToInt64(v))
    }
    @inline(__always) static func int(_ p: UnsafePointer<Int32>, _ i: Int) -> Int64 { Int64(p[i]) }
    @inline(__always) static func setInt(_ p: UnsafeMutablePointer<Int32>, _ i: Int, _ v: Int64) { p[i] = Int32(truncatingIfNeeded: v) }
}

enum I64Element: HostElement {
    typealias Stored = Int64
    typealias Real = Double
    static var isFloat: Bool { false }
    @inline(__always) static func float(_ p: UnsafePointer<Int64>, _ i: Int) -> Double { Double(p[i]) }
    @inline(__always) static func setFloat(_ p: UnsafeMutablePointer<Int64>, _ i: Int, _ v: Double) { p[i] = truncatingToInt64(v) }
    @inline(__always) static func int(_ p: UnsafePointer<Int64>, _ i: Int) -> Int64 { p[i] }
    @inline(__always) static func setInt(_ p: UnsafeMutablePointer<Int64>, _ i: Int, _ v: Int64) { p[i] = v }
}

/// The 8- and 16-bit integers: a float stores as its truncation toward zero wrapped to the
/// type's width, as PyTorch converts (300.7 -> 44 in uint8, -1.5 -> 255); an integer wraps
/// (two's complement).
enum U8Element: HostElement {
    typealias Stored = UInt8
    typealias Real = Double
    static var isFloat: Bool { false }
    @inline(__always) static func float(_ p: UnsafePointer<UInt8>, _ i: Int) -> Double { Double(p[i]) }
    @inline(__always) static func setFloat(_ p: UnsafeMutablePointer<UInt8>, _ i: Int, _ v: Double) {
        p[i] = UInt8(truncatingIfNeeded: truncatingToInt64(v))
    }
    @inline(__always) static func int(_ p: UnsafePointer<UInt8>, _ i: Int) -> Int64 { Int64(p[i]) }
    @inline(__always) static func setInt(_ p: UnsafeMutablePointer<UInt8>, _ i: Int, _ v: Int64) { p[i] = UInt8(truncatingIfNeeded: v) }
}

enum I8Element: HostElement {
    typealias Stored = Int8
    typealias Real = Double
    static var isFloat: Bool { false }
    @inline(__always) static func float(_ p: UnsafePointer<Int8>, _ i: Int) -> Double { Double(p[i]) }
    @inline(__always) static func setFloat(_ p: UnsafeMutablePointer<Int8>, _ i: Int, _ v: Double) {
        p[i] = Int8(truncatingIfNeeded: truncatingToInt64(v))
    }
    @inline(__always) static func int(_ p: UnsafePointer<Int8>, _ i: Int) -> Int64 { Int64(p[i]) }
    @inline(__always) static func setInt(_ p: UnsafeMutablePointer<Int8>, _ i: Int, _ v: Int64) { p[i] = Int8(truncatingIfNeeded: v) }
}

enum I16Element: HostElement {
    typealias Stored = Int16
    typealias Real = Double
    static var isFloat: Bool { false }
    @inline(__always) static func float(_ p: UnsafePointer<Int16>, _ i: Int) -> Double { Double(p[i]) }
    @inline(__always) static func setFloat(_ p: UnsafeMutablePointer<Int16>, _ i: Int, _ v: Double) {
        p[i] = Int16(truncatingIfNeeded: truncatingToInt64(v))
    }
    @inline(__always) static func int(_ p: UnsafePointer<Int16>, _ i: Int) -> Int64 { Int64(p[i]) }
    @inline(__always) static func setInt(_ p: UnsafeMutablePointer<Int16>, _ i: Int, _ v: Int64) { p[i] = Int16(truncatingIfNeeded: v) }
}

enum BoolElement: HostElement {
    typealias Stored = UInt8
    typealias Real = Double
    static var isFloat: Bool { false }
    @inline(__always) static func float(_ p: UnsafePointer<UInt8>, _ i: Int) -> Double { p[i] != 0 ? 1 : 0 }
    @inline(__always) static func setFloat(_ p: UnsafeMutablePointer<UInt8>, _ i: Int, _ v: Double) { p[i] = v != 0 ? 1 : 0 }
    @inline(__always) static func int(_ p: UnsafePointer<UInt8>, _ i: Int) -> Int64 { p[i] != 0 ? 1 : 0 }
    @inline(__always) static func setInt(_ p: UnsafeMutablePointer<UInt8>, _ i: Int, _ v: Int64) { p[i] = v != 0 ? 1 : 0 }
}

/// A kernel body generic over one element type; `dispatch` picks the type from a dtype.
protocol ElementVisitor {
    associatedtype Result
    func visit<E: HostElement>(_ e: E.Type) -> Result
}

@inline(__always)
func dispatch<V: ElementVisitor>(_ dtype: DType, _ v: V) -> V.Result {
    switch dtype {
    case .float32: return v.visit(F32Element.self)
    case .float16: return v.visit(F16Element.self)
    case .bfloat16: return v.visit(BF16Element.self)
    case .int32: return v.visit(I32Element.self)
    case .int64: return v.visit(I64Element.self)
    case .bool: return v.visit(BoolElement.self)
    case .float64: return v.visit(F64Element.self)
    case .uint8: return v.visit(U8Element.self)
    case .int8: return v.visit(I8Element.self)
    case .int16: return v.visit(I16Element.self)
    }
}

/// Contiguous conversions between float32 and bfloat16, written branch-free so they
/// vectorise (autocast casts every operand of a lower-precision op). Bit-exact with
/// `bfloat16Bits(fromFloat32Bits:)`.
enum BFloat16FastPath {
    static func applies(_ src: TensorImpl, _ dst: TensorImpl) -> Bool {
        src.isContiguous && dst.isContiguous
            && ((src.dtype == .float32 && dst.dtype == .bfloat16) || (src.dtype == .bfloat16 && dst.dtype == .float32))
    }

    static func copy(_ src: TensorImpl, into dst: TensorImpl) {
        if src.dtype == .float32 {
            let x = UnsafePointer(HostBackend.address(src).assumingMemoryBound(to: Float.self))
            let o = HostBackend.address(dst).assumingMemoryBound(to: UInt16.self)
            HostThreads.forEachRange(src.numel) { r in narrow(x + r.lowerBound, o + r.lowerBound, r.count) }
        } else {
            let x = UnsafePointer(HostBackend.address(src).assumingMemoryBound(to: UInt16.self))
            let o = HostBackend.address(dst).assumingMemoryBound(to: Float.self)
            HostThreads.forEachRange(src.numel) { r in widen(x + r.lowerBound, o + r.lowerBound, r.count) }
        }
    }

    /// `n` floats rounded to bfloat16 bits, on the widest vector unit this CPU has.
    @inline(__always)
    static func narrow(_ src: UnsafePointer<Float>, _ dst: UnsafeMutablePointer<UInt16>, _ n: Int) {
        lucid_host_narrow_bf16(src, dst, n)
    }

    /// `n` floats rounded in place to bfloat16 values, as narrowing and widening them back
    /// would give, in one pass.
    @inline(__always)
    static func round(_ x: UnsafeMutablePointer<Float>, _ n: Int) {
        lucid_host_round_bf16(x, n)
    }

    /// `n` bfloat16 values widened (exactly) to floats.
    @inline(__always)
    static func widen(_ src: UnsafePointer<UInt16>, _ dst: UnsafeMutablePointer<Float>, _ n: Int) {
        lucid_host_widen_bf16(src, dst, n)
    }
}
