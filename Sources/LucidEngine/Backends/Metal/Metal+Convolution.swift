#if canImport(Metal) && !LUCID_NO_METAL
import Metal

/// The geometry a window kernel reads (Kernels/Convolution.metal `WindowShape`): 18 int64
/// words, the last four the strides of the strided operand.
private func windowShape(n: Int, c: Int, _ g: WindowGeometry, strides: [Int]) -> [Int64] {
    [n, c, g.input.0, g.input.1, g.output.0, g.output.1, g.kernel.0, g.kernel.1, g.stride.0, g.stride.1,
     g.padding.0, g.padding.1, g.dilation.0, g.dilation.1].map(Int64.init) + strides.map(Int64.init)
}

/// Convolution on the GPU as im2col, GEMM and col2im (Kernels/Convolution.metal and the
/// matmul family): there are no direct convolution passes, so the op layer composes each
/// pass from these.
extension MetalBackend: ConvolutionKernels {
    func convolutionRoute(_ call: KernelCall) -> KernelRoute {
        switch call.op {
        case .im2col:
            let x = call.reads[0], cols = call.writes[0]
            return cols.numel == 0 || x.dtype.isFloatingPoint && cols.dtype == x.dtype && cols.isContiguous && x.ndim == 4
                ? .native : .host
        case .col2im:
            let cols = call.reads[0], x = call.writes[0]
            return x.numel == 0 || x.dtype.isFloatingPoint && cols.dtype == x.dtype && x.isContiguous && x.ndim == 4
                && cols.ndim == 3 ? .native : .host
        default:
            return .compose
        }
    }

    func im2col(_ x: TensorImpl, _ g: WindowGeometry, into cols: TensorImpl) {
        guard cols.numel > 0 else { return }
        encode("im2col_\(x.dtype.name)", count: cols.numel) { e in
            bind(x, 0, e)
            bind(cols, 1, e)
            setBytes(windowShape(n: x.shape[0], c: x.shape[1], g, strides: x.strides), 2, e)
        }
    }

    func col2im(_ cols: TensorImpl, _ g: WindowGeometry, into x: TensorImpl) {
        guard x.numel > 0 else { return }
        encode("col2im_\(x.dtype.name)", count: x.numel) { e in
            bind(cols, 0, e)
            bind(x, 1, e)
            setBytes(windowShape(n: x.shape[0], c: x.shape[1], g, strides: cols.strides + [0]), 2, e)
        }
    }

    func convolution(_ pass: ConvolutionPassKind, _ problem: ConvolutionProblem, x: TensorImpl?, weight: TensorImpl?,
                     bias: TensorImpl?, gradOut: TensorImpl?, into out: TensorImpl) -> Bool {
        false
    }
}
#endif
