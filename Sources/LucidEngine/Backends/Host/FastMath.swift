/// Branch-free float32 math that the compiler vectorises (libm's calls do not), for the
/// elementwise loops whose cost is their transcendental function: the exact gelu and its
/// derivative. Accurate to a few ulp where libm is.
/// (Constants are locals, not static lets: a static's lazy initialisation check in the loop
/// would keep it from being vectorised.) `exp(a, 0)` and `sigmoid` have step-for-step copies
/// in Sources/CHostKernels, for the loops built for several vector units; the two must give
/// the same bits, which tests/test_host_kernels.py checks through sigmoid and SiLU.
enum FastMath {

    /// exp(a + b) for a + b ≤ 0, where `a` is exact and `b` carries the low part of the
    /// argument (so that exp(-x²) keeps its relative accuracy: x² is split exactly). Results
    /// below float32's normal range round once, as gradual underflow does; 0 below that (and
    /// for a NaN argument, which only an infinite x in exp(-x²) makes here).
    @inline(__always)
    static func exp(_ a: Float, _ b: Float) -> Float {
        let log2e: Float = 1.442_695_04
        let ln2Hi: Float = 0.693_145_751_953_125  // 15 significant bits: k·ln2Hi is exact
        let ln2Lo: Float = 1.428_606_765_330_187e-6
        let roundingShift: Float = 12_582_912  // 1.5·2^23: adding it rounds to an integer
        let twoToMinus64: Float = 5.421_010_862_427_522e-20
        let s = Swift.max(a + b, -104)
        let shifted = s * log2e + roundingShift
        let kf = shifted - roundingShift
        let k = Int32(bitPattern: shifted.bitPattern) &- Int32(bitPattern: roundingShift.bitPattern)
        let r = (Swift.max(a, -128) - kf * ln2Hi) - kf * ln2Lo + b
        // exp(r) on |r| ≤ ln2/2: Taylor to degree 7 (truncation below 2^-27).
        var p: Float = 1.0 / 5040
        p = p * r + 1.0 / 720
        p = p * r + 1.0 / 120
        p = p * r + 1.0 / 24
        p = p * r + 1.0 / 6
        p = p * r + 0.5
        p = p * r + 1
        p = p * r + 1
        // 2^k as 2^(k+64)·2^-64, so that k down to -150 stays a normal scale until the last product.
        let scale = Float(bitPattern: UInt32(bitPattern: (k &+ 191) & 0xFF) &<< 23)
        let y = p * scale * twoToMinus64
        return a + b >= -104 ? y : 0  // also 0 for -inf - inf
    }

    /// The logistic function 1 / (1 + e^-x), from e^-|x| ≤ 1 (so the exponential never
    /// overflows): 1 / (1 + e) for x ≥ 0, e / (1 + e) below. NaN stays NaN.
    @inline(__always)
    static func sigmoid(_ x: Float) -> Float {
        let e = exp(-Swift.abs(x), 0)
        let r = 1 / (1 + e)
        let y = x >= 0 ? r : e * r
        return x != x ? x : y
    }

    /// tanh(x) within 2 ulp: x + x³·P(x²) below |x| = 0.55 (P a degree-4 least-squares fit of
    /// (tanh x − x)/x³ there, relative error under 1e-7), and (1 − e)/(1 + e) with e = e^-2|x|
    /// above, where 1 − e no longer cancels. NaN stays NaN; ±inf gives ±1.
    @inline(__always)
    static func tanh(_ x: Float) -> Float {
        let a = Swift.abs(x)
        let z = x * x
        var p: Float = -0.006_356_495_868
        p = p * z + 0.021_127_241_412
        p = p * z - 0.053_865_079_073
        p = p * z + 0.133_326_996_820
        p = p * z - 0.333_333_206_076
        let small = x + x * z * p
        let e = exp(-2 * a, 0)
        let large = (1 - e) / (1 + e)
        let y = a < 0.55 ? small : (x < 0 ? -large : large)
        return x != x ? x : y
    }

    /// x with its low 12 significand bits cleared: its square is exact in float32.
    @inline(__always)
    private static func high(_ x: Float) -> Float { Float(bitPattern: x.bitPattern & 0xFFFF_F000) }

    /// exp(-x·x·c) with x·x split exactly (c = 1 or 1/2, exact scalings).
    @inline(__always)
    static func gaussian(_ x: Float, _ c: Float) -> Float {
        let h = high(x)
        return exp(-(h * h) * c, -((x - h) * (x + h)) * c)
    }

    /// erfc(t) for t ≥ 0 (Numerical Recipes' erfcc: relative error below 1.2e-7), with e^(-t²)
    /// split exactly so that the tail keeps its relative accuracy.
    @inline(__always)
    static func erfcNonNegative(_ t: Float) -> Float {
        let u = 1 / (1 + 0.5 * t)
        var c: Float = 0.170_872_77
        c = c * u - 0.822_152_23
        c = c * u + 1.488_515_87
        c = c * u - 1.135_203_98
        c = c * u + 0.278_868_07
        c = c * u - 0.186_288_06
        c = c * u + 0.096_784_18
        c = c * u + 0.374_091_96
        c = c * u + 1.000_023_68
        c = c * u - 1.265_512_23
        let h = high(t)
        return u * exp(-(h * h), -((t - h) * (t + h)) + c)
    }

    /// Φ(x), the standard normal CDF: erfc(|x|/√2)/2 below 0, 1 − that above, so that
    /// neither tail cancels.
    @inline(__always)
    static func normalCDF(_ x: Float) -> Float {
        let half = 0.5 * erfcNonNegative(Swift.abs(x) * 0.707_106_77)
        return x < 0 ? half : 1 - half
    }

    /// The exact gelu, x·Φ(x).
    @inline(__always)
    static func gelu(_ x: Float) -> Float { x * normalCDF(x) }

    /// d gelu/dx = Φ(x) + x·φ(x).
    @inline(__always)
    static func geluDerivative(_ x: Float) -> Float {
        normalCDF(x) + x * 0.398_942_3 * gaussian(x, 0.5)
    }
}
