/// The element types a tensor can hold.
///
/// Raw values are the codes used by the C ABI (`LUCID_FLOAT32` …) and must not change.
public enum DType: Int32, CaseIterable, Sendable, CustomStringConvertible {
    case float32 = 0
    case float16 = 1
    case bfloat16 = 2
    case int32 = 3
    case int64 = 4
    case bool = 5
    case float64 = 6
    case uint8 = 7
    case int8 = 8
    case int16 = 9

    /// Bytes per element.
    public var itemSize: Int {
        switch self {
        case .float32, .int32: return 4
        case .float16, .bfloat16: return 2
        case .int64, .float64: return 8
        case .bool, .uint8, .int8: return 1
        case .int16: return 2
        }
    }

    /// Whether the type is an integer type (bool is not one).
    public var isInteger: Bool {
        switch self {
        case .uint8, .int8, .int16, .int32, .int64: return true
        default: return false
        }
    }

    /// The range of an integer type (nil for floats and bool).
    var integerRange: ClosedRange<Int64>? {
        switch self {
        case .uint8: return 0...255
        case .int8: return -128...127
        case .int16: return -32768...32767
        case .int32: return Int64(Int32.min)...Int64(Int32.max)
        case .int64: return Int64.min...Int64.max
        default: return nil
        }
    }

    /// `v` wrapped into an integer type's width (two's complement), as a cast stores it; `v`
    /// itself for the other types.
    func wrapping(_ v: Int64) -> Int64 {
        switch self {
        case .uint8: return Int64(UInt8(truncatingIfNeeded: v))
        case .int8: return Int64(Int8(truncatingIfNeeded: v))
        case .int16: return Int64(Int16(truncatingIfNeeded: v))
        case .int32: return Int64(Int32(truncatingIfNeeded: v))
        default: return v
        }
    }

    /// Whether the type is a floating-point type.
    public var isFloatingPoint: Bool {
        self == .float32 || self == .float16 || self == .bfloat16 || self == .float64
    }

    /// Whether the type is a 16-bit floating-point type (computed in float32).
    public var isLowPrecision: Bool { self == .float16 || self == .bfloat16 }

    /// The type an op that computes "in float32 at least" (statistics, softmax, attention
    /// scores) computes a floating input of this type in: float64 for float64, float32 for
    /// the others.
    var computeType: DType { self == .float64 ? .float64 : .float32 }

    /// The name Python shows after `lucid.` (`float16`, `bool`, …).
    public var name: String {
        switch self {
        case .float32: return "float32"
        case .float16: return "float16"
        case .bfloat16: return "bfloat16"
        case .int32: return "int32"
        case .int64: return "int64"
        case .bool: return "bool"
        case .float64: return "float64"
        case .uint8: return "uint8"
        case .int8: return "int8"
        case .int16: return "int16"
        }
    }

    public var description: String { "lucid.\(name)" }

    /// 0 bool, 1 integer, 2 floating point: PyTorch's promotion categories.
    var category: Int { self == .bool ? 0 : (isFloatingPoint ? 2 : 1) }

    /// The smallest type both `a` and `b` convert to without losing their category, as in
    /// `torch.promote_types`: float16 with bfloat16 gives float32, float64 beats every other
    /// float, any float beats any integer, the wider integer beats the narrower (uint8 with
    /// int8 gives int16, the narrowest type that holds both ranges), anything beats bool.
    static func promote(_ a: DType, _ b: DType) -> DType {
        if a == b { return a }
        if a.category != b.category { return a.category > b.category ? a : b }
        switch a.category {
        case 2:
            if a == .float64 || b == .float64 { return .float64 }
            if a == .float32 || b == .float32 { return .float32 }
            return .float32  // float16 with bfloat16
        case 1:
            if a == .int64 || b == .int64 { return .int64 }
            if a == .int32 || b == .int32 { return .int32 }
            return .int16  // int16 with a narrower type, or uint8 with int8
        default:
            return .bool
        }
    }
}
