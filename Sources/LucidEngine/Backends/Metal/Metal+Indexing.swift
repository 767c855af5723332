#if canImport(Metal) && !LUCID_NO_METAL
import Metal

/// IndexSteps (Kernels/Indexing.metal): length, index_step, src_step, out_step, size.
private func indexSteps(length: Int = 0, index: Int = 0, src: Int = 0, out: Int = 0, size: Int = 0) -> [Int64] {
    [length, index, src, out, size].map(Int64.init)
}

/// Gathers and scatter-adds on the GPU (Kernels/Indexing.metal). The placement kernels
/// (`nonzero`, `put`, `take`) are not here: they run on the host (counted); the size of
/// nonzero's result is needed on the host before anything else can run.
extension MetalBackend: IndexingKernels {
    func indexingRoute(_ call: KernelCall) -> KernelRoute {
        switch call.op {
        case .gather(let dim):
            let a = call.reads[0], index = call.reads[1], out = call.writes[0]
            guard out.numel > 0 else { return .native }
            var zeroed = a.strides
            zeroed[dim] = 0
            return out.dtype == a.dtype && index.dtype == .int64
                && MetalLayout(shape: index.shape, operands: [index.strides, zeroed, out.strides]) != nil ? .native : .host
        case .scatterAdd(let dim):
            let src = call.reads[0], index = call.reads[1], out = call.writes[0]
            guard out.numel > 0 else { return .native }
            guard index.dtype == .int64, out.dtype == src.dtype, out.isContiguous else { return .host }
            var lines = index.shape, zeroed = Shape.contiguousStrides(out.shape)
            lines[dim] = 1
            zeroed[dim] = 0
            return MetalLayout(shape: lines, operands: [index.strides, src.strides, zeroed]) != nil ? .native : .host
        case .nllTerms, .nllBackward:
            // No fused kernel here: composed from the gather and the scatter.
            return .compose
        default:
            return .native
        }
    }

    func gather(
        _ a: TensorImpl, dim: Int, index: TensorImpl, into out: TensorImpl,
        outOfRange: @escaping @Sendable (Int64) -> LucidError
    ) throws {
        guard out.numel > 0 else { return }
        var zeroed = a.strides
        zeroed[dim] = 0
        let layout = MetalLayout(routed: index.shape, operands: [index.strides, zeroed, out.strides])
        let bad = try makeFlag()
        encode("gather_\(a.dtype.name)", count: layout.count) { e in
            bind(a, 0, e)
            bind(index, 1, e)
            bind(out, 2, e)
            bind(bad, 3, e)
            setBytes(layout.words, 4, e)
            setBytes(indexSteps(src: a.strides[dim], size: a.shape[dim]), 5, e)
        }
        // The flag is read when the command buffer completes, and a set flag raised at the
        // program's next synchronisation, so a gather never makes the host wait; which index
        // was first is found on the host then, on the error path only.
        let size = a.shape[dim]
        try deferCheck(DeferredCheck(flag: bad) { outOfRange(Self.firstOutside(index, size)) })
    }

    /// Floating scatter-adds whose lines have at least this many elements add atomically, a
    /// thread per element.
    static let atomicLineLength = 64

    func scatterAdd(_ src: TensorImpl, dim: Int, index: TensorImpl, into out: TensorImpl) throws {
        guard out.numel > 0 else { return }
        let accType: DType = src.dtype.isFloatingPoint ? .float32 : .int64
        var lines = index.shape
        lines[dim] = 1
        let acc = accType == out.dtype ? out : try TensorImpl.empty(out.shape, dtype: accType, on: self)
        var zeroed = acc.strides
        zeroed[dim] = 0
        let layout = MetalLayout(routed: lines, operands: [index.strides, src.strides, zeroed])
        fill(acc, with: Scalar(int: 0))
        // Long floating lines (few lines of many elements each): a thread per element, adding
        // atomically, rather than a thread per line walking it. Both kernels take one binding.
        var launch: (kernel: String, layout: MetalLayout)? = index.numel > 0 ? ("scatter_add_", layout) : nil
        if accType == .float32, index.numel >= Self.atomicLineLength * layout.count,
            let elements = MetalLayout(shape: index.shape, operands: [index.strides, src.strides, zeroed])
        {
            launch = ("scatter_add_atomic_", elements)
        }
        if let launch {
            // The indices were checked by the gather this adds back into, but on this device
            // that check is raised only at the next synchronisation, so its backward may come
            // first: the kernels skip an index out of range and raise this flag, writing
            // nothing outside the accumulator.
            let bad = try makeFlag()
            let size = acc.shape[dim]
            encode(launch.kernel + src.dtype.name, count: launch.layout.count) { e in
                bind(src, 0, e)
                bind(index, 1, e)
                bind(acc, 2, e)
                setBytes(launch.layout.words, 3, e)
                setBytes(
                    indexSteps(
                        length: index.shape[dim], index: index.strides[dim], src: src.strides[dim],
                        out: acc.strides[dim], size: size), 4, e)
                bind(bad, 5, e)
            }
            try deferCheck(
                DeferredCheck(flag: bad) {
                    LucidError.index(
                        "scatter_add: index \(Self.firstOutside(index, size)) is out of bounds for dimension \(dim) with size \(size)")
                })
        }
        if acc !== out { copy(acc, into: out) }  // one rounding (or the int64 → int32/bool store)
    }

    /// The first element of an int64 index tensor outside `0..<size` (-1 for none), found on
    /// the host once the kernel that flagged it has completed (on the error path only).
    static func firstOutside(_ index: TensorImpl, _ size: Int) -> Int64 {
        let values = HostBackend.address(index).assumingMemoryBound(to: Int64.self)
        var first: Int64 = -1
        StridedLoop(shape: index.shape, strides: [index.strides]).forEachRun(bases: [0]) { o, n, s in
            var i = o[0]
            for _ in 0..<n where first == -1 {
                if values[i] < 0 || values[i] >= Int64(size) { first = values[i] }
                i &+= s[0]
            }
        }
        return first
    }
}
#endif
