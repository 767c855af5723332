import CHostKernels

/// Host softmax: oneDNN where it is linked (elsewhere the op layer composes it), and the
/// float32 backward along the last axis.
extension HostBackend: SoftmaxKernels, SoftmaxBackwardKernels {
    /// Whether the host has a direct kernel for this softmax. oneDNN's max skips a NaN, so a
    /// row holding one would come out as 0s around it: such input is composed, which makes the
    /// whole row NaN, as PyTorch and the GPU kernel do.
    static func takesSoftmax(_ x: TensorImpl, axis: Int, log: Bool, into out: TensorImpl) -> Bool {
        #if canImport(CDNNL)
        return x.isContiguous && !containsNaN(x) && DNNL.takesSoftmax(x, axis: axis, log: log, into: out)
        #else
        return false
        #endif
    }

    func softmax(_ x: TensorImpl, axis: Int, log: Bool, into out: TensorImpl) throws {
        #if canImport(CDNNL)
        if DNNL.softmax(x, axis: axis, log: log, into: out) { return }
        #endif
        throw LucidError.runtime("softmax: oneDNN did not run a softmax it had taken (shape \(x.shape), axis \(axis))")
    }

    /// Whether the host has a fused backward for this softmax: float32 along the last axis.
    static func takesSoftmaxBackward(_ grad: TensorImpl, _ y: TensorImpl, axis: Int, into gradIn: TensorImpl) -> Bool {
        grad.dtype == .float32 && y.dtype == .float32 && gradIn.dtype == .float32 && axis == y.ndim - 1
            && grad.isContiguous && y.isContiguous && gradIn.isContiguous && y.numel > 0
    }

    func softmaxBackward(_ grad: TensorImpl, _ y: TensorImpl, axis: Int, log: Bool, into gradIn: TensorImpl) {
        let n = y.shape[axis], rows = y.numel / n
        let pg = UnsafePointer(hostPointer(grad, F32Element.self)), py = UnsafePointer(hostPointer(y, F32Element.self))
        let po = hostPointer(gradIn, F32Element.self)
        HostThreads.forEachRange(rows, grain: max(1, HostThreads.grain / n), align: 1) { range in
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
