/// Views and layout: reshape, view, transpose, permute, contiguous. Views share storage.
package enum ShapeOps {
    static let reshape = OpInfo("reshape", .view)
    static let view = OpInfo("view", .view)
    static let transpose = OpInfo("transpose", .view)
    static let permute = OpInfo("permute", .view)
    static let contiguous = OpInfo("contiguous", .view)

    /// Resolves one -1 and checks the element count.
    static func inferShape(_ shape: [Int], numel: Int, op: String) throws -> [Int] {
        var out = shape
        var inferred: Int? = nil
        var known = 1
        for (i, s) in shape.enumerated() {
            if s == -1 {
                guard inferred == nil else { throw LucidError.value("\(op): only one dimension can be -1, got \(shape)") }
                inferred = i
            } else if s < 0 {
                throw LucidError.value("\(op): invalid dimension \(s) in shape \(shape)")
            } else {
                let (m, o) = known.multipliedReportingOverflow(by: s)
                guard !o else { throw LucidError.value("\(op): shape \(shape) has too many elements") }
                known = m
            }
        }
        if let i = inferred {
            guard known != 0, numel % known == 0 else {
                throw LucidError.value("\(op): shape \(shape) is invalid for input of size \(numel)")
            }
            out[i] = numel / known
        } else if known != numel {
            throw LucidError.value("\(op): shape \(shape) is invalid for input of size \(numel)")
        }
        _ = try Shape.numel(out)  // (an empty tensor's other dimensions are bounded too)
        return out
    }

    /// Strides that let `newShape` view memory laid out as (oldShape, oldStrides), or nil when
    /// only a copy can produce it (the rule of PyTorch's `view`).
    static func viewStrides(oldShape: [Int], oldStrides: [Int], newShape: [Int]) -> [Int]? {
        var numel = 1
        for s in oldShape { numel &*= s }
        if numel == 0 || oldShape.isEmpty { return Shape.contiguousStrides(newShape) }
        var newStrides = [Int](repeating: 0, count: newShape.count)
        var viewD = newShape.count - 1
        var chunkBase = oldStrides[oldShape.count - 1]
        var tensorNumel = 1, viewNumel = 1
        for d in stride(from: oldShape.count - 1, through: 0, by: -1) {
            tensorNumel &*= oldShape[d]
            if d == 0 || (oldShape[d - 1] != 1 && oldStrides[d - 1] != tensorNumel &* chunkBase) {
                while viewD >= 0 && (viewNumel < tensorNumel || newShape[viewD] == 1) {
                    newStrides[viewD] = viewNumel &* chunkBase
                    viewNumel &*= newShape[viewD]
                    viewD -= 1
                }
                if viewNumel != tensorNumel { return nil }
                if d > 0 {
                    chunkBase = oldStrides[d - 1]
                    tensorNumel = 1
                    viewNumel = 1
                }
            }
        }
        return viewD == -1 ? newStrides : nil
    }

    /// A view when the strides allow it, a contiguous copy otherwise.
    package static func reshape(_ a: TensorImpl, _ shape: [Int]) throws -> TensorImpl {
        let target = try inferShape(shape, numel: a.numel, op: reshape.name)
        let out: TensorImpl
        if let s = viewStrides(oldShape: a.shape, oldStrides: a.strides, newShape: target) {
            out = a.view(shape: target, strides: s)
        } else {
            let dense = try GradMode.with(false) { try Ops.contiguous(a) }
            out = dense.view(shape: target, strides: Shape.contiguousStrides(target))
        }
        let shape = a.shape
        return Autograd.record(out, Autograd.name(reshape), [a]) { g in [try reshape(g, shape)] }
    }

    /// Always a view; throws when the layout does not allow one.
    package static func view(_ a: TensorImpl, _ shape: [Int]) throws -> TensorImpl {
        let target = try inferShape(shape, numel: a.numel, op: view.name)
        guard let s = viewStrides(oldShape: a.shape, oldStrides: a.strides, newShape: target) else {
            throw LucidError.runtime(
                "view: shape "
                    + "\(target) is not compatible with the input's shape \(a.shape) and strides \(a.strides); use reshape, or call "
                    + "contiguous() first"
            )
        }
        let shape = a.shape
        return Autograd.record(a.view(shape: target, strides: s), Autograd.name(view), [a]) { g in [try reshape(g, shape)] }
    }

    package static func transpose(_ a: TensorImpl, _ d0: Int, _ d1: Int) throws -> TensorImpl {
        let i = try Shape.wrapDim(d0, ndim: a.ndim, op: transpose.name)
        let j = try Shape.wrapDim(d1, ndim: a.ndim, op: transpose.name)
        var shape = a.shape, strides = a.strides
        if a.ndim > 0 {
            shape.swapAt(i, j)
            strides.swapAt(i, j)
        }
        return Autograd.record(a.view(shape: shape, strides: strides), Autograd.name(transpose), [a]) { g in
            [try transpose(g, d0, d1)]
        }
    }

    package static func permute(_ a: TensorImpl, _ dims: [Int]) throws -> TensorImpl {
        guard dims.count == a.ndim else {
            throw LucidError.value("permute: expected \(a.ndim) dimensions for a tensor of shape \(a.shape), got \(dims)")
        }
        var seen = Set<Int>()
        var wrapped: [Int] = []
        for d in dims {
            let w = try Shape.wrapDim(d, ndim: a.ndim, op: permute.name)
            guard seen.insert(w).inserted else {
                throw LucidError.value("permute: dimension \(d) appears more than once in \(dims)")
            }
            wrapped.append(w)
        }
        let out = a.view(shape: wrapped.map { a.shape[$0] }, strides: wrapped.map { a.strides[$0] })
        var inverse = [Int](repeating: 0, count: wrapped.count)
        for (i, d) in wrapped.enumerated() { inverse[d] = i }
        return Autograd.record(out, Autograd.name(permute), [a]) { g in [try permute(g, inverse)] }
    }
}

/// squeeze, unsqueeze, expand, flatten, narrow, cat, stack, split and chunk.
extension ShapeOps {
    static let squeeze = OpInfo("squeeze", .view)
    static let unsqueeze = OpInfo("unsqueeze", .view)
    static let expand = OpInfo("expand", .view)
    static let flatten = OpInfo("flatten", .view)
    static let narrow = OpInfo("narrow", .view)
    /// Multi-input ops that mix dtypes run in the widest one under autocast.
    static let cat = OpInfo("cat", .promote)
    static let stack = OpInfo("stack", .promote)
    static let split = OpInfo("split", .view)
    static let asStrided = OpInfo("as_strided", .view)
    static let extraInfos = [squeeze, unsqueeze, expand, flatten, narrow, cat, stack, split, asStrided]

    /// Drops size-1 dimensions: those in `dims`, or all when nil. Other listed dimensions are
    /// left alone, as in PyTorch.
    package static func squeeze(_ a: TensorImpl, dims: [Int]?) throws -> TensorImpl {
        let axes = try dims.map { try Reductions.axes($0, ndim: a.ndim, op: squeeze.name) } ?? Array(0..<a.ndim)
        let keep = (0..<a.ndim).filter { !(axes.contains($0) && a.shape[$0] == 1) }
        return try reshape(a, keep.map { a.shape[$0] })
    }

    package static func unsqueeze(_ a: TensorImpl, _ dim: Int) throws -> TensorImpl {
        let d = try Shape.wrapDim(dim, ndim: a.ndim + 1, op: unsqueeze.name)
        var shape = a.shape
        shape.insert(1, at: d)
        return try reshape(a, shape)
    }

    /// A broadcast view of `a` at `shape` (-1 keeps a dimension); the gradient is summed back.
    package static func expand(_ a: TensorImpl, _ shape: [Int]) throws -> TensorImpl {
        guard shape.count >= a.ndim else {
            throw LucidError.value("expand: the target shape \(shape) has fewer dimensions than the tensor's \(a.shape)")
        }
        let lead = shape.count - a.ndim
        var target = shape
        for (i, s) in shape.enumerated() {
            let own = i >= lead ? a.shape[i - lead] : nil
            if s == -1 {
                guard let own else { throw LucidError.value("expand: -1 is not allowed in a new leading dimension (shape \(shape))") }
                target[i] = own
            } else if s < 0 {
                throw LucidError.value("expand: invalid size \(s) in shape \(shape)")
            } else if let own, own != 1, own != s {
                throw LucidError.value(
                    "expand: the size \(own) of dimension \(i - lead) of shape \(a.shape) cannot be expanded to \(s) (only size-1 dimensions can)")
            }
        }
        _ = try Shape.numel(target)
        let shapeIn = a.shape
        return Autograd.record(a.expanded(to: target), Autograd.name(expand), [a]) { g in [try Autograd.reduce(g, to: shapeIn)] }
    }

    /// Merges dimensions `start...end` into one.
    package static func flatten(_ a: TensorImpl, start: Int, end: Int) throws -> TensorImpl {
        let s = try Shape.wrapDim(start, ndim: a.ndim, op: flatten.name), e = try Shape.wrapDim(end, ndim: a.ndim, op: flatten.name)
        if a.ndim == 0 { return try reshape(a, [1]) }
        guard s <= e else { throw LucidError.value("flatten: start_dim \(start) comes after end_dim \(end)") }
        var n = 1
        for d in s...e { n *= a.shape[d] }
        return try reshape(a, Array(a.shape[..<s]) + [n] + Array(a.shape[(e + 1)...]))
    }

    /// The view of `length` entries of `dim` from `start`.
    package static func narrow(_ a: TensorImpl, dim: Int, start: Int, length: Int) throws -> TensorImpl {
        guard a.ndim > 0 else { throw LucidError.index("narrow: cannot narrow a 0-d tensor") }
        let d = try Shape.wrapDim(dim, ndim: a.ndim, op: narrow.name)
        let size = a.shape[d]
        let s = start < 0 ? start + size : start
        guard s >= 0, s <= size, length >= 0, length <= size - s else {
            throw LucidError.index("narrow: start \(start) and length \(length) are out of range for dimension \(dim) of size \(size)")
        }
        var items = [Indexing.Item](repeating: .slice(start: nil, stop: nil, step: nil), count: a.ndim)
        items[d] = .slice(start: s, stop: s + length, step: 1)
        return try Indexing.subscripted(a, items)
    }

    /// torch.diagonal: the view of the elements `a[..., i, ..., i + offset, ...]` of dimensions
    /// `dim1` and `dim2`, which are dropped and replaced by a last dimension along the diagonal.
    package static func diagonal(_ a: TensorImpl, offset: Int, dim1: Int, dim2: Int) throws -> TensorImpl {
        let op = "diagonal"
        guard a.ndim >= 2 else { throw LucidError.runtime("diagonal: expected a tensor of at least 2 dimensions, got \(a.ndim)") }
        let d1 = try Shape.wrapDim(dim1, ndim: a.ndim, op: op), d2 = try Shape.wrapDim(dim2, ndim: a.ndim, op: op)
        guard d1 != d2 else { throw LucidError.runtime("diagonal: dimensions \(dim1) and \(dim2) are the same") }
        let (n1, n2) = (a.shape[d1], a.shape[d2])
        let length = max(0, offset >= 0 ? min(n1, n2 - offset) : min(n1 + offset, n2))
        /// The diagonal's geometry over a tensor of a's shape with `strides`, starting at `start`.
        func geometry(_ strides: [Int], _ start: Int) -> (shape: [Int], strides: [Int], offset: Int) {
            let kept = (0..<a.ndim).filter { $0 != d1 && $0 != d2 }
            let first = length == 0 ? 0 : (offset >= 0 ? offset * strides[d2] : -offset * strides[d1])
            return (kept.map { a.shape[$0] } + [length], kept.map { strides[$0] } + [strides[d1] + strides[d2]], start + first)
        }
        let g = geometry(a.strides, a.offset)
        let shapeIn = a.shape
        return Autograd.record(a.view(shape: g.shape, strides: g.strides, offset: g.offset), "DiagonalBackward", [a]) { grad in
            // Each diagonal element is a distinct element of `a`: the gradient goes back into place.
            let z = try Creation.full(shapeIn, value: ScalarOperand(int: 0), dtype: grad.dtype, device: grad.device)
            let d = geometry(Shape.contiguousStrides(shapeIn), 0)
            if grad.numel > 0 { z.backend.copy(grad, into: z.view(shape: d.shape, strides: d.strides, offset: d.offset)) }
            return [z]
        }
    }

    /// torch.as_strided: the view of `a`'s storage with sizes `size` and strides `stride` (in
    /// elements, not negative) from storage element `offset` (a's own when nil), which must lie
    /// inside the storage. Its elements may repeat or overlap; the gradient of each adds up
    /// at the element of `a` it views.
    package static func asStrided(_ a: TensorImpl, size: [Int], stride: [Int], offset: Int?) throws -> TensorImpl {
        let op = asStrided.name
        guard size.count == stride.count else {
            throw LucidError.runtime("\(op): mismatch in length of strides and shape: \(stride.count) strides for \(size.count) sizes")
        }
        guard size.allSatisfy({ $0 >= 0 }) else { throw LucidError.runtime("\(op): negative size in \(size)") }
        guard stride.allSatisfy({ $0 >= 0 }) else { throw LucidError.runtime("\(op): negative strides are not supported, got \(stride)") }
        let start = offset ?? a.offset
        guard start >= 0 else { throw LucidError.runtime("\(op): negative storage offset \(start)") }
        let capacity = a.storageBytes / a.dtype.itemSize
        let count = try Shape.numel(size)
        // An empty view may start at the storage's end, no further (PyTorch's bound too).
        guard count > 0 || start <= capacity else {
            throw LucidError.runtime("\(op): storage offset \(start) is past the end of the tensor's storage of \(capacity) elements")
        }
        var last = start
        if count > 0 {
            for (n, s) in zip(size, stride) {
                let (step, o1) = (n - 1).multipliedReportingOverflow(by: s)
                let (next, o2) = last.addingReportingOverflow(step)
                guard !o1, !o2 else { throw LucidError.runtime("\(op): sizes \(size) and strides \(stride) overflow") }
                last = next
            }
            guard last < capacity else {
                let need = last == Int.max ? "more than \(last)" : "\(last + 1)"  // (the largest offset has no + 1)
                throw LucidError.runtime(
                    "\(op): sizes \(size), strides \(stride) and storage offset \(start) need a storage of \(need) elements; the tensor's "
                        + "storage has \(capacity)"
                )
            }
        }
        let view = a.view(shape: size, strides: stride, offset: start)
        let input = (shape: a.shape, strides: a.strides, offset: a.offset)
        return Autograd.record(view, Autograd.name(asStrided), [a]) { g in
            // Each element's gradient is added at the storage element it views, over a buffer
            // spanning a's elements and the view's; a's gradient is read back from it.
            let span = Shape.span(input.shape, input.strides, from: input.offset)
            let low = min(span.low, start), high = max(span.high, last)
            let buffer = try Creation.full([high - low + 1], value: ScalarOperand(int: 0), dtype: g.dtype, device: g.device)
            if count > 0 {
                let positions = Shape.offsets(size, stride, from: start - low).map { Int64($0) }
                let at = try TensorImpl.empty([count], dtype: .int64, on: buffer.backend)
                positions.withUnsafeBytes { at.backend.write($0, into: at) }
                _ = try InPlace.indexPut(
                    buffer, [.tensor(at)], try ShapeOps.reshape(g, [count]), accumulate: true, base: nil,
                    op: "AsStridedBackward")
            }
            return [try Ops.contiguous(buffer.view(shape: input.shape, strides: input.strides, offset: input.offset - low))]
        }
    }

    /// Joins tensors of one shape (except along `dim`) along `dim`, in their promoted dtype.
    package static func cat(_ tensors: [TensorImpl], dim: Int) throws -> TensorImpl {
        let op = cat.name
        guard let first = tensors.first else { throw LucidError.value("cat: expected a non-empty list of tensors") }
        try Ops.checkSameDevice(op, tensors)
        guard first.ndim > 0 else { throw LucidError.value("cat: zero-dimensional tensors cannot be concatenated (use stack)") }
        let d = try Shape.wrapDim(dim, ndim: first.ndim, op: op)
        var total = 0
        for (i, t) in tensors.enumerated() {
            guard t.ndim == first.ndim, (0..<t.ndim).allSatisfy({ $0 == d || t.shape[$0] == first.shape[$0] }) else {
                throw LucidError.value("cat: tensor \(i) has shape \(t.shape), which does not match \(first.shape) except in dimension \(d)")
            }
            let (sum, overflow) = total.addingReportingOverflow(t.shape[d])
            guard !overflow else { throw LucidError.value("cat: dimension \(d) of the result is too large") }
            total = sum
        }
        return try cat.run(tensors) { cast in try catBody(cast, d: d, total: total) }
    }

    private static func catBody(_ cast: [TensorImpl], d: Int, total: Int) throws -> TensorImpl {
        let first = cast[0]
        let dtype = Composite.widestType(cast)
        let inputs = try cast.map { try Ops.cast($0, to: dtype) }
        var shape = first.shape
        shape[d] = total
        let out = try TensorImpl.empty(shape, dtype: dtype, on: first.backend)
        var offset = 0
        for t in inputs {
            out.backend.copy(t, into: out.view(shape: t.shape, strides: out.strides, offset: offset * out.strides[d]))
            offset += t.shape[d]
        }
        let sizes = inputs.map { $0.shape[d] }
        return Autograd.record(out, Autograd.name(cat), inputs) { g in
            var start = 0
            return try sizes.map { n in
                defer { start += n }
                return try narrow(g, dim: d, start: start, length: n)
            }
        }
    }

    /// Joins tensors of one shape along a new dimension `dim`.
    package static func stack(_ tensors: [TensorImpl], dim: Int) throws -> TensorImpl {
        guard let first = tensors.first else { throw LucidError.value("stack: expected a non-empty list of tensors") }
        for (i, t) in tensors.enumerated() where t.shape != first.shape {
            throw LucidError.value("stack: expects each tensor to be of equal shape, but got \(first.shape) at entry 0 and \(t.shape) at entry \(i)")
        }
        let d = try Shape.wrapDim(dim, ndim: first.ndim + 1, op: stack.name)
        return try stack.run(tensors) { ts in try cat(try ts.map { try unsqueeze($0, d) }, dim: d) }
    }

    /// Views of consecutive pieces of `dim` with the given sizes (which must add up).
    package static func split(_ a: TensorImpl, sizes: [Int], dim: Int) throws -> [TensorImpl] {
        guard a.ndim > 0 else { throw LucidError.value("split: cannot split a 0-d tensor") }
        let d = try Shape.wrapDim(dim, ndim: a.ndim, op: split.name)
        // Taken from what is left rather than summed, so that huge sizes cannot overflow.
        var left: Int? = a.shape[d]
        for n in sizes { left = left.flatMap { n >= 0 && n <= $0 ? $0 - n : nil } }
        guard left == 0 else {
            throw LucidError.value("split: sizes \(sizes) do not add up to \(a.shape[d]), the size of dimension \(dim)")
        }
        var start = 0
        return try sizes.map { n in
            defer { start += n }
            return try narrow(a, dim: d, start: start, length: n)
        }
    }

    /// torch.split with one size: pieces of `size` entries, the last possibly smaller.
    package static func split(_ a: TensorImpl, size: Int, dim: Int) throws -> [TensorImpl] {
        guard size > 0 else { throw LucidError.value("split: split_size must be positive, got \(size)") }
        guard a.ndim > 0 else { throw LucidError.value("split: cannot split a 0-d tensor") }
        let n = a.shape[try Shape.wrapDim(dim, ndim: a.ndim, op: split.name)]
        let sizes = n == 0 ? [0] : stride(from: 0, to: n, by: size).map { Swift.min(size, n - $0) }
        return try split(a, sizes: sizes, dim: dim)
    }

    /// torch.chunk: at most `chunks` pieces of ceil(n / chunks) entries.
    package static func chunk(_ a: TensorImpl, chunks: Int, dim: Int) throws -> [TensorImpl] {
        guard chunks > 0 else { throw LucidError.value("chunk: chunks must be positive, got \(chunks)") }
        guard a.ndim > 0 else { throw LucidError.value("chunk: cannot chunk a 0-d tensor") }
        let n = a.shape[try Shape.wrapDim(dim, ndim: a.ndim, op: split.name)]
        return try split(a, size: n == 0 ? 1 : (n - 1) / chunks + 1, dim: dim)
    }
}
