// The SIMD-group products' tiles and the convolution weight pass's split sum on the emulated GPU
// (the check build only, where the MSLKernels module of tests/metal exists), against sums in
// Double of the same rounded inputs: sizes that end inside a tile or are smaller than one,
// every floating dtype, batches, transposed operands and a batch-broadcast one, and sums cut
// into chunks of any length.
#if canImport(MSLKernels)
import Testing
@testable import LucidEngine

private let floatTypes: [DType] = [.float32, .float16, .bfloat16]

/// The unit roundoff of `dtype` and half its spacing of subnormals: a float32 sum rounded once
/// into it is within the first relatively, or the second absolutely, of the sum (plus the
/// float32 sum's own error).
private func roundoff(_ dtype: DType) -> (relative: Double, absolute: Double) {
    switch dtype {
    case .float16: (0x1p-11, 0x1p-25)
    case .bfloat16: (0x1p-8, 0x1p-134)
    default: (0x1p-24, 0x1p-150)
    }
}

/// `v` as `dtype` holds it.
private func rounded(_ v: Float, _ dtype: DType) -> Float {
    switch dtype {
    case .float16: halfToFloat(floatToHalf(v))
    case .bfloat16: bfloatToFloat(floatToBFloat(v))
    default: v
    }
}

/// A contiguous tensor of `shape` on `gpu` holding `count` values from `rng` rounded into
/// `dtype`, and those values.
private func tensor(
    _ shape: [Int], _ dtype: DType, _ gpu: MetalBackend, _ rng: inout SelfTestNumbers
) throws -> (TensorImpl, [Double]) {
    let t = try TensorImpl.empty(shape, dtype: dtype, on: gpu)
    let values = rng.values(t.numel, scale: 1).map { rounded($0, dtype) }
    var bytes: [UInt8] = []
    for v in values {
        switch dtype {
        case .float16: withUnsafeBytes(of: floatToHalf(v)) { bytes += $0 }
        case .bfloat16: withUnsafeBytes(of: floatToBFloat(v)) { bytes += $0 }
        default: withUnsafeBytes(of: v) { bytes += $0 }
        }
    }
    bytes.withUnsafeBytes { gpu.write($0, into: t) }
    return (t, values.map(Double.init))
}

/// The values of a contiguous floating tensor on `gpu`.
private func values(_ t: TensorImpl, _ gpu: MetalBackend) -> [Double] {
    var bytes = [UInt8](repeating: 0, count: t.numel * t.dtype.itemSize)
    bytes.withUnsafeMutableBytes { gpu.read(t, into: $0) }
    return bytes.withUnsafeBytes { raw in
        (0..<t.numel).map { i in
            switch t.dtype {
            case .float16: Double(halfToFloat(raw.load(fromByteOffset: i * 2, as: UInt16.self)))
            case .bfloat16: Double(bfloatToFloat(raw.load(fromByteOffset: i * 2, as: UInt16.self)))
            default: Double(raw.load(fromByteOffset: i * 4, as: Float.self))
            }
        }
    }
}

/// The outputs that miss `want` by more than one rounding into `dtype` plus a float32 sum's
/// error over `terms` terms of magnitude `scale` (each output's sum of |products|), as
/// "index: got, want".
private func misses(_ got: [Double], _ want: [Double], scale: [Double], terms: Int, _ dtype: DType) -> [String] {
    guard got.count == want.count else { return ["\(got.count) outputs for \(want.count)"] }
    return want.indices.compactMap { i in
        let unit = roundoff(dtype)
        let bound = unit.relative * abs(want[i]) + unit.absolute + Double(terms + 2) * 0x1p-24 * scale[i]
        return abs(got[i] - want[i]) <= bound ? nil : "\(i): \(got[i]), \(want[i])"
    }
}

/// One product: a batch of m×k by k×n, a stored transposed (columns contiguous) or not, b
/// likewise, b shared by the batch (batch stride 0) or not, with a bias or without.
private struct Product: CustomStringConvertible, Sendable {
    let batch: Int, m: Int, n: Int, k: Int
    let transposeA: Bool, transposeB: Bool, broadcastB: Bool, bias: Bool

    var description: String {
        "\(batch)×\(m)×\(k)·\(k)×\(n)" + (transposeA ? " aᵀ" : "") + (transposeB ? " bᵀ" : "")
            + (broadcastB ? " b shared" : "") + (bias ? " +bias" : "")
    }
}

// Sizes of 1, 63, 65, 130 and 257 in each of m, n and k (ends inside a 32- and a 64-wide
// tile, or before one), exact multiples of both tiles, and each layout.
private let products: [Product] = [
    Product(batch: 2, m: 1, n: 65, k: 257, transposeA: false, transposeB: true, broadcastB: true, bias: true),
    Product(batch: 2, m: 63, n: 130, k: 1, transposeA: true, transposeB: false, broadcastB: false, bias: false),
    Product(batch: 1, m: 65, n: 63, k: 65, transposeA: true, transposeB: true, broadcastB: false, bias: true),
    Product(batch: 2, m: 130, n: 1, k: 63, transposeA: false, transposeB: false, broadcastB: true, bias: false),
    Product(batch: 1, m: 257, n: 130, k: 17, transposeA: false, transposeB: true, broadcastB: false, bias: true),
    Product(batch: 3, m: 64, n: 128, k: 32, transposeA: true, transposeB: false, broadcastB: true, bias: true),
]

@Suite struct MetalTileTests {
    @Test(arguments: floatTypes)
    func bothTilesMatchDoubleSumsAtEveryEdge(dtype: DType) throws {
        let gpu = try #require(Backends.metalBackend)
        var rng = SelfTestNumbers(seed: 44)
        for p in products {
            // a as [batch, m, k] (or its transpose stored [batch, k, m]); b as [k, n] (or
            // [n, k]), one per batch entry unless shared.
            let (a, av) = try tensor([p.batch, p.m, p.k], dtype, gpu, &rng)
            let bBatch = p.broadcastB ? 1 : p.batch
            let (b, bv) = try tensor([bBatch, p.k, p.n], dtype, gpu, &rng)
            let (bias, biasv) = try tensor([p.n], dtype, gpu, &rng)
            let a3 = a.view(
                shape: [p.batch, p.m, p.k], strides: p.transposeA ? [p.m * p.k, 1, p.m] : [p.m * p.k, p.k, 1], offset: 0)
            let b3 = b.view(
                shape: [p.batch, p.k, p.n],
                strides: [p.broadcastB ? 0 : p.k * p.n] + (p.transposeB ? [1, p.k] : [p.n, 1]), offset: 0)
            var want = [Double](repeating: 0, count: p.batch * p.m * p.n), scale = want
            for e in 0..<p.batch {
                for i in 0..<p.m {
                    for j in 0..<p.n {
                        var sum = p.bias ? biasv[j] : 0, size = abs(sum)
                        for l in 0..<p.k {
                            let x = av[e * p.m * p.k + (p.transposeA ? l * p.m + i : i * p.k + l)]
                            let y = bv[(p.broadcastB ? 0 : e) * p.k * p.n + (p.transposeB ? j * p.k + l : l * p.n + j)]
                            sum += x * y
                            size += abs(x * y)
                        }
                        want[(e * p.m + i) * p.n + j] = sum
                        scale[(e * p.m + i) * p.n + j] = size
                    }
                }
            }
            for tile in [SimdTile.small, .large] {
                let out = try TensorImpl.empty([p.batch, p.m, p.n], dtype: dtype, on: gpu)
                let before = gpu.stats.dispatches
                gpu.gemmKernel(a3, b3, bias: p.bias ? bias : nil, into: out, tile: tile)
                let kernel = tile == .large ? "gemm_simd64_\(dtype.name)" : "gemm_simd_\(dtype.name)"
                #expect(gpu.stats.dispatches[kernel, default: 0] == before[kernel, default: 0] + 1, "\(p) on \(kernel)")
                let wrong = misses(values(out, gpu), want, scale: scale, terms: p.k, dtype)
                #expect(wrong.isEmpty, "\(p) on \(kernel): \(wrong.count) outputs wrong, first \(wrong.prefix(3))")
            }
        }
    }

    @Test(arguments: floatTypes)
    func theWeightPassSplitIntoChunksSumsAsInOnePass(dtype: DType) throws {
        let gpu = try #require(Backends.metalBackend)
        var rng = SelfTestNumbers(seed: 7)
        // A 7×7 stem from 3 to 64 channels (stride 2, padding 3), and a grouped, dilated one
        // with a stride per axis; their sums over n·oh·ow = 128 and 2 · 3 · 7 = 42 terms.
        let stem = ConvolutionProblem(
            batch: 2, channels: 3, outChannels: 64, groups: 1,
            WindowGeometry(kernel: (7, 7), stride: (2, 2), padding: (3, 3), dilation: (1, 1), input: (15, 15), output: (8, 8)),
            dtype: dtype)
        let grouped = ConvolutionProblem(
            batch: 2, channels: 4, outChannels: 6, groups: 2,
            WindowGeometry(kernel: (3, 2), stride: (2, 1), padding: (1, 1), dilation: (1, 2), input: (5, 7), output: (3, 7)),
            dtype: dtype)
        for p in [stem, grouped] {
            let cg = p.channels / p.groups, og = p.outChannels / p.groups, terms = p.batch * p.outH * p.outW
            let (x, xv) = try tensor([p.batch, p.channels, p.inH, p.inW], dtype, gpu, &rng)
            let (gy, gv) = try tensor([p.batch, p.outChannels, p.outH, p.outW], dtype, gpu, &rng)
            var want = [Double](repeating: 0, count: p.outChannels * cg * p.kH * p.kW), scale = want
            for n in 0..<p.batch {
                for o in 0..<p.outChannels {
                    for oy in 0..<p.outH {
                        for ox in 0..<p.outW {
                            let g = gv[((n * p.outChannels + o) * p.outH + oy) * p.outW + ox]
                            for c in 0..<cg {
                                for ky in 0..<p.kH {
                                    for kx in 0..<p.kW {
                                        let iy = oy * p.strideH - p.padH + ky * p.dilH, ix = ox * p.strideW - p.padW + kx * p.dilW
                                        guard iy >= 0, iy < p.inH, ix >= 0, ix < p.inW else { continue }
                                        let v = g * xv[((n * p.channels + o / og * cg + c) * p.inH + iy) * p.inW + ix]
                                        want[((o * cg + c) * p.kH + ky) * p.kW + kx] += v
                                        scale[((o * cg + c) * p.kH + ky) * p.kW + kx] += abs(v)
                                    }
                                }
                            }
                        }
                    }
                }
            }
            // One chunk, chunks of one term, lengths that do not divide the sum, and the
            // split the backend picks.
            for chunk in [nil, 1, 5, 16, 37, terms - 1, terms, terms + 3] as [Int?] {
                let out = try TensorImpl.empty([p.outChannels, cg, p.kH, p.kW], dtype: dtype, on: gpu)
                let before = gpu.stats.dispatches
                try gpu.weightGradient(p, x: x, gradOut: gy, into: out, chunk: chunk)
                let sums =
                    gpu.stats.dispatches["conv_backward_weights_sum_\(dtype.name)", default: 0]
                    - before["conv_backward_weights_sum_\(dtype.name)", default: 0]
                let chunks = chunk.map { (terms + $0 - 1) / $0 } ?? 1
                #expect(sums == (chunks > 1 ? 1 : 0), "\(p) in chunks of \(chunk.map(String.init) ?? "its own")")
                let wrong = misses(values(out, gpu), want, scale: scale, terms: terms, dtype)
                #expect(wrong.isEmpty, "chunks of \(chunk.map(String.init) ?? "its own"): \(wrong.count) wrong, first \(wrong.prefix(3))")
            }
        }
    }

    @Test func productsTakeTheLargeTileOnlyWhenItFillsTheGPU() {
        #expect(MetalBackend.gemmTile(batch: 1, m: 1024, n: 1024) == .large)
        #expect(MetalBackend.gemmTile(batch: 128, m: 64, n: 64) == .large)
        #expect(MetalBackend.gemmTile(batch: 1, m: 256, n: 256) == .small)  // 16 tiles of 64×64
        #expect(MetalBackend.gemmTile(batch: 1, m: 16, n: 65536) == .small)  // skinny
        #expect(MetalBackend.gemmTile(batch: 1, m: 65536, n: 63) == .small)
        #expect(SimdTile.large.groups(entries: 2, m: 65, n: 128) == 2 * 2 * 2)
        #expect(SimdTile.small.threadgroupFloats == 32 * 20 + 16 * 36)
        #expect(SimdTile.large.threadgroupFloats == 64 * 20 + 16 * 68)
    }

    @Test func theStemsWeightPassIsSplitIntoEnoughThreadgroups() {
        // A ResNet stem on 8 images of 224²: 64 × 147 outputs in 2 × 5 tiles, a sum over
        // 8 · 112 · 112 terms.
        let k = 8 * 112 * 112
        let (length, count) = MetalBackend.weightPassChunks(tiles: 10, k: k, weightCount: 64 * 147)
        #expect(count * 10 >= MetalBackend.weightPassGroups)
        #expect(length % 16 == 0 && length >= MetalBackend.shortestChunk)
        #expect(length * count >= k && length * (count - 1) < k)
        // Enough tiles already, or too short a sum: one chunk.
        let enough = MetalBackend.weightPassChunks(tiles: 400, k: k, weightCount: 1 << 20)
        #expect(enough.length == k && enough.count == 1)
        let short = MetalBackend.weightPassChunks(tiles: 1, k: 300, weightCount: 27)
        #expect(short.length == 300 && short.count == 1)
        // Partial sums that 32-bit indices cannot address: fewer chunks.
        let big = MetalBackend.weightPassChunks(tiles: 1, k: 1 << 30, weightCount: 1 << 28)
        #expect(big.count * (1 << 28) <= Int(Int32.max) && big.count > 1)
    }
}
#endif
