/// Elementwise unary kernels and their math, shared by every host backend. Raw values are the
/// C ABI's op codes. Input and output share a dtype; floating types compute in float32.
package enum UnaryKernel: Int32, Sendable, CaseIterable {
    case neg = 0, relu = 1, exp = 2, log = 3, log1p = 4, sqrt = 5, rsqrt = 6, abs = 7
    case tanh = 8, sigmoid = 9, silu = 10, gelu = 11, geluTanh = 12, softplus = 13, sin = 14, cos = 15
    case expm1 = 16, tan = 17, asin = 18, acos = 19, atan = 20, round = 21
    case floor = 22, ceil = 23, trunc = 24, sign = 25, erf = 26, erfc = 27, erfinv = 28, lgamma = 29, digamma = 30
    case log2 = 31, log10 = 32, exp2 = 33, sinh = 34, cosh = 35, asinh = 36, acosh = 37, atanh = 38, sinc = 39, i0 = 40
    case specialI0e = 41, specialI1 = 42, specialI1e = 43, specialNdtri = 44, specialLogNdtr = 45, specialErfcx = 46
    case specialBesselJ0 = 47, specialBesselJ1 = 48, specialBesselY0 = 49, specialBesselY1 = 50
    case specialModifiedBesselI0 = 51, specialModifiedBesselI1 = 52, specialModifiedBesselK0 = 53, specialModifiedBesselK1 = 54
    case specialScaledModifiedBesselK0 = 55, specialScaledModifiedBesselK1 = 56, specialSphericalBesselJ0 = 57, specialAiryAi = 58

    /// The kernel's name in messages and counts, as Python spells it (`gelu_tanh`; the
    /// special functions without their `special_` prefix).
    var name: String {
        switch self {
        case .geluTanh: return "gelu_tanh"
        case .specialI0e: return "i0e"
        case .specialI1: return "i1"
        case .specialI1e: return "i1e"
        case .specialNdtri: return "ndtri"
        case .specialErfcx: return "erfcx"
        case .specialLogNdtr: return "log_ndtr"
        case .specialBesselJ0: return "bessel_j0"
        case .specialBesselJ1: return "bessel_j1"
        case .specialBesselY0: return "bessel_y0"
        case .specialBesselY1: return "bessel_y1"
        case .specialModifiedBesselI0: return "modified_bessel_i0"
        case .specialModifiedBesselI1: return "modified_bessel_i1"
        case .specialModifiedBesselK0: return "modified_bessel_k0"
        case .specialModifiedBesselK1: return "modified_bessel_k1"
        case .specialScaledModifiedBesselK0: return "scaled_modified_bessel_k0"
        case .specialScaledModifiedBesselK1: return "scaled_modified_bessel_k1"
        case .specialSphericalBesselJ0: return "spherical_bessel_j0"
        case .specialAiryAi: return "airy_ai"
        default: return "\(self)"
        }
    }

    /// Whether the op also has an integer form (the others promote integers to float32).
    var keepsIntegers: Bool {
        switch self {
        case .neg, .relu, .abs, .round, .floor, .ceil, .trunc, .sign: return true
        default: return false
        }
    }

    /// Whether the Metal kernels have the op (the others, the special functions computed in
    /// double precision, run on the host kernels there).
    var hasMetalKernel: Bool {
        switch self {
        case .erf, .erfc, .erfinv, .lgamma, .digamma, .sinc, .i0: return false
        default: return rawValue <= UnaryKernel.atanh.rawValue
        }
    }

    /// Whether the op has a gradient: PyTorch has none for these special functions, whose
    /// results then do not require one.
    var hasDerivative: Bool {
        switch self {
        case .specialScaledModifiedBesselK0, .specialScaledModifiedBesselK1, .specialSphericalBesselJ0, .specialAiryAi:
            return false
        default: return true
        }
    }

    /// The special functions, computed in double precision and rounded once.
    @inline(__always)
    private func special(_ x: Double) -> Double {
        switch self {
        case .floor: return x.rounded(.down)
        case .ceil: return x.rounded(.up)
        case .trunc: return x.rounded(.towardZero)
        case .sign: return x.isNaN ? x : (x > 0 ? 1 : (x < 0 ? -1 : 0))
        case .erf: return SpecialMath.erf(x)
        case .erfc: return SpecialMath.erfc(x)
        case .erfinv: return SpecialMath.erfinv(x)
        case .lgamma: return SpecialMath.lgamma(x)
        case .digamma: return SpecialMath.digamma(x)
        case .log2: return SpecialMath.log2(x)
        case .log10: return SpecialMath.log10(x)
        case .exp2: return SpecialMath.exp2(x)
        case .sinh: return SpecialMath.sinh(x)
        case .cosh: return SpecialMath.cosh(x)
        case .asinh: return SpecialMath.asinh(x)
        case .acosh: return SpecialMath.acosh(x)
        case .atanh: return SpecialMath.atanh(x)
        case .sinc: return SpecialMath.sinc(x)
        case .i0, .specialModifiedBesselI0: return SpecialMath.besselI(0, x)
        case .specialI0e: return SpecialMath.besselIScaled(0, x)
        case .specialI1, .specialModifiedBesselI1: return SpecialMath.besselI(1, x)
        case .specialI1e: return SpecialMath.besselIScaled(1, x)
        case .specialNdtri: return SpecialMath.ndtri(x)
        case .specialLogNdtr: return SpecialMath.logNdtr(x)
        case .specialErfcx: return SpecialMath.erfcx(x)
        case .specialBesselJ0: return SpecialMath.besselJ(0, x)
        case .specialBesselJ1: return SpecialMath.besselJ(1, x)
        case .specialBesselY0: return SpecialMath.besselY(0, x)
        case .specialBesselY1: return SpecialMath.besselY(1, x)
        case .specialModifiedBesselK0: return SpecialMath.besselK(0, x)
        case .specialModifiedBesselK1: return SpecialMath.besselK(1, x)
        case .specialScaledModifiedBesselK0: return SpecialMath.besselKScaled(0, x)
        case .specialScaledModifiedBesselK1: return SpecialMath.besselKScaled(1, x)
        case .specialSphericalBesselJ0: return SpecialMath.sphericalJ0(x)
        case .specialAiryAi: return SpecialMath.airyAi(x)
        default: return .nan
        }
    }

    /// The special functions' derivatives, in double precision, from x or (for the ops whose
    /// `derivativeUsesOutput`) the output y: the graph node keeps only one of them.
    @inline(__always)
    private func specialDerivative(_ x: Double, _ y: Double) -> Double {
        switch self {
        case .floor, .ceil, .trunc, .sign: return 0
        case .erf: return 2 / SpecialMath.sqrtPi * Double.exp(-x * x)
        case .erfc: return -2 / SpecialMath.sqrtPi * Double.exp(-x * x)
        case .erfinv: return SpecialMath.sqrtPi / 2 * Double.exp(y * y)
        case .lgamma: return SpecialMath.digamma(x)
        case .digamma: return SpecialMath.trigamma(x)
        case .log2: return 1 / (x * SpecialMath.ln2)
        case .log10: return 1 / (x * SpecialMath.ln10)
        case .exp2: return y * SpecialMath.ln2
        case .sinh: return SpecialMath.cosh(x)
        case .cosh: return SpecialMath.sinh(x)
        case .asinh: return 1 / (x * x + 1).squareRoot()
        case .acosh: return 1 / (x * x - 1).squareRoot()
        case .atanh: return 1 / (1 - x * x)
        case .sinc: return SpecialMath.sincDerivative(x)
        case .i0: return SpecialMath.besselI(1, x)
        // d/dx e^-|x| I0 = e^-|x| I1 - sign(x) e^-|x| I0
        case .specialI0e: return SpecialMath.besselIScaled(1, x) - (x > 0 ? 1 : (x < 0 ? -1 : 0)) * SpecialMath.besselIScaled(0, x)
        // I1' = I0 - I1/x (½ at 0)
        case .specialI1: return x == 0 ? 0.5 : SpecialMath.besselI(0, x) - SpecialMath.besselI(1, x) / x
        case .specialI1e:
            if x == 0 { return 0.5 }
            return SpecialMath.besselIScaled(0, x) - SpecialMath.besselIScaled(1, x) * ((x > 0 ? 1 : -1) + 1 / x)
        case .specialNdtri: return (2 * Double.pi).squareRoot() * Double.exp(0.5 * y * y)
        case .specialLogNdtr: return (2 / Double.pi).squareRoot() / SpecialMath.erfcx(-x / SpecialMath.sqrt2)
        case .specialErfcx: return 2 * x * SpecialMath.erfcx(x) - 2 / SpecialMath.sqrtPi
        // The Bessel functions' derivatives from their recurrences: Z0' = -Z1 (I0' = I1), and
        // Z1' = Z0 - Z1/x (K1' = -K0 - K1/x), with J1'(0) = I1'(0) = ½.
        case .specialBesselJ0: return -SpecialMath.besselJ(1, x)
        case .specialBesselY0: return -SpecialMath.besselY(1, x)
        case .specialModifiedBesselI0: return SpecialMath.besselI(1, x)
        case .specialModifiedBesselK0: return -SpecialMath.besselK(1, x)
        case .specialBesselJ1: return x == 0 ? 0.5 : SpecialMath.besselJ(0, x) - SpecialMath.besselJ(1, x) / x
        case .specialBesselY1: return SpecialMath.besselY(0, x) - SpecialMath.besselY(1, x) / x
        case .specialModifiedBesselI1: return x == 0 ? 0.5 : SpecialMath.besselI(0, x) - SpecialMath.besselI(1, x) / x
        case .specialModifiedBesselK1: return -SpecialMath.besselK(0, x) - SpecialMath.besselK(1, x) / x
        default: return .nan
        }
    }

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
        case .floor: return x.rounded(.down)
        case .ceil: return x.rounded(.up)
        case .trunc: return x.rounded(.towardZero)
        default: return R(special(Double(x)))
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
        case .relu, .exp, .sqrt, .rsqrt, .tanh, .sigmoid, .expm1, .tan, .erfinv, .exp2, .specialNdtri: return true
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
        default: return R(specialDerivative(Double(x), Double(y)))
        }
    }

    /// The op on one integer (only for `keepsIntegers` ops).
    @inline(__always)
    func apply(_ x: Int64) -> Int64 {
        switch self {
        case .neg: return 0 &- x
        case .relu: return max(x, 0)
        case .round, .floor, .ceil, .trunc: return x
        case .sign: return x > 0 ? 1 : (x < 0 ? -1 : 0)
        default: return x == .min ? x : Swift.abs(x)
        }
    }
}
