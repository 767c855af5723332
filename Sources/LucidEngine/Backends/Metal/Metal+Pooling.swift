#if canImport(Metal) && !LUCID_NO_METAL
import Metal

/// The geometry a pooling kernel reads (Kernels/Pooling.metal `PoolGeometry`): 13 int64 words.
private func poolGeometry(planes: Int, _ g: WindowGeometry) -> [Int64] {
    [
        planes, g.input.0, g.input.1, g.output.0, g.output.1, g.kernel.0, g.kernel.1, g.stride.0, g.stride.1,
        g.padding.0, g.padding.1, g.dilation.0, g.dilation.1,
    ].map(Int64.init)
}

/// Max pooling and its adjoint on the GPU (Kernels/Pooling.metal), with the host kernels'
/// rules; other dtypes or layouts are routed to the host (counted). Average pooling has no
/// kernel here and is composed.
extension MetalBackend: PoolingKernels {
    func poolingRoute(_ call: KernelCall) -> KernelRoute {
        switch call.op {
        case .maxPool2d:
            let x = call.reads[0], values = call.writes[0], indices = call.writes[1]
            return values.numel == 0
                || x.dtype.isFloatingPoint && x.isContiguous && values.isContiguous
                    && indices.isContiguous && values.dtype == x.dtype
                ? .native : .host
        case .maxPool2dBackward:
            let grad = call.reads[0], indices = call.reads[1], gradIn = call.writes[0]
            return gradIn.numel == 0
                || gradIn.dtype.isFloatingPoint && grad.dtype == gradIn.dtype && grad.isContiguous
                    && indices.isContiguous && gradIn.isContiguous
                ? .native : .host
        default:
            return .compose
        }
    }

    func maxPool2d(_ x: TensorImpl, _ g: WindowGeometry, values: TensorImpl, indices: TensorImpl) {
        guard values.numel > 0 else { return }
        encode("max_pool2d_\(x.dtype.name)", count: values.numel) { e in
            bind(x, 0, e)
            bind(values, 1, e)
            bind(indices, 2, e)
            setBytes(poolGeometry(planes: x.shape[0], g), 3, e)
        }
    }

    func maxPool2dBackward(_ grad: TensorImpl, indices: TensorImpl, _ g: WindowGeometry, into gradIn: TensorImpl) {
        guard gradIn.numel > 0 else { return }
        encode("max_pool2d_backward_\(gradIn.dtype.name)", count: gradIn.numel) { e in
            bind(grad, 0, e)
            bind(indices, 1, e)
            bind(gradIn, 2, e)
            setBytes(poolGeometry(planes: gradIn.shape[0], g), 3, e)
        }
    }
}
#endif
