/// Writes into existing tensors: the engine side of PyTorch's in-place ops. The values go
/// into the destination's storage through its strides, with no copy of the rest of its base,
/// so every tensor viewing that storage sees them; each write bumps the storage's version.
package enum InPlace {
    /// Backward node names, as PyTorch's.
    static let copyBackwards = "CopyBackwards", copySlices = "CopySlices", asStridedBackward = "AsStridedBackward"

    /// Writes `value` (broadcast to `dst`'s shape, converted to its dtype and moved to its
    /// device) into `dst`'s elements.
    ///
    /// `base` is the tensor `dst` views when the write must reach the base's autograd history
    /// (a view of a tensor that requires grad); nil otherwise. When gradients are recorded the
    /// result is the tensor to use from now on in place of `base ?? dst`: the same storage and
    /// geometry, whose backward node is the write. Otherwise nothing but the values changes,
    /// and the result is nil.
    ///
    /// `fill`: `value` is one value written everywhere, which PyTorch allows into a tensor that
    /// sees one element at several places (an expanded view); other writes refuse such a
    /// destination. `sameKind`: the value must not be of a higher kind than `dst` (bool <
    /// integer < floating), as for the result of an in-place arithmetic op; a copy converts
    /// any dtype. `result`: `value` is the in-place op's own result, made for this write, so
    /// what its backward saved of it is from now on `dst` as written (PyTorch saves the
    /// destination of `exp_`, `sigmoid_`, ...): a later write into `dst` makes that backward
    /// refuse, as PyTorch's does.
    package static func assign(
        _ dst: TensorImpl, _ value: TensorImpl, base: TensorImpl?, op: String,
        fill: Bool = false, sameKind: Bool = false, result: Bool = false
    ) throws -> TensorImpl? {
        try checkShape(value, dst, op: op)
        if sameKind { try checkKind(value.dtype, dst, op: op) }
        let recording = try checkRecording(dst, value: value, base: base, op: op)
        if !fill { try checkNoInternalOverlap(dst, op: op) }
        var source = value.device == dst.device ? value : try Conversion.to(value, dtype: nil, device: dst.device)
        if source.storage.sharesMemory(with: dst.storage) && partiallyOverlaps(source, dst) {
            throw LucidError.runtime(
                "\(op): unsupported operation: some elements of the input tensor and the written-to tensor refer to a single memory "
                    + "location. Please clone() the tensor before performing the operation."
            )
        }
        source = try readFirst(source, before: dst)
        if dst.numel > 0 {
            dst.backend.copy(source.withRequiresGrad(false).expanded(to: dst.shape), into: dst)
        }
        dst.storage.bumpVersion()
        if result, recording, let node = value.gradFn, value.storage !== dst.storage {
            node.resave(value.storage, as: dst)
        }
        return recording ? record(dst, value: value, base: base) : nil
    }

    /// Sets every element of `dst` to `value` (PyTorch's `fill_`, allowed into an expanded
    /// view); `base` and the result as for `assign`.
    package static func fill(_ dst: TensorImpl, _ value: ScalarOperand, base: TensorImpl?, op: String) throws -> TensorImpl? {
        let scalar = try Creation.scalar(value, for: dst.dtype)
        let recording = try checkRecording(dst, value: nil, base: base, op: op)
        if dst.numel > 0 { dst.backend.fill(dst, with: scalar) }
        dst.storage.bumpVersion()
        return recording ? record(dst, value: nil, base: base) : nil
    }

    /// Writes `value` (a tensor, or else `scalar`) into the elements `dst[items]` names: ints,
    /// slices, `None` and `...` (Python's `x[i, 1:3] = v`), with no view made by the caller.
    /// `base` is the tensor whose history a recorded write reaches (dst itself when it is no
    /// view); the result as for `assign`.
    package static func write(
        _ dst: TensorImpl, at items: [Indexing.Item], value: TensorImpl?, scalar: ScalarOperand,
        base: TensorImpl?, op: String
    ) throws -> TensorImpl? {
        for item in items {
            if case .tensor = item { throw LucidError.index("\(op): tensor indices write through index_put, not a view") }
        }
        let region = try GradMode.with(false) { try Indexing.subscripted(dst, items) }
        if let value { return try assign(region, value, base: base, op: op) }
        return try fill(region, scalar, base: base, op: op)
    }

    /// Sets the one element of `dst` at `index` (one int per dimension, negative from the end)
    /// to a scalar: `x[i, j] = v` where autograd records nothing, without a view or a copy.
    package static func setElement(
        _ dst: TensorImpl, _ index: UnsafeBufferPointer<Int>, _ value: ScalarOperand,
        op: String
    ) throws {
        guard index.count == dst.ndim else {
            throw LucidError.index("\(op): \(index.count) indices for a tensor of dimension \(dst.ndim)")
        }
        guard !(GradMode.isEnabled && dst.requiresGrad) else {
            throw LucidError.runtime("\(op): a write autograd records goes through lucid_write_at")
        }
        var offset = dst.offset
        for d in 0..<dst.ndim {
            let size = dst.shape[d], i = index[d]
            guard i >= -size && i < size else {
                throw LucidError.index("index \(i) is out of bounds for dimension \(d) with size \(size)")
            }
            offset &+= (i < 0 ? i + size : i) &* dst.strides[d]
        }
        let scalar = try Creation.scalar(value, for: dst.dtype)
        dst.backend.fill(dst.view(shape: [], strides: [], offset: offset), with: scalar)
        dst.storage.bumpVersion()
    }

    /// `dst[items] = value` for items with tensors (Python's `x[idx] = v` and `x[mask] = v`,
    /// torch's `index_put_`; with `accumulate`, added, repeated positions adding up): only
    /// the indexed elements are read and written. `value` is converted to dst's dtype and
    /// broadcast to the shape of `dst[items]`. Of several writes to one position without
    /// `accumulate` the last is kept, as on PyTorch's CPU. As in PyTorch, the write may go
    /// into an expanded view. `base` and the result as for `assign`: when autograd records
    /// the write, its gradients are those of `Indexing.assign` on dst's old values.
    package static func indexPut(
        _ dst: TensorImpl, _ items: [Indexing.Item], _ value: TensorImpl, accumulate: Bool,
        base: TensorImpl?, op: String
    ) throws -> TensorImpl? {
        try Ops.checkSameDevice(op, dst, value)
        let recording = try checkRecording(dst, value: value, base: base, op: op)
        let written = recording ? try Indexing.assign(try Ops.clone(dst), items, value, accumulate: accumulate) : nil
        let places = try Indexing.places(dst, items)
        guard (try? Shape.broadcast(value.shape, places.indexed, op: op)) == places.indexed else {
            throw LucidError.value("\(op): values of shape \(value.shape) cannot be broadcast to the indexed shape \(places.indexed)")
        }
        let (offsets, shape, strides) = (places.offsets, places.shape, places.strides)
        let rowsShape = [offsets.count] + shape
        if try Shape.numel(rowsShape) > 0 {
            try GradMode.with(false) {
                // The values as rows, one per place: a copy of their own, read before any write.
                let v = try Ops.cast(value.withRequiresGrad(false), to: dst.dtype).expanded(to: places.indexed)
                var rows = try ShapeOps.reshape(try Ops.clone(try ShapeOps.permute(v, places.order)), rowsShape)
                var at = offsets
                if accumulate {
                    // Rows that meet are summed first, then added to what is there.
                    var slot: [Int: Int] = [:], unique: [Int] = [], slots: [Int64] = []
                    for o in offsets {
                        if let k = slot[o] {
                            slots.append(Int64(k))
                        } else {
                            slot[o] = unique.count; slots.append(Int64(unique.count)); unique.append(o)
                        }
                    }
                    if unique.count < offsets.count {
                        let index = try TensorImpl.empty([offsets.count], dtype: .int64, on: dst.backend)
                        slots.withUnsafeBytes { index.backend.write($0, into: index) }
                        let spread = try ShapeOps.reshape(index, [offsets.count] + shape.map { _ in 1 }).expanded(to: rowsShape)
                        rows = try Indexing.scatterAdd(rows, dim: 0, index: try Ops.contiguous(spread), shape: [unique.count] + shape)
                    }
                    let old = try TensorImpl.empty([unique.count] + shape, dtype: dst.dtype, on: dst.backend)
                    dst.run(PlacementKernels.self, KernelCall(.take, reads: [dst], writes: [old]), op) {
                        $0.take(dst, at: unique, shape: shape, strides: strides, into: old)
                    }
                    rows = try Ops.contiguous(try Ops.cast(try Elementwise.binary(.add, old, rows), to: dst.dtype))
                    at = unique
                }
                dst.run(PlacementKernels.self, KernelCall(.put, reads: [rows], writes: [dst]), op) {
                    $0.put(rows, into: dst, at: at, shape: shape, strides: strides)
                }
            }
        }
        dst.storage.bumpVersion()
        guard let written else { return nil }
        return record(dst, value: written, base: base)
    }

    // MARK: - Arithmetic in place

    /// `dst op= other` (PyTorch's `add_`, `mul_`, `+=`, ...; for add and sub, `other` times
    /// `alpha`), where autograd records nothing. One kernel writes `dst` when the result keeps
    /// its dtype; otherwise the result is computed and copied in. `other` broadcasts to dst's
    /// shape; a result of a higher kind than dst (a float into an integer tensor) is refused.
    package static func binary(_ k: BinaryKernel, _ dst: TensorImpl, _ other: TensorImpl, alpha: Double, op: String) throws {
        try checkUnrecorded(dst, other, op: op)
        try Ops.checkSameDevice(op, dst, other)
        let dtype = Elementwise.computeType(k, Elementwise.resultType(dst, other))
        try Elementwise.checkBool(k, dtype)
        guard alpha == 1 || k == .add || k == .sub else { throw LucidError.value("\(op): alpha is for add and sub only") }
        guard dtype.isFloatingPoint || alpha == alpha.rounded() else {
            throw LucidError.type("\(op): for integral input tensors, alpha must not be a floating-point number, got \(alpha)")
        }
        let alphaOperand: ScalarOperand
        if dtype.isFloatingPoint {
            alphaOperand = ScalarOperand(float: alpha)
        } else {
            guard let whole = Int64(exactly: alpha) else {
                throw LucidError.value("\(op): alpha \(alpha) does not fit in a 64-bit integer")
            }
            alphaOperand = ScalarOperand(int: whole)
        }
        try checkShape(other, dst, op: op)
        try checkKind(dtype, dst, op: op)
        try checkNoInternalOverlap(dst, op: op)
        let y = try readFirst(other.withRequiresGrad(false), before: dst)
        if dtype == dst.dtype && y.dtype == dst.dtype && dst.numel > 0 {
            let scale = Float(k == .sub ? -alpha : alpha)
            if alpha == 1
                || dst.runUnlessComposed(
                    FusedElementwiseKernels.self, KernelCall(.addScaled, reads: [dst, y], writes: [dst]),
                    "\(k)", { $0.addScaled(dst, y, alpha: scale, into: dst) }) == nil
            {
                let scaled =
                    try alpha == 1
                    ? y
                    : GradMode.with(false) {
                        try Ops.cast(try Elementwise.binary(.mul, y, scalar: alphaOperand, scalarFirst: false), to: dst.dtype)
                    }
                let ys = scaled.expanded(to: dst.shape)
                dst.run(ElementwiseKernels.self, KernelCall(.binary(k), reads: [dst, ys], writes: [dst]), "\(k)") {
                    $0.binary(k, dst, ys, into: dst)
                }
            }
        } else if dst.numel > 0 {
            let value = try GradMode.with(false) { () -> TensorImpl in
                let scaled = alpha == 1 ? y : try Elementwise.binary(.mul, y, scalar: alphaOperand, scalarFirst: false)
                return try Elementwise.binary(k, dst, scaled)
            }
            dst.backend.copy(value.expanded(to: dst.shape), into: dst)
        }
        dst.storage.bumpVersion()
    }

    /// `dst op= scalar` where autograd records nothing, as `binary`.
    package static func binary(_ k: BinaryKernel, _ dst: TensorImpl, scalar: ScalarOperand, op: String) throws {
        try checkUnrecorded(dst, nil, op: op)
        let dtype = Elementwise.computeType(k, Elementwise.resultType(dst, scalar))
        try Elementwise.checkBool(k, dtype)
        try checkKind(dtype, dst, op: op)
        try checkNoInternalOverlap(dst, op: op)
        if dst.numel > 0 {
            if dtype == dst.dtype {
                dst.run(ElementwiseKernels.self, KernelCall(.binaryScalar(k), reads: [dst], writes: [dst]), "\(k)") {
                    $0.binary(k, dst, scalar: scalar.value, scalarFirst: false, into: dst)
                }
            } else {
                let value = try GradMode.with(false) { try Elementwise.binary(k, dst, scalar: scalar, scalarFirst: false) }
                dst.backend.copy(value, into: dst)
            }
        }
        dst.storage.bumpVersion()
    }

    /// `dst = op(dst)` (`exp_`, `relu_`, ...) where autograd records nothing.
    package static func unary(_ k: UnaryKernel, _ dst: TensorImpl, op: String) throws {
        try checkUnrecorded(dst, nil, op: op)
        let value =
            k.keepsIntegers || dst.dtype.isFloatingPoint
            ? nil
            : try GradMode.with(false) { try Elementwise.unary(k, dst) }  // an integer result of a float function
        try checkKind(value?.dtype ?? dst.dtype, dst, op: op)
        try checkNoInternalOverlap(dst, op: op)
        if dst.numel > 0 {
            if let value {
                dst.backend.copy(value, into: dst)
            } else {
                dst.run(ElementwiseKernels.self, KernelCall(.unary(k), reads: [dst], writes: [dst]), k.name) {
                    $0.unary(k, dst, into: dst)
                }
            }
        }
        dst.storage.bumpVersion()
    }

    private static func checkUnrecorded(_ dst: TensorImpl, _ other: TensorImpl?, op: String) throws {
        if GradMode.isEnabled && (dst.requiresGrad || other?.requiresGrad == true) {
            throw LucidError.runtime("\(op): this write would be recorded for autograd: compute the result and write it with lucid_assign")
        }
    }

    /// Refuses a value whose shape does not broadcast to `dst`'s.
    private static func checkShape(_ value: TensorImpl, _ dst: TensorImpl, op: String) throws {
        guard (try? Shape.broadcast(value.shape, dst.shape, op: op)) == dst.shape else {
            throw LucidError.runtime(
                "\(op): the value's shape \(value.shape) does not match the tensor's shape \(dst.shape) and cannot be broadcast to it (an "
                    + "in-place op cannot change its tensor's shape)"
            )
        }
    }

    /// Refuses a result of a higher kind than `dst` (bool < integer < floating).
    private static func checkKind(_ result: DType, _ dst: TensorImpl, op: String) throws {
        if result.category > dst.dtype.category {
            throw LucidError.runtime("\(op): result type \(result.name) can't be cast to the desired output type \(dst.dtype.name)")
        }
    }

    /// Refuses a destination that sees one element at several places.
    private static func checkNoInternalOverlap(_ dst: TensorImpl, op: String) throws {
        if hasInternalOverlap(dst) {
            throw LucidError.runtime(
                "\(op): unsupported operation: more than one element of the written-to tensor refers to a single memory location. Please "
                    + "clone() the tensor before performing the operation."
            )
        }
    }

    /// `source` itself, or a copy of it when it is other elements of `dst`'s storage, so that
    /// the write reads all of it before changing any.
    private static func readFirst(_ source: TensorImpl, before dst: TensorImpl) throws -> TensorImpl {
        guard source.storage.sharesMemory(with: dst.storage),
            !(source.shape == dst.shape && source.strides == dst.strides && source.offset == dst.offset)
        else { return source }
        return try GradMode.with(false) { try Ops.clone(source) }
    }

    /// Whether the write is recorded for autograd, refusing what PyTorch refuses then: a leaf
    /// that requires grad, or a view of one; a view of a tensor whose layout the recorded
    /// write cannot map.
    private static func checkRecording(_ dst: TensorImpl, value: TensorImpl?, base: TensorImpl?, op: String) throws -> Bool {
        let target = base ?? dst
        guard GradMode.isEnabled, target.requiresGrad || dst.requiresGrad || value?.requiresGrad == true else { return false }
        if target.requiresGrad && target.isLeaf {
            throw LucidError.runtime(
                base == nil || base === dst
                    ? "\(op): a leaf tensor that requires grad is being used in an in-place operation; change it under lucid.no_grad() (or "
                        + "through .data)"
                    : "\(op): a view of a leaf tensor that requires grad is being used in an in-place operation; change it under lucid.no_grad()")
        }
        if let base, base !== dst, hasInternalOverlap(base) {
            throw LucidError.runtime(
                "\(op): writing through a view of an expanded tensor while gradients are recorded is not supported; clone() the tensor it views first"
            )
        }
        return true
    }

    /// The write as a node of the graph: the tensor to use from now on in place of `base`
    /// (or `dst`).
    private static func record(_ dst: TensorImpl, value: TensorImpl?, base: TensorImpl?) -> TensorImpl {
        let inputs = [value].compactMap { $0 }
        let valueShape = value?.shape ?? []
        let valueGrad = { (g: TensorImpl) throws -> [TensorImpl?] in
            value == nil ? [] : [try Autograd.reduce(g, to: valueShape)]
        }
        guard let base, base !== dst else {
            // The old values are gone: their history gets a zero gradient, the value the rest.
            return Autograd.record(dst, copyBackwards, [dst] + inputs) { g in
                [try Creation.full(g.shape, value: ScalarOperand(int: 0), dtype: g.dtype, device: g.device)] + (try valueGrad(g))
            }
        }
        // The base's gradient flows to its old history except where the view was written,
        // and from there to the value.
        let placement = Placement(dst, in: base), overlaps = hasInternalOverlap(dst)
        return Autograd.record(base, copySlices, [base] + inputs) { g in
            if overlaps {  // the written view is expanded: its gradients cannot be told apart, as in PyTorch
                throw LucidError.runtime(
                    "\(copySlices): unsupported operation: more than one element of the written-to tensor refers to a single memory "
                        + "location. Please clone() the tensor before performing the operation."
                )
            }
            let (gb, gr) = try placement.laidOut(g, dtype: g.dtype)
            let gv = try valueGrad(try Ops.clone(gr))
            gb.backend.fill(gr, with: Scalar(int: 0))
            return [gb] + gv
        }
    }

    /// `view`'s elements as a view of `base`, whose storage it views, with `base`'s present
    /// history: what a view becomes once a recorded write has given its base a new history
    /// (PyTorch's AsStridedBackward). Its gradient reaches the base at the elements it views.
    package static func view(_ view: TensorImpl, of base: TensorImpl) -> TensorImpl {
        let region = base.view(shape: view.shape, strides: view.strides, offset: view.offset)
        guard base.requiresGrad else { return region }
        // An expanded view sees one element at several places: their gradients add up there.
        let repeated = (0..<view.ndim).filter { view.shape[$0] > 1 && view.strides[$0] == 0 }
        let once = base.view(
            shape: view.shape.enumerated().map { repeated.contains($0.offset) ? 1 : $0.element },
            strides: view.strides, offset: view.offset)
        let placement = Placement(once, in: base)
        let node = GradNode(name: asStridedBackward, inputs: [GradNode.Edge(base)]) { g in
            let (gb, gr) = try placement.laidOut(nil, dtype: g.dtype)
            let summed = repeated.isEmpty ? g : try Reductions.reduce(.sum, g, dims: repeated, keepdim: true)
            if gr.numel > 0 { gb.backend.copy(summed, into: gr) }
            return [gb]
        }
        return region.tracked(by: node)
    }

    /// Where a view's elements sit among its base's, as a backward rule keeps it (the tensors'
    /// geometry, not their storage).
    private struct Placement {
        let base: (shape: [Int], strides: [Int], offset: Int, rowMajor: Bool)
        let view: (shape: [Int], strides: [Int], offset: Int)
        let device: Device

        init(_ view: TensorImpl, in base: TensorImpl) {
            self.base = (base.shape, base.strides, base.offset, base.hasRowMajorStrides)
            self.view = (view.shape, view.strides, view.offset)
            device = base.device
        }

        /// A gradient for the base in a new buffer of `dtype` laid out as the base (its strides,
        /// over the span of storage it covers), holding `g` (base-shaped) or zeros; and the view's
        /// elements as a view of that buffer.
        func laidOut(_ g: TensorImpl?, dtype: DType) throws -> (TensorImpl, TensorImpl) {
            if base.rowMajor {
                let gb =
                    try g.map { try Ops.clone($0) }
                    ?? Creation.full(base.shape, value: ScalarOperand(int: 0), dtype: dtype, device: device)
                return (gb, gb.view(shape: view.shape, strides: view.strides, offset: view.offset - base.offset))
            }
            let (low, high) = Shape.span(base.shape, base.strides, from: base.offset)
            let empty = base.shape.contains(0)
            let buffer = try Creation.full(
                [empty ? 0 : high - low + 1], value: ScalarOperand(int: 0), dtype: dtype,
                device: device)
            let gb = buffer.view(shape: base.shape, strides: base.strides, offset: base.offset - low)
            if let g, !empty { gb.backend.copy(g, into: gb) }
            return (gb, buffer.view(shape: view.shape, strides: view.strides, offset: view.offset - low))
        }
    }

    /// Whether some element of `t` is seen at more than one index (a dimension of stride 0
    /// and size above 1, as an expanded view has). Other overlaps are not looked for, as in
    /// PyTorch.
    static func hasInternalOverlap(_ t: TensorImpl) -> Bool {
        zip(t.shape, t.strides).contains { $0.0 > 1 && $0.1 == 0 }
    }

    /// Whether `a` and `b` (of one storage) cover some of the same memory without being the
    /// same elements; judged, as PyTorch does, only when both are dense.
    private static func partiallyOverlaps(_ a: TensorImpl, _ b: TensorImpl) -> Bool {
        guard a.isContiguous, b.isContiguous, a.numel > 0, b.numel > 0 else { return false }
        let (aStart, bStart) = (a.offset * a.dtype.itemSize, b.offset * b.dtype.itemSize)
        let (aEnd, bEnd) = (aStart + a.numel * a.dtype.itemSize, bStart + b.numel * b.dtype.itemSize)
        if aStart == bStart && aEnd == bEnd { return false }
        return aStart < bEnd && bStart < aEnd
    }
}
