#if canImport(Metal) && !LUCID_NO_METAL
import Metal

/// Softmax and log-softmax on the GPU, and their backward (Kernels/Softmax.metal): one
/// threadgroup per row, float32 inside, one rounding into the dtype. Other layouts are composed.
extension MetalBackend: SoftmaxKernels, SoftmaxBackwardKernels {
    func softmaxRoute(_ call: KernelCall) -> KernelRoute {
        let tensors = call.reads + call.writes, dtype = call.writes[0].dtype
        return dtype.isFloatingPoint && tensors.allSatisfy { $0.dtype == dtype && $0.isContiguous } && tensors[0].numel > 0
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

    func softmaxBackward(_ grad: TensorImpl, _ y: TensorImpl, axis: Int, log: Bool, into gradIn: TensorImpl) {
        let length = y.shape[axis], inner = y.shape[(axis + 1)...].reduce(1, *)
        encode("softmax_backward_\(y.dtype.name)", groups: y.numel / length, width: Self.rowWidth(length), floatsPerThread: 2) { e in
            bind(grad, 0, e)
            bind(y, 1, e)
            bind(gradIn, 2, e)
            setBytes([Int64(length), Int64(inner), log ? 1 : 0], 3, e)  // SoftmaxShape
        }
    }
}
#endif
