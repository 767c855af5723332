#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Host elementwise kernels: arithmetic on tensors and scalars, unary functions and their
/// derivatives, comparisons and selection; the fused kernels for contiguous float32 operands.
extension HostBackend: ElementwiseKernels, FusedElementwiseKernels {
    func binary(_ op: BinaryKernel, _ a: TensorImpl, _ b: TensorImpl, into out: TensorImpl) {
        if FloatFastPath.applies(out, a, b) { return FloatFastPath.binary(op, a, b, out) }
        if BFloat16Elementwise.applies(out, a, b) { return BFloat16Elementwise.binary(op, a, b, out) }
        if BroadcastRuns.binary(op, a, b, into: out) { return }
        dispatch(out.dtype, BinaryTensorKernel(op: op, a: a, b: b, out: out))
    }

    func binary(_ op: BinaryKernel, _ a: TensorImpl, scalar: Scalar, scalarFirst: Bool, into out: TensorImpl) {
        if FloatFastPath.applies(out, a) {
            return FloatFastPath.binary(op, a, scalar: Float(scalar.double), scalarFirst: scalarFirst, out)
        }
        if BFloat16Elementwise.applies(out, a) {
            return BFloat16Elementwise.binary(op, a, scalar: Float(scalar.double), scalarFirst: scalarFirst, out)
        }
        dispatch(out.dtype, BinaryScalarKernel(op: op, a: a, s: scalar, scalarFirst: scalarFirst, out: out))
    }

    func unary(_ op: UnaryKernel, _ a: TensorImpl, into out: TensorImpl) {
        #if canImport(CDNNL)
        if DNNL.unary(op, a, into: out) { return }
        #endif
        if FloatFastPath.applies(out, a) { return FloatFastPath.unary(op, a, out) }
        if BFloat16Elementwise.applies(out, a) { return BFloat16Elementwise.unary(op, a, out) }
        dispatch(out.dtype, UnaryElementKernel(op: op, a: a, out: out))
    }

    func unaryBackward(_ op: UnaryKernel, x: TensorImpl, y: TensorImpl, grad: TensorImpl, into gradIn: TensorImpl) {
        #if canImport(CDNNL)
        if DNNL.unaryBackward(op, x: x, grad: grad, into: gradIn) { return }
        // oneDNN's gelu derivative beats the host loop by more than writing out a gradient of
        // one value everywhere costs.
        if op == .gelu, FloatFastPath.splats(grad, gradIn),
            let dense = try? TensorImpl.empty(grad.shape, dtype: grad.dtype, on: HostBackend.scratch(beside: grad))
        {
            copy(grad, into: dense)
            if DNNL.unaryBackward(op, x: x, grad: dense, into: gradIn) { return }
        }
        #endif
        if FloatFastPath.applies(gradIn, x, y) {
            if FloatFastPath.applies(gradIn, grad) { return FloatFastPath.unaryBackward(op, x: x, y: y, grad: grad, gradIn) }
            if FloatFastPath.splats(grad, gradIn) {
                return FloatFastPath.unaryBackward(op, x: x, y: y, splat: FloatFastPath.pointer(grad)[0], gradIn)
            }
        }
        if BFloat16Elementwise.applies(gradIn, x, y)
            && (BFloat16Elementwise.applies(gradIn, grad) || FloatFastPath.splats(grad, gradIn, dtype: .bfloat16))
        {
            return BFloat16Elementwise.unaryBackward(op, x: x, y: y, grad: grad, gradIn)
        }
        dispatch(gradIn.dtype, UnaryBackwardKernel(op: op, x: x, y: y, g: grad, out: gradIn))
    }

    func compare(_ op: CompareKernel, _ a: TensorImpl, _ b: TensorImpl, into out: TensorImpl) {
        if DenseFastPath.compare(op, a, b, into: out) { return }
        dispatch(a.dtype, CompareElements(op: op, a: a, b: b, out: out))
    }

    func select(_ cond: TensorImpl, _ a: TensorImpl, _ b: TensorImpl, into out: TensorImpl) {
        if DenseFastPath.select(cond, a, b, into: out) { return }
        dispatch(out.dtype, SelectElements(cond: cond, a: a, b: b, out: out))
    }

    func addScaled(_ a: TensorImpl, _ b: TensorImpl, alpha: Float, into out: TensorImpl) {
        FloatFastPath.addScaled(a, b, alpha: alpha, out)
    }

    func leakyRelu(_ x: TensorImpl, slope: Float, into out: TensorImpl) {
        FloatFastPath.leakyRelu(x, slope: slope, out)
    }

    func leakyReluBackward(_ x: TensorImpl, grad: TensorImpl, slope: Float, into gradIn: TensorImpl) {
        FloatFastPath.leakyReluBackward(x, grad: grad, slope: slope, gradIn)
    }
}

@inline(__always)
func applyBinary<R: HostReal>(_ op: BinaryKernel, _ x: R, _ y: R) -> R {
    switch op {
    case .add: return x + y
    case .sub: return x - y
    case .mul: return x * y
    case .div: return x / y
    case .pow: return R.pow(x, y)
    case .maximum: return x.isNaN || y.isNaN ? .nan : Swift.max(x, y)
    case .minimum: return x.isNaN || y.isNaN ? .nan : Swift.min(x, y)
    case .bitwiseAnd, .bitwiseOr, .bitwiseXor, .leftShift, .rightShift, .gcd, .lcm:
        return .nan  // refused for floating types by the op layer
    case .nextafter:
        if x.isNaN || y.isNaN { return .nan }
        return x == y ? y : (x < y ? x.nextUp : x.nextDown)
    case .fmax: return x.isNaN ? y : (y.isNaN ? x : Swift.max(x, y))
    case .fmin: return x.isNaN ? y : (y.isNaN ? x : Swift.min(x, y))
    case .heaviside: return x == 0 ? y : (x > 0 ? 1 : 0)
    case .copysign: return R(signOf: y, magnitudeOf: x)
    default: return R(binaryDouble(op, Double(x), Double(y)))
    }
}

/// The float ops computed in double precision and rounded once.
private func binaryDouble(_ op: BinaryKernel, _ x: Double, _ y: Double) -> Double {
    switch op {
    case .atan2: return atan2(x, y)
    case .hypot: return hypot(x, y)
    case .xlogy: return x == 0 && !y.isNaN ? 0 : x * log(y)
    case .xlog1py: return x == 0 && !y.isNaN ? 0 : x * log1p(y)
    case .zeta: return SpecialMath.zeta(x, y)
    case .igamma: return SpecialMath.igamma(x, y)
    case .igammac: return SpecialMath.igammac(x, y)
    case .logaddexp, .logaddexp2:
        let m = Swift.max(x, y)
        if x.isNaN || y.isNaN { return .nan }
        if m.isInfinite && x == y { return m }  // (inf - inf would be NaN)
        let d = -Swift.abs(x - y)
        return op == .logaddexp ? m + log1p(exp(d)) : m + log1p(exp2(d)) / SpecialMath.ln2
    case .fmod: return fmod(x, y)
    case .chebyshevPolynomialT, .chebyshevPolynomialU, .chebyshevPolynomialV, .chebyshevPolynomialW, .shiftedChebyshevPolynomialT,
        .shiftedChebyshevPolynomialU,
        .shiftedChebyshevPolynomialV, .shiftedChebyshevPolynomialW, .hermitePolynomialH, .hermitePolynomialHe, .laguerrePolynomialL,
        .legendrePolynomialP:
        return SpecialMath.polynomial(op, x, y)
    case .remainder:
        // x - floor(x / y)·y, as the remainder of the truncating fmod moved to y's sign.
        var r = fmod(x, y)
        if r != 0 && (r < 0) != (y < 0) { r += y }
        return r
    case .truncDivide: return (x / y).rounded(.towardZero)
    case .floorDivide:
        // floor(x / y) of the exact quotient: (x - fmod(x, y)) / y is an integer up to rounding,
        // one less when the remainder's sign differs from y's.
        if y == 0 { return x / y }
        let r = fmod(x, y)
        var q = (x - r) / y
        if r != 0 && (y < 0) != (r < 0) { q -= 1 }
        if q == 0 { return (0.0).sign == (x / y).sign ? 0 : -0.0 }
        var f = q.rounded(.down)
        if q - f > 0.5 { f += 1 }
        return f
    default: return .nan
    }
}

/// Integer power by squaring, wrapping on overflow; negative exponents give 0 except for
/// bases 1 and -1 (the integer part of the true value).
@inline(__always)
func integerPower(_ base: Int64, _ exponent: Int64) -> Int64 {
    if exponent < 0 {
        if base == 1 { return 1 }
        if base == -1 { return exponent & 1 == 0 ? 1 : -1 }
        return 0
    }
    var result: Int64 = 1, b = base, e = exponent
    while e > 0 {
        if e & 1 == 1 { result &*= b }
        b &*= b
        e >>= 1
    }
    return result
}

@inline(__always)
private func applyInt(_ op: BinaryKernel, _ x: Int64, _ y: Int64) -> Int64 {
    switch op {
    case .add: return x &+ y
    case .sub: return x &- y
    case .mul: return x &* y
    case .div: return y == 0 ? 0 : (x == .min && y == -1 ? .min : x / y)  // not reached: div promotes to float
    case .pow: return integerPower(x, y)
    case .minimum: return Swift.min(x, y)
    case .bitwiseAnd: return x & y
    case .bitwiseOr: return x | y
    case .bitwiseXor: return x ^ y
    case .fmod, .truncDivide:
        // Divisors of 0 are refused by the op layer; .min / -1 wraps.
        if y == 0 { return 0 }
        if y == -1 { return op == .fmod ? 0 : 0 &- x }
        return op == .fmod ? x % y : x / y
    case .remainder, .floorDivide:
        if y == 0 { return 0 }
        if y == -1 { return op == .remainder ? 0 : 0 &- x }
        let q = x / y, r = x % y
        let adjust = r != 0 && (r < 0) != (y < 0)
        return op == .remainder ? (adjust ? r + y : r) : (adjust ? q - 1 : q)
    case .fmax, .maximum: return Swift.max(x, y)
    case .fmin: return Swift.min(x, y)
    case .heaviside: return x == 0 ? y : (x > 0 ? 1 : 0)
    // Shifts by a negative count or the width or more give 0 (left) or the sign (right); the
    // result is truncated into the dtype, whose width the 64-bit shift covers.
    case .leftShift: return y < 0 || y >= 64 ? 0 : x << y
    case .rightShift: return y < 0 || y >= 64 ? (x < 0 ? -1 : 0) : x >> y
    case .gcd: return gcd(x, y)
    case .lcm:
        let g = gcd(x, y)
        if g == 0 { return 0 }
        let v = (x / g) &* y
        return v == .min ? v : Swift.abs(v)
    default: return 0  // the float-valued ops, promoted by the op layer
    }
}

/// The greatest common divisor (non-negative; gcd(0, 0) = 0), by Euclid's algorithm.
@inline(__always)
private func gcd(_ a: Int64, _ b: Int64) -> Int64 {
    var x = a.magnitude, y = b.magnitude
    while y != 0 { (x, y) = (y, x % y) }
    return Int64(truncatingIfNeeded: x)
}

private struct BinaryTensorKernel: ElementVisitor {
    let op: BinaryKernel, a: TensorImpl, b: TensorImpl, out: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let pa = UnsafePointer(HostBackend.address(a).assumingMemoryBound(to: E.Stored.self))
        let pb = UnsafePointer(HostBackend.address(b).assumingMemoryBound(to: E.Stored.self))
        let po = HostBackend.address(out).assumingMemoryBound(to: E.Stored.self)
        let loop = StridedLoop(shape: out.shape, strides: [a.strides, b.strides, out.strides])
        switch op {
        case .add:
            run(loop, pa, pb, po, E.self) {
                $0 + $1
            } int: {
                $0 &+ $1
            }
        case .sub:
            run(loop, pa, pb, po, E.self) {
                $0 - $1
            } int: {
                $0 &- $1
            }
        case .mul:
            run(loop, pa, pb, po, E.self) {
                $0 * $1
            } int: {
                $0 &* $1
            }
        case .div:
            run(loop, pa, pb, po, E.self) {
                $0 / $1
            } int: {
                applyInt(.div, $0, $1)
            }
        case .pow:
            run(loop, pa, pb, po, E.self) {
                E.Real.pow($0, $1)
            } int: {
                integerPower($0, $1)
            }
        case .maximum:
            run(loop, pa, pb, po, E.self) {
                applyBinary(.maximum, $0, $1)
            } int: {
                Swift.max($0, $1)
            }
        case .minimum:
            run(loop, pa, pb, po, E.self) {
                applyBinary(.minimum, $0, $1)
            } int: {
                Swift.min($0, $1)
            }
        default:
            run(loop, pa, pb, po, E.self) {
                applyBinary(op, $0, $1)
            } int: {
                applyInt(op, $0, $1)
            }
        }
    }

    @inline(__always)
    private func run<E: HostElement>(
        _ loop: StridedLoop, _ pa: UnsafePointer<E.Stored>, _ pb: UnsafePointer<E.Stored>,
        _ po: UnsafeMutablePointer<E.Stored>, _: E.Type,
        float f: (E.Real, E.Real) -> E.Real, int g: (Int64, Int64) -> Int64
    ) {
        loop.forEachRun(bases: [0, 0, 0]) { o, n, s in
            var i = o[0], j = o[1], k = o[2]
            let sa = s[0], sb = s[1], so = s[2]
            for _ in 0..<n {
                if E.isFloat { E.setFloat(po, k, f(E.float(pa, i), E.float(pb, j))) } else { E.setInt(po, k, g(E.int(pa, i), E.int(pb, j))) }
                i &+= sa; j &+= sb; k &+= so
            }
        }
    }
}

private struct BinaryScalarKernel: ElementVisitor {
    let op: BinaryKernel, a: TensorImpl, s: Scalar, scalarFirst: Bool, out: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let pa = UnsafePointer(HostBackend.address(a).assumingMemoryBound(to: E.Stored.self))
        let po = HostBackend.address(out).assumingMemoryBound(to: E.Stored.self)
        let loop = StridedLoop(shape: out.shape, strides: [a.strides, out.strides])
        let fs = E.Real(s.double), isc = s.int, op = op, first = scalarFirst
        loop.forEachRun(bases: [0, 0]) { o, n, st in
            var i = o[0], k = o[1]
            for _ in 0..<n {
                if E.isFloat {
                    let x = E.float(pa, i)
                    E.setFloat(po, k, first ? applyBinary(op, fs, x) : applyBinary(op, x, fs))
                } else {
                    let x = E.int(pa, i)
                    E.setInt(po, k, first ? applyInt(op, isc, x) : applyInt(op, x, isc))
                }
                i &+= st[0]; k &+= st[1]
            }
        }
    }
}

private struct UnaryElementKernel: ElementVisitor {
    let op: UnaryKernel, a: TensorImpl, out: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let pa = UnsafePointer(HostBackend.address(a).assumingMemoryBound(to: E.Stored.self))
        let po = HostBackend.address(out).assumingMemoryBound(to: E.Stored.self)
        let loop = StridedLoop(shape: out.shape, strides: [a.strides, out.strides])
        let op = op
        loop.forEachRun(bases: [0, 0]) { o, n, s in
            // A run of contiguous float32 (a row of a slice, say) takes the vectorised loop.
            if E.Stored.self == Float.self, s[0] == 1, s[1] == 1 {
                FloatFastPath.unary(
                    op, UnsafeRawPointer(pa + o[0]).assumingMemoryBound(to: Float.self),
                    UnsafeMutableRawPointer(po + o[1]).assumingMemoryBound(to: Float.self), n)
                return
            }
            var i = o[0], k = o[1]
            for _ in 0..<n {
                if E.isFloat { E.setFloat(po, k, op.apply(E.float(pa, i))) } else { E.setInt(po, k, op.apply(E.int(pa, i))) }
                i &+= s[0]; k &+= s[1]
            }
        }
    }
}

private struct UnaryBackwardKernel: ElementVisitor {
    let op: UnaryKernel, x: TensorImpl, y: TensorImpl, g: TensorImpl, out: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let px = UnsafePointer(HostBackend.address(x).assumingMemoryBound(to: E.Stored.self))
        let py = UnsafePointer(HostBackend.address(y).assumingMemoryBound(to: E.Stored.self))
        let pg = UnsafePointer(HostBackend.address(g).assumingMemoryBound(to: E.Stored.self))
        let po = HostBackend.address(out).assumingMemoryBound(to: E.Stored.self)
        let loop = StridedLoop(shape: out.shape, strides: [x.strides, y.strides, g.strides, out.strides])
        let op = op
        loop.forEachRun(bases: [0, 0, 0, 0]) { o, n, s in
            if E.Stored.self == Float.self, s[0] == 1, s[1] == 1, s[2] == 1, s[3] == 1 {
                func float(_ p: UnsafePointer<E.Stored>) -> UnsafePointer<Float> {
                    UnsafeRawPointer(p).assumingMemoryBound(to: Float.self)
                }
                FloatFastPath.unaryBackward(
                    op, float(px + o[0]), float(py + o[1]), float(pg + o[2]),
                    UnsafeMutableRawPointer(po + o[3]).assumingMemoryBound(to: Float.self), n)
                return
            }
            var i = o[0], j = o[1], l = o[2], k = o[3]
            for _ in 0..<n {
                E.setFloat(po, k, E.float(pg, l) * op.derivative(E.float(px, i), E.float(py, j)))
                i &+= s[0]; j &+= s[1]; l &+= s[2]; k &+= s[3]
            }
        }
    }
}

private struct CompareElements: ElementVisitor {
    let op: CompareKernel, a: TensorImpl, b: TensorImpl, out: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let pa = UnsafePointer(hostPointer(a, E.self)), pb = UnsafePointer(hostPointer(b, E.self))
        let po = hostPointer(out, BoolElement.self)
        let loop = StridedLoop(shape: out.shape, strides: [a.strides, b.strides, out.strides])
        let op = op
        loop.forEachRun(bases: [0, 0, 0]) { o, n, s in
            var i = o[0], j = o[1], k = o[2]
            for _ in 0..<n {
                let r: Bool
                if E.isFloat { r = Self.test(op, E.float(pa, i), E.float(pb, j)) } else { r = Self.test(op, E.int(pa, i), E.int(pb, j)) }
                po[k] = r ? 1 : 0
                i &+= s[0]; j &+= s[1]; k &+= s[2]
            }
        }
    }

    @inline(__always)
    static func test<T: Comparable>(_ op: CompareKernel, _ x: T, _ y: T) -> Bool {
        switch op {
        case .eq: return x == y
        case .ne: return x != y
        case .lt: return x < y
        case .le: return x <= y
        case .gt: return x > y
        case .ge: return x >= y
        }
    }
}

private struct SelectElements: ElementVisitor {
    let cond: TensorImpl, a: TensorImpl, b: TensorImpl, out: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let pc = UnsafePointer(hostPointer(cond, BoolElement.self))
        let pa = UnsafePointer(hostPointer(a, E.self)), pb = UnsafePointer(hostPointer(b, E.self)), po = hostPointer(out, E.self)
        let loop = StridedLoop(shape: out.shape, strides: [cond.strides, a.strides, b.strides, out.strides])
        loop.forEachRun(bases: [0, 0, 0, 0]) { o, n, s in
            var c = o[0], i = o[1], j = o[2], k = o[3]
            for _ in 0..<n {
                po[k] = pc[c] != 0 ? pa[i] : pb[j]
                c &+= s[0]; i &+= s[1]; j &+= s[2]; k &+= s[3]
            }
        }
    }
}
