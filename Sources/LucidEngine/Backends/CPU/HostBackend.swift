#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Aligned host memory from the caching allocator, counted in `MemoryStats` under the device
/// it serves.
final class HostBuffer: DeviceBuffer, @unchecked Sendable {
    let pointer: UnsafeMutableRawPointer
    let byteCount: Int
    let blockSize: Int
    let device: Device

    init(byteCount: Int, device: Device) throws {
        (pointer, blockSize) = try HostAllocator.shared.allocate(byteCount)
        self.byteCount = byteCount
        self.device = device
        MemoryStats.allocated(byteCount, on: device)
    }

    deinit {
        HostAllocator.shared.release(pointer, size: blockSize)
        MemoryStats.released(byteCount, on: device)
    }
}

/// The host backend: the CPU stream, and — as a second instance — the host fallback that
/// serves "metal" where Metal is missing. Kernels run at once on the calling thread; GEMM goes
/// to the platform BLAS (Accelerate on Apple, OpenBLAS elsewhere).
final class HostBackend: Backend {
    let device: Device
    let name: String

    init(device: Device, name: String) {
        self.device = device
        self.name = name
    }

    func allocate(byteCount: Int) throws -> any DeviceBuffer { try HostBuffer(byteCount: byteCount, device: device) }
    func synchronize() {}

    func write(_ bytes: UnsafeRawBufferPointer, into dst: TensorImpl) {
        guard let src = bytes.baseAddress else { return }
        memcpy(Self.address(dst), src, min(bytes.count, dst.numel * dst.dtype.itemSize))
    }

    func read(_ src: TensorImpl, into bytes: UnsafeMutableRawBufferPointer) {
        guard let dst = bytes.baseAddress else { return }
        memcpy(dst, Self.address(src), min(bytes.count, src.numel * src.dtype.itemSize))
    }

    /// Address of element 0 of a host tensor.
    @inline(__always)
    static func address(_ t: TensorImpl) -> UnsafeMutableRawPointer {
        unsafeDowncast(t.storage.buffer, to: HostBuffer.self).pointer + t.offset * t.dtype.itemSize
    }

    func fill(_ out: TensorImpl, with value: Scalar) {
        dispatch(out.dtype, FillKernel(out: out, value: value))
    }

    func copy(_ src: TensorImpl, into dst: TensorImpl) {
        if src.dtype == dst.dtype, src.isContiguous, dst.isContiguous {
            memmove(Self.address(dst), Self.address(src), src.numel * src.dtype.itemSize)
            return
        }
        if BFloat16FastPath.applies(src, dst) { return BFloat16FastPath.copy(src, into: dst) }
        dispatch(src.dtype, CopySource(src: src, dst: dst))
    }

    func binary(_ op: BinaryKernel, _ a: TensorImpl, _ b: TensorImpl, into out: TensorImpl) {
        if FloatFastPath.applies(out, a, b) { return FloatFastPath.binary(op, a, b, out) }
        if BFloat16Elementwise.applies(out, a, b) { return BFloat16Elementwise.binary(op, a, b, out) }
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

    func reduce(_ op: ReduceKernel, _ a: TensorImpl, axes: [Int], into out: TensorImpl) {
        if FloatFastPath.reduce(op, a, axes: axes, into: out) { return }
        dispatch(a.dtype, ReduceSource(op: op, a: a, axes: axes, out: out))
    }

    func gemm(_ a: TensorImpl, _ b: TensorImpl, bias: TensorImpl?, into out: TensorImpl) {
#if canImport(CDNNL)
        // bfloat16 always (AVX-512 BF16 / AMX kernels); float32 once the product is large
        // enough for oneDNN's kernels to repay its per-call set-up over BLAS.
        let flops = out.shape[0] &* out.shape[1] &* out.shape[2] &* a.shape[2]
        if (out.dtype == .bfloat16 || (out.dtype == .float32 && flops >= 1 << 18)) && DNNL.gemm(a, b, bias: bias, into: out) {
            return
        }
#endif
        if out.dtype.isFloatingPoint {
            HostGEMM.float(a, b, bias: bias, into: out)
        } else {
            dispatch(out.dtype, IntegerGEMM(a: a, b: b, bias: bias, out: out))
        }
    }
}

extension HostBackend {
    func softmax(_ x: TensorImpl, axis: Int, log: Bool, into out: TensorImpl) -> Bool {
#if canImport(CDNNL)
        return DNNL.softmax(x, axis: axis, log: log, into: out)
#else
        return false
#endif
    }

    func attention(_ q: TensorImpl, _ k: TensorImpl, _ v: TensorImpl, scale: Float, causal: Bool,
                   weights: TensorImpl?, into out: TensorImpl) -> Bool {
#if canImport(CDNNL)
        return DNNL.attention(q, k, v, scale: scale, causal: causal, weights: weights, into: out)
#else
        return false
#endif
    }

    func convolution(_ pass: ConvolutionPassKind, _ problem: ConvolutionProblem, x: TensorImpl?, weight: TensorImpl?,
                     bias: TensorImpl?, gradOut: TensorImpl?, into out: TensorImpl) -> Bool {
#if canImport(CDNNL)
        // oneDNN's argument indices: SRC 1, WEIGHTS 33, BIAS 41, DST 17, DIFF_SRC 129,
        // DIFF_WEIGHTS 161, DIFF_DST 145.
        var args: [(Int32, TensorImpl)]
        switch pass {
        case .forward:
            guard let x, let weight else { return false }
            args = [(DNNL.Arg.src, x), (DNNL.Arg.weights, weight), (DNNL.Arg.dst, out)]
            if let bias { args.append((DNNL.Arg.bias, bias)) }
        case .backwardData:
            guard let gradOut, let weight else { return false }
            args = [(DNNL.Arg.diffDst, gradOut), (DNNL.Arg.weights, weight), (DNNL.Arg.diffSrc, out)]
        case .backwardWeights:
            guard let x, let gradOut else { return false }
            args = [(DNNL.Arg.src, x), (DNNL.Arg.diffDst, gradOut), (DNNL.Arg.diffWeights, out)]
        }
        return DNNL.convolution(pass, problem, args)
#else
        return false
#endif
    }

    func sgdStep(param: TensorImpl, grad: TensorImpl, momentum: TensorImpl?, hyper: SGDHyper,
                 newParam: TensorImpl, newMomentum: TensorImpl?) {
        dispatch(param.dtype, SGDKernel(p: param, g: grad, buf: momentum, h: hyper, outP: newParam, outBuf: newMomentum))
    }

    func unscale(_ grad: TensorImpl, invScale: Float, into out: TensorImpl) -> Bool {
        dispatch(grad.dtype, UnscaleKernel(g: grad, inv: invScale, out: out))
    }

    func adamStep(param: TensorImpl, grad: TensorImpl, m: TensorImpl, v: TensorImpl, hyper: AdamHyper,
                  newParam: TensorImpl, newM: TensorImpl, newV: TensorImpl) {
        dispatch(param.dtype, AdamKernel(p: param, g: grad, m: m, v: v, h: hyper, outP: newParam, outM: newM, outV: newV))
    }
}

@inline(__always)
private func floats<E: HostElement>(_ t: TensorImpl, _: E.Type) -> UnsafeMutablePointer<E.Stored> {
    HostBackend.address(t).assumingMemoryBound(to: E.Stored.self)
}

private struct SGDKernel: ElementVisitor {
    let p: TensorImpl, g: TensorImpl, buf: TensorImpl?, h: SGDHyper, outP: TensorImpl, outBuf: TensorImpl?
    func visit<E: HostElement>(_: E.Type) {
        let pp = floats(p, E.self), gp = floats(g, E.self), op = floats(outP, E.self)
        let bp = buf.map { floats($0, E.self) }, obp = outBuf.map { floats($0, E.self) }
        for i in 0..<p.numel {
            let w = E.float(pp, i)
            var d = E.float(gp, i)
            if h.maximize { d = -d }
            if h.weightDecay != 0 { d += h.weightDecay * w }
            if let obp {
                var b = d
                if let bp, !h.firstStep { b = h.momentum * E.float(bp, i) + (1 - h.dampening) * d }
                E.setFloat(obp, i, b)
                d = h.nesterov ? d + h.momentum * b : b
            }
            E.setFloat(op, i, w - h.lr * d)
        }
    }
}

private struct UnscaleKernel: ElementVisitor {
    let g: TensorImpl, inv: Float, out: TensorImpl
    func visit<E: HostElement>(_: E.Type) -> Bool {
        let gp = floats(g, E.self), op = floats(out, E.self)
        var nonFinite = false
        for i in 0..<g.numel {
            let x = E.float(gp, i) * inv
            E.setFloat(op, i, x)
            if !x.isFinite || !E.float(op, i).isFinite { nonFinite = true }
        }
        return nonFinite
    }
}

private struct AdamKernel: ElementVisitor {
    let p: TensorImpl, g: TensorImpl, m: TensorImpl, v: TensorImpl, h: AdamHyper
    let outP: TensorImpl, outM: TensorImpl, outV: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let pp = UnsafePointer(floats(p, E.self)), gp = UnsafePointer(floats(g, E.self))
        let mp = UnsafePointer(floats(m, E.self)), vp = UnsafePointer(floats(v, E.self))
        let op = floats(outP, E.self), om = floats(outM, E.self), ov = floats(outV, E.self)
        let h = h
        HostThreads.forEachRange(p.numel) { r in Self.update(E.self, h, pp, gp, mp, vp, op, om, ov, r) }
    }

    /// One range of the update, the step's constants hoisted (a function of its own so that
    /// they stay in registers and the loop vectorises).
    private static func update<E: HostElement>(_: E.Type, _ h: AdamHyper, _ pp: UnsafePointer<E.Stored>,
                                               _ gp: UnsafePointer<E.Stored>, _ mp: UnsafePointer<E.Stored>,
                                               _ vp: UnsafePointer<E.Stored>, _ op: UnsafeMutablePointer<E.Stored>,
                                               _ om: UnsafeMutablePointer<E.Stored>, _ ov: UnsafeMutablePointer<E.Stored>,
                                               _ r: Range<Int>) {
        // PyTorch's form: p -= lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps)
        let bc1 = Float(1 - pow(Double(h.beta1), Double(h.step))), bc2 = Float(1 - pow(Double(h.beta2), Double(h.step)))
        let stepSize = h.lr / bc1, bc2Root = bc2.squareRoot()
        let sign: Float = h.maximize ? -1 : 1
        let coupled = h.decoupled ? 0 : h.weightDecay, shrink = h.decoupled ? 1 - h.lr * h.weightDecay : 1
        let b1 = h.beta1, b2 = h.beta2, eps = h.eps
        for i in r {
            let w0 = E.float(pp, i)
            let d = coupled == 0 ? sign * E.float(gp, i) : sign * E.float(gp, i) + coupled * w0
            let w = shrink * w0
            let mi = b1 * E.float(mp, i) + (1 - b1) * d
            let vi = b2 * E.float(vp, i) + (1 - b2) * d * d
            E.setFloat(om, i, mi)
            E.setFloat(ov, i, vi)
            E.setFloat(op, i, w - stepSize * mi / (vi.squareRoot() / bc2Root + eps))
        }
    }
}

// MARK: - Elementwise kernels

private struct FillKernel: ElementVisitor {
    let out: TensorImpl, value: Scalar
    func visit<E: HostElement>(_: E.Type) {
        let p = HostBackend.address(out).assumingMemoryBound(to: E.Stored.self)
        let loop = StridedLoop(shape: out.shape, strides: [out.strides])
        // One rounding from the float64 value into a 16-bit float, through float32 rounded to odd.
        let f = out.dtype.isLowPrecision ? roundedToOddFloat(value.double) : Float(value.double), i = value.int
        loop.forEachRun(bases: [0]) { o, n, s in
            for j in 0..<n {
                if E.isFloat { E.setFloat(p, o[0] &+ j &* s[0], f) } else { E.setInt(p, o[0] &+ j &* s[0], i) }
            }
        }
    }
}

private struct CopySource: ElementVisitor {
    let src: TensorImpl, dst: TensorImpl
    func visit<S: HostElement>(_: S.Type) { dispatch(dst.dtype, CopyDestination<S>(src: src, dst: dst)) }
}

private struct CopyDestination<S: HostElement>: ElementVisitor {
    let src: TensorImpl, dst: TensorImpl
    func visit<D: HostElement>(_: D.Type) {
        let ps = UnsafePointer(HostBackend.address(src).assumingMemoryBound(to: S.Stored.self))
        let pd = HostBackend.address(dst).assumingMemoryBound(to: D.Stored.self)
        let loop = StridedLoop(shape: dst.shape, strides: [src.strides, dst.strides])
        loop.forEachRun(bases: [0, 0]) { o, n, s in
            var i = o[0], k = o[1]
            for _ in 0..<n {
                if S.isFloat { D.setFloat(pd, k, S.float(ps, i)) } else { D.setInt(pd, k, S.int(ps, i)) }
                i &+= s[0]; k &+= s[1]
            }
        }
    }
}

@inline(__always)
func applyBinary(_ op: BinaryKernel, _ x: Float, _ y: Float) -> Float {
    switch op {
    case .add: return x + y
    case .sub: return x - y
    case .mul: return x * y
    case .div: return x / y
    case .pow: return LibM.pow(x, y)
    case .maximum: return x.isNaN || y.isNaN ? .nan : Swift.max(x, y)
    case .minimum: return x.isNaN || y.isNaN ? .nan : Swift.min(x, y)
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
        case .pow: run(loop, pa, pb, po, E.self) { LibM.pow($0, $1) } int: { integerPower($0, $1) }
        case .maximum: run(loop, pa, pb, po, E.self) { applyBinary(.maximum, $0, $1) } int: { Swift.max($0, $1) }
        case .minimum: run(loop, pa, pb, po, E.self) { applyBinary(.minimum, $0, $1) } int: { Swift.min($0, $1) }
        }
    }

    @inline(__always)
    private func run<E: HostElement>(_ loop: StridedLoop, _ pa: UnsafePointer<E.Stored>, _ pb: UnsafePointer<E.Stored>,
                                     _ po: UnsafeMutablePointer<E.Stored>, _: E.Type,
                                     float f: (Float, Float) -> Float, int g: (Int64, Int64) -> Int64) {
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
        let fs = Float(s.double), isc = s.int, op = op, first = scalarFirst
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
            var i = o[0], j = o[1], l = o[2], k = o[3]
            for _ in 0..<n {
                E.setFloat(po, k, E.float(pg, l) * op.derivative(E.float(px, i), E.float(py, j)))
                i &+= s[0]; j &+= s[1]; l &+= s[2]; k &+= s[3]
            }
        }
    }
}

extension HostBackend {
    func unaryBackward(_ op: UnaryKernel, x: TensorImpl, y: TensorImpl, grad: TensorImpl, into gradIn: TensorImpl) {
        if FloatFastPath.applies(gradIn, x, y) && FloatFastPath.applies(gradIn, grad) {
            return FloatFastPath.unaryBackward(op, x: x, y: y, grad: grad, gradIn)
        }
        if BFloat16Elementwise.applies(gradIn, x, y) && BFloat16Elementwise.applies(gradIn, grad) {
            return BFloat16Elementwise.unaryBackward(op, x: x, y: y, grad: grad, gradIn)
        }
        dispatch(gradIn.dtype, UnaryBackwardKernel(op: op, x: x, y: y, g: grad, out: gradIn))
    }
}

// MARK: - Reductions

private struct ReduceSource: ElementVisitor {
    let op: ReduceKernel, a: TensorImpl, axes: [Int], out: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let pa = UnsafePointer(HostBackend.address(a).assumingMemoryBound(to: E.Stored.self))
        // Accumulate into a contiguous scratch indexed like `out`, stepping through `a` with
        // the output's strides zeroed along the reduced axes.
        var outStrides = Shape.contiguousStrides(out.shape)
        for ax in axes { outStrides[ax] = 0 }
        let loop = StridedLoop(shape: a.shape, strides: [a.strides, outStrides])
        let count = out.numel
        var reducedCount = 1
        for ax in axes { reducedCount &*= a.shape[ax] }
        if E.isFloat {
            var acc = [Double](repeating: 0, count: count)
            acc.withUnsafeMutableBufferPointer { accp in
                loop.forEachRun(bases: [0, 0]) { o, n, s in
                    var i = o[0], k = o[1]
                    for _ in 0..<n { accp[k] += Double(E.float(pa, i)); i &+= s[0]; k &+= s[1] }
                }
            }
            if op == .mean { for j in 0..<count { acc[j] /= Double(reducedCount) } }
            dispatch(out.dtype, StoreDoubles(values: acc, out: out))
        } else {
            var acc = [Int64](repeating: 0, count: count)
            acc.withUnsafeMutableBufferPointer { accp in
                loop.forEachRun(bases: [0, 0]) { o, n, s in
                    var i = o[0], k = o[1]
                    for _ in 0..<n { accp[k] &+= E.int(pa, i); i &+= s[0]; k &+= s[1] }
                }
            }
            dispatch(out.dtype, StoreInts(values: acc, out: out))
        }
    }
}

private struct StoreDoubles: ElementVisitor {
    let values: [Double], out: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let p = HostBackend.address(out).assumingMemoryBound(to: E.Stored.self)
        for (j, v) in values.enumerated() { E.setFloat(p, j, Float(v)) }
    }
}

private struct StoreInts: ElementVisitor {
    let values: [Int64], out: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let p = HostBackend.address(out).assumingMemoryBound(to: E.Stored.self)
        for (j, v) in values.enumerated() { E.setInt(p, j, v) }
    }
}

// MARK: - GEMM

/// Reads any host tensor into a contiguous float32 buffer.
private struct PackFloat: ElementVisitor {
    let t: TensorImpl, into: UnsafeMutablePointer<Float>
    func visit<E: HostElement>(_: E.Type) {
        let p = UnsafePointer(HostBackend.address(t).assumingMemoryBound(to: E.Stored.self))
        let loop = StridedLoop(shape: t.shape, strides: [t.strides, Shape.contiguousStrides(t.shape)])
        let dst = into
        loop.forEachRun(bases: [0, 0]) { o, n, s in
            var i = o[0], k = o[1]
            for _ in 0..<n { dst[k] = E.float(p, i); i &+= s[0]; k &+= s[1] }
        }
    }
}

/// Writes a contiguous float32 buffer into a contiguous tensor, rounding once.
private struct UnpackFloat: ElementVisitor {
    let from: UnsafePointer<Float>, t: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let p = HostBackend.address(t).assumingMemoryBound(to: E.Stored.self)
        for j in 0..<t.numel { E.setFloat(p, j, from[j]) }
    }
}

enum HostGEMM {
    /// One operand as BLAS sees it: a float32 pointer, its leading dimension, whether it is
    /// transposed, and the batch stride. Operands BLAS cannot read in place are packed into
    /// `owned`, which the caller frees.
    private struct Operand {
        var base: UnsafePointer<Float>
        var ld: Int
        var transposed: Bool
        var batchStride: Int
        var owned: UnsafeMutablePointer<Float>?
    }

    private static func packed(_ t: TensorImpl) -> UnsafeMutablePointer<Float> {
        let p = UnsafeMutablePointer<Float>.allocate(capacity: max(t.numel, 1))
        dispatch(t.dtype, PackFloat(t: t, into: p))
        return p
    }

    private static func operand(_ t: TensorImpl) -> Operand {
        let rows = t.shape[1], cols = t.shape[2]
        if t.dtype == .float32 {
            let base = UnsafePointer(HostBackend.address(t).assumingMemoryBound(to: Float.self))
            if t.strides[2] == 1 && t.strides[1] >= max(cols, 1) {
                return Operand(base: base, ld: t.strides[1], transposed: false, batchStride: t.strides[0])
            }
            if t.strides[1] == 1 && t.strides[2] >= max(rows, 1) {
                return Operand(base: base, ld: t.strides[2], transposed: true, batchStride: t.strides[0])
            }
        }
        let p = packed(t)
        return Operand(base: UnsafePointer(p), ld: max(cols, 1), transposed: false, batchStride: rows * cols, owned: p)
    }

    static func float(_ a: TensorImpl, _ b: TensorImpl, bias: TensorImpl?, into out: TensorImpl) {
        let batch = out.shape[0], m = out.shape[1], n = out.shape[2], k = a.shape[2]
        if out.numel == 0 { return }
        let opA = operand(a), opB = operand(b)
        let biasValues = bias.map(packed)
        // Low-precision outputs accumulate in a float32 buffer and round once at the end.
        let lowPrecision = out.dtype != .float32
        let c = lowPrecision ? UnsafeMutablePointer<Float>.allocate(capacity: out.numel)
                             : HostBackend.address(out).assumingMemoryBound(to: Float.self)
        defer {
            opA.owned?.deallocate()
            opB.owned?.deallocate()
            biasValues?.deallocate()
            if lowPrecision { c.deallocate() }
        }
        for i in 0..<batch {
            let ci = c + i * m * n
            if k == 0 {
                ci.update(repeating: 0, count: m * n)
            } else {
                BLAS.sgemm(transA: opA.transposed, transB: opB.transposed, m: m, n: n, k: k,
                           a: opA.base + i * opA.batchStride, lda: opA.ld,
                           b: opB.base + i * opB.batchStride, ldb: opB.ld, c: ci, ldc: n)
            }
            if let bv = biasValues {
                for r in 0..<m { for j in 0..<n { ci[r * n + j] += bv[j] } }
            }
        }
        if lowPrecision { dispatch(out.dtype, UnpackFloat(from: UnsafePointer(c), t: out)) }
    }
}

/// Integer matmul: there is no integer BLAS, and integer matmul is rare enough that a plain
/// wrapping loop serves.
private struct IntegerGEMM: ElementVisitor {
    let a: TensorImpl, b: TensorImpl, bias: TensorImpl?, out: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let pa = UnsafePointer(HostBackend.address(a).assumingMemoryBound(to: E.Stored.self))
        let pb = UnsafePointer(HostBackend.address(b).assumingMemoryBound(to: E.Stored.self))
        let po = HostBackend.address(out).assumingMemoryBound(to: E.Stored.self)
        let pbias = bias.map { UnsafePointer(HostBackend.address($0).assumingMemoryBound(to: E.Stored.self)) }
        let biasStride = bias?.strides[0] ?? 0
        let batch = out.shape[0], m = out.shape[1], n = out.shape[2], k = a.shape[2]
        for bi in 0..<batch {
            for i in 0..<m {
                for j in 0..<n {
                    var acc: Int64 = pbias.map { E.int($0, j * biasStride) } ?? 0
                    for l in 0..<k {
                        acc &+= E.int(pa, bi * a.strides[0] + i * a.strides[1] + l * a.strides[2])
                            &* E.int(pb, bi * b.strides[0] + l * b.strides[1] + j * b.strides[2])
                    }
                    E.setInt(po, (bi * m + i) * n + j, acc)
                }
            }
        }
    }
}
