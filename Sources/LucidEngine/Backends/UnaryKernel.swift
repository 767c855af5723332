/// Elementwise unary kernels and their math, shared by every host backend. Raw values are the
/// C ABI's op codes. Input and output share a dtype; floating types compute in float32.
package enum UnaryKernel: Int32, Sendable, CaseIterable {
    case neg = 0, relu = 1, exp = 2, log = 3, log1p = 4, sqrt = 5, rsqrt = 6, abs = 7
    case tanh = 8, sigmoid = 9, silu = 10, gelu = 11, geluTanh = 12, softplus = 13, sin = 14, cos = 15
    case expm1 = 16, tan = 17, asin = 18, acos = 19, atan = 20, round = 21

    /// The kernel's name in messages and counts, as Python spells it (`gelu_tanh`).
    var name: String { self == .geluTanh ? "gelu_tanh" : "\(self)" }

    /// Whether the op also has an integer form (the others promote integers to float32).
    var keepsIntegers: Bool { self == .neg || self == .relu || self == .abs || self == .round }

    /// The op on one value, in the value's real type.
    @inline(__always)
    func apply<R: HostReal>(_ x: R) -> R {
        switch self {
        case .neg: return -x
        case .relu: return x < 0 ? 0 : x  // keeps NaN, as PyTorch does
        case .exp: return R.exp(x)
        case .log: return R.log(x)
        case .log1p: return R.log1p(x)
        case .sqrt: return x.squareRoot()
        case .rsqrt: return 1 / x.squareRoot()
        case .abs: return Swift.abs(x)
        case .tanh: return R.tanh(x)
        case .sigmoid: return R.sigmoid(x)
        case .silu: return x * R.sigmoid(x)
        // Φ(x) through erfc and (1 + tanh u)/2 = sigmoid(2u) keep the negative tails
        // accurate, where 1 + erf and 1 + tanh would cancel to 0.
        case .gelu: return R.gelu(x)
        case .geluTanh: return x * R.sigmoid(2 * Self.geluTanhArgument(x))
        case .softplus: return x > 20 ? x : R.log1p(R.exp(x))  // PyTorch's threshold
        case .sin: return R.sin(x)
        case .cos: return R.cos(x)
        case .expm1: return R.expm1(x)
        case .tan: return R.tan(x)
        case .asin: return R.asin(x)
        case .acos: return R.acos(x)
        case .atan: return R.atan(x)
        case .round: return x.rounded(.toNearestOrEven)
        }
    }

    /// √(2/π)·(x + 0.044715·x³), the argument of tanh in the tanh approximation of GELU.
    @inline(__always)
    private static func geluTanhArgument<R: HostReal>(_ x: R) -> R {
        0.797_884_560_802_865_4 * (x + 0.044715 * x * x * x)
    }

    /// Whether `derivative` reads the forward output `y` rather than the input `x`; the op's
    /// graph node then keeps only the output (and only the input otherwise), as PyTorch's does.
    var derivativeUsesOutput: Bool {
        switch self {
        case .relu, .exp, .sqrt, .rsqrt, .tanh, .sigmoid, .expm1, .tan: return true
        default: return false
        }
    }

    /// d op(x)/dx, given the input `x` and the output `y`.
    @inline(__always)
    func derivative<R: HostReal>(_ x: R, _ y: R) -> R {
        switch self {
        case .neg: return -1
        case .relu: return y > 0 ? 1 : 0
        case .exp: return y
        case .log: return 1 / x
        case .log1p: return 1 / (1 + x)
        case .sqrt: return 0.5 / y
        case .rsqrt: return -0.5 * y * y * y
        case .abs: return x > 0 ? 1 : (x < 0 ? -1 : 0)
        case .tanh: return 1 - y * y
        case .sigmoid: return y * (1 - y)
        case .silu:
            let s = R.sigmoid(x)
            return s * (1 + x * (1 - s))
        case .gelu: return R.geluDerivative(x)
        case .geluTanh:
            let s = R.sigmoid(2 * Self.geluTanhArgument(x))  // (1 + tanh u) / 2; 1 - tanh² u = 4s(1 - s)
            return s + 2 * x * s * (1 - s) * 0.797_884_560_802_865_4 * (1 + 3 * 0.044715 * x * x)
        case .softplus: return x > 20 ? 1 : R.sigmoid(x)
        case .sin: return R.cos(x)
        case .cos: return -R.sin(x)
        case .expm1: return y + 1
        case .tan: return 1 + y * y
        case .asin: return 1 / (1 - x * x).squareRoot()
        case .acos: return -1 / (1 - x * x).squareRoot()
        case .atan: return 1 / (1 + x * x)
        case .round: return 0
        }
    }

    /// The op on one integer (only for `keepsIntegers` ops).
    @inline(__always)
    func apply(_ x: Int64) -> Int64 {
        switch self {
        case .neg: return 0 &- x
        case .relu: return max(x, 0)
        case .round: return x
        default: return x == .min ? x : Swift.abs(x)
        }
    }
}
