/// Python-style subscripts (ints, slices with steps, None, ..., integer tensors, boolean
/// masks), read (`subscripted`) and written (`assign`, and the places `InPlace.indexPut`
/// writes), with backward.
extension Indexing {
    /// One item of a Python subscript.
    package enum Item {
        case int(Int)
        case slice(start: Int?, stop: Int?, step: Int?)
        case newAxis
        case ellipsis
        case tensor(TensorImpl)
    }

    /// The view `a[items]` for basic items, followed by advanced (tensor) indexing with
    /// NumPy's placement rule: the broadcast index dimensions replace the indexed ones when
    /// those are adjacent, and lead the result otherwise.
    package static func subscripted(_ a: TensorImpl, _ items: [Item]) throws -> TensorImpl {
        let parsed = try parse(a, items)
        let (cshape, cstrides, coffset) = parsed.contiguous
        let fullShape = a.shape
        let basic = Autograd.record(parsed.view, "SliceBackward", [a]) { g in
            // Each view element is a distinct element of `a`: copy the gradient into place.
            let z = try Creation.full(fullShape, value: ScalarOperand(int: 0), dtype: g.dtype, device: g.device)
            z.backend.copy(g, into: z.view(shape: cshape, strides: cstrides, offset: coffset))
            return [z]
        }
        if parsed.advanced.isEmpty { return basic }  // a view: no precision of its own
        return try index.run(basic) { try advancedIndex($0, parsed.advanced) }
    }

    /// An advanced (tensor) item: the view dimension it indexes, that dimension's size, and
    /// the indices.
    typealias Advanced = (position: Int, size: Int, indices: HostIndex)

    /// `a[items]` taken apart: the view the basic items make (untracked), that view's geometry
    /// were `a` row-major, and the advanced items, each keeping its dimensions in the view.
    private static func parse(_ a: TensorImpl, _ items: [Item]) throws
        -> (view: TensorImpl, contiguous: (shape: [Int], strides: [Int], offset: Int), advanced: [Advanced])
    {
        let items = try masksAsBool(items)
        var consumed = 0, ellipses = 0
        for item in items {
            switch item {
            case .int, .slice: consumed += 1
            case .tensor(let t): consumed += t.dtype == .bool ? t.ndim : 1
            case .ellipsis: ellipses += 1
            case .newAxis: break
            }
        }
        guard ellipses <= 1 else { throw LucidError.index("an index can only have a single ellipsis ('...')") }
        guard consumed <= a.ndim else {
            throw LucidError.index("too many indices for tensor of dimension \(a.ndim) (got \(consumed))")
        }
        var expanded: [Item] = []
        for item in items {
            if case .ellipsis = item {
                expanded += [Item](repeating: .slice(start: nil, stop: nil, step: nil), count: a.ndim - consumed)
            } else {
                expanded.append(item)
            }
        }
        if ellipses == 0 { expanded += [Item](repeating: .slice(start: nil, stop: nil, step: nil), count: a.ndim - consumed) }

        // Basic indexing: one view. Tensor items keep their dimensions, remembered as (first
        // view dimension, index arrays) for the advanced step. Offsets and strides wrap rather
        // than trap: for a tensor with elements they address its storage and cannot overflow;
        // an empty tensor's dimensions may be too large for strides, but its view is never read.
        var shape: [Int] = [], strides: [Int] = [], offset = a.offset
        var cshape: [Int] = [], cstrides: [Int] = [], coffset = 0  // the same view of a contiguous a
        let contiguous = Shape.contiguousStrides(a.shape)
        var advanced: [Advanced] = []
        var d = 0
        for item in expanded {
            switch item {
            case .int(let i):
                let size = a.shape[d]
                guard i >= -size && i < size else {
                    throw LucidError.index("index \(i) is out of bounds for dimension \(d) with size \(size)")
                }
                let w = i < 0 ? i + size : i
                offset &+= w &* a.strides[d]; coffset &+= w &* contiguous[d]
                d += 1
            case .slice(let start, let stop, let step):
                let (s, n, st) = try sliceRange(start, stop, step, size: a.shape[d])
                offset &+= s &* a.strides[d]; coffset &+= s &* contiguous[d]
                shape.append(n); strides.append(a.strides[d] &* st)
                cshape.append(n); cstrides.append(contiguous[d] &* st)
                d += 1
            case .newAxis:
                shape.append(1); strides.append(0); cshape.append(1); cstrides.append(0)
            case .tensor(let t) where t.dtype == .bool && t.ndim == 0:
                // A 0-d mask adds a dimension holding the whole tensor once (true) or not at all.
                let hits = t.run(PlacementKernels.self, KernelCall(.nonzero, reads: [t], writes: []), "nonzero") {
                    $0.nonzero(t)
                }.count
                advanced.append((shape.count, 1, HostIndex(shape: [hits], values: [Int64](repeating: 0, count: hits))))
                shape.append(1); strides.append(0); cshape.append(1); cstrides.append(0)
            case .tensor(let t):
                try Ops.checkSameDevice(index.name, [a, t])
                let dims = t.dtype == .bool ? t.ndim : 1
                let sizes = Array(a.shape[d..<(d + dims)])
                let arrays =
                    try t.dtype == .bool
                    ? HostIndex.fromMask(t, sizes: sizes, firstDim: d)
                    : [try HostIndex.fromIntegers(t, op: index.name)]
                for (k, arr) in arrays.enumerated() {
                    advanced.append((shape.count, a.shape[d + k], arr))
                    shape.append(a.shape[d + k]); strides.append(a.strides[d + k])
                    cshape.append(a.shape[d + k]); cstrides.append(contiguous[d + k])
                }
                d += dims
            case .ellipsis:
                break
            }
        }
        return (a.view(shape: shape, strides: strides, offset: offset), (cshape, cstrides, coffset), advanced)
    }

    /// `items` with each uint8 tensor read as the bool mask `t != 0`: PyTorch (deprecated but
    /// still) takes a uint8 index as a mask, not as integer positions.
    private static func masksAsBool(_ items: [Item]) throws -> [Item] {
        guard items.contains(where: { if case .tensor(let t) = $0 { return t.dtype == .uint8 } else { return false } }) else {
            return items
        }
        return try items.map { item in
            guard case .tensor(let t) = item, t.dtype == .uint8 else { return item }
            return .tensor(try GradMode.with(false) { try Ops.cast(t.withRequiresGrad(false), to: .bool) })
        }
    }

    /// Where the elements of `a[items]` (items with tensors) sit in `a`'s storage: the storage
    /// offset at each position of the broadcast index dimensions (row-major), the sizes and
    /// strides of the other dimensions, the shape of `a[items]`, and the order of its
    /// dimensions that puts the index dimensions first.
    static func places(_ a: TensorImpl, _ items: [Item]) throws
        -> (offsets: [Int], shape: [Int], strides: [Int], indexed: [Int], order: [Int])
    {
        let (view, _, advanced) = try parse(a, items)
        let (bshape, indices) = try checkedIndices(advanced)
        var offsets = [Int](repeating: view.offset, count: indices.first?.count ?? 1)
        for (entry, values) in zip(advanced, indices) {
            let stride = view.strides[entry.position]
            for j in offsets.indices { offsets[j] &+= Int(values[j]) &* stride }
        }
        let positions = advanced.map(\.position)
        let rest = (0..<view.ndim).filter { !positions.contains($0) }
        let (shape, strides) = (rest.map { view.shape[$0] }, rest.map { view.strides[$0] })
        let nb = bshape.count
        guard let first = positions.first, first > 0, zip(positions, positions.dropFirst()).allSatisfy({ $1 == $0 + 1 }) else {
            return (offsets, shape, strides, bshape + shape, Array(0..<(nb + shape.count)))
        }
        let indexed = Array(shape[..<first]) + bshape + Array(shape[first...])
        return (offsets, shape, strides, indexed, Array(first..<(first + nb)) + Array(0..<first) + Array((first + nb)..<indexed.count))
    }

    /// The advanced items' indices broadcast together, row-major, negative ones wrapped, each
    /// checked against its dimension; and the broadcast shape.
    private static func checkedIndices(_ adv: [Advanced]) throws -> ([Int], [[Int64]]) {
        guard let head = adv.first else { return ([], []) }
        let bshape = try adv.dropFirst().reduce(head.indices.shape) { try Shape.broadcast($0, $1.indices.shape, op: index.name) }
        let all = try adv.map { entry -> [Int64] in
            var values = entry.indices.broadcast(to: bshape)
            let size = Int64(entry.size)
            for j in values.indices {
                let i = values[j]
                guard i >= -size && i < size else {
                    throw LucidError.index("index \(i) is out of bounds for dimension \(entry.position) with size \(size)")
                }
                if i < 0 { values[j] = i + size }
            }
            return values
        }
        return (bshape, all)
    }

    /// `a` with `values` written at `a[items]`, as a new tensor: Python's `a[items] = values`,
    /// or with `accumulate` torch's `index_put_(..., accumulate=True)` (added, repeated
    /// positions adding up). `values` is converted to `a`'s dtype and broadcast to the shape of
    /// `a[items]`. Where integer index tensors name a position more than once without
    /// `accumulate`, the last write wins, as on PyTorch's CPU. Gradients flow to `a` where
    /// nothing was written (everywhere with `accumulate`) and to `values` from the positions
    /// they were written to.
    package static func assign(_ a: TensorImpl, _ items: [Item], _ values: TensorImpl, accumulate: Bool) throws -> TensorImpl {
        try Ops.checkSameDevice(indexPut.name, [a, values])
        return try indexPut.run(a, values) { a, values in try assignBody(a, items, values, accumulate: accumulate) }
    }

    private static func assignBody(_ a: TensorImpl, _ items: [Item], _ values: TensorImpl, accumulate: Bool) throws -> TensorImpl {
        let op = indexPut.name
        try Ops.checkSameDevice(op, [a, values])
        // Each element's flat position, indexed like `a`: the positions the write goes to.
        let positions = try GradMode.with(false) {
            let ids = try Creation.arange(start: 0, end: Int64(a.numel), step: 1, dtype: .int64, device: a.device)
            return try subscripted(try ShapeOps.reshape(ids, a.shape), items)
        }
        guard let shape = try? Shape.broadcast(values.shape, positions.shape, op: op), shape == positions.shape else {
            throw LucidError.value("\(op): values of shape \(values.shape) cannot be broadcast to the indexed shape \(positions.shape)")
        }
        var where_ = try ShapeOps.reshape(positions, [-1])
        var what = try ShapeOps.reshape(try ShapeOps.expand(try Ops.cast(values, to: a.dtype), positions.shape), [-1])
        let integerItems = items.contains { if case .tensor(let t) = $0 { return t.dtype != .bool && t.dtype != .uint8 } else { return false } }
        if !accumulate && integerItems && where_.numel > 1 {
            // Only integer index tensors can repeat a position: keep each position's last write.
            let dense = try Ops.contiguous(where_)
            var flat = [Int64](repeating: 0, count: dense.numel)
            flat.withUnsafeMutableBytes { dense.backend.read(dense, into: $0) }
            var seen = Set<Int64>(), kept: [Int64] = []
            for j in stride(from: flat.count - 1, through: 0, by: -1) where seen.insert(flat[j]).inserted {
                kept.append(Int64(j))
            }
            if kept.count < flat.count {
                kept.reverse()
                let keep = try TensorImpl.empty([kept.count], dtype: .int64, on: a.backend)
                kept.withUnsafeBytes { keep.backend.write($0, into: keep) }
                where_ = try indexSelect(where_, dim: 0, index: keep)
                what = try indexSelect(what, dim: 0, index: keep)
            }
        }
        let written = try ShapeOps.reshape(try scatterAdd(what, dim: 0, index: where_, shape: [a.numel]), a.shape)
        if accumulate { return try Elementwise.binary(.add, a, written) }
        let hit = try GradMode.with(false) {
            let ones = try Creation.full([where_.numel], value: ScalarOperand(int: 1), dtype: .bool, device: a.device)
            return try ShapeOps.reshape(try scatterAdd(ones, dim: 0, index: where_, shape: [a.numel]), a.shape)
        }
        return try Comparison.`where`(hit, written, a)
    }

    /// Python slice semantics: (start, count, step), clamped to the dimension.
    static func sliceRange(_ start: Int?, _ stop: Int?, _ step: Int?, size: Int) throws -> (Int, Int, Int) {
        let st = step ?? 1
        guard st > 0 else { throw LucidError.value("slice step must be positive, got \(st)") }
        func clampIndex(_ v: Int?, _ dflt: Int) -> Int {
            guard let v else { return dflt }
            let w = v < 0 ? v + size : v
            return Swift.min(Swift.max(w, 0), size)
        }
        let s = clampIndex(start, 0), e = clampIndex(stop, size)
        let n = e > s ? (e - s - 1) / st + 1 : 0
        // With fewer than two elements the step never moves: 1 keeps stride · step (a view's
        // new stride) from overflowing for a huge step. With two or more, step < size.
        return (s, n, n < 2 ? 1 : st)
    }

    private static func advancedIndex(_ v: TensorImpl, _ adv: [Advanced]) throws -> TensorImpl {
        let (bshape, indices) = try checkedIndices(adv)
        let count = try Shape.numel(bshape)
        // Linear index into the advanced dimensions merged (row-major).
        var linear = [Int64](repeating: 0, count: count)
        var scale = 1
        for (entry, values) in zip(adv, indices).reversed() {
            for j in 0..<count { linear[j] += values[j] * Int64(scale) }
            scale *= entry.size
        }
        let positions = adv.map(\.position)
        let rest = (0..<v.ndim).filter { !positions.contains($0) }
        let merged = try ShapeOps.reshape(try ShapeOps.permute(v, positions + rest), [scale] + rest.map { v.shape[$0] })
        let idx = try TensorImpl.empty([count], dtype: .int64, on: v.backend)
        linear.withUnsafeBytes { idx.backend.write($0, into: idx) }
        let picked = try indexSelect(merged, dim: 0, index: idx)
        let result = try ShapeOps.reshape(picked, bshape + rest.map { v.shape[$0] })
        // Adjacent advanced dimensions stay where they were; otherwise they lead.
        let adjacent = zip(positions, positions.dropFirst()).allSatisfy { $1 == $0 + 1 }
        guard adjacent, let first = positions.first, first > 0 else { return result }
        let nb = bshape.count
        let before = Array(nb..<(nb + first)), batch = Array(0..<nb), after = Array((nb + first)..<result.ndim)
        return try ShapeOps.permute(result, before + batch + after)
    }
}

/// Integer indices held on the host with their shape, for the advanced-index arithmetic.
struct HostIndex {
    var shape: [Int]
    var values: [Int64]

    static func fromIntegers(_ t: TensorImpl, op: String) throws -> HostIndex {
        guard !t.dtype.isFloatingPoint else {
            throw LucidError.index("tensors used as indices must be integer or bool tensors, got \(t.dtype)")
        }
        let dense = try GradMode.with(false) { try Ops.contiguous(try Ops.cast(t.withRequiresGrad(false), to: .int64)) }
        var values = [Int64](repeating: 0, count: dense.numel)
        values.withUnsafeMutableBytes { dense.backend.read(dense, into: $0) }
        return HostIndex(shape: t.shape, values: values)
    }

    /// One index array per mask dimension, from the true positions of a bool mask that covers
    /// dimensions `firstDim...` of sizes `sizes`.
    static func fromMask(_ mask: TensorImpl, sizes: [Int], firstDim: Int) throws -> [HostIndex] {
        guard mask.shape == sizes else {
            throw LucidError.index(
                "the shape of the mask \(mask.shape) does not match the shape \(sizes) of the indexed tensor starting at dimension \(firstDim)")
        }
        let flat = mask.run(PlacementKernels.self, KernelCall(.nonzero, reads: [mask], writes: []), "nonzero") {
            $0.nonzero(mask)
        }
        let strides = Shape.contiguousStrides(sizes)
        return (0..<sizes.count).map { k in
            HostIndex(shape: [flat.count], values: flat.map { Int64(($0 / strides[k]) % Swift.max(sizes[k], 1)) })
        }
    }

    /// The values laid out over `target` (a broadcast of `shape`), row-major.
    func broadcast(to target: [Int]) -> [Int64] {
        if target == shape { return values }
        let lead = target.count - shape.count
        let own = Shape.contiguousStrides(shape)
        var strides = [Int](repeating: 0, count: target.count)
        for i in 0..<shape.count where shape[i] != 1 { strides[lead + i] = own[i] }
        return Shape.offsets(target, strides).map { values[$0] }
    }
}
