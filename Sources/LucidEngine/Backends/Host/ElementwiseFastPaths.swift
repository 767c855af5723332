import CHostKernels
/// Tight loops for the common case of contiguous float32 operands of one shape: one switch
/// outside the loop and plain pointer loops inside, which the compiler vectorises. The
/// generic strided kernels handle everything else.
enum FloatFastPath {
    /// Whether `out` and the operands are contiguous tensors of `dtype` and one shape. (Two
    /// overloads rather than a variadic parameter, which would allocate an array per op.)
    @inline(__always)
    static func applies(_ out: TensorImpl, _ a: TensorImpl, dtype: DType = .float32) -> Bool {
        out.dtype == dtype && a.dtype == dtype && a.shape == out.shape && out.isContiguous && a.isContiguous
    }

    @inline(__always)
    static func applies(_ out: TensorImpl, _ a: TensorImpl, _ b: TensorImpl, dtype: DType = .float32) -> Bool {
        applies(out, a, dtype: dtype) && b.dtype == dtype && b.shape == out.shape && b.isContiguous
    }

    /// Whether `t` (of `out`'s shape and `dtype`) reads one value everywhere: every stride 0,
    /// as the gradient a full sum or mean spreads over its input is.
    @inline(__always)
    static func splats(_ t: TensorImpl, _ out: TensorImpl, dtype: DType = .float32) -> Bool {
        t.dtype == dtype && t.shape == out.shape && t.numel > 0 && t.strides.allSatisfy { $0 == 0 }
    }

    /// The length of the blocks that stand for a splatted operand (see `withSplat`).
    static let splatBlock = 1024

    /// Runs `body` with `splatBlock` copies of `value` on the stack: a loop over a splatted
    /// operand reads them block after block instead of a full tensor of one value.
    @inline(__always)
    static func withSplat(_ value: Float, _ body: (UnsafePointer<Float>) -> Void) {
        withUnsafeTemporaryAllocation(of: Float.self, capacity: splatBlock) { buf in
            buf.initialize(repeating: value)
            body(UnsafePointer(buf.baseAddress!))
        }
    }

    /// `body(start, count)` over `r` in blocks of at most `splatBlock`.
    @inline(__always)
    static func inBlocks(_ r: Range<Int>, _ body: (Int, Int) -> Void) {
        var i = r.lowerBound
        while i < r.upperBound {
            let m = Swift.min(splatBlock, r.upperBound - i)
            body(i, m)
            i += m
        }
    }

    @inline(__always)
    static func pointer(_ t: TensorImpl) -> UnsafeMutablePointer<Float> {
        HostBackend.address(t).assumingMemoryBound(to: Float.self)
    }

    static func binary(_ op: BinaryKernel, _ a: TensorImpl, _ b: TensorImpl, _ out: TensorImpl) {
        let x = UnsafePointer(pointer(a)), y = UnsafePointer(pointer(b)), o = pointer(out)
        HostThreads.forEachRange(out.numel) { r in binary(op, x + r.lowerBound, y + r.lowerBound, o + r.lowerBound, r.count) }
    }

    /// `out = a + alpha·b` in one pass (`out` may be `a`).
    static func addScaled(_ a: TensorImpl, _ b: TensorImpl, alpha: Float, _ out: TensorImpl) {
        let x = UnsafePointer(pointer(a)), y = UnsafePointer(pointer(b)), o = pointer(out)
        HostThreads.forEachRange(out.numel) { r in
            lucid_host_add_scaled(x + r.lowerBound, y + r.lowerBound, alpha, o + r.lowerBound, r.count)
        }
    }

    static func binary(_ op: BinaryKernel, _ a: TensorImpl, scalar: Float, scalarFirst: Bool, _ out: TensorImpl) {
        let x = UnsafePointer(pointer(a)), o = pointer(out)
        HostThreads.forEachRange(out.numel) { r in
            binary(op, x + r.lowerBound, scalar: scalar, scalarFirst: scalarFirst, o + r.lowerBound, r.count)
        }
    }

    static func unary(_ op: UnaryKernel, _ a: TensorImpl, _ out: TensorImpl) {
        let x = UnsafePointer(pointer(a)), o = pointer(out)
        HostThreads.forEachRange(out.numel) { r in unary(op, x + r.lowerBound, o + r.lowerBound, r.count) }
    }

    /// `gradIn = grad · op'(x, y)`; `x`, `y`, `grad` and `gradIn` contiguous of one shape.
    static func unaryBackward(_ op: UnaryKernel, x: TensorImpl, y: TensorImpl, grad: TensorImpl, _ out: TensorImpl) {
        let px = UnsafePointer(pointer(x)), py = UnsafePointer(pointer(y)), pg = UnsafePointer(pointer(grad))
        let o = pointer(out)
        HostThreads.forEachRange(out.numel) { r in
            let i = r.lowerBound
            unaryBackward(op, px + i, py + i, pg + i, o + i, r.count)
        }
    }

    /// The same with the gradient one value `g` everywhere.
    static func unaryBackward(_ op: UnaryKernel, x: TensorImpl, y: TensorImpl, splat g: Float, _ out: TensorImpl) {
        let px = UnsafePointer(pointer(x)), py = UnsafePointer(pointer(y)), o = pointer(out)
        HostThreads.forEachRange(out.numel) { r in
            withSplat(g) { pg in inBlocks(r) { i, m in unaryBackward(op, px + i, py + i, pg, o + i, m) } }
        }
    }

    /// `out = x > 0 ? x : slope·x`.
    static func leakyRelu(_ x: TensorImpl, slope: Float, _ out: TensorImpl) {
        let px = UnsafePointer(pointer(x)), o = pointer(out)
        HostThreads.forEachRange(out.numel) { r in
            for i in r { o[i] = px[i] > 0 ? px[i] : px[i] * slope }
        }
    }

    /// `gradIn = x > 0 ? grad : slope·grad`; `grad` contiguous or one value everywhere.
    static func leakyReluBackward(_ x: TensorImpl, grad: TensorImpl, slope: Float, _ out: TensorImpl) {
        let px = UnsafePointer(pointer(x)), pg = UnsafePointer(pointer(grad)), o = pointer(out)
        if splats(grad, out) {
            let g = pg[0], scaled = g * slope
            return HostThreads.forEachRange(out.numel) { r in
                for i in r { o[i] = px[i] > 0 ? g : scaled }
            }
        }
        HostThreads.forEachRange(out.numel) { r in
            for i in r { o[i] = px[i] > 0 ? pg[i] : pg[i] * slope }
        }
    }

    // The loops, on `n` contiguous floats: shared by the float32 kernels and the bfloat16
    // ones, which run them on widened blocks.

    /// lucid_host_arith's code of the four arithmetic ops; nil for the others.
    @inline(__always)
    private static func arithmetic(_ op: BinaryKernel) -> Int32? {
        switch op {
        case .add: 0
        case .sub: 1
        case .mul: 2
        case .div: 3
        default: nil
        }
    }

    // An in-place op's output is its first operand. The loops below then read and write
    // through one pointer: with two equal pointers the vectoriser's overlap check fails and
    // the loop runs one element at a time. (The C loops of the arithmetic ops do the same.)

    @inline(__always)
    static func binary(
        _ op: BinaryKernel, _ x: UnsafePointer<Float>, _ y: UnsafePointer<Float>,
        _ o: UnsafeMutablePointer<Float>, _ n: Int
    ) {
        if let code = arithmetic(op) { return lucid_host_arith(code, x, y, o, n) }
        if x == UnsafePointer(o) {
            for i in 0..<n { o[i] = applyBinary(op, o[i], y[i]) }
        } else {
            for i in 0..<n { o[i] = applyBinary(op, x[i], y[i]) }
        }
    }

    @inline(__always)
    static func binary(
        _ op: BinaryKernel, _ x: UnsafePointer<Float>, scalar s: Float, scalarFirst: Bool,
        _ o: UnsafeMutablePointer<Float>, _ n: Int
    ) {
        if let code = arithmetic(op) { return lucid_host_arith_scalar(code, x, s, scalarFirst ? 1 : 0, o, n) }
        switch (x == UnsafePointer(o), scalarFirst) {
        case (true, false): for i in 0..<n { o[i] = applyBinary(op, o[i], s) }
        case (true, true): for i in 0..<n { o[i] = applyBinary(op, s, o[i]) }
        case (false, false): for i in 0..<n { o[i] = applyBinary(op, x[i], s) }
        case (false, true): for i in 0..<n { o[i] = applyBinary(op, s, x[i]) }
        }
    }

    @inline(__always)
    static func unary(_ op: UnaryKernel, _ x: UnsafePointer<Float>, _ o: UnsafeMutablePointer<Float>, _ n: Int) {
        switch op {
        case .neg: for i in 0..<n { o[i] = -x[i] }
        case .relu: for i in 0..<n { o[i] = x[i] < 0 ? 0 : x[i] }
        case .abs: for i in 0..<n { o[i] = Swift.abs(x[i]) }
        case .exp: for i in 0..<n { o[i] = Float.exp(x[i]) }
        case .gelu: lucid_host_gelu(x, o, n)
        case .geluTanh: lucid_host_gelu_tanh(x, o, n)
        case .sigmoid: lucid_host_sigmoid(x, o, n)
        case .tanh: lucid_host_tanh(x, o, n)
        case .silu: lucid_host_silu(x, o, n)
        default: for i in 0..<n { o[i] = op.apply(x[i]) }
        }
    }

    @inline(__always)
    static func unaryBackward(
        _ op: UnaryKernel, _ x: UnsafePointer<Float>, _ y: UnsafePointer<Float>,
        _ g: UnsafePointer<Float>, _ o: UnsafeMutablePointer<Float>, _ n: Int
    ) {
        switch op {
        case .relu: for i in 0..<n { o[i] = x[i] > 0 ? g[i] : 0 * g[i] }
        case .neg: for i in 0..<n { o[i] = -g[i] }
        case .abs:
            for i in 0..<n {
                let d: Float = x[i] > 0 ? 1 : (x[i] < 0 ? -1 : 0)
                o[i] = g[i] * d
            }
        case .exp: for i in 0..<n { o[i] = g[i] * y[i] }
        case .tanh: for i in 0..<n { o[i] = g[i] * (1 - y[i] * y[i]) }
        case .sigmoid: for i in 0..<n { o[i] = g[i] * (y[i] * (1 - y[i])) }
        case .gelu: lucid_host_gelu_backward(x, g, o, n)
        case .geluTanh: lucid_host_gelu_tanh_backward(x, g, o, n)
        case .silu: lucid_host_silu_backward(x, g, o, n)
        default: for i in 0..<n { o[i] = g[i] * op.derivative(x[i], y[i]) }
        }
    }
}

/// The float32 loops on contiguous bfloat16 tensors of one shape: blocks of values widen
/// (exactly) to float32 on the stack, run the float32 loop and round once on the way back,
/// which is what the generic kernel computes, element by element.
enum BFloat16Elementwise {
    @inline(__always)
    static func applies(_ out: TensorImpl, _ a: TensorImpl) -> Bool { FloatFastPath.applies(out, a, dtype: .bfloat16) }

    @inline(__always)
    static func applies(_ out: TensorImpl, _ a: TensorImpl, _ b: TensorImpl) -> Bool {
        FloatFastPath.applies(out, a, b, dtype: .bfloat16)
    }

    static let block = 1024

    @inline(__always)
    private static func bits(_ t: TensorImpl) -> UnsafePointer<UInt16> {
        UnsafePointer(HostBackend.address(t).assumingMemoryBound(to: UInt16.self))
    }

    @inline(__always)
    private static func outBits(_ t: TensorImpl) -> UnsafeMutablePointer<UInt16> {
        HostBackend.address(t).assumingMemoryBound(to: UInt16.self)
    }

    /// Runs `body` on float32 blocks of up to three widened inputs and one output; with
    /// `splat`, the third input is that one value everywhere (and `inputs.2` is not read).
    @inline(__always)
    private static func blocks(
        _ n: Int, _ inputs: (UnsafePointer<UInt16>, UnsafePointer<UInt16>?, UnsafePointer<UInt16>?),
        _ out: UnsafeMutablePointer<UInt16>, splat: Float? = nil,
        _ body: (UnsafePointer<Float>, UnsafePointer<Float>, UnsafePointer<Float>, UnsafeMutablePointer<Float>, Int) -> Void
    ) {
        HostThreads.forEachRange(n) { r in
            withUnsafeTemporaryAllocation(of: Float.self, capacity: 4 * block) { buf in
                let a = buf.baseAddress!, b = a + block, c = b + block, o = c + block
                if let splat { c.initialize(repeating: splat, count: block) }
                var i = r.lowerBound
                while i < r.upperBound {
                    let m = min(block, r.upperBound - i)
                    BFloat16FastPath.widen(inputs.0 + i, a, m)
                    if let p = inputs.1 { BFloat16FastPath.widen(p + i, b, m) }
                    if splat == nil, let p = inputs.2 { BFloat16FastPath.widen(p + i, c, m) }
                    body(a, b, c, o, m)
                    BFloat16FastPath.narrow(o, out + i, m)
                    i += m
                }
            }
        }
    }

    static func binary(_ op: BinaryKernel, _ a: TensorImpl, _ b: TensorImpl, _ out: TensorImpl) {
        blocks(out.numel, (bits(a), bits(b), nil), outBits(out)) { x, y, _, o, m in FloatFastPath.binary(op, x, y, o, m) }
    }

    static func binary(_ op: BinaryKernel, _ a: TensorImpl, scalar: Float, scalarFirst: Bool, _ out: TensorImpl) {
        blocks(out.numel, (bits(a), nil, nil), outBits(out)) { x, _, _, o, m in
            FloatFastPath.binary(op, x, scalar: scalar, scalarFirst: scalarFirst, o, m)
        }
    }

    static func unary(_ op: UnaryKernel, _ a: TensorImpl, _ out: TensorImpl) {
        blocks(out.numel, (bits(a), nil, nil), outBits(out)) { x, _, _, o, m in FloatFastPath.unary(op, x, o, m) }
    }

    /// `gradIn = grad · op'(x, y)`; `grad` contiguous, or one value everywhere.
    static func unaryBackward(_ op: UnaryKernel, x: TensorImpl, y: TensorImpl, grad: TensorImpl, _ out: TensorImpl) {
        let splat: Float? = FloatFastPath.splats(grad, out, dtype: .bfloat16) ? bfloatToFloat(bits(grad)[0]) : nil
        blocks(out.numel, (bits(x), bits(y), bits(grad)), outBits(out), splat: splat) { px, py, pg, o, m in
            FloatFastPath.unaryBackward(op, px, py, pg, o, m)
        }
    }
}

/// Comparisons and selections over a contiguous output whose operands are each contiguous
/// of the output's shape or one broadcast value (all strides 0, as a scalar operand is):
/// plain loops the compiler vectorises, on up to `HostThreads.current` threads.
enum DenseFastPath {
    /// How an operand is read: element i, or element 0 everywhere.
    @inline(__always)
    private static func layout(_ t: TensorImpl, _ out: TensorImpl) -> Bool? {
        if t.shape == out.shape && t.isContiguous { return false }
        if t.strides.allSatisfy({ $0 == 0 }) || t.numel == 1 { return true }
        return nil
    }

    static func compare(_ op: CompareKernel, _ a: TensorImpl, _ b: TensorImpl, into out: TensorImpl) -> Bool {
        guard a.dtype == .float32, b.dtype == .float32, out.isContiguous, out.numel > 0,
            let sa = layout(a, out), let sb = layout(b, out), !(sa && sb)
        else { return false }
        let pa = UnsafePointer(FloatFastPath.pointer(a)), pb = UnsafePointer(FloatFastPath.pointer(b))
        let po = HostBackend.address(out).assumingMemoryBound(to: UInt8.self)
        HostThreads.forEachRange(out.numel) { r in
            // One loop per op, outside the switch, so that each vectorises.
            switch op {
            case .eq: run(pa, pb, sa, sb, po, r) { $0 == $1 }
            case .ne: run(pa, pb, sa, sb, po, r) { $0 != $1 }
            case .lt: run(pa, pb, sa, sb, po, r) { $0 < $1 }
            case .le: run(pa, pb, sa, sb, po, r) { $0 <= $1 }
            case .gt: run(pa, pb, sa, sb, po, r) { $0 > $1 }
            case .ge: run(pa, pb, sa, sb, po, r) { $0 >= $1 }
            }
        }
        return true
    }

    @inline(__always)
    private static func run(
        _ pa: UnsafePointer<Float>, _ pb: UnsafePointer<Float>, _ sa: Bool, _ sb: Bool,
        _ po: UnsafeMutablePointer<UInt8>, _ r: Range<Int>, _ test: (Float, Float) -> Bool
    ) {
        switch (sa, sb) {
        case (false, false): for i in r { po[i] = test(pa[i], pb[i]) ? 1 : 0 }
        case (false, true): let y = pb[0]; for i in r { po[i] = test(pa[i], y) ? 1 : 0 }
        default: let x = pa[0]; for i in r { po[i] = test(x, pb[i]) ? 1 : 0 }
        }
    }

    static func select(_ cond: TensorImpl, _ a: TensorImpl, _ b: TensorImpl, into out: TensorImpl) -> Bool {
        guard cond.shape == out.shape, cond.isContiguous, out.isContiguous, out.numel > 0, a.dtype == out.dtype,
            b.dtype == out.dtype, let sa = layout(a, out), let sb = layout(b, out)
        else { return false }
        switch out.dtype.itemSize {
        case 4: select(UInt32.self, cond, a, b, sa, sb, out)
        case 2: select(UInt16.self, cond, a, b, sa, sb, out)
        case 8: select(UInt64.self, cond, a, b, sa, sb, out)
        default: select(UInt8.self, cond, a, b, sa, sb, out)
        }
        return true
    }

    /// The selection as a copy of `T`-sized bit patterns (every dtype of that size alike).
    private static func select<T: FixedWidthInteger>(
        _: T.Type, _ cond: TensorImpl, _ a: TensorImpl, _ b: TensorImpl,
        _ sa: Bool, _ sb: Bool, _ out: TensorImpl
    ) {
        let pc = UnsafePointer(HostBackend.address(cond).assumingMemoryBound(to: UInt8.self))
        let pa = UnsafePointer(HostBackend.address(a).assumingMemoryBound(to: T.self))
        let pb = UnsafePointer(HostBackend.address(b).assumingMemoryBound(to: T.self))
        let po = HostBackend.address(out).assumingMemoryBound(to: T.self)
        HostThreads.forEachRange(out.numel) { r in
            switch (sa, sb) {
            case (false, false): for i in r { po[i] = pc[i] != 0 ? pa[i] : pb[i] }
            case (false, true): let y = pb[0]; for i in r { po[i] = pc[i] != 0 ? pa[i] : y }
            case (true, false): let x = pa[0]; for i in r { po[i] = pc[i] != 0 ? x : pb[i] }
            case (true, true): let x = pa[0], y = pb[0]; for i in r { po[i] = pc[i] != 0 ? x : y }
            }
        }
    }
}

/// float32 binary ops whose operands broadcast along whole inner runs: a per-channel weight
/// times an [N, C, H, W] tensor, a bias row added to a matrix. The output is contiguous; over
/// the longest suffix of dimensions each operand is either laid out as the output or constant,
/// and the run loops of FloatFastPath take each stretch.
enum BroadcastRuns {
    static func binary(_ op: BinaryKernel, _ a: TensorImpl, _ b: TensorImpl, into out: TensorImpl) -> Bool {
        guard out.dtype == .float32, a.dtype == .float32, b.dtype == .float32, out.isContiguous, out.numel > 0 else {
            return false
        }
        let shape = out.shape, dense = Shape.contiguousStrides(shape)
        // The inner suffix: each operand dense (its strides equal the output's) or constant there.
        var split = shape.count, aDense = true, aConst = true, bDense = true, bConst = true
        while split > 0 {
            let d = split - 1
            let ad = aDense && (a.strides[d] == dense[d] || shape[d] == 1), ac = aConst && (a.strides[d] == 0 || shape[d] == 1)
            let bd = bDense && (b.strides[d] == dense[d] || shape[d] == 1), bc = bConst && (b.strides[d] == 0 || shape[d] == 1)
            guard (ad || ac) && (bd || bc) else { break }
            (aDense, aConst, bDense, bConst) = (ad, ac, bd, bc)
            split = d
        }
        let inner = shape[split...].reduce(1, *)
        guard inner >= 16, split < shape.count, !(aConst && bConst) else { return false }
        let outer = shape[..<split].reduce(1, *)
        let x = UnsafePointer(FloatFastPath.pointer(a)), y = UnsafePointer(FloatFastPath.pointer(b)), o = FloatFastPath.pointer(out)
        let outerShape = Array(shape[..<split]), aOuter = Array(a.strides[..<split]), bOuter = Array(b.strides[..<split])
        HostThreads.forEachRange(outer, grain: Swift.max(1, HostThreads.grain / inner), align: 1) { range in
            for p in range {
                // Offsets of outer position p in each operand.
                var rest = p, ia = 0, ib = 0
                for d in stride(from: split - 1, through: 0, by: -1) {
                    let i = rest % outerShape[d]
                    rest /= outerShape[d]
                    ia += i * aOuter[d]
                    ib += i * bOuter[d]
                }
                let po = o + p * inner
                if aConst {
                    FloatFastPath.binary(op, y + ib, scalar: x[ia], scalarFirst: true, po, inner)
                } else if bConst {
                    FloatFastPath.binary(op, x + ia, scalar: y[ib], scalarFirst: false, po, inner)
                } else {
                    FloatFastPath.binary(op, x + ia, y + ib, po, inner)
                }
            }
        }
        return true
    }
}
