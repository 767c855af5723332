#if canImport(Metal) && !LUCID_NO_METAL
import Metal

/// The geometry a window kernel reads (Kernels/Convolution.metal `WindowShape`): 18 int64
/// words, the last four the strides of the strided operand.
private func windowShape(n: Int, c: Int, _ g: WindowGeometry, strides: [Int]) -> [Int64] {
    [
        n, c, g.input.0, g.input.1, g.output.0, g.output.1, g.kernel.0, g.kernel.1, g.stride.0, g.stride.1,
        g.padding.0, g.padding.1, g.dilation.0, g.dilation.1,
    ].map(Int64.init) + strides.map(Int64.init)
}

/// The problem a direct convolution kernel reads (Kernels/Convolution.metal `ConvShape32`):
/// 18 int32 words, the last the length of the weight pass's k chunks (`kChunk`), or nil when an
/// index of the pass does not fit 32 bits.
private func convShape(_ p: ConvolutionProblem, bias: Bool, kChunk: Int = 0) -> [Int32]? {
    let words = [
        p.batch, p.channels, p.outChannels, p.groups, p.inH, p.inW, p.outH, p.outW, p.kH, p.kW,
        p.strideH, p.strideW, p.padH, p.padW, p.dilH, p.dilW, bias ? 1 : 0, kChunk,
    ]
    let limit = Int(Int32.max)
    // The largest index any pass forms: an element of x, of the output (gradient), of the
    // weight, or along a product's k (the weight pass runs over every image's pixels).
    let sizes = [
        p.batch * p.channels * p.inH * p.inW, p.batch * p.outChannels * p.outH * p.outW,
        p.outChannels * (p.channels / max(p.groups, 1)) * p.kH * p.kW, p.batch * p.outH * p.outW,
    ]
    guard sizes.allSatisfy({ $0 <= limit }), words.allSatisfy({ $0 >= 0 && $0 <= limit }) else { return nil }
    return words.map { Int32($0) }
}

/// Convolution on the GPU. The three passes of conv2d (and of conv_transpose2d, whose passes
/// they are) run as implicit GEMM on the SIMD-group tiles (Kernels/Convolution.metal): each
/// product reads the windows it needs from the image, so no im2col buffer is made, and the
/// weight pass splits its long sum when it has few tiles. im2col and col2im remain for what
/// the direct kernels do not take, where the op layer composes.
extension MetalBackend: ConvolutionKernels, DirectConvolutionKernels {
    func convolutionRoute(_ call: KernelCall) -> KernelRoute {
        switch call.op {
        case .im2col:
            let x = call.reads[0], cols = call.writes[0]
            return cols.numel == 0 || x.dtype.isFloatingPoint && cols.dtype == x.dtype && cols.isContiguous && x.ndim == 4
                ? .native : .host
        case .col2im:
            let cols = call.reads[0], x = call.writes[0]
            return x.numel == 0
                || x.dtype.isFloatingPoint && cols.dtype == x.dtype && x.isContiguous && x.ndim == 4
                    && cols.ndim == 3
                ? .native : .host
        case .convolution(let pass, let problem):
            let tensors = call.reads + call.writes
            let kernel = Self.convolutionKernel(pass, problem.dtype)
            let takes =
                [DType.float32, .float16, .bfloat16].contains(problem.dtype)
                && tensors.allSatisfy { $0.dtype == problem.dtype && $0.isContiguous }
                && convShape(problem, bias: false) != nil
                && (maxThreadsPerThreadgroup(kernel) ?? 0) >= Self.simdGemmThreads
            return takes ? .native : .compose
        default:
            return .compose
        }
    }

    static func convolutionKernel(_ pass: ConvolutionPassKind, _ dtype: DType) -> String {
        switch pass {
        case .forward: "conv_forward_\(dtype.name)"
        case .backwardData: "conv_backward_data_\(dtype.name)"
        case .backwardWeights: "conv_backward_weights_\(dtype.name)"
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

    /// The weight pass's sum over its k = n·oh·ow terms is split into chunks when its tiles
    /// alone are fewer than this many threadgroups (a 7×7 stem from 3 to 64 channels has 10):
    /// about three for each core of the largest Apple GPUs.
    static let weightPassGroups = 256
    /// The shortest chunk: a chunk's partial sums cost a store and a read of the weight's size,
    /// paid for by at least this many terms (16 of the tiles' 16-wide k slices).
    static let shortestChunk = 256

    /// How the weight pass of `tiles` 32×32 tiles over `k` terms splits its sum: the chunks'
    /// length (a multiple of the 16-wide k slices) and count, enough for about
    /// `weightPassGroups` threadgroups in all, none shorter than `shortestChunk`, and their
    /// partial sums (`weightCount` floats each) addressable with 32-bit indices. One chunk of
    /// length k when the tiles are enough.
    static func weightPassChunks(tiles: Int, k: Int, weightCount: Int) -> (length: Int, count: Int) {
        let wanted = min(
            (weightPassGroups + tiles - 1) / max(tiles, 1), k / shortestChunk, Int(Int32.max) / max(weightCount, 1))
        guard wanted > 1 else { return (k, 1) }
        let length = ((k + wanted - 1) / wanted + 15) / 16 * 16
        return (length, (k + length - 1) / length)
    }

    /// One pass on a threadgroup of 128 threads per 32×32 tile of each product: forward and
    /// backward-data products per (image, group), backward-weights per group
    /// (`weightGradient`).
    func convolution(
        _ pass: ConvolutionPassKind, _ problem: ConvolutionProblem, x: TensorImpl?, weight: TensorImpl?,
        bias: TensorImpl?, gradOut: TensorImpl?, into out: TensorImpl
    ) throws {
        guard out.numel > 0 else { return }
        let kernel = Self.convolutionKernel(pass, problem.dtype)
        guard (maxThreadsPerThreadgroup(kernel) ?? 0) >= Self.simdGemmThreads else {
            throw LucidError.runtime("convolution: \(kernel) cannot have a tile's \(Self.simdGemmThreads) threads here")
        }
        let p = problem, cg = p.channels / p.groups, og = p.outChannels / p.groups
        // The two operands each kernel reads (buffers 0 and 1) and its products' extents.
        let operands: (TensorImpl?, TensorImpl?)
        let (entries, m, n): (Int, Int, Int)
        switch pass {
        case .forward:
            operands = (x, weight)
            (entries, m, n) = (p.batch * p.groups, og, p.outH * p.outW)
        case .backwardData:
            operands = (gradOut, weight)
            (entries, m, n) = (p.batch * p.groups, cg, p.inH * p.inW)
        case .backwardWeights:
            guard let x, let gradOut else { throw LucidError.runtime("convolution: the \(pass) pass is missing an operand") }
            return try weightGradient(p, x: x, gradOut: gradOut, into: out)
        }
        guard let first = operands.0, let second = operands.1 else {
            throw LucidError.runtime("convolution: the \(pass) pass is missing an operand")
        }
        guard let shape = convShape(p, bias: bias != nil) else {
            throw LucidError.runtime("convolution: \(problem) does not fit the kernels' 32-bit indices")
        }
        encodeTiles(kernel, entries: entries, m: m, n: n, first, second, bias: bias, out: out, shape: shape)
    }

    /// The weight pass, per group gw[Og, Cg·kk] = gy[Og, n·oh·ow] · window(x)ᵀ, its sum split
    /// into chunks of `chunk` terms (nil: as `weightPassChunks` splits it): a pass per chunk
    /// into float32 partial sums, then `conv_backward_weights_sum` adds them in order and
    /// rounds once. One chunk writes the gradient directly.
    func weightGradient(
        _ p: ConvolutionProblem, x: TensorImpl, gradOut: TensorImpl, into out: TensorImpl, chunk: Int? = nil
    ) throws {
        let kernel = Self.convolutionKernel(.backwardWeights, p.dtype)
        let (og, kdim, k) = (p.outChannels / p.groups, p.channels / p.groups * p.kH * p.kW, p.batch * p.outH * p.outW)
        // float32's partial sums are its direct kernel's output.
        let partialKernel = p.dtype == .float32 ? kernel : "conv_backward_weights_partial_\(p.dtype.name)"
        let sumKernel = "conv_backward_weights_sum_\(p.dtype.name)"
        var chunks = Self.weightPassChunks(tiles: SimdTile.small.groups(entries: p.groups, m: og, n: kdim), k: k, weightCount: out.numel)
        if let chunk { chunks = (max(chunk, 1), (k + max(chunk, 1) - 1) / max(chunk, 1)) }
        let splits = (maxThreadsPerThreadgroup(partialKernel) ?? 0) >= Self.simdGemmThreads
        if !splits || chunks.count <= 1 || chunks.count > Int(Int32.max) / max(out.numel, 1) { chunks = (k, 1) }
        guard let shape = convShape(p, bias: false, kChunk: chunks.length) else {
            throw LucidError.runtime("convolution: \(p) does not fit the kernels' 32-bit indices")
        }
        guard chunks.count > 1 else {
            return encodeTiles(kernel, entries: p.groups, m: og, n: kdim, x, gradOut, bias: nil, out: out, shape: shape)
        }
        let partial = try TensorImpl.empty([chunks.count * out.numel], dtype: .float32, on: self)
        encodeTiles(
            partialKernel, entries: chunks.count * p.groups, m: og, n: kdim, x, gradOut, bias: nil, out: partial, shape: shape)
        encode(sumKernel, count: out.numel) { e in
            bind(partial, 0, e)
            bind(out, 1, e)
            setBytes([UInt32(out.numel), UInt32(chunks.count)], 2, e)
        }
    }
}
#endif
