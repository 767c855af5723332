#if canImport(Metal) && !LUCID_NO_METAL
import Metal
import MetalPerformanceShaders

/// The problem a gemm kernel reads (Kernels/Matmul.metal `GemmShape`): 11 int64 words.
private func gemmShape(_ a: TensorImpl, _ b: TensorImpl, _ out: TensorImpl, bias: Bool) -> [Int64] {
    [
        out.shape[0], out.shape[1], out.shape[2], a.shape[2],
        a.strides[0], a.strides[1], a.strides[2], b.strides[0], b.strides[1], b.strides[2], bias ? 1 : 0,
    ].map(Int64.init)
}

/// The problem `gemm_simd` reads (`GemmShape32`: 11 int32 words), or nil when an index of the
/// product does not fit 32 bits.
private func gemmShape32(_ a: TensorImpl, _ b: TensorImpl, _ out: TensorImpl, bias: Bool) -> [Int32]? {
    let words = gemmShape(a, b, out, bias: bias)
    // The largest offset each operand reaches, and the output's size.
    let (batch, m, n, k) = (out.shape[0], out.shape[1], out.shape[2], a.shape[2])
    let reachA = a.offset + (batch - 1) * a.strides[0] + (m - 1) * a.strides[1] + max(k - 1, 0) * a.strides[2]
    let reachB = b.offset + (batch - 1) * b.strides[0] + max(k - 1, 0) * b.strides[1] + (n - 1) * b.strides[2]
    let limit = Int(Int32.max)
    guard out.numel <= limit, reachA <= limit, reachB <= limit, k <= limit, words.allSatisfy({ $0 >= 0 && $0 <= Int64(limit) })
    else { return nil }
    return words.map { Int32($0) }
}

/// One operand of an MPS product: a row-major matrix (columns contiguous) or the transpose of
/// one (rows contiguous), described as it is stored.
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

    /// The batch as one MPS matrix of `matrices` matrices, one batch stride apart, or (with
    /// `batch`) the one matrix of that batch entry.
    func matrix(_ t: TensorImpl, type: MPSDataType, matrices: Int = 1, batch: Int = 0) -> MPSMatrix {
        let buffer = t.metalBufferForEncoding().buffer
        let size = t.dtype.itemSize
        let offset = (t.offset + batch * t.strides[0]) * size
        let stride = matrices > 1 ? t.strides[0] * size : rows * rowBytes
        return MPSMatrix(
            buffer: buffer, offset: offset,
            descriptor: MPSMatrixDescriptor(
                rows: rows, columns: columns, matrices: matrices, rowBytes: rowBytes,
                matrixBytes: stride, dataType: type))
    }

    /// Whether a batch of `count` matrices of `t` can be one MPS matrix: each entry its own
    /// matrix, one batch stride apart (a whole number of rows).
    func batches(_ t: TensorImpl, _ count: Int) -> Bool {
        let stride = t.strides[0] * t.dtype.itemSize
        return count > 1 && stride >= rows * rowBytes && stride % rowBytes == 0
    }
}

/// Metal Performance Shaders' products, a kernel object per shape made once, and what the
/// self-test found of MPS's float16 sums. Its own lock: products are encoded on any thread.
final class MatrixProducts: @unchecked Sendable {
    private struct Key: Hashable {
        let transposeLeft: Bool, transposeRight: Bool
        let m: Int, n: Int, k: Int
    }

    private let lock = Lock()
    private var kernels: [Key: MPSMatrixMultiplication] = [:]
    private var float16Sums32 = false
    /// Shapes kept at most; a program past that many distinct products starts over.
    static let capacity = 256

    /// Whether float16 products go to MPS: only once the self-test has seen MPS sum them in
    /// float32 (until then, and where it sums in float16, they run `gemm_simd_float16`).
    var float16ViaMPS: Bool {
        get { lock.withLock { float16Sums32 } }
        set { lock.withLock { float16Sums32 = newValue } }
    }

    func kernel(
        _ gpu: any MTLDevice, transposeLeft: Bool, transposeRight: Bool, m: Int, n: Int,
        k: Int
    ) -> MPSMatrixMultiplication {
        let key = Key(transposeLeft: transposeLeft, transposeRight: transposeRight, m: m, n: n, k: k)
        return lock.withLock {
            if let made = kernels[key] { return made }
            if kernels.count >= Self.capacity { kernels.removeAll() }
            let made = MPSMatrixMultiplication(
                device: gpu, transposeLeft: transposeLeft, transposeRight: transposeRight,
                resultRows: m, resultColumns: n, interiorColumns: k, alpha: 1, beta: 0)
            kernels[key] = made
            return made
        }
    }
}

/// Matrix products on the GPU. float32 products without a bias go to Metal Performance
/// Shaders (`MPSMatrixMultiplication`, float32 accumulation, one call per batch), and float16
/// ones too where the self-test saw MPS sum float16 in float32; bfloat16, products with a bias
/// and the rest run `gemm_simd` (Kernels/Matmul.metal: the SIMD groups' 8×8 matrix units over
/// 32×32 tiles, float32 accumulators, the bias added before the one rounding, as the host
/// computes them), or a thread per output where 32-bit indices do not reach or the pipeline
/// cannot have a tile's 128 threads. Integer products wrap in int64, as on the host.
extension MetalBackend: MatmulKernels {
    /// A `gemm_simd` threadgroup: four SIMD groups of 32.
    static let simdGemmThreads = 128

    /// Products of floating and int32/int64 dtypes run here; others on the host.
    func matmulRoute(_ call: KernelCall) -> KernelRoute {
        let out = call.writes[0]
        return out.numel == 0 || out.dtype.isFloatingPoint || out.dtype == .int32 || out.dtype == .int64 ? .native : .host
    }

    func gemm(_ a: TensorImpl, _ b: TensorImpl, bias: TensorImpl?, into out: TensorImpl) {
        guard out.numel > 0 else { return }
        let type: MPSDataType? = out.dtype == .float32 ? .float32 : (out.dtype == .float16 && products.float16ViaMPS ? .float16 : nil)
        if let type, bias == nil, a.shape[2] > 0 {
            if mpsProduct(a, b, into: out, type: type) { return }
        }
        gemmKernel(a, b, bias: bias, into: out)
    }

    /// `a @ b` through Metal Performance Shaders in `type`, one call for the whole batch where
    /// each operand's batch is one MPS matrix; false (nothing encoded) when an operand's layout
    /// is one MPS cannot read.
    @discardableResult
    func mpsProduct(_ a: TensorImpl, _ b: TensorImpl, into out: TensorImpl, type: MPSDataType) -> Bool {
        guard let left = MPSOperand(a), let right = MPSOperand(b), let result = MPSOperand(out) else { return false }
        let (batches, m, n, k) = (out.shape[0], out.shape[1], out.shape[2], a.shape[2])
        let product = products.kernel(gpu, transposeLeft: left.transposed, transposeRight: right.transposed, m: m, n: n, k: k)
        encodeIntoCommandBuffer("mps_matmul") { cb in
            if left.batches(a, batches) && right.batches(b, batches) && result.batches(out, batches) {
                product.encode(
                    commandBuffer: cb, leftMatrix: left.matrix(a, type: type, matrices: batches),
                    rightMatrix: right.matrix(b, type: type, matrices: batches),
                    resultMatrix: result.matrix(out, type: type, matrices: batches))
                return
            }
            for batch in 0..<batches {
                product.encode(
                    commandBuffer: cb, leftMatrix: left.matrix(a, type: type, batch: batch),
                    rightMatrix: right.matrix(b, type: type, batch: batch),
                    resultMatrix: result.matrix(out, type: type, batch: batch))
            }
        }
        return true
    }

    /// Encodes a kernel of the SIMD-group tile family (`gemm_simd`, the convolution passes): a
    /// threadgroup of `simdGemmThreads` per 32×32 tile of `entries` m×n products, reading `a`
    /// (buffer 0), `b` (1) and the bias when given (2), writing `out` (3), with the kernel's
    /// shape words (4).
    func encodeTiles(
        _ kernel: String, entries: Int, m: Int, n: Int, _ a: TensorImpl, _ b: TensorImpl,
        bias: TensorImpl?, out: TensorImpl, shape: [Int32]
    ) {
        let tiles = entries * ((m + 31) / 32) * ((n + 31) / 32)
        guard tiles > 0 else { return }
        encode(kernel, groups: tiles, width: Self.simdGemmThreads, floatsPerThread: 8) { e in
            bind(a, 0, e)
            bind(b, 1, e)
            bind(bias ?? out, 2, e)  // read only when has_bias is set
            bind(out, 3, e)
            setBytes(shape, 4, e)
        }
    }

    /// The product on lucid's kernels.
    private func gemmKernel(_ a: TensorImpl, _ b: TensorImpl, bias: TensorImpl?, into out: TensorImpl) {
        let bindAll = { (e: any MTLComputeCommandEncoder) in
            bind(a, 0, e)
            bind(b, 1, e)
            bind(bias ?? out, 2, e)  // read only when has_bias is set
            bind(out, 3, e)
            setBytes(gemmShape(a, b, out, bias: bias != nil), 4, e)
        }
        // The SIMD-group kernel needs exactly 128 threads per threadgroup and 32-bit indices.
        let simd = "gemm_simd_\(out.dtype.name)"
        if out.dtype.isFloatingPoint, let shape = gemmShape32(a, b, out, bias: bias != nil),
            (maxThreadsPerThreadgroup(simd) ?? 0) >= Self.simdGemmThreads
        {
            encodeTiles(simd, entries: out.shape[0], m: out.shape[1], n: out.shape[2], a, b, bias: bias, out: out, shape: shape)
        } else {
            encode("gemm_\(out.dtype.name)", count: out.numel, bindAll)
        }
    }
}

extension MetalBackend {
    /// Whether MPS sums float16 products in float32 here: a [1, 4097] · [4097, 1] product of
    /// 2048 followed by 4096 halves with ones is 4096 in float32 sums, and less in any float16
    /// ones (2048 + 0.5 rounds back to 2048). Sets the float16 route, and returns the sum
    /// (nil when the probe could not run).
    func probeFloat16Sums() -> Float? {
        guard let x = try? TensorImpl.empty([1, 1, 4097], dtype: .float16, on: self),
            let y = try? TensorImpl.empty([1, 4097, 1], dtype: .float16, on: self),
            let out = try? TensorImpl.empty([1, 1, 1], dtype: .float16, on: self)
        else { return nil }
        let values = [floatToHalf(2048)] + [UInt16](repeating: floatToHalf(0.5), count: 4096)
        values.withUnsafeBytes { write($0, into: x) }
        [UInt16](repeating: floatToHalf(1), count: 4097).withUnsafeBytes { write($0, into: y) }
        guard mpsProduct(x, y, into: out, type: .float16) else { return nil }
        var bits: UInt16 = 0
        withUnsafeMutableBytes(of: &bits) { read(out, into: $0) }
        let sum = halfToFloat(bits)
        products.float16ViaMPS = sum == 4096
        return sum
    }
}
#endif
