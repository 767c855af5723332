/// Elementwise binary kernels. The op layer has already chosen the dtype: `a`, `b` and the
/// output share it, and `a`/`b` are broadcast views of the output's shape. Raw values are the
/// C ABI's codes (`enum lucid_binary_op`), also the Metal kernels' op codes. The bitwise ops
/// take integer and bool operands only.
package enum BinaryKernel: Int32, Sendable, CaseIterable {
    case add = 0, sub = 1, mul = 2, div = 3, pow = 4, maximum = 5, minimum = 6
    case bitwiseAnd = 7, bitwiseOr = 8, bitwiseXor = 9
    case atan2 = 10, copysign = 11, xlogy = 12, xlog1py = 13, zeta = 14
    case hypot = 15, nextafter = 16, logaddexp = 17, logaddexp2 = 18, igamma = 19, igammac = 20
    case fmod = 21, remainder = 22, floorDivide = 23, truncDivide = 24, fmax = 25, fmin = 26, heaviside = 27
    case leftShift = 28, rightShift = 29, gcd = 30, lcm = 31
    case chebyshevPolynomialT = 32, chebyshevPolynomialU = 33, chebyshevPolynomialV = 34, chebyshevPolynomialW = 35
    case shiftedChebyshevPolynomialT = 36, shiftedChebyshevPolynomialU = 37, shiftedChebyshevPolynomialV = 38, shiftedChebyshevPolynomialW = 39
    case hermitePolynomialH = 40, hermitePolynomialHe = 41, laguerrePolynomialL = 42, legendrePolynomialP = 43

    var isBitwise: Bool { self == .bitwiseAnd || self == .bitwiseOr || self == .bitwiseXor }

    /// Whether the Metal kernels have the op (the others, computed in double precision, run on
    /// the host kernels there).
    var hasMetalKernel: Bool {
        switch self {
        case .add, .sub, .mul, .div, .pow, .maximum, .minimum, .bitwiseAnd, .bitwiseOr, .bitwiseXor, .atan2, .copysign,
            .fmod, .remainder, .floorDivide, .truncDivide, .fmax, .fmin, .heaviside, .leftShift, .rightShift, .gcd, .lcm:
            return true
        default: return false
        }
    }

    /// Ops whose integer operands promote to float32, as division's do.
    var promotesIntegers: Bool {
        (BinaryKernel.atan2.rawValue...BinaryKernel.zeta.rawValue).contains(rawValue) || isPolynomial
    }

    /// The orthogonal polynomials p_n(x), x first and n second.
    var isPolynomial: Bool { rawValue >= BinaryKernel.chebyshevPolynomialT.rawValue }

    /// Ops defined for floating operands only.
    var floatingOnly: Bool { (BinaryKernel.hypot.rawValue...BinaryKernel.igammac.rawValue).contains(rawValue) }

    /// Ops defined for integer operands only (bool refused).
    var integerOnly: Bool { (BinaryKernel.leftShift.rawValue...BinaryKernel.lcm.rawValue).contains(rawValue) }

    /// The integer divisions, whose divisor must not be 0.
    var divides: Bool { self == .fmod || self == .remainder || self == .floorDivide || self == .truncDivide }
}
