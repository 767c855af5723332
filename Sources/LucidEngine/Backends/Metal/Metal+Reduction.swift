#if canImport(Metal) && !LUCID_NO_METAL
import Metal

/// Reductions on the GPU (Kernels/Reduction.metal): one thread per output element, one
/// threadgroup per output when there are few outputs of many elements, and several per output
/// and a second pass when there are few of very many (a loss's mean, a gradient's norm). Floating
/// sums and means are compensated float32 sums rounded once into the input's dtype; integer and
/// bool sums accumulate in int64. Other dtype pairs and unmergeable ranks are routed to the
/// host (counted).
extension MetalBackend: ReductionKernels {
    /// The shapes a reduction of `a` over `axes` runs over: the kept (output) positions and
    /// the reduced ones.
    private static func split(_ a: TensorImpl, axes: [Int]) -> (kept: [Int], reduced: [Int]) {
        var kept = a.shape, reduced = a.shape
        for d in a.shape.indices { if axes.contains(d) { kept[d] = 1 } else { reduced[d] = 1 } }
        return (kept, reduced)
    }

    /// Whether a reduction's dtypes have a kernel: floating sums and means into the input's
    /// dtype, integer and bool sums into int64.
    private static func kinds(_ op: ReduceKernel, _ a: TensorImpl, _ out: TensorImpl) -> (floating: Bool, integral: Bool) {
        (a.dtype.isFloatingPoint && out.dtype == a.dtype, !a.dtype.isFloatingPoint && op == .sum && out.dtype == .int64)
    }

    func reductionRoute(_ call: KernelCall) -> KernelRoute {
        let a = call.reads[0]
        switch call.op {
        case .reduce(let op, let axes):
            let out = call.writes[0]
            let (floating, integral) = Self.kinds(op, a, out)
            guard out.numel > 0, a.numel > 0 || !(floating || integral) else { return .native }
            let (kept, reduced) = Self.split(a, axes: axes)
            return (floating || integral) && MetalLayout(shape: kept, operands: [a.strides, out.strides]) != nil
                && MetalLayout(shape: reduced, operands: [a.strides]) != nil ? .native : .host
        case .argReduce(let axis):
            let indices = call.writes[0], values = call.writes.count > 1 ? call.writes[1] : nil
            guard indices.numel > 0 else { return .native }
            var shape = a.shape, strides = a.strides
            shape.remove(at: axis)
            strides.remove(at: axis)
            return a.dtype != .bool && values.map({ $0.dtype == a.dtype }) ?? true
                && MetalLayout(shape: shape, operands: [strides, indices.strides, (values ?? indices).strides]) != nil
                ? .native : .host
        default:
            return .native
        }
    }

    /// Floating reductions to at most this many outputs of at least `cooperativeLength`
    /// elements each run a threadgroup per output; of at least `splitLength` each, several
    /// threadgroups per output (each thread summing at least `splitShare` elements, 256
    /// threads a group, at most `maxParts` groups) and a second pass over their partials.
    static let cooperativeOutputs = 2048
    static let cooperativeLength = 512
    static let splitLength = 1 << 16
    static let splitShare = 32
    static let maxParts = 128

    func reduce(_ op: ReduceKernel, _ a: TensorImpl, axes: [Int], into out: TensorImpl) {
        guard out.numel > 0 else { return }
        let floating = Self.kinds(op, a, out).floating
        let (kept, reduced) = Self.split(a, axes: axes)
        if a.numel == 0 {
            // Nothing to add: a sum is 0, a mean NaN (0 / 0), as on the host.
            return fill(out, with: op == .mean && floating ? Scalar(.nan) : Scalar(int: 0))
        }
        let outer = MetalLayout(routed: kept, operands: [a.strides, out.strides])
        let inner = MetalLayout(routed: reduced, operands: [a.strides])
        let bindAll = { (e: any MTLComputeCommandEncoder) in
            bind(a, 0, e)
            bind(out, 1, e)
            setBytes(outer.words, 2, e)
            setBytes(inner.words, 3, e)
            if floating { setBytes(UInt32(op == .mean ? 1 : 0), 4, e) }
        }
        // Few outputs of very many elements: several threadgroups per output, then their sums.
        if floating && outer.count <= Self.cooperativeOutputs && inner.count >= Self.splitLength,
            splitReduce(op, a, into: out, outer: outer, inner: inner)
        {
            return
        }
        // Few outputs of many elements each: a threadgroup per output, else too few threads.
        if floating && outer.count <= Self.cooperativeOutputs && inner.count >= Self.cooperativeLength {
            encode(
                "reduce_group_\(a.dtype.name)", groups: outer.count, width: Self.rowWidth(inner.count),
                floatsPerThread: 2, bindAll)
        } else {
            encode("reduce_\(a.dtype.name)", count: outer.count, bindAll)
        }
    }

    /// The two passes of a split reduction; false when the partials' memory cannot be had.
    private func splitReduce(
        _ op: ReduceKernel, _ a: TensorImpl, into out: TensorImpl, outer: MetalLayout,
        inner: MetalLayout
    ) -> Bool {
        let width = 256
        let parts = Swift.min(Self.maxParts, Swift.max(2, inner.count / (width * Self.splitShare)))
        guard let partials = try? TensorImpl.empty([outer.count * parts], dtype: .float32, on: self) else { return false }
        let count = UInt32(parts)
        encode("reduce_split_\(a.dtype.name)", groups: outer.count * parts, width: width, floatsPerThread: 2) { e in
            bind(a, 0, e)
            bind(partials, 1, e)
            setBytes(outer.words, 2, e)
            setBytes(inner.words, 3, e)
            setBytes(count, 4, e)
        }
        encode("reduce_merge_\(a.dtype.name)", groups: outer.count, width: Self.rowWidth(parts), floatsPerThread: 2) { e in
            bind(partials, 0, e)
            bind(out, 1, e)
            setBytes(outer.words, 2, e)
            setBytes(inner.words, 3, e)
            setBytes(UInt32(op == .mean ? 1 : 0), 4, e)
            setBytes(count, 5, e)
        }
        return true
    }

    func argReduce(max: Bool, _ a: TensorImpl, axis: Int, values: TensorImpl?, indices: TensorImpl) {
        guard indices.numel > 0 else { return }
        var shape = a.shape, strides = a.strides
        let length = shape.remove(at: axis), step = strides.remove(at: axis)
        let outer = MetalLayout(routed: shape, operands: [strides, indices.strides, (values ?? indices).strides])
        let bindAll = { (e: any MTLComputeCommandEncoder) in
            bind(a, 0, e)
            bind(indices, 1, e)
            bind(values ?? a, 2, e)  // written only when the flags say there are values
            setBytes(outer.words, 3, e)
            setBytes(Int64(length), 4, e)
            setBytes(Int64(step), 5, e)
            setBytes(UInt32((max ? 1 : 0) | (values != nil ? 2 : 0)), 6, e)
        }
        // Few outputs along a long axis: a threadgroup per output (indices exact as floats).
        if a.dtype.isFloatingPoint && outer.count <= Self.cooperativeOutputs && length >= Self.cooperativeLength
            && length < 1 << 24
        {
            return encode(
                "arg_reduce_group_\(a.dtype.name)", groups: outer.count, width: Self.rowWidth(length),
                floatsPerThread: 2, bindAll)
        }
        encode("arg_reduce_\(a.dtype.name)", count: outer.count, bindAll)
    }
}
#endif
