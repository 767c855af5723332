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

/// A tile of the SIMD-group products (`LUCID_SIMD_TILE_PRODUCT`, Kernels/Common.metal): a
/// threadgroup of `MetalBackend.simdGemmThreads` computes `rows`×`columns` outputs, staging
/// 16-wide slices along k in threadgroup memory with rows padded by 4 floats.
struct SimdTile: Equatable, Sendable {
    let rows: Int, columns: Int

    /// gemm_simd and the convolution passes.
    static let small = SimdTile(rows: 32, columns: 32)
    /// gemm_simd64: a quarter of the threadgroups of `small` for the same product, each loading
    /// half as much per output.
    static let large = SimdTile(rows: 64, columns: 64)

    /// Its threadgroup memory in float32s (`LUCID_SG_FLOATS`): a [rows][16 + 4] and
    /// b [16][columns + 4], which the result's strips reuse.
    var threadgroupFloats: Int { rows * (16 + 4) + 16 * (columns + 4) }

    /// Threadgroups over `entries` m×n products.
    func groups(entries: Int, m: Int, n: Int) -> Int {
        entries * ((m + rows - 1) / rows) * ((n + columns - 1) / columns)
    }
}

/// Matrix products on the GPU. float32 products go to Metal Performance Shaders
/// (`MPSMatrixMultiplication`, float32 accumulation, one call per batch), a bias then added by
/// `gemm_add_bias_float32` in float32, as the host adds it; float16 ones without a bias too
/// where the self-test saw MPS sum float16 in float32 (a bias added after MPS's float16 result
/// would round twice). bfloat16, float16 with a bias and layouts MPS cannot read run
/// `gemm_simd`/`gemm_simd64` (Kernels/Matmul.metal: the SIMD groups' 8×8 matrix units over
/// 32×32 or 64×64 tiles, float32 accumulators, the bias added before the one rounding, as the
/// host computes them), or a thread per output where 32-bit indices do not reach or the
/// pipeline cannot have a tile's 128 threads. Integer products wrap in int64, as on the host.
extension MetalBackend: MatmulKernels {
    /// A `gemm_simd` threadgroup: four SIMD groups of 32.
    static let simdGemmThreads = 128

    /// The 64×64 tile serves products with at least this many of them (both sides at least
    /// 64): about two threadgroups per core of the largest Apple GPUs, each tile loading half
    /// as much per output as a 32×32 one. Smaller products keep the 32×32 tile, whose four
    /// times as many threadgroups fill the GPU, and so do skinny ones, where most of a 64-row
    /// or 64-column tile would be padding.
    static let largeTileGroups = 128

    /// The tile of a `batch` of m×n products.
    static func gemmTile(batch: Int, m: Int, n: Int) -> SimdTile {
        m >= SimdTile.large.rows && n >= SimdTile.large.columns
            && SimdTile.large.groups(entries: batch, m: m, n: n) >= largeTileGroups ? .large : .small
    }

    /// Products of floating and int32/int64 dtypes run here; others on the host.
    func matmulRoute(_ call: KernelCall) -> KernelRoute {
        let out = call.writes[0]
        return out.numel == 0 || out.dtype.isFloatingPoint || out.dtype == .int32 || out.dtype == .int64 ? .native : .host
    }

    func gemm(_ a: TensorImpl, _ b: TensorImpl, bias: TensorImpl?, into out: TensorImpl) {
        guard out.numel > 0 else { return }
        if a.shape[2] > 0, let type = mpsType(out, bias: bias), mpsProduct(a, b, into: out, type: type) {
            if let bias { addBias(bias, to: out) }
            return
        }
        gemmKernel(a, b, bias: bias, into: out)
    }

    /// The MPS data type a product into `out` runs in, or nil when it runs on lucid's kernels.
    private func mpsType(_ out: TensorImpl, bias: TensorImpl?) -> MPSDataType? {
        switch out.dtype {
        case .float32:
            // The bias is added after, in float32: the one add the host makes. Its grid has
            // 32-bit coordinates.
            let rows = out.shape[0] * out.shape[1]
            return bias == nil || (rows <= Int(UInt32.max) && out.shape[2] <= Int(UInt32.max)) ? .float32 : nil
        case .float16:
            return bias == nil && products.float16ViaMPS ? .float16 : nil
        default:
            return nil
        }
    }

    /// Adds `bias` [n] to every row of the contiguous float32 [batch, m, n] `out`.
    private func addBias(_ bias: TensorImpl, to out: TensorImpl) {
        let (rows, n) = (out.shape[0] * out.shape[1], out.shape[2])
        encode("gemm_add_bias_float32", grid: MTLSize(width: n, height: rows, depth: 1)) { e in
            bind(out, 0, e)
            bind(bias, 1, e)
            setBytes([UInt32(n), UInt32(rows)], 2, e)
        }
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

    /// Encodes a kernel of the SIMD-group tile family (`gemm_simd`, `gemm_simd64`, the
    /// convolution passes): a threadgroup of `simdGemmThreads` per `tile` of `entries` m×n
    /// products, reading `a` (buffer 0), `b` (1) and the bias when given (2), writing `out`
    /// (3), with the kernel's shape words (4).
    func encodeTiles(
        _ kernel: String, tile: SimdTile = .small, entries: Int, m: Int, n: Int, _ a: TensorImpl, _ b: TensorImpl,
        bias: TensorImpl?, out: TensorImpl, shape: [Int32]
    ) {
        let groups = tile.groups(entries: entries, m: m, n: n)
        guard groups > 0 else { return }
        let floatsPerThread = (tile.threadgroupFloats + Self.simdGemmThreads - 1) / Self.simdGemmThreads
        encode(kernel, groups: groups, width: Self.simdGemmThreads, floatsPerThread: floatsPerThread) { e in
            bind(a, 0, e)
            bind(b, 1, e)
            bind(bias ?? a, 2, e)  // read only when has_bias is set; `a` has the bias's dtype
            bind(out, 3, e)
            setBytes(shape, 4, e)
        }
    }

    /// The product on lucid's kernels, on `tile` when given (else the one `gemmTile` picks).
    func gemmKernel(_ a: TensorImpl, _ b: TensorImpl, bias: TensorImpl?, into out: TensorImpl, tile: SimdTile? = nil) {
        let bindAll = { (e: any MTLComputeCommandEncoder) in
            bind(a, 0, e)
            bind(b, 1, e)
            bind(bias ?? out, 2, e)  // read only when has_bias is set
            bind(out, 3, e)
            setBytes(gemmShape(a, b, out, bias: bias != nil), 4, e)
        }
        // The SIMD-group kernels need exactly 128 threads per threadgroup and 32-bit indices;
        // the 64×64 tile falls back to the 32×32 one where its pipeline cannot have them.
        let (batch, m, n) = (out.shape[0], out.shape[1], out.shape[2])
        let tiles = [tile ?? Self.gemmTile(batch: batch, m: m, n: n), .small]
        let name = { (tile: SimdTile) in tile == .large ? "gemm_simd64_\(out.dtype.name)" : "gemm_simd_\(out.dtype.name)" }
        if out.dtype.isFloatingPoint, let shape = gemmShape32(a, b, out, bias: bias != nil),
            let tile = tiles.first(where: { (maxThreadsPerThreadgroup(name($0)) ?? 0) >= Self.simdGemmThreads })
        {
            encodeTiles(name(tile), tile: tile, entries: batch, m: m, n: n, a, b, bias: bias, out: out, shape: shape)
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
