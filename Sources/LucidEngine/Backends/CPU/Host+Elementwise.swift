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
#endif
        if FloatFastPath.applies(gradIn, x, y) && FloatFastPath.applies(gradIn, grad) {
            return FloatFastPath.unaryBackward(op, x: x, y: y, grad: grad, gradIn)
        }
        if BFloat16Elementwise.applies(gradIn, x, y) && BFloat16Elementwise.applies(gradIn, grad) {
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
    case .bitwiseAnd, .bitwiseOr, .bitwiseXor: return .nan  // refused for floating types by the op layer
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
    case .maximum: return Swift.max(x, y)
    case .minimum: return Swift.min(x, y)
    case .bitwiseAnd: return x & y
    case .bitwiseOr: return x | y
    case .bitwiseXor: return x ^ y
    }
}

private struct BinaryTensorKernel: ElementVisitor {
    let op: BinaryKernel, a: TensorImpl, b: TensorImpl, out: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let pa = UnsafePointer(HostBackend.address(a).assumingMemoryBound(to: E.Stored.self))
        let pb = UnsafePointer(HostBackend.address(b).assumingMemoryBound(to: E.Stored.self))
        let po = HostBackend.address(out).assumingMemoryBound(to: E.Stored.self)
        let loop = StridedLoop(shape: out.shape, strides: [a.strides, b.strides, out.strides])
        switch op {
        case .add: run(loop, pa, pb, po, E.self) { $0 + $1 } int: { $0 &+ $1 }
        case .sub: run(loop, pa, pb, po, E.self) { $0 - $1 } int: { $0 &- $1 }
        case .mul: run(loop, pa, pb, po, E.self) { $0 * $1 } int: { $0 &* $1 }
        case .div: run(loop, pa, pb, po, E.self) { $0 / $1 } int: { applyInt(.div, $0, $1) }
        case .pow: run(loop, pa, pb, po, E.self) { E.Real.pow($0, $1) } int: { integerPower($0, $1) }
        case .maximum: run(loop, pa, pb, po, E.self) { applyBinary(.maximum, $0, $1) } int: { Swift.max($0, $1) }
        case .minimum: run(loop, pa, pb, po, E.self) { applyBinary(.minimum, $0, $1) } int: { Swift.min($0, $1) }
        case .bitwiseAnd, .bitwiseOr, .bitwiseXor:
            run(loop, pa, pb, po, E.self) { applyBinary(op, $0, $1) } int: { applyInt(op, $0, $1) }
        }
    }

    @inline(__always)
    private func run<E: HostElement>(_ loop: StridedLoop, _ pa: UnsafePointer<E.Stored>, _ pb: UnsafePointer<E.Stored>,
                                     _ po: UnsafeMutablePointer<E.Stored>, _: E.Type,
                                     float f: (E.Real, E.Real) -> E.Real, int g: (Int64, Int64) -> Int64) {
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
                FloatFastPath.unary(op, UnsafeRawPointer(pa + o[0]).assumingMemoryBound(to: Float.self),
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
                FloatFastPath.unaryBackward(op, float(px + o[0]), float(py + o[1]), float(pg + o[2]),
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
