/// Host reductions: sums and means over axes (accumulating in float64 or int64), and the
/// arg-reductions.
extension HostBackend: ReductionKernels {
    func reduce(_ op: ReduceKernel, _ a: TensorImpl, axes: [Int], into out: TensorImpl) {
        if FloatFastPath.reduce(op, a, axes: axes, into: out) { return }
        // bfloat16 and float16: the float32 loops on a widened copy (exact), their float32
        // sums rounded once into `out`, as the float64 loop below would store them.
        if a.dtype.isLowPrecision, a.isContiguous, a.numel > 0,
            let wide = try? TensorImpl.empty(a.shape, dtype: .float32, on: HostBackend.scratch(beside: a)),
            let sums = out.dtype == .float32 && out.isContiguous
                ? out : try? TensorImpl.empty(out.shape, dtype: .float32, on: HostBackend.scratch(beside: out))
        {
            copy(a, into: wide)
            if FloatFastPath.reduce(op, wide, axes: axes, into: sums) {
                if sums !== out { copy(sums, into: out) }
                return
            }
        }
        dispatch(a.dtype, ReduceSource(op: op, a: a, axes: axes, out: out))
    }

    func argReduce(max: Bool, _ a: TensorImpl, axis: Int, values: TensorImpl?, indices: TensorImpl) {
        dispatch(a.dtype, ArgReduceKernel(isMax: max, a: a, axis: axis, values: values, indices: indices))
    }
}

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
        if E.isFloat && E.Real.self == Double.self {
            // float64 sums compensated (Neumaier): a float64 accumulator alone would lose
            // what float64 inputs carry.
            var acc = [Double](repeating: 0, count: count), lost = [Double](repeating: 0, count: count)
            acc.withUnsafeMutableBufferPointer { accp in
                lost.withUnsafeMutableBufferPointer { lostp in
                    loop.forEachRun(bases: [0, 0]) { o, n, s in
                        var i = o[0], k = o[1]
                        for _ in 0..<n {
                            let x = Double(E.float(pa, i)), t = accp[k] + x
                            lostp[k] += abs(accp[k]) >= abs(x) ? (accp[k] - t) + x : (x - t) + accp[k]
                            accp[k] = t
                            i &+= s[0]; k &+= s[1]
                        }
                    }
                }
            }
            for j in 0..<count { acc[j] += lost[j] }
            if op == .mean { for j in 0..<count { acc[j] /= Double(reducedCount) } }
            dispatch(out.dtype, StoreDoubles(values: acc, out: out))
        } else if E.isFloat {
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
        for (j, v) in values.enumerated() { E.setFloat(p, j, E.Real(v)) }
    }
}

private struct StoreInts: ElementVisitor {
    let values: [Int64], out: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let p = HostBackend.address(out).assumingMemoryBound(to: E.Stored.self)
        for (j, v) in values.enumerated() { E.setInt(p, j, v) }
    }
}

private struct ArgReduceKernel: ElementVisitor {
    let isMax: Bool, a: TensorImpl, axis: Int, values: TensorImpl?, indices: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let pa = UnsafePointer(hostPointer(a, E.self))
        let pi = hostPointer(indices, I64Element.self)
        let pv = values.map { hostPointer($0, E.self) }
        var outer = a.shape, aStrides = a.strides
        let length = outer.remove(at: axis), step = aStrides.remove(at: axis)
        let vStrides = values?.strides ?? indices.strides
        let loop = StridedLoop(shape: outer, strides: [aStrides, indices.strides, vStrides])
        let isMax = isMax
        loop.forEachRun(bases: [0, 0, 0]) { o, n, s in
            var base = o[0], k = o[1], v = o[2]
            for _ in 0..<n {
                var best = 0
                if E.isFloat {
                    var bv = E.float(pa, base)
                    var q = base
                    for r in 1..<max(length, 1) {
                        q &+= step
                        if bv.isNaN { break }
                        let x = E.float(pa, q)
                        if x.isNaN || (isMax ? x > bv : x < bv) { bv = x; best = r }
                    }
                } else {
                    var bv = E.int(pa, base)
                    var q = base
                    for r in 1..<max(length, 1) {
                        q &+= step
                        let x = E.int(pa, q)
                        if isMax ? x > bv : x < bv { bv = x; best = r }
                    }
                }
                pi[k] = Int64(best)
                if let pv { pv[v] = pa[base &+ best &* step] }
                base &+= s[0]; k &+= s[1]; v &+= s[2]
            }
        }
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
            if part == 0 && reduced {
                part = 1
            } else if part == 1 && !reduced {
                part = 2
            } else if part == 2 && reduced {
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
    private static func reduceAroundChannels(
        _ op: ReduceKernel, _ a: TensorImpl, axes: [Int],
        into out: TensorImpl
    ) -> Bool {
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
            let v =
                dst.loadUnaligned(fromByteOffset: j * 4, as: SIMD16<Float>.self)
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
        guard n >= 2 * HostThreads.grain, HostThreads.current > 1 else {
            for b in 0..<blocks { total += blockSum(x, b * 4096, Swift.min(n, b * 4096 + 4096)) }
            return total
        }
        let partial = UnsafeMutablePointer<Double>.allocate(capacity: blocks)
        defer { partial.deallocate() }
        HostThreads.forEachRange(blocks, grain: HostThreads.grain / 4096, align: 1) { range in
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
