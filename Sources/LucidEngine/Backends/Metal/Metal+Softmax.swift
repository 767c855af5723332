#if canImport(Metal) && !LUCID_NO_METAL
import Metal

/// Softmax and log-softmax on the GPU (Kernels/Softmax.metal): one threadgroup per row,
/// float32 inside, one rounding into the dtype. Other layouts, and the backward, are composed.
extension MetalBackend: SoftmaxKernels {
    func softmaxRoute(_ call: KernelCall) -> KernelRoute {
        guard case .softmax = call.op else { return .compose }
        let x = call.reads[0], out = call.writes[0]
        return x.dtype.isFloatingPoint && out.dtype == x.dtype && x.isContiguous && out.isContiguous && x.numel > 0
            ? .native : .compose
    }

    func softmax(_ x: TensorImpl, axis: Int, log: Bool, into out: TensorImpl) {
        let length = x.shape[axis], inner = x.shape[(axis + 1)...].reduce(1, *)
        let rows = x.numel / length
        encode("softmax_\(x.dtype.name)", groups: rows, width: Self.rowWidth(length), floatsPerThread: 2) { e in
            bind(x, 0, e)
            bind(out, 1, e)
            setBytes([Int64(length), Int64(inner), log ? 1 : 0], 2, e)  // SoftmaxShape
        }
    }
}
#endif
