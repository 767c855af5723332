import CHostKernels

/// Host softmax: float32 along the last axis, CHostKernels' row loop (`SoftmaxRows`; it takes
/// a row in two passes as wide as the vector unit, faster than oneDNN's, and handles NaN);
/// otherwise oneDNN where it is linked and has a kernel of its own for the dtype and axis;
/// float32 along another axis, `FloatColumns`; elsewhere the op layer composes it. And the
/// float32 backward.
extension HostBackend: SoftmaxKernels, SoftmaxBackwardKernels {
    /// Whether the host has a direct kernel for this softmax. The row kernel makes a row
    /// holding a NaN all NaN, as PyTorch and the GPU kernel do. oneDNN's max skips a NaN, so
    /// such a row would come out as 0s around it: input with a NaN that the row kernel does not
    /// take is composed, which makes the whole row NaN. The column kernel takes
    /// finite input only (an infinity in a column is the composed form's to handle).
    static func takesSoftmax(_ x: TensorImpl, axis: Int, log: Bool, into out: TensorImpl) -> Bool {
        guard x.isContiguous else { return false }
        if SoftmaxRows.takes(x, axis: axis, out) { return true }
        #if canImport(CDNNL)
        if DNNL.takesSoftmax(x, axis: axis, log: log, into: out) { return !containsNaN(x) }
        #endif
        return FloatColumns.takes(x, axis: axis, out) && !containsNonFinite(x)
    }

    func softmax(_ x: TensorImpl, axis: Int, log: Bool, into out: TensorImpl) throws {
        if SoftmaxRows.takes(x, axis: axis, out) {
            SoftmaxRows.run(
                UnsafePointer(hostPointer(x, F32Element.self)), hostPointer(out, F32Element.self),
                rows: x.numel / x.shape[axis], n: x.shape[axis], log: log)
            return
        }
        #if canImport(CDNNL)
        if DNNL.softmax(x, axis: axis, log: log, into: out) { return }
        #endif
        if FloatColumns.takes(x, axis: axis, out) {
            let (outer, n, inner) = FloatColumns.extents(x.shape, axis)
            FloatColumns.softmax(
                UnsafePointer(hostPointer(x, F32Element.self)), hostPointer(out, F32Element.self), outer: outer, n: n,
                inner: inner, log: log)
            return
        }
        throw LucidError.runtime("softmax: the host did not run a softmax it had taken (shape \(x.shape), axis \(axis))")
    }

    /// Whether the host has a fused backward for this softmax: float32, contiguous.
    static func takesSoftmaxBackward(_ grad: TensorImpl, _ y: TensorImpl, axis: Int, into gradIn: TensorImpl) -> Bool {
        grad.dtype == .float32 && y.dtype == .float32 && gradIn.dtype == .float32 && grad.isContiguous
            && y.isContiguous && gradIn.isContiguous && y.numel > 0
    }

    func softmaxBackward(_ grad: TensorImpl, _ y: TensorImpl, axis: Int, log: Bool, into gradIn: TensorImpl) {
        let pg = UnsafePointer(hostPointer(grad, F32Element.self)), py = UnsafePointer(hostPointer(y, F32Element.self))
        let po = hostPointer(gradIn, F32Element.self)
        let (outer, n, inner) = FloatColumns.extents(y.shape, axis)
        if inner > 1 {
            return FloatColumns.softmaxBackward(pg, py, po, outer: outer, n: n, inner: inner, log: log)
        }
        HostThreads.forEachRange(outer, grain: max(1, HostThreads.grain / n), align: 1) { range in
            for r in range { FloatRows.softmaxBackwardRow(pg + r * n, py + r * n, n, log: log, po + r * n) }
        }
    }

    /// Whether a contiguous floating tensor holds a NaN (read by bits, so every dtype alike).
    static func containsNaN(_ x: TensorImpl) -> Bool { scan(x, infinities: false) }

    /// Whether a contiguous floating tensor holds a NaN or an infinity.
    static func containsNonFinite(_ x: TensorImpl) -> Bool { scan(x, infinities: true) }

    /// A branch-free scan of the magnitude bits over the whole tensor (it vectorises; stopping
    /// early does not): NaN is above the all-ones exponent, an infinity equal to it. Large
    /// tensors are scanned in parallel ranges.
    private static func scan(_ x: TensorImpl, infinities: Bool) -> Bool {
        let base = UnsafeRawPointer(address(x)), n = x.numel
        let limit: Int32
        switch x.dtype {
        case .float32: limit = infinities ? 0x7f7f_ffff : 0x7f80_0000
        case .float16: limit = infinities ? 0x7bff : 0x7c00
        case .bfloat16: limit = infinities ? 0x7f7f : 0x7f80
        default: return false
        }
        let wide = x.dtype == .float32
        // The loops are CHostKernels', built for the widest vector unit the CPU has.
        let hit = { (range: Range<Int>) -> Bool in
            wide
                ? lucid_host_any_above32(
                    base.assumingMemoryBound(to: UInt32.self) + range.lowerBound, range.count,
                    UInt32(limit)) != 0
                : lucid_host_any_above16(
                    base.assumingMemoryBound(to: UInt16.self) + range.lowerBound, range.count,
                    UInt16(limit)) != 0
        }
        guard n >= 2 * HostThreads.streamingGrain else { return hit(0..<n) }
        let lock = Lock()
        var found = false
        HostThreads.forEachRange(n, grain: HostThreads.streamingGrain) { range in
            if hit(range) { lock.withLock { found = true } }
        }
        return found
    }
}

/// Softmax along the last axis of a contiguous float32 tensor: CHostKernels' row loop, a part
/// of the rows on each thread.
enum SoftmaxRows {
    static func takes(_ x: TensorImpl, axis: Int, _ out: TensorImpl) -> Bool {
        x.dtype == .float32 && out.dtype == .float32 && x.isContiguous && out.isContiguous && x.shape == out.shape
            && x.numel > 0 && x.ndim > 0 && axis == x.ndim - 1
    }

    /// softmax (log: log-softmax) of `rows` rows of n floats from x into out.
    static func run(_ x: UnsafePointer<Float>, _ out: UnsafeMutablePointer<Float>, rows: Int, n: Int, log: Bool) {
        HostThreads.forEachRange(rows, grain: max(1, HostThreads.grain / n), align: 1) { part in
            let at = part.lowerBound * n
            lucid_host_softmax_rows(x + at, out + at, part.count, n, log ? 1 : 0)
        }
    }
}

/// Softmax along an axis that is not the last, of a contiguous float32 tensor seen as
/// [outer, n, inner]: each of the `inner` columns of an outer index is one softmax of n
/// entries, `inner` apart. The loops run along the columns, a block of them at a time, so that
/// they vectorise (a per-pixel class axis: [batch, classes, height, width] over dim 1).
enum FloatColumns {
    /// Columns a loop takes at once: its running maxima and sums stay in the cache.
    static let block = 256

    static func extents(_ shape: [Int], _ axis: Int) -> (outer: Int, n: Int, inner: Int) {
        (shape[..<axis].reduce(1, *), shape[axis], shape[(axis + 1)...].reduce(1, *))
    }

    static func takes(_ x: TensorImpl, axis: Int, _ out: TensorImpl) -> Bool {
        x.dtype == .float32 && out.dtype == .float32 && x.isContiguous && out.isContiguous && x.shape == out.shape
            && x.numel > 0 && axis < x.ndim - 1 && extents(x.shape, axis).inner > 1
    }

    /// Runs `body(o, j0, width, scratch)` over every block of columns, in parallel parts;
    /// `scratch` holds 2·block floats.
    private static func forEachBlock(
        outer: Int, n: Int, inner: Int,
        _ body: (_ o: Int, _ j0: Int, _ width: Int, _ scratch: UnsafeMutablePointer<Float>) -> Void
    ) {
        let blocks = (inner + block - 1) / block
        HostThreads.forEachRange(outer * blocks, grain: max(1, HostThreads.grain / (n * block)), align: 1) { parts in
            withUnsafeTemporaryAllocation(of: Float.self, capacity: 2 * block) { scratch in
                for part in parts {
                    let j0 = (part % blocks) * block
                    body(part / blocks, j0, min(block, inner - j0), scratch.baseAddress!)
                }
            }
        }
    }

    /// softmax: exp(x - max) / Σexp(x - max); log-softmax: (x - max) - log Σexp(x - max),
    /// summed in float32 as the row kernels do (CHostKernels' loops). The input is finite.
    static func softmax(
        _ x: UnsafePointer<Float>, _ out: UnsafeMutablePointer<Float>, outer: Int, n: Int, inner: Int, log: Bool
    ) {
        forEachBlock(outer: outer, n: n, inner: inner) { o, j0, w, scratch in
            let at = o * n * inner + j0
            lucid_host_softmax_columns(x + at, out + at, n, inner, w, log ? 1 : 0, scratch)
        }
    }

    /// The backward from the output y: softmax dx = y·(g - Σg·y); log-softmax
    /// dx = g - exp(y)·Σg, each sum over a column.
    static func softmaxBackward(
        _ g: UnsafePointer<Float>, _ y: UnsafePointer<Float>, _ dx: UnsafeMutablePointer<Float>, outer: Int, n: Int,
        inner: Int, log: Bool
    ) {
        forEachBlock(outer: outer, n: n, inner: inner) { o, j0, w, scratch in
            let at = o * n * inner + j0
            lucid_host_softmax_columns_backward(g + at, y + at, dx + at, n, inner, w, log ? 1 : 0, scratch)
        }
    }
}
