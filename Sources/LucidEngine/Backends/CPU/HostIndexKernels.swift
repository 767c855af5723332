/// Host kernels for comparisons, selection, arg-reductions, gather/scatter and nonzero.
extension HostBackend {
    func compare(_ op: CompareKernel, _ a: TensorImpl, _ b: TensorImpl, into out: TensorImpl) {
        dispatch(a.dtype, CompareElements(op: op, a: a, b: b, out: out))
    }

    func select(_ cond: TensorImpl, _ a: TensorImpl, _ b: TensorImpl, into out: TensorImpl) {
        dispatch(out.dtype, SelectElements(cond: cond, a: a, b: b, out: out))
    }

    func argReduce(max: Bool, _ a: TensorImpl, axis: Int, values: TensorImpl?, indices: TensorImpl) {
        dispatch(a.dtype, ArgReduceKernel(isMax: max, a: a, axis: axis, values: values, indices: indices))
    }

    func gather(_ a: TensorImpl, dim: Int, index: TensorImpl, into out: TensorImpl) -> Int64? {
        dispatch(a.dtype, GatherKernel(a: a, dim: dim, index: index, out: out))
    }

    func scatterAdd(_ src: TensorImpl, dim: Int, index: TensorImpl, into out: TensorImpl) {
        dispatch(src.dtype, ScatterAddKernel(src: src, dim: dim, index: index, out: out))
    }

    func nonzero(_ mask: TensorImpl) -> [Int] {
        let p = UnsafePointer(HostBackend.address(mask).assumingMemoryBound(to: UInt8.self))
        let loop = StridedLoop(shape: mask.shape, strides: [mask.strides])
        var positions: [Int] = []
        var flat = 0
        loop.forEachRun(bases: [0]) { o, n, s in
            var i = o[0]
            for _ in 0..<n {
                if p[i] != 0 { positions.append(flat) }
                flat += 1
                i &+= s[0]
            }
        }
        return positions
    }
}

@inline(__always)
private func typed<E: HostElement>(_ t: TensorImpl, _: E.Type) -> UnsafeMutablePointer<E.Stored> {
    HostBackend.address(t).assumingMemoryBound(to: E.Stored.self)
}

private struct CompareElements: ElementVisitor {
    let op: CompareKernel, a: TensorImpl, b: TensorImpl, out: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let pa = UnsafePointer(typed(a, E.self)), pb = UnsafePointer(typed(b, E.self))
        let po = typed(out, BoolElement.self)
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
        let pc = UnsafePointer(typed(cond, BoolElement.self))
        let pa = UnsafePointer(typed(a, E.self)), pb = UnsafePointer(typed(b, E.self)), po = typed(out, E.self)
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

private struct ArgReduceKernel: ElementVisitor {
    let isMax: Bool, a: TensorImpl, axis: Int, values: TensorImpl?, indices: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let pa = UnsafePointer(typed(a, E.self))
        let pi = typed(indices, I64Element.self)
        let pv = values.map { typed($0, E.self) }
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

/// Strides of `a` laid over `index`'s shape with `dim` zeroed: the offset of the element of
/// `a` at index's position before the gathered coordinate is added.
private func gatherStrides(_ a: TensorImpl, _ dim: Int) -> [Int] {
    var s = a.strides
    s[dim] = 0
    return s
}

private struct GatherKernel: ElementVisitor {
    let a: TensorImpl, dim: Int, index: TensorImpl, out: TensorImpl
    func visit<E: HostElement>(_: E.Type) -> Int64? {
        let pa = UnsafePointer(typed(a, E.self)), po = typed(out, E.self)
        let px = UnsafePointer(typed(index, I64Element.self))
        let size = Int64(a.shape[dim]), step = a.strides[dim]
        let loop = StridedLoop(shape: index.shape, strides: [index.strides, gatherStrides(a, dim), out.strides])
        var bad: Int64? = nil
        loop.forEachRun(bases: [0, 0, 0]) { o, n, s in
            guard bad == nil else { return }
            var x = o[0], i = o[1], k = o[2]
            for _ in 0..<n {
                let idx = px[x]
                guard idx >= 0 && idx < size else { bad = idx; return }
                po[k] = pa[i &+ Int(idx) &* step]
                x &+= s[0]; i &+= s[1]; k &+= s[2]
            }
        }
        return bad
    }
}

private struct ScatterAddKernel: ElementVisitor {
    let src: TensorImpl, dim: Int, index: TensorImpl, out: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let ps = UnsafePointer(typed(src, E.self)), po = typed(out, E.self)
        let px = UnsafePointer(typed(index, I64Element.self))
        let step = out.strides[dim]
        let loop = StridedLoop(shape: index.shape, strides: [index.strides, src.strides, gatherStrides(out, dim)])
        if E.isFloat {
            var acc = [Float](repeating: 0, count: out.numel)
            acc.withUnsafeMutableBufferPointer { accp in
                loop.forEachRun(bases: [0, 0, 0]) { o, n, s in
                    var x = o[0], i = o[1], k = o[2]
                    for _ in 0..<n {
                        accp[k &+ Int(px[x]) &* step] += E.float(ps, i)
                        x &+= s[0]; i &+= s[1]; k &+= s[2]
                    }
                }
            }
            for j in 0..<out.numel { E.setFloat(po, j, acc[j]) }
        } else {
            var acc = [Int64](repeating: 0, count: out.numel)
            acc.withUnsafeMutableBufferPointer { accp in
                loop.forEachRun(bases: [0, 0, 0]) { o, n, s in
                    var x = o[0], i = o[1], k = o[2]
                    for _ in 0..<n {
                        accp[k &+ Int(px[x]) &* step] &+= E.int(ps, i)
                        x &+= s[0]; i &+= s[1]; k &+= s[2]
                    }
                }
            }
            for j in 0..<out.numel { E.setInt(po, j, acc[j]) }
        }
    }
}
