/// gather / index_select / embedding and their adjoint scatter_add, with backward. The
/// Python-style subscripts are in Subscripts.swift.
package enum Indexing {
    static let gather = OpInfo("gather", .none)
    static let scatterAdd = OpInfo("scatter_add", .none)
    static let indexSelect = OpInfo("index_select", .none)
    static let embedding = OpInfo("embedding", .none)
    static let index = OpInfo("index", .none)
    static let indexPut = OpInfo("index_put", .none)
    /// The public ops (scatter_add only serves gather's and index_put's backward).
    static let infos = [gather, indexSelect, embedding, index, indexPut]

    /// An integer index tensor as int64 (bool and floating indices are refused).
    private static func integerIndex(_ t: TensorImpl, op: String) throws -> TensorImpl {
        guard !t.dtype.isFloatingPoint && t.dtype != .bool else {
            throw LucidError.type("\(op): index must be an integer tensor (int32 or int64), got \(t.dtype)")
        }
        return try GradMode.with(false) { try Ops.cast(t.withRequiresGrad(false), to: .int64) }
    }

    /// torch.gather: `out[i][j] = a[index[i][j]][j]` for dim 0, and so on.
    package static func gather(_ a: TensorImpl, dim: Int, index: TensorImpl) throws -> TensorImpl {
        try gather.run(a, index) { a, index in try gatherBody(a, dim: dim, index: index) }
    }

    private static func gatherBody(_ a: TensorImpl, dim: Int, index: TensorImpl) throws -> TensorImpl {
        let op = gather.name
        try Ops.checkSameDevice(op, [a, index])
        let axis = try Shape.wrapDim(dim, ndim: a.ndim, op: op)
        let idx = try integerIndex(index, op: op)
        let x = a.ndim == 0 ? a.view(shape: [1], strides: [1]) : a
        let ix = idx.ndim == 0 ? idx.view(shape: [1], strides: [1]) : idx
        guard ix.ndim == x.ndim else {
            throw LucidError.value("gather: index must have as many dimensions as the input (\(a.ndim)), got shape \(index.shape)")
        }
        for d in 0..<x.ndim where d != axis && ix.shape[d] > x.shape[d] {
            throw LucidError.value("gather: index shape \(index.shape) is larger than the input shape \(a.shape) in dimension \(d)")
        }
        let out = try TensorImpl.empty(ix.shape, dtype: x.dtype, on: x.backend)
        let size = x.shape[axis]
        try out.run(IndexingKernels.self, KernelCall(.gather(dim: axis), reads: [x, ix], writes: [out]), "gather") {
            try $0.gather(x, dim: axis, index: ix, into: out) {
                LucidError.index("gather: index \($0) is out of bounds for dimension \(axis) with size \(size)")
            }
        }
        let result = idx.ndim == 0 ? out.view(shape: [], strides: []) : out
        let xShape = x.shape, aShape = a.shape
        return Autograd.record(result, Autograd.name(gather), [a], saved: [ix]) { g in
            [try ShapeOps.reshape(try scatterAdd(try ShapeOps.reshape(g, ix.shape), dim: axis, index: ix, shape: xShape), aShape)]
        }
    }

    /// A zero tensor of `shape` with `src` added at the positions `index` names along `dim`
    /// (torch.scatter_add on zeros); the adjoint of gather. Indices must be in range.
    static func scatterAdd(_ src: TensorImpl, dim: Int, index: TensorImpl, shape: [Int]) throws -> TensorImpl {
        let out = try TensorImpl.empty(shape, dtype: src.dtype, on: src.backend)
        try out.run(IndexingKernels.self, KernelCall(.scatterAdd(dim: dim), reads: [src, index], writes: [out]), "scatter_add") {
            try $0.scatterAdd(src, dim: dim, index: index, into: out)
        }
        return Autograd.record(out, Autograd.name(scatterAdd), [src], saved: [index]) { g in [try gather(g, dim: dim, index: index)] }
    }

    /// torch.index_select: the slices of `a` along `dim` at the positions in the 1-D `index`.
    package static func indexSelect(_ a: TensorImpl, dim: Int, index: TensorImpl) throws -> TensorImpl {
        try indexSelect.run(a, index) { a, index in try indexSelectBody(a, dim: dim, index: index) }
    }

    private static func indexSelectBody(_ a: TensorImpl, dim: Int, index: TensorImpl) throws -> TensorImpl {
        let op = indexSelect.name
        try Ops.checkSameDevice(op, [a, index])
        guard index.ndim <= 1 else {
            throw LucidError.value("index_select: index must be 0-d or 1-D, got shape \(index.shape)")
        }
        let axis = try Shape.wrapDim(dim, ndim: a.ndim, op: op)
        let idx = try integerIndex(index, op: op)
        let x = a.ndim == 0 ? a.view(shape: [1], strides: [1]) : a
        let n = idx.numel
        var shape = x.shape
        shape[axis] = n
        var strides = [Int](repeating: 0, count: x.ndim)
        strides[axis] = idx.ndim == 0 ? 0 : idx.strides[0]
        let spread = idx.view(shape: shape, strides: strides)
        let out = try TensorImpl.empty(shape, dtype: x.dtype, on: x.backend)
        let size = x.shape[axis]
        try out.run(IndexingKernels.self, KernelCall(.gather(dim: axis), reads: [x, spread], writes: [out]), "gather") {
            try $0.gather(x, dim: axis, index: spread, into: out) {
                LucidError.index("index_select: index \($0) is out of bounds for dimension \(axis) with size \(size)")
            }
        }
        let result = a.ndim == 0 ? out.view(shape: [], strides: []) : out
        let xShape = x.shape, aShape = a.shape
        return Autograd.record(result, Autograd.name(indexSelect), [a], saved: [spread]) { g in
            [try ShapeOps.reshape(try scatterAdd(try ShapeOps.reshape(g, shape), dim: axis, index: spread, shape: xShape), aShape)]
        }
    }

    /// Rows of `weight` ([num_embeddings, dim]) at `indices` (any shape): [*indices.shape, dim].
    /// Rows at `paddingIndex` receive no gradient.
    package static func embedding(_ weight: TensorImpl, _ indices: TensorImpl, paddingIndex: Int?) throws -> TensorImpl {
        try embedding.run(weight, indices) { w, i in try embeddingBody(w, i, paddingIndex: paddingIndex) }
    }

    private static func embeddingBody(_ weight: TensorImpl, _ indices: TensorImpl, paddingIndex: Int?) throws -> TensorImpl {
        guard weight.ndim == 2 else {
            throw LucidError.value("embedding: weight must be 2-D [num_embeddings, embedding_dim], got shape \(weight.shape)")
        }
        let idx = try integerIndex(indices, op: embedding.name)
        var pad: Int? = nil
        if let p = paddingIndex {
            guard p >= -weight.shape[0] && p < weight.shape[0] else {
                throw LucidError.value("embedding: padding_idx \(p) is out of range for \(weight.shape[0]) embeddings")
            }
            pad = p < 0 ? p + weight.shape[0] : p
        }
        let flat = try ShapeOps.reshape(idx, [-1])
        let rows = try GradMode.with(false) { try indexSelect(weight.withRequiresGrad(false), dim: 0, index: flat) }
        let out = try ShapeOps.reshape(rows, indices.shape + [weight.shape[1]])
        return Autograd.record(out, Autograd.name(embedding), [weight], saved: [flat]) { g in
            var g2 = try ShapeOps.reshape(g, [flat.numel, weight.shape[1]])
            if let pad {
                let hit = try ShapeOps.reshape(try Comparison.compare(.eq, flat, scalar: ScalarOperand(int: Int64(pad))), [flat.numel, 1])
                g2 = try Comparison.where(hit, scalar: ScalarOperand(int: 0), g2)
            }
            let spread = flat.view(shape: g2.shape, strides: [flat.strides[0], 0])
            return [try scatterAdd(g2, dim: 0, index: spread, shape: weight.shape)]
        }
    }
}
