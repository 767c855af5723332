/// Host gathers, scatter-adds and the positions of true elements.
extension HostBackend: IndexingKernels, PlacementKernels {
    func gather(
        _ a: TensorImpl, dim: Int, index: TensorImpl, into out: TensorImpl,
        outOfRange: @escaping @Sendable (Int64) -> LucidError
    ) throws {
        if let bad = dispatch(a.dtype, GatherKernel(a: a, dim: dim, index: index, out: out)) { throw outOfRange(bad) }
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

    func put(_ values: TensorImpl, into dst: TensorImpl, at offsets: [Int], shape: [Int], strides: [Int]) {
        moveRows(dst, offsets, shape, strides, values, toStorage: true)
    }

    func take(_ src: TensorImpl, at offsets: [Int], shape: [Int], strides: [Int], into out: TensorImpl) {
        moveRows(src, offsets, shape, strides, out, toStorage: false)
    }
}

/// Moves elements between rows of a contiguous tensor and the places in `storage`'s memory
/// that `put` and `take` describe, as raw elements of the dtype's size.
private func moveRows(
    _ storage: TensorImpl, _ offsets: [Int], _ shape: [Int], _ strides: [Int], _ rows: TensorImpl,
    toStorage: Bool
) {
    switch storage.dtype.itemSize {
    case 1: moveRows(UInt8.self, storage, offsets, shape, strides, rows, toStorage)
    case 2: moveRows(UInt16.self, storage, offsets, shape, strides, rows, toStorage)
    case 4: moveRows(UInt32.self, storage, offsets, shape, strides, rows, toStorage)
    default: moveRows(UInt64.self, storage, offsets, shape, strides, rows, toStorage)
    }
}

private func moveRows<T>(
    _: T.Type, _ storage: TensorImpl, _ offsets: [Int], _ shape: [Int], _ strides: [Int],
    _ rows: TensorImpl, _ toStorage: Bool
) {
    let memory = HostBackend.base(of: storage.storage.buffer).assumingMemoryBound(to: T.self)
    let row = HostBackend.address(rows).assumingMemoryBound(to: T.self)
    if shape.isEmpty {  // one element a row: a mask's or an index's positions
        for (r, i) in offsets.enumerated() {
            if toStorage { memory[i] = row[r] } else { row[r] = memory[i] }
        }
        return
    }
    let loop = StridedLoop(shape: shape, strides: [strides])
    var r = 0
    for base in offsets {
        loop.forEachRun(bases: [base]) { o, n, s in
            var i = o[0]
            for _ in 0..<n {
                if toStorage { memory[i] = row[r] } else { row[r] = memory[i] }
                r += 1
                i &+= s[0]
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
        let pa = UnsafePointer(hostPointer(a, E.self)), po = hostPointer(out, E.self)
        let px = UnsafePointer(hostPointer(index, I64Element.self))
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
        let ps = UnsafePointer(hostPointer(src, E.self)), po = hostPointer(out, E.self)
        let px = UnsafePointer(hostPointer(index, I64Element.self))
        let step = out.strides[dim]
        let loop = StridedLoop(shape: index.shape, strides: [index.strides, src.strides, gatherStrides(out, dim)])
        if E.isFloat && E.Stored.self == E.Real.self {
            // float32 and float64 sum in their own type: straight into the zeroed output (the
            // same sums in the same order as through a separate accumulator). A run that adds
            // a row (or one value) at one index, as an embedding's gradient does, is one vector loop.
            let acc = UnsafeMutableRawPointer(po).assumingMemoryBound(to: E.Real.self)
            let values = UnsafeRawPointer(ps).assumingMemoryBound(to: E.Real.self)
            acc.update(repeating: 0, count: out.numel)
            loop.forEachRun(bases: [0, 0, 0]) { o, n, s in
                if s[0] == 0 && s[2] == 1 && (s[1] == 1 || s[1] == 0) {
                    let row = acc + (o[2] &+ Int(px[o[0]]) &* step), from = values + o[1]
                    if s[1] == 1 {
                        for j in 0..<n { row[j] += from[j] }
                    } else {
                        let v = from[0]
                        for j in 0..<n { row[j] += v }
                    }
                    return
                }
                var x = o[0], i = o[1], k = o[2]
                for _ in 0..<n {
                    acc[k &+ Int(px[x]) &* step] += values[i]
                    x &+= s[0]; i &+= s[1]; k &+= s[2]
                }
            }
        } else if E.isFloat {
            var acc = [E.Real](repeating: 0, count: out.numel)
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
