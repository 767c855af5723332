#if canImport(Metal) && !LUCID_NO_METAL
import Metal

/// Softmax and log-softmax on the GPU (Kernels/Softmax.metal): one threadgroup per row,
/// float32 inside, one rounding into the dtype.
extension MetalBackend: SoftmaxKernels {
    func softmax(_ x: TensorImpl, axis: Int, log: Bool, into out: TensorImpl) -> Bool {
        guard x.dtype.isFloatingPoint, out.dtype == x.dtype, x.isContiguous, out.isContiguous, x.numel > 0 else {
            return false
        }
        let length = x.shape[axis], inner = x.shape[(axis + 1)...].reduce(1, *)
        let rows = x.numel / length
        encode("softmax_\(x.dtype.name)", groups: rows, width: Self.rowWidth(length), floatsPerThread: 2) { e in
            bind(x, 0, e)
            bind(out, 1, e)
            setBytes([Int64(length), Int64(inner), log ? 1 : 0], 2, e)  // SoftmaxShape
        }
        return true
    }
}
#endif
