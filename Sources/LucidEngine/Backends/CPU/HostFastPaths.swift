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

    @inline(__always)
    static func pointer(_ t: TensorImpl) -> UnsafeMutablePointer<Float> {
        HostBackend.address(t).assumingMemoryBound(to: Float.self)
    }

    // An in-place op's output is its first operand. The loops below then read and write
    // through one pointer: with two equal pointers the vectoriser's overlap check fails and
    // the loop runs one element at a time.

    static func binary(_ op: BinaryKernel, _ a: TensorImpl, _ b: TensorImpl, _ out: TensorImpl) {
        let x = UnsafePointer(pointer(a)), y = UnsafePointer(pointer(b)), o = pointer(out)
        if x == UnsafePointer(o) {
            return HostThreads.forEachRange(out.numel) { r in binary(op, inPlace: o + r.lowerBound, y + r.lowerBound, r.count) }
        }
        HostThreads.forEachRange(out.numel) { r in binary(op, x + r.lowerBound, y + r.lowerBound, o + r.lowerBound, r.count) }
    }

    /// `out = a + alpha·b` in one pass (`out` may be `a`).
    static func addScaled(_ a: TensorImpl, _ b: TensorImpl, alpha: Float, _ out: TensorImpl) {
        let x = UnsafePointer(pointer(a)), y = UnsafePointer(pointer(b)), o = pointer(out)
        if x == UnsafePointer(o) {
            return HostThreads.forEachRange(out.numel) { r in for i in r { o[i] += alpha * y[i] } }
        }
        HostThreads.forEachRange(out.numel) { r in for i in r { o[i] = x[i] + alpha * y[i] } }
    }

    static func binary(_ op: BinaryKernel, _ a: TensorImpl, scalar: Float, scalarFirst: Bool, _ out: TensorImpl) {
        let x = UnsafePointer(pointer(a)), o = pointer(out)
        if x == UnsafePointer(o) && !scalarFirst {
            return HostThreads.forEachRange(out.numel) { r in binary(op, inPlace: o + r.lowerBound, scalar: scalar, r.count) }
        }
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

    /// `out = x > 0 ? x : slope·x`.
    static func leakyRelu(_ x: TensorImpl, slope: Float, _ out: TensorImpl) {
        let px = UnsafePointer(pointer(x)), o = pointer(out)
        HostThreads.forEachRange(out.numel) { r in
            for i in r { o[i] = px[i] > 0 ? px[i] : px[i] * slope }
        }
    }

    /// `gradIn = x > 0 ? grad : slope·grad`.
    static func leakyReluBackward(_ x: TensorImpl, grad: TensorImpl, slope: Float, _ out: TensorImpl) {
        let px = UnsafePointer(pointer(x)), pg = UnsafePointer(pointer(grad)), o = pointer(out)
        HostThreads.forEachRange(out.numel) { r in
            for i in r { o[i] = px[i] > 0 ? pg[i] : pg[i] * slope }
        }
    }

    // The loops, on `n` contiguous floats: shared by the float32 kernels and the bfloat16
    // ones, which run them on widened blocks.

    @inline(__always)
    static func binary(_ op: BinaryKernel, _ x: UnsafePointer<Float>, _ y: UnsafePointer<Float>,
                       _ o: UnsafeMutablePointer<Float>, _ n: Int) {
        switch op {
        case .add: for i in 0..<n { o[i] = x[i] + y[i] }
        case .sub: for i in 0..<n { o[i] = x[i] - y[i] }
        case .mul: for i in 0..<n { o[i] = x[i] * y[i] }
        case .div: for i in 0..<n { o[i] = x[i] / y[i] }
        case .pow, .maximum, .minimum, .bitwiseAnd, .bitwiseOr, .bitwiseXor:
            for i in 0..<n { o[i] = applyBinary(op, x[i], y[i]) }
        }
    }

    /// `o op= y` elementwise.
    @inline(__always)
    static func binary(_ op: BinaryKernel, inPlace o: UnsafeMutablePointer<Float>, _ y: UnsafePointer<Float>, _ n: Int) {
        switch op {
        case .add: for i in 0..<n { o[i] += y[i] }
        case .sub: for i in 0..<n { o[i] -= y[i] }
        case .mul: for i in 0..<n { o[i] *= y[i] }
        case .div: for i in 0..<n { o[i] /= y[i] }
        case .pow, .maximum, .minimum, .bitwiseAnd, .bitwiseOr, .bitwiseXor:
            for i in 0..<n { o[i] = applyBinary(op, o[i], y[i]) }
        }
    }

    /// `o op= s` elementwise.
    @inline(__always)
    static func binary(_ op: BinaryKernel, inPlace o: UnsafeMutablePointer<Float>, scalar s: Float, _ n: Int) {
        switch op {
        case .add: for i in 0..<n { o[i] += s }
        case .sub: for i in 0..<n { o[i] -= s }
        case .mul: for i in 0..<n { o[i] *= s }
        case .div: for i in 0..<n { o[i] /= s }
        default: for i in 0..<n { o[i] = applyBinary(op, o[i], s) }
        }
    }

    @inline(__always)
    static func binary(_ op: BinaryKernel, _ x: UnsafePointer<Float>, scalar s: Float, scalarFirst: Bool,
                       _ o: UnsafeMutablePointer<Float>, _ n: Int) {
        switch (op, scalarFirst) {
        case (.add, _): for i in 0..<n { o[i] = x[i] + s }
        case (.mul, _): for i in 0..<n { o[i] = x[i] * s }
        case (.sub, false): for i in 0..<n { o[i] = x[i] - s }
        case (.sub, true): for i in 0..<n { o[i] = s - x[i] }
        case (.div, false): for i in 0..<n { o[i] = x[i] / s }
        case (.div, true): for i in 0..<n { o[i] = s / x[i] }
        case (_, false): for i in 0..<n { o[i] = applyBinary(op, x[i], s) }
        case (_, true): for i in 0..<n { o[i] = applyBinary(op, s, x[i]) }
        }
    }

    @inline(__always)
    static func unary(_ op: UnaryKernel, _ x: UnsafePointer<Float>, _ o: UnsafeMutablePointer<Float>, _ n: Int) {
        switch op {
        case .neg: for i in 0..<n { o[i] = -x[i] }
        case .relu: for i in 0..<n { o[i] = x[i] < 0 ? 0 : x[i] }
        case .abs: for i in 0..<n { o[i] = Swift.abs(x[i]) }
        case .exp: for i in 0..<n { o[i] = LibM.exp(x[i]) }
        case .gelu: for i in 0..<n { o[i] = FastMath.gelu(x[i]) }
        case .sigmoid: for i in 0..<n { o[i] = FastMath.sigmoid(x[i]) }
        case .silu: lucid_host_silu(x, o, n)
        default: for i in 0..<n { o[i] = op.apply(x[i]) }
        }
    }

    @inline(__always)
    static func unaryBackward(_ op: UnaryKernel, _ x: UnsafePointer<Float>, _ y: UnsafePointer<Float>,
                              _ g: UnsafePointer<Float>, _ o: UnsafeMutablePointer<Float>, _ n: Int) {
        switch op {
        case .relu: for i in 0..<n { o[i] = x[i] > 0 ? g[i] : 0 * g[i] }
        case .neg: for i in 0..<n { o[i] = -g[i] }
        case .exp: for i in 0..<n { o[i] = g[i] * y[i] }
        case .tanh: for i in 0..<n { o[i] = g[i] * (1 - y[i] * y[i]) }
        case .sigmoid: for i in 0..<n { o[i] = g[i] * (y[i] * (1 - y[i])) }
        case .gelu: for i in 0..<n { o[i] = g[i] * FastMath.geluDerivative(x[i]) }
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

    /// Runs `body` on float32 blocks of up to three widened inputs and one output.
    @inline(__always)
    private static func blocks(_ n: Int, _ inputs: (UnsafePointer<UInt16>, UnsafePointer<UInt16>?, UnsafePointer<UInt16>?),
                               _ out: UnsafeMutablePointer<UInt16>,
                               _ body: (UnsafePointer<Float>, UnsafePointer<Float>, UnsafePointer<Float>, UnsafeMutablePointer<Float>, Int) -> Void) {
        HostThreads.forEachRange(n) { r in
            withUnsafeTemporaryAllocation(of: Float.self, capacity: 4 * block) { buf in
                let a = buf.baseAddress!, b = a + block, c = b + block, o = c + block
                var i = r.lowerBound
                while i < r.upperBound {
                    let m = min(block, r.upperBound - i)
                    BFloat16FastPath.widen(inputs.0 + i, a, m)
                    if let p = inputs.1 { BFloat16FastPath.widen(p + i, b, m) }
                    if let p = inputs.2 { BFloat16FastPath.widen(p + i, c, m) }
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

    static func unaryBackward(_ op: UnaryKernel, x: TensorImpl, y: TensorImpl, grad: TensorImpl, _ out: TensorImpl) {
        blocks(out.numel, (bits(x), bits(y), bits(grad)), outBits(out)) { px, py, pg, o, m in
            FloatFastPath.unaryBackward(op, px, py, pg, o, m)
        }
    }
}

/// Contiguous conversions between float32 and bfloat16, written branch-free so they
/// vectorise (autocast casts every operand of a lower-precision op). Bit-exact with
/// `bfloat16Bits(fromFloat32Bits:)`.
enum BFloat16FastPath {
    static func applies(_ src: TensorImpl, _ dst: TensorImpl) -> Bool {
        src.isContiguous && dst.isContiguous
            && ((src.dtype == .float32 && dst.dtype == .bfloat16) || (src.dtype == .bfloat16 && dst.dtype == .float32))
    }

    static func copy(_ src: TensorImpl, into dst: TensorImpl) {
        if src.dtype == .float32 {
            let x = UnsafePointer(HostBackend.address(src).assumingMemoryBound(to: Float.self))
            let o = HostBackend.address(dst).assumingMemoryBound(to: UInt16.self)
            HostThreads.forEachRange(src.numel) { r in narrow(x + r.lowerBound, o + r.lowerBound, r.count) }
        } else {
            let x = UnsafePointer(HostBackend.address(src).assumingMemoryBound(to: UInt16.self))
            let o = HostBackend.address(dst).assumingMemoryBound(to: Float.self)
            HostThreads.forEachRange(src.numel) { r in widen(x + r.lowerBound, o + r.lowerBound, r.count) }
        }
    }

    /// `n` floats rounded to bfloat16 bits, on the widest vector unit this CPU has.
    @inline(__always)
    static func narrow(_ src: UnsafePointer<Float>, _ dst: UnsafeMutablePointer<UInt16>, _ n: Int) {
        lucid_host_narrow_bf16(src, dst, n)
    }

    /// `n` bfloat16 values widened (exactly) to floats.
    @inline(__always)
    static func widen(_ src: UnsafePointer<UInt16>, _ dst: UnsafeMutablePointer<Float>, _ n: Int) {
        let d = UnsafeMutableRawPointer(dst).assumingMemoryBound(to: UInt32.self)
        for i in 0..<n { d[i] = UInt32(src[i]) << 16 }
    }
}

extension FloatFastPath {
    /// Sum or mean of a contiguous float32 tensor over axes that, once size-1 dimensions are
    /// set aside, form one run: the tensor is then [outer, reduced, inner] and each output
    /// sums `reduced` contiguous values (inner == 1) or rows of `inner` values. Blocks
    /// accumulate in float32 vector lanes and the blocks in float64, as accurate as the
    /// generic kernel's float64 running sum to well within float32 rounding. False when the
    /// axes do not fit that form.
    static func reduce(_ op: ReduceKernel, _ a: TensorImpl, axes: [Int], into out: TensorImpl) -> Bool {
        guard a.dtype == .float32, out.dtype == .float32, a.isContiguous, out.isContiguous, a.numel > 0 else { return false }
        // (outer, reduced, inner) sizes, walking the dimensions that are not 1.
        var sizes = [1, 1, 1], part = 0
        for (d, n) in a.shape.enumerated() where n != 1 {
            let reduced = axes.contains(d)
            if part == 0 && reduced { part = 1 } else if part == 1 && !reduced { part = 2 } else if part == 2 && reduced {
                return reduceAroundChannels(op, a, axes: axes, into: out)
            }
            sizes[part] &*= n
        }
        let (outer, count, inner) = (sizes[0], sizes[1], sizes[2])
        let x = UnsafePointer(pointer(a)), o = pointer(out)
        let divisor = op == .mean ? Double(count) : 1
        if inner == 1 {
            // Long runs are summed in parallel blocks, many short ones in parallel runs.
            guard count < 2 * HostThreads.streamingGrain else {
                for p in 0..<outer { o[p] = Float(sum(x + p * count, count) / divisor) }
                return true
            }
            HostThreads.forEachRange(outer, grain: Swift.max(1, HostThreads.streamingGrain / count), align: 1) { range in
                for p in range { o[p] = Float(sum(x + p * count, count) / divisor) }
            }
            return true
        }
        // Rows of `inner` values: a block of rows adds up in float32, the blocks in float64.
        let rowsPerBlock = 64
        var block = [Float](repeating: 0, count: inner), total = [Double](repeating: 0, count: inner)
        block.withUnsafeMutableBufferPointer { bp in
            total.withUnsafeMutableBufferPointer { tp in
                let b = bp.baseAddress!, t = tp.baseAddress!
                for p in 0..<outer {
                    t.update(repeating: 0, count: inner)
                    var r = 0
                    while r < count {
                        let rows = min(rowsPerBlock, count - r)
                        b.update(repeating: 0, count: inner)
                        for row in r..<(r + rows) { accumulate(x + (p * count + row) * inner, into: b, inner) }
                        for j in 0..<inner { t[j] += Double(b[j]) }
                        r += rows
                    }
                    let dst = o + p * inner
                    for j in 0..<inner { dst[j] = Float(t[j] / divisor) }
                }
            }
        }
        return true
    }

    /// Reductions over the dimensions on both sides of a kept block, as a bias's or a
    /// per-channel weight's gradient sums an [N, C, H, W] tensor over N, H and W: per kept
    /// position, the contiguous runs of the trailing reduced dimensions (SIMD sums widened to
    /// double) added over the leading ones; kept positions run in parallel.
    private static func reduceAroundChannels(_ op: ReduceKernel, _ a: TensorImpl, axes: [Int],
                                             into out: TensorImpl) -> Bool {
        // (leading reduced, kept, trailing reduced): every dimension of size > 1 in that order.
        var sizes = [1, 1, 1], part = 0
        for (d, n) in a.shape.enumerated() where n != 1 {
            let reduced = axes.contains(d)
            let want = part == 1 ? !reduced : reduced
            if !want {
                part += 1
                if part > 2 || (part == 1 && reduced) || (part == 2 && !reduced) { return false }
            }
            sizes[part] &*= n
        }
        let (lead, kept, run) = (sizes[0], sizes[1], sizes[2])
        guard run >= 8 else { return false }
        let x = UnsafePointer(pointer(a)), o = pointer(out)
        let divisor = op == .mean ? Double(lead * run) : 1
        HostThreads.forEachRange(kept, grain: Swift.max(1, HostThreads.grain / (lead * run)), align: 1) { range in
            for c in range {
                var total = 0.0
                for n in 0..<lead { total += FloatRows.sum(x + (n * kept + c) * run, run) }
                o[c] = Float(total / divisor)
            }
        }
        return true
    }

    /// `acc[j] += x[j]` for `n` floats, 16 lanes at a time.
    @inline(__always)
    private static func accumulate(_ x: UnsafePointer<Float>, into acc: UnsafeMutablePointer<Float>, _ n: Int) {
        let src = UnsafeRawPointer(x), dst = UnsafeMutableRawPointer(acc)
        var j = 0
        while j + 16 <= n {
            let v = dst.loadUnaligned(fromByteOffset: j * 4, as: SIMD16<Float>.self)
                + src.loadUnaligned(fromByteOffset: j * 4, as: SIMD16<Float>.self)
            dst.storeBytes(of: v, toByteOffset: j * 4, as: SIMD16<Float>.self)
            j += 16
        }
        while j < n { acc[j] += x[j]; j += 1 }
    }

    /// The sum of `n` contiguous floats: blocks of 4096 in four 16-lane float32
    /// accumulators, the block sums added in float64 in order. A long run's blocks are summed
    /// in parallel, then added in that same order: the result does not depend on the threads.
    private static func sum(_ x: UnsafePointer<Float>, _ n: Int) -> Double {
        let blocks = (n + 4095) / 4096
        var total = 0.0
        guard n >= 2 * HostThreads.streamingGrain, HostThreads.current > 1 else {
            for b in 0..<blocks { total += blockSum(x, b * 4096, Swift.min(n, b * 4096 + 4096)) }
            return total
        }
        let partial = UnsafeMutablePointer<Double>.allocate(capacity: blocks)
        defer { partial.deallocate() }
        HostThreads.forEachRange(blocks, grain: HostThreads.streamingGrain / 4096, align: 1) { range in
            for b in range { partial[b] = blockSum(x, b * 4096, Swift.min(n, b * 4096 + 4096)) }
        }
        for b in 0..<blocks { total += partial[b] }
        return total
    }

    /// The sum of x[i..<end] (one block): four 16-lane float32 accumulators, then the
    /// elements past the last whole 64 in float64.
    @inline(__always)
    private static func blockSum(_ x: UnsafePointer<Float>, _ i: Int, _ end: Int) -> Double {
        let raw = UnsafeRawPointer(x)
        var a0 = SIMD16<Float>(), a1 = SIMD16<Float>(), a2 = SIMD16<Float>(), a3 = SIMD16<Float>()
        var j = i
        while j + 64 <= end {
            a0 += raw.loadUnaligned(fromByteOffset: j * 4, as: SIMD16<Float>.self)
            a1 += raw.loadUnaligned(fromByteOffset: (j + 16) * 4, as: SIMD16<Float>.self)
            a2 += raw.loadUnaligned(fromByteOffset: (j + 32) * 4, as: SIMD16<Float>.self)
            a3 += raw.loadUnaligned(fromByteOffset: (j + 48) * 4, as: SIMD16<Float>.self)
            j += 64
        }
        var s = Double(((a0 + a1) + (a2 + a3)).sum())
        while j < end { s += Double(x[j]); j += 1 }
        return s
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
              let sa = layout(a, out), let sb = layout(b, out), !(sa && sb) else { return false }
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
    private static func run(_ pa: UnsafePointer<Float>, _ pb: UnsafePointer<Float>, _ sa: Bool, _ sb: Bool,
                            _ po: UnsafeMutablePointer<UInt8>, _ r: Range<Int>, _ test: (Float, Float) -> Bool) {
        switch (sa, sb) {
        case (false, false): for i in r { po[i] = test(pa[i], pb[i]) ? 1 : 0 }
        case (false, true): let y = pb[0]; for i in r { po[i] = test(pa[i], y) ? 1 : 0 }
        default: let x = pa[0]; for i in r { po[i] = test(x, pb[i]) ? 1 : 0 }
        }
    }

    static func select(_ cond: TensorImpl, _ a: TensorImpl, _ b: TensorImpl, into out: TensorImpl) -> Bool {
        guard cond.shape == out.shape, cond.isContiguous, out.isContiguous, out.numel > 0, a.dtype == out.dtype,
              b.dtype == out.dtype, let sa = layout(a, out), let sb = layout(b, out) else { return false }
        switch out.dtype.itemSize {
        case 4: select(UInt32.self, cond, a, b, sa, sb, out)
        case 2: select(UInt16.self, cond, a, b, sa, sb, out)
        case 8: select(UInt64.self, cond, a, b, sa, sb, out)
        default: select(UInt8.self, cond, a, b, sa, sb, out)
        }
        return true
    }

    /// The selection as a copy of `T`-sized bit patterns (every dtype of that size alike).
    private static func select<T: FixedWidthInteger>(_: T.Type, _ cond: TensorImpl, _ a: TensorImpl, _ b: TensorImpl,
                                                     _ sa: Bool, _ sb: Bool, _ out: TensorImpl) {
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
