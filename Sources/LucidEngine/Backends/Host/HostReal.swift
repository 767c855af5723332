#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The real types the host kernels compute in: `Float` for float32 and the 16-bit floats,
/// `Double` for float64 (and for converting integers, which it holds exactly up to 2^53). The
/// kernels are generic over it, so a float64 tensor is computed in double precision
/// throughout; each type brings its own math (float32's vectorisable `FastMath`, libm's
/// double functions for float64). The host kernels reach libm only through these.
protocol HostReal: BinaryFloatingPoint, Sendable {
    static func exp(_ x: Self) -> Self
    static func log(_ x: Self) -> Self
    static func log1p(_ x: Self) -> Self
    static func expm1(_ x: Self) -> Self
    static func pow(_ x: Self, _ y: Self) -> Self
    static func sin(_ x: Self) -> Self
    static func cos(_ x: Self) -> Self
    static func tan(_ x: Self) -> Self
    static func asin(_ x: Self) -> Self
    static func acos(_ x: Self) -> Self
    static func atan(_ x: Self) -> Self
    static func tanh(_ x: Self) -> Self
    static func sigmoid(_ x: Self) -> Self
    /// x·Φ(x), the exact GELU.
    static func gelu(_ x: Self) -> Self
    /// d/dx of x·Φ(x): Φ(x) + x·φ(x).
    static func geluDerivative(_ x: Self) -> Self
}

extension Float: HostReal {
    @inline(__always) static func exp(_ x: Float) -> Float { expf(x) }
    @inline(__always) static func log(_ x: Float) -> Float { logf(x) }
    @inline(__always) static func log1p(_ x: Float) -> Float { log1pf(x) }
    @inline(__always) static func expm1(_ x: Float) -> Float { expm1f(x) }
    @inline(__always) static func pow(_ x: Float, _ y: Float) -> Float { powf(x, y) }
    @inline(__always) static func sin(_ x: Float) -> Float { sinf(x) }
    @inline(__always) static func cos(_ x: Float) -> Float { cosf(x) }
    @inline(__always) static func tan(_ x: Float) -> Float { tanf(x) }
    @inline(__always) static func asin(_ x: Float) -> Float { asinf(x) }
    @inline(__always) static func acos(_ x: Float) -> Float { acosf(x) }
    @inline(__always) static func atan(_ x: Float) -> Float { atanf(x) }
    @inline(__always) static func tanh(_ x: Float) -> Float { FastMath.tanh(x) }
    @inline(__always) static func sigmoid(_ x: Float) -> Float { FastMath.sigmoid(x) }
    @inline(__always) static func gelu(_ x: Float) -> Float { FastMath.gelu(x) }
    @inline(__always) static func geluDerivative(_ x: Float) -> Float { FastMath.geluDerivative(x) }
}

extension Double: HostReal {
    @inline(__always) static func exp(_ x: Double) -> Double { libmExp(x) }
    @inline(__always) static func log(_ x: Double) -> Double { libmLog(x) }
    @inline(__always) static func log1p(_ x: Double) -> Double { libmLog1p(x) }
    @inline(__always) static func expm1(_ x: Double) -> Double { libmExpm1(x) }
    @inline(__always) static func pow(_ x: Double, _ y: Double) -> Double { libmPow(x, y) }
    @inline(__always) static func sin(_ x: Double) -> Double { libmSin(x) }
    @inline(__always) static func cos(_ x: Double) -> Double { libmCos(x) }
    @inline(__always) static func tan(_ x: Double) -> Double { libmTan(x) }
    @inline(__always) static func asin(_ x: Double) -> Double { libmAsin(x) }
    @inline(__always) static func acos(_ x: Double) -> Double { libmAcos(x) }
    @inline(__always) static func atan(_ x: Double) -> Double { libmAtan(x) }
    @inline(__always) static func tanh(_ x: Double) -> Double { libmTanh(x) }
    /// 1/(1 + e^-x), through e^x below 0 so that neither side overflows.
    @inline(__always) static func sigmoid(_ x: Double) -> Double {
        if x >= 0 { return 1 / (1 + libmExp(-x)) }
        let e = libmExp(x)
        return e / (1 + e)
    }
    /// Φ(x) = erfc(-x/√2)/2 keeps the negative tail accurate, where 1 + erf would cancel.
    @inline(__always) static func gelu(_ x: Double) -> Double { x * 0.5 * libmErfc(-x * 0.707_106_781_186_547_5) }
    @inline(__always) static func geluDerivative(_ x: Double) -> Double {
        let cdf = 0.5 * libmErfc(-x * 0.707_106_781_186_547_5)
        return cdf + x * 0.398_942_280_401_432_7 * libmExp(-0.5 * x * x)
    }
}

// libm's double functions under names the members above do not shadow.
@inline(__always) private func libmExp(_ x: Double) -> Double { exp(x) }
@inline(__always) private func libmLog(_ x: Double) -> Double { log(x) }
@inline(__always) private func libmLog1p(_ x: Double) -> Double { log1p(x) }
@inline(__always) private func libmExpm1(_ x: Double) -> Double { expm1(x) }
@inline(__always) private func libmSin(_ x: Double) -> Double { sin(x) }
@inline(__always) private func libmCos(_ x: Double) -> Double { cos(x) }
@inline(__always) private func libmTan(_ x: Double) -> Double { tan(x) }
@inline(__always) private func libmAsin(_ x: Double) -> Double { asin(x) }
@inline(__always) private func libmAcos(_ x: Double) -> Double { acos(x) }
@inline(__always) private func libmAtan(_ x: Double) -> Double { atan(x) }
@inline(__always) private func libmTanh(_ x: Double) -> Double { tanh(x) }
@inline(__always) private func libmErfc(_ x: Double) -> Double { erfc(x) }
@inline(__always) private func libmPow(_ x: Double, _ y: Double) -> Double { pow(x, y) }
