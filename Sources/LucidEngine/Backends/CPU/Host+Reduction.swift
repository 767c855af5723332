/// Host reductions: sums and means over axes (accumulating in float64 or int64), and the
/// arg-reductions.
extension HostBackend: ReductionKernels {
    func reduce(_ op: ReduceKernel, _ a: TensorImpl, axes: [Int], into out: TensorImpl) {
        if FloatFastPath.reduce(op, a, axes: axes, into: out) { return }
        // bfloat16 and float16: the float32 loops on a widened copy (exact), their float32
        // sums rounded once into `out`, as the float64 loop below would store them.
        if a.dtype.isLowPrecision, a.isContiguous, a.numel > 0,
           let wide = try? TensorImpl.empty(a.shape, dtype: .float32, on: a.backend),
           let sums = out.dtype == .float32 && out.isContiguous ? out : try? TensorImpl.empty(out.shape, dtype: .float32, on: out.backend) {
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
