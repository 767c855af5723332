#if canImport(Metal) && !LUCID_NO_METAL
import Metal
import MetalPerformanceShaders

/// The problem a gemm kernel reads (Kernels/Matmul.metal `GemmShape`): 11 int64 words.
private func gemmShape(_ a: TensorImpl, _ b: TensorImpl, _ out: TensorImpl, bias: Bool) -> [Int64] {
    [out.shape[0], out.shape[1], out.shape[2], a.shape[2],
     a.strides[0], a.strides[1], a.strides[2], b.strides[0], b.strides[1], b.strides[2], bias ? 1 : 0].map(Int64.init)
}

/// One operand of an MPS product, per batch entry: a row-major matrix (columns contiguous) or
/// the transpose of one (rows contiguous), described as it is stored.
private struct MPSOperand {
    let transposed: Bool
    let rows: Int, columns: Int, rowBytes: Int

    init?(_ t: TensorImpl) {
        let rows = t.shape[1], cols = t.shape[2], size = t.dtype.itemSize
        if t.strides[2] == 1 && t.strides[1] >= max(cols, 1) {
            (transposed, self.rows, columns, rowBytes) = (false, rows, cols, t.strides[1] * size)
        } else if t.strides[1] == 1 && t.strides[2] >= max(rows, 1) {
            (transposed, self.rows, columns, rowBytes) = (true, cols, rows, t.strides[2] * size)
        } else {
            return nil
        }
    }

    func matrix(_ t: TensorImpl, batch: Int) -> MPSMatrix {
        let buffer = t.metalBufferForEncoding().buffer
        let offset = (t.offset + batch * t.strides[0]) * t.dtype.itemSize
        return MPSMatrix(buffer: buffer, offset: offset,
                         descriptor: MPSMatrixDescriptor(rows: rows, columns: columns, rowBytes: rowBytes, dataType: .float32))
    }
}

/// Matrix products on the GPU. float32 products without a bias go to Metal Performance
/// Shaders (`MPSMatrixMultiplication`, float32 accumulation); float16, bfloat16 and products
/// with a bias run the gemm kernels (Kernels/Matmul.metal: 16×16 tiles staged in threadgroup
/// memory, or a thread per output for thinner products), in float32 arithmetic with the
/// bias added before the one rounding, as the host computes them. Integer products wrap in
/// int64, as on the host.
extension MetalBackend: MatmulKernels {
    /// Products of floating and int32/int64 dtypes run here; others on the host.
    func matmulRoute(_ call: KernelCall) -> KernelRoute {
        let out = call.writes[0]
        return out.numel == 0 || out.dtype.isFloatingPoint || out.dtype == .int32 || out.dtype == .int64 ? .native : .host
    }

    func gemm(_ a: TensorImpl, _ b: TensorImpl, bias: TensorImpl?, into out: TensorImpl) {
        guard out.numel > 0 else { return }
        if out.dtype == .float32, bias == nil, a.shape[2] > 0,
           let left = MPSOperand(a), let right = MPSOperand(b), let result = MPSOperand(out) {
            let (m, n, k) = (out.shape[1], out.shape[2], a.shape[2])
            let product = MPSMatrixMultiplication(device: gpu, transposeLeft: left.transposed, transposeRight: right.transposed,
                                                  resultRows: m, resultColumns: n, interiorColumns: k, alpha: 1, beta: 0)
            encodeIntoCommandBuffer("mps_matmul") { cb in
                for batch in 0..<out.shape[0] {
                    product.encode(commandBuffer: cb, leftMatrix: left.matrix(a, batch: batch),
                                   rightMatrix: right.matrix(b, batch: batch), resultMatrix: result.matrix(out, batch: batch))
                }
            }
            return
        }
        let bindAll = { (e: any MTLComputeCommandEncoder) in
            bind(a, 0, e)
            bind(b, 1, e)
            bind(bias ?? out, 2, e)  // read only when has_bias is set
            bind(out, 3, e)
            setBytes(gemmShape(a, b, out, bias: bias != nil), 4, e)
        }
        // The tiled kernel needs exactly tile × tile threads per threadgroup: where its pipeline
        // allows fewer, the product runs a thread per output instead.
        let (m, n, tile) = (out.shape[1], out.shape[2], 16)
        let tiled = "gemm_tiled_\(out.dtype.name)"
        if out.dtype.isFloatingPoint && m >= tile && n >= tile, (maxThreadsPerThreadgroup(tiled) ?? 0) >= tile * tile {
            let tiles = out.shape[0] * ((m + tile - 1) / tile) * ((n + tile - 1) / tile)
            encode(tiled, groups: tiles, width: tile * tile, floatsPerThread: 2, bindAll)
        } else {
            encode("gemm_\(out.dtype.name)", count: out.numel, bindAll)
        }
    }
}
#endif
