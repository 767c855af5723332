#if canImport(Metal) && !LUCID_NO_METAL
import Metal

/// Reductions on the GPU (Kernels/Reduction.metal): one thread per output element over short or
/// strided rows, a SIMD group per output over contiguous rows of a few dozen elements or more,
/// one threadgroup per output when there are few outputs of many elements, and several per
/// output and a second pass when there are few of very many (a loss's mean, a gradient's
/// norm); each with 32-bit indices when every count and offset fits, else 64-bit (`_wide`). Floating
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
    /// Otherwise, rows of at least `simdRowLength` contiguous elements run a SIMD group per
    /// output, and shorter (or strided) rows a thread per output.
    static let cooperativeOutputs = 2048
    static let cooperativeLength = 512
    static let splitLength = 1 << 16
    static let splitShare = 32
    static let maxParts = 128
    static let simdRowLength = 32

    /// Whether the reduced elements of a row are adjacent in memory (the innermost merged
    /// dimension of `inner` has stride 1), so that a SIMD group's lanes read them together.
    private static func rowsAreContiguous(_ inner: MetalLayout) -> Bool {
        inner.rank > 0 && inner.step(0, inner.rank - 1) == 1
    }

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
        // The kernels add an input's row offset (outer) and its element's offset (inner).
        let narrow = MetalLayout.narrow([outer, inner], reach: outer.reach(0) + inner.reach(0))
        let form = narrow ? "" : "_wide"
        let bindAll = { (e: any MTLComputeCommandEncoder) in
            bind(a, 0, e)
            bind(out, 1, e)
            outer.bind(narrow: narrow, 2, e)
            inner.bind(narrow: narrow, 3, e)
            if floating { setBytes(UInt32(op == .mean ? 1 : 0), 4, e) }
        }
        // Few outputs of very many elements: several threadgroups per output, then their sums.
        if floating && outer.count <= Self.cooperativeOutputs && inner.count >= Self.splitLength,
            splitReduce(op, a, into: out, outer: outer, inner: inner, narrow: narrow)
        {
            return
        }
        let dtype = a.dtype.name
        if floating && outer.count <= Self.cooperativeOutputs && inner.count >= Self.cooperativeLength {
            // Few outputs of many elements each: a threadgroup per output, else too few threads.
            encode(
                "reduce_group_\(dtype)\(form)", groups: outer.count, width: Self.rowWidth(inner.count),
                floatsPerThread: 2, bindAll)
        } else if floating && inner.count >= Self.simdRowLength && Self.rowsAreContiguous(inner) {
            encode(simdRows: "reduce_simd_\(dtype)\(form)", rows: outer.count, bindAll)
        } else {
            encode("reduce_\(dtype)\(form)", count: outer.count, bindAll)
        }
    }

    /// The two passes of a split reduction; false when the partials' memory cannot be had.
    private func splitReduce(
        _ op: ReduceKernel, _ a: TensorImpl, into out: TensorImpl, outer: MetalLayout,
        inner: MetalLayout, narrow: Bool
    ) -> Bool {
        let width = 256
        let parts = Swift.min(Self.maxParts, Swift.max(2, inner.count / (width * Self.splitShare)))
        guard let partials = try? TensorImpl.empty([outer.count * parts], dtype: .float32, on: self) else { return false }
        let count = UInt32(parts), form = narrow ? "" : "_wide"
        encode("reduce_split_\(a.dtype.name)\(form)", groups: outer.count * parts, width: width, floatsPerThread: 2) { e in
            bind(a, 0, e)
            bind(partials, 1, e)
            outer.bind(narrow: narrow, 2, e)
            inner.bind(narrow: narrow, 3, e)
            setBytes(count, 4, e)
        }
        encode("reduce_merge_\(a.dtype.name)\(form)", groups: outer.count, width: Self.rowWidth(parts), floatsPerThread: 2) {
            e in
            bind(partials, 0, e)
            bind(out, 1, e)
            outer.bind(narrow: narrow, 2, e)
            inner.bind(narrow: narrow, 3, e)
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
        // The kernels add a row's offset (outer) and the axis's (length · step).
        let narrow = MetalLayout.narrow([outer], reach: outer.reach(0) + Swift.max(length - 1, 0) * abs(step))
        let form = narrow ? "" : "_wide"
        let bindAll = { (e: any MTLComputeCommandEncoder) in
            bind(a, 0, e)
            bind(indices, 1, e)
            bind(values ?? a, 2, e)  // written only when the flags say there are values
            outer.bind(narrow: narrow, 3, e)
            if narrow {
                setBytes(Int32(length), 4, e)
                setBytes(Int32(step), 5, e)
            } else {
                setBytes(Int64(length), 4, e)
                setBytes(Int64(step), 5, e)
            }
            setBytes(UInt32((max ? 1 : 0) | (values != nil ? 2 : 0)), 6, e)
        }
        let dtype = a.dtype.name
        // Indices of the floating merges are exact as floats below 2^24.
        guard a.dtype.isFloatingPoint && length < 1 << 24 else { return encode("arg_reduce_\(dtype)\(form)", count: outer.count, bindAll) }
        if outer.count <= Self.cooperativeOutputs && length >= Self.cooperativeLength {
            // Few outputs along a long axis: a threadgroup per output.
            encode(
                "arg_reduce_group_\(dtype)\(form)", groups: outer.count, width: Self.rowWidth(length),
                floatsPerThread: 2, bindAll)
        } else if length >= Self.simdRowLength && step == 1 {
            encode(simdRows: "arg_reduce_simd_\(dtype)\(form)", rows: outer.count, bindAll)
        } else {
            encode("arg_reduce_\(dtype)\(form)", count: outer.count, bindAll)
        }
    }
}
#endif
