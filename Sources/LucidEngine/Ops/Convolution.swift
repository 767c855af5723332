/// Convolution and pooling, built on im2col (`unfold`) and its adjoint col2im (`fold`):
/// a convolution is a matmul of the weights with the unfolded input, so it inherits the
/// lower-precision GEMM path under autocast.
package enum Convolution {
    static let unfold = OpInfo("unfold", .none)
    static let fold = OpInfo("fold", .none)
    static let conv1d = OpInfo("conv1d", .lowerPrecision)
    static let conv2d = OpInfo("conv2d", .lowerPrecision)
    static let convTranspose2d = OpInfo("conv_transpose2d", .lowerPrecision)
    static let maxPool2d = OpInfo("max_pool2d", .none)
    static let avgPool2d = OpInfo("avg_pool2d", .none)
    static let adaptiveAvgPool2d = OpInfo("adaptive_avg_pool2d", .none)
    /// The public ops (unfold and fold are their building blocks).
    static let infos = [conv1d, conv2d, convTranspose2d, maxPool2d, avgPool2d, adaptiveAvgPool2d]

    /// A pair of per-dimension parameters (height, width).
    package typealias Pair = (Int, Int)

    /// Output size of a sliding window, or nil when the window does not fit.
    static func windows(_ size: Int, kernel: Int, stride: Int, padding: Int, dilation: Int, ceil: Bool = false) -> Int? {
        let span = size + 2 * padding - dilation * (kernel - 1) - 1
        guard span >= 0 else { return nil }
        var n = (ceil ? (span + stride - 1) / stride : span / stride) + 1
        // With ceil mode the last window must start inside the input or its left padding.
        if ceil && (n - 1) * stride >= size + padding { n -= 1 }
        return n
    }

    /// Window parameters above this are refused, so that the size arithmetic cannot overflow.
    static let maxParameter = Int(Int32.max)

    private static func checkPositive(_ op: String, _ name: String, _ p: Pair, allowZero: Bool = false) throws {
        if p.0 < (allowZero ? 0 : 1) || p.1 < (allowZero ? 0 : 1) {
            throw LucidError.value("\(op): \(name) must be \(allowZero ? "non-negative" : "positive"), got (\(p.0), \(p.1))")
        }
        if p.0 > maxParameter || p.1 > maxParameter {
            throw LucidError.value("\(op): \(name) (\(p.0), \(p.1)) is larger than the supported \(maxParameter)")
        }
    }

    static func geometry(
        _ op: String, input: Pair, kernel: Pair, stride: Pair, padding: Pair, dilation: Pair,
        ceil: Bool = false
    ) throws -> WindowGeometry {
        try checkPositive(op, "kernel_size", kernel)
        try checkPositive(op, "stride", stride)
        try checkPositive(op, "dilation", dilation)
        try checkPositive(op, "padding", padding, allowZero: true)
        guard let oh = windows(input.0, kernel: kernel.0, stride: stride.0, padding: padding.0, dilation: dilation.0, ceil: ceil),
            let ow = windows(input.1, kernel: kernel.1, stride: stride.1, padding: padding.1, dilation: dilation.1, ceil: ceil),
            oh > 0, ow > 0
        else {
            throw LucidError.value(
                "\(op): the input of size (\(input.0), \(input.1)) with padding (\(padding.0), \(padding.1)) is smaller than the dilated "
                    + "kernel (\(dilation.0 * (kernel.0 - 1) + 1), \(dilation.1 * (kernel.1 - 1) + 1))"
            )
        }
        return WindowGeometry(kernel: kernel, stride: stride, padding: padding, dilation: dilation, input: input, output: (oh, ow))
    }

    /// [N, C, H, W] → [N, C·kh·kw, oh·ow]; the adjoint of `fold`.
    static func unfold(_ x: TensorImpl, _ g: WindowGeometry) throws -> TensorImpl {
        let n = x.shape[0], c = x.shape[1]
        let out = try TensorImpl.empty([n, c * g.kernel.0 * g.kernel.1, g.output.0 * g.output.1], dtype: x.dtype, on: x.backend)
        out.run(ConvolutionKernels.self, KernelCall(.im2col, reads: [x], writes: [out]), "im2col") { $0.im2col(x, g, into: out) }
        return Autograd.record(out, Autograd.name(unfold), [x]) { grad in [try fold(grad, g, channels: c)] }
    }

    /// [N, C·kh·kw, oh·ow] → [N, C, H, W], summing overlaps; the adjoint of `unfold`.
    static func fold(_ cols: TensorImpl, _ g: WindowGeometry, channels c: Int) throws -> TensorImpl {
        let out = try TensorImpl.empty([cols.shape[0], c, g.input.0, g.input.1], dtype: cols.dtype, on: cols.backend)
        out.run(ConvolutionKernels.self, KernelCall(.col2im, reads: [cols], writes: [out]), "col2im") { $0.col2im(cols, g, into: out) }
        return Autograd.record(out, Autograd.name(fold), [cols]) { grad in [try unfold(grad, g)] }
    }

    /// Adds a missing batch dimension to `x` when it has `ndim - 1` dimensions.
    private static func batched(_ op: String, _ x: TensorImpl, ndim: Int, layout: String) throws -> (TensorImpl, Bool) {
        if x.ndim == ndim { return (x, false) }
        if x.ndim == ndim - 1 { return (try ShapeOps.unsqueeze(x, 0), true) }
        throw LucidError.value("\(op): expected a \(ndim - 1)-D or \(ndim)-D input (\(layout)), got shape \(x.shape)")
    }

    /// `perGroup · groups`, the channel count a weight implies; a product beyond Int (a huge
    /// groups) is an error, as no tensor has that many channels.
    private static func channels(_ op: String, _ perGroup: Int, groups: Int) throws -> Int {
        guard groups > 0 else { throw LucidError.value("\(op): groups must be positive, got \(groups)") }
        let (n, overflow) = perGroup.multipliedReportingOverflow(by: groups)
        guard !overflow else { throw LucidError.value("\(op): groups=\(groups) is larger than any channel count") }
        return n
    }

    private static func checkConvParams(
        _ op: String, _ x: TensorImpl, _ w: TensorImpl, _ b: TensorImpl?, groups: Int,
        inChannels: Int, outChannels: Int
    ) throws {
        guard x.shape[1] == inChannels else {
            throw LucidError.value(
                "\(op): input has \(x.shape[1]) channels (shape \(x.shape)) but the weight of shape \(w.shape) with groups=\(groups) "
                    + "expects \(inChannels)"
            )
        }
        guard inChannels % groups == 0, outChannels % groups == 0 else {
            throw LucidError.value("\(op): in_channels \(inChannels) and out_channels \(outChannels) must be divisible by groups=\(groups)")
        }
        if let b, b.shape != [outChannels] {
            throw LucidError.value("\(op): bias must have shape [\(outChannels)], got \(b.shape)")
        }
    }

    /// 2-D cross-correlation of [N, C, H, W] (or [C, H, W]) input with [O, C/groups, kh, kw]
    /// weights; lower precision under autocast.
    package static func conv2d(
        _ input: TensorImpl, _ weight: TensorImpl, _ bias: TensorImpl?, stride: Pair, padding: Pair,
        dilation: Pair, groups: Int, op: OpInfo = conv2d
    ) throws -> TensorImpl {
        let name = op.name
        try Ops.checkSameDevice(name, [input, weight] + (bias.map { [$0] } ?? []))
        guard weight.ndim == 4 else { throw LucidError.value("\(name): weight must be 4-D [out, in/groups, kh, kw], got \(weight.shape)") }
        let (x0, unbatched) = try batched(name, input, ndim: 4, layout: "[N, C, H, W]")
        let o = weight.shape[0], cg = weight.shape[1]
        try checkConvParams(
            name, x0, weight, bias, groups: groups, inChannels: try channels(name, cg, groups: groups),
            outChannels: o)
        let g = try geometry(
            name, input: (x0.shape[2], x0.shape[3]), kernel: (weight.shape[2], weight.shape[3]),
            stride: stride, padding: padding, dilation: dilation)
        let out = try op.run([x0, weight] + (bias.map { [$0] } ?? [])) { t in
            try Composite.checkSameDType(name, t)
            if let direct = try direct(name, t, groups: groups, g) { return direct }
            let x = t[0], w = t[1]
            let n = x.shape[0], k = cg * g.kernel.0 * g.kernel.1, l = g.output.0 * g.output.1
            let cols = try ShapeOps.reshape(try unfold(x, g), [n, groups, k, l])
            let wg = try ShapeOps.reshape(w, [groups, o / groups, k])
            var y = try ShapeOps.reshape(try LinearAlgebra.matmul(wg, cols), [n, o, g.output.0, g.output.1])
            if t.count > 2 { y = try Composite.add(y, try ShapeOps.reshape(t[2], [1, o, 1, 1])) }
            return y
        }
        return unbatched ? try ShapeOps.squeeze(out, dims: [0]) : out
    }

    /// conv2d through the backend's direct kernels (forward, and the backward passes in its
    /// graph node), or nil when the backend has none for this problem.
    private static func direct(_ name: String, _ t: [TensorImpl], groups: Int, _ g: WindowGeometry) throws -> TensorImpl? {
        // With a few input channels per group (an image model's first layer), the host's
        // bfloat16 kernels run at half the speed of its float32 ones on a CPU without bfloat16
        // arithmetic. float32 on the bfloat16 operands gives the same result (exact products,
        // float32 sums, rounded once). With it, the bfloat16 kernels are the faster (a third
        // of the float32 backward's time for one input channel).
        if t[0].dtype == .bfloat16, t[0].backend is HostBackend, !HostBackend.nativeBFloat16, t[0].shape[1] / groups <= 4 {
            guard let y = try direct(name, try t.map { try Ops.cast($0, to: .float32) }, groups: groups, g) else { return nil }
            return try Ops.cast(y, to: .bfloat16)
        }
        let x = try Ops.contiguous(t[0]), w = try Ops.contiguous(t[1])
        let b = t.count > 2 ? try Ops.contiguous(t[2]) : nil
        let o = w.shape[0]
        let problem = ConvolutionProblem(batch: x.shape[0], channels: x.shape[1], outChannels: o, groups: groups, g, dtype: x.dtype)
        let out = try TensorImpl.empty([x.shape[0], o, g.output.0, g.output.1], dtype: x.dtype, on: x.backend)
        let call = KernelCall(.convolution(.forward, problem), reads: Operands([x, w] + (b.map { [$0] } ?? [])), writes: [out])
        guard
            try out.runUnlessComposed(
                DirectConvolutionKernels.self, call, name,
                {
                    try $0.convolution(.forward, problem, x: x, weight: w, bias: b, gradOut: nil, into: out)
                }) != nil
        else { return nil }
        guard Autograd.tracks(x, w) || b?.requiresGrad == true && GradMode.isEnabled else { return out }
        // Only the wanted gradients are computed: an image batch needs none, its first layer's
        // weights do (and the node then keeps no weight for it).
        let needX = x.requiresGrad, needW = w.requiresGrad, needB = b?.requiresGrad == true
        let savedX = needW ? x : nil, savedW = needX ? w : nil, xShape = x.shape, wShape = w.shape
        return Autograd.record(out, Autograd.name(conv2d), [x, w] + (b.map { [$0] } ?? []), saved: [savedX, savedW]) { grad in
            let gy = try Ops.contiguous(grad)
            let gx = try savedW.map { try pass(name, .backwardData, problem, x: nil, weight: $0, gradOut: gy, shape: xShape) }
            let gw = try savedX.map { try pass(name, .backwardWeights, problem, x: $0, weight: nil, gradOut: gy, shape: wShape) }
            let gb = needB ? try Reductions.reduce(.sum, gy, dims: [0, 2, 3], keepdim: false) : nil
            return [gx, gw] + (b == nil ? [] : [gb])
        }
    }

    /// One pass of the backend's convolution kernels (a backward pass of conv2d or
    /// conv_transpose2d) into a new tensor of `shape`, on the backend and in the dtype of the
    /// tensor it reads; throws when the backend's kernel fails.
    private static func pass(
        _ name: String, _ kind: ConvolutionPassKind, _ problem: ConvolutionProblem, x: TensorImpl?,
        weight: TensorImpl?, gradOut: TensorImpl?, shape: [Int]
    ) throws -> TensorImpl {
        let source = (gradOut ?? x)!
        let out = try TensorImpl.empty(shape, dtype: source.dtype, on: source.backend)
        let call = KernelCall(.convolution(kind, problem), reads: Operands([x, weight, gradOut].compactMap { $0 }), writes: [out])
        guard
            try out.runUnlessComposed(
                DirectConvolutionKernels.self, call, name,
                {
                    try $0.convolution(kind, problem, x: x, weight: weight, bias: nil, gradOut: gradOut, into: out)
                }) != nil
        else {
            throw LucidError.runtime("\(name): the backend's \(kind) convolution kernel failed for problem \(problem)")
        }
        return out
    }

    /// conv_transpose2d through the backend's direct convolution kernels, or nil when it has
    /// none for this problem. A transposed convolution is the input gradient of the
    /// convolution `g` describes (from the [N, C_out, oh, ow] output image to the [N, C_in, h, w]
    /// input, with x's weight as that convolution's [C_in, C_out/groups, kh, kw] weight), so
    /// its forward is that convolution's backward-data pass, and its backward passes are the
    /// convolution's forward (for x) and backward-weights (for the weight, with x as the
    /// output gradient). The bias is the caller's.
    private static func directTranspose(
        _ name: String, _ t: [TensorImpl], groups: Int,
        _ g: WindowGeometry
    ) throws -> TensorImpl? {
        let x = try Ops.contiguous(t[0]), w = try Ops.contiguous(t[1])
        let n = x.shape[0], cin = w.shape[0], cout = w.shape[1] * groups
        let problem = ConvolutionProblem(batch: n, channels: cout, outChannels: cin, groups: groups, g, dtype: x.dtype)
        let out = try TensorImpl.empty([n, cout, g.input.0, g.input.1], dtype: x.dtype, on: x.backend)
        let call = KernelCall(.convolution(.backwardData, problem), reads: [w, x], writes: [out])
        guard
            try out.runUnlessComposed(
                DirectConvolutionKernels.self, call, name,
                {
                    try $0.convolution(.backwardData, problem, x: nil, weight: w, bias: nil, gradOut: x, into: out)
                }) != nil
        else { return nil }
        guard Autograd.tracks(x, w) else { return out }
        let savedX = w.requiresGrad ? x : nil, savedW = x.requiresGrad ? w : nil, xShape = x.shape, wShape = w.shape
        return Autograd.record(out, Autograd.name(convTranspose2d), [x, w], saved: [savedX, savedW]) { grad in
            let gy = try Ops.contiguous(grad)
            let gx = try savedW.map { try pass(name, .forward, problem, x: gy, weight: $0, gradOut: nil, shape: xShape) }
            let gw = try savedX.map { try pass(name, .backwardWeights, problem, x: gy, weight: nil, gradOut: $0, shape: wShape) }
            return [gx, gw]
        }
    }

    /// 1-D cross-correlation of [N, C, L] (or [C, L]) input with [O, C/groups, k] weights.
    package static func conv1d(
        _ input: TensorImpl, _ weight: TensorImpl, _ bias: TensorImpl?, stride: Int, padding: Int,
        dilation: Int, groups: Int
    ) throws -> TensorImpl {
        guard weight.ndim == 3 else { throw LucidError.value("conv1d: weight must be 3-D [out, in/groups, k], got \(weight.shape)") }
        let (x, unbatched) = try batched(conv1d.name, input, ndim: 3, layout: "[N, C, L]")
        let y = try conv2d(
            try ShapeOps.unsqueeze(x, 2), try ShapeOps.unsqueeze(weight, 2), bias, stride: (1, stride),
            padding: (0, padding), dilation: (1, dilation), groups: groups, op: conv1d)
        let out = try ShapeOps.squeeze(y, dims: [2])
        return unbatched ? try ShapeOps.squeeze(out, dims: [0]) : out
    }

    /// The adjoint of conv2d with respect to its input ("deconvolution"): [N, Cin, H, W] input,
    /// [Cin, Cout/groups, kh, kw] weights.
    package static func convTranspose2d(
        _ input: TensorImpl, _ weight: TensorImpl, _ bias: TensorImpl?, stride: Pair,
        padding: Pair, outputPadding: Pair, dilation: Pair, groups: Int
    ) throws -> TensorImpl {
        let name = convTranspose2d.name
        try Ops.checkSameDevice(name, [input, weight] + (bias.map { [$0] } ?? []))
        guard weight.ndim == 4 else { throw LucidError.value("\(name): weight must be 4-D [in, out/groups, kh, kw], got \(weight.shape)") }
        let (x0, unbatched) = try batched(name, input, ndim: 4, layout: "[N, C, H, W]")
        let cin = weight.shape[0], cog = weight.shape[1], kh = weight.shape[2], kw = weight.shape[3]
        try checkConvParams(
            name, x0, weight, bias, groups: groups, inChannels: cin,
            outChannels: try channels(name, cog, groups: groups))
        try checkPositive(name, "stride", stride)
        try checkPositive(name, "dilation", dilation)
        try checkPositive(name, "padding", padding, allowZero: true)
        try checkPositive(name, "output_padding", outputPadding, allowZero: true)
        guard outputPadding.0 < Swift.max(stride.0, dilation.0), outputPadding.1 < Swift.max(stride.1, dilation.1) else {
            throw LucidError.value("\(name): output_padding (\(outputPadding.0), \(outputPadding.1)) must be smaller than stride or dilation")
        }
        let h = x0.shape[2], w = x0.shape[3]
        func outputSize(_ n: Int, _ s: Int, _ p: Int, _ d: Int, _ k: Int, _ op: Int) throws -> Int {
            let (grown, overflow) = Swift.max(n - 1, 0).multipliedReportingOverflow(by: s)
            let size = grown &- 2 * p &+ d * (k - 1) &+ op &+ 1
            guard !overflow, size <= Shape.maxElements else {
                throw LucidError.value("\(name): the output for input size \(n) and stride \(s) would be too large")
            }
            return size
        }
        let oh = try outputSize(h, stride.0, padding.0, dilation.0, kh, outputPadding.0)
        let ow = try outputSize(w, stride.1, padding.1, dilation.1, kw, outputPadding.1)
        guard oh > 0, ow > 0 else { throw LucidError.value("\(name): the output size (\(oh), \(ow)) is not positive") }
        let g = WindowGeometry(kernel: (kh, kw), stride: stride, padding: padding, dilation: dilation, input: (oh, ow), output: (h, w))
        let cout = cog * groups
        let out = try convTranspose2d.run([x0, weight] + (bias.map { [$0] } ?? [])) { t in
            try Composite.checkSameDType(name, t)
            if var y = try directTranspose(name, t, groups: groups, g) {
                if t.count > 2 { y = try Composite.add(y, try ShapeOps.reshape(t[2], [1, cout, 1, 1])) }
                return y
            }
            let x = t[0], wt = t[1], n = x.shape[0]
            let xg = try ShapeOps.reshape(x, [n, groups, cin / groups, h * w])
            let wg = try ShapeOps.transpose(try ShapeOps.reshape(wt, [groups, cin / groups, cog * kh * kw]), 1, 2)
            let cols = try ShapeOps.reshape(try LinearAlgebra.matmul(wg, xg), [n, cout * kh * kw, h * w])
            var y = try fold(cols, g, channels: cout)
            if t.count > 2 { y = try Composite.add(y, try ShapeOps.reshape(t[2], [1, cout, 1, 1])) }
            return y
        }
        return unbatched ? try ShapeOps.squeeze(out, dims: [0]) : out
    }

    /// [N, C, H, W] (or [C, H, W]) as [N·C, 1, H, W], for pooling each channel alike.
    private static func planes(_ op: String, _ input: TensorImpl) throws -> (TensorImpl, [Int]) {
        guard input.ndim == 3 || input.ndim == 4 else {
            throw LucidError.value("\(op): expected a 3-D or 4-D input ([C, H, W] or [N, C, H, W]), got shape \(input.shape)")
        }
        try Composite.checkFloat(op, [input])
        let lead = Array(input.shape.dropLast(2))
        let h = input.shape[input.ndim - 2], w = input.shape[input.ndim - 1]
        return (try ShapeOps.reshape(input, [lead.reduce(1, *), 1, h, w]), lead)
    }

    private static func checkHalfKernel(_ op: String, _ padding: Pair, _ kernel: Pair, _ dilation: Pair = (1, 1)) throws {
        guard padding.0 * 2 <= dilation.0 * (kernel.0 - 1) + 1, padding.1 * 2 <= dilation.1 * (kernel.1 - 1) + 1 else {
            throw LucidError.value("\(op): padding (\(padding.0), \(padding.1)) should be at most half of the kernel size (\(kernel.0), \(kernel.1))")
        }
    }

    /// The max over each window; padding counts as -inf.
    package static func maxPool2d(
        _ input: TensorImpl, kernel: Pair, stride: Pair, padding: Pair, dilation: Pair,
        ceilMode: Bool
    ) throws -> TensorImpl {
        try maxPool2d.run(input) { input in
            try maxPool2dBody(input, kernel: kernel, stride: stride, padding: padding, dilation: dilation, ceilMode: ceilMode)
        }
    }

    private static func maxPool2dBody(
        _ input: TensorImpl, kernel: Pair, stride: Pair, padding: Pair, dilation: Pair,
        ceilMode: Bool
    ) throws -> TensorImpl {
        let op = maxPool2d.name
        let (x, lead) = try planes(op, input)
        // geometry first: it bounds every parameter, so the half-kernel check cannot overflow
        let g = try geometry(
            op, input: (x.shape[2], x.shape[3]), kernel: kernel, stride: stride, padding: padding,
            dilation: dilation, ceil: ceilMode)
        try checkHalfKernel(op, padding, kernel, dilation)
        guard x.dtype.isFloatingPoint else {
            throw LucidError.type("\(op): expected a floating-point input, got \(x.dtype)")
        }
        let xc = try Ops.contiguous(x)
        let outShape = [xc.shape[0], 1, g.output.0, g.output.1]
        let values = try TensorImpl.empty(outShape, dtype: xc.dtype, on: xc.backend)
        let indices = try TensorImpl.empty(outShape, dtype: .int64, on: xc.backend)
        if values.numel > 0 {
            xc.run(PoolingKernels.self, KernelCall(.maxPool2d, reads: [xc], writes: [values, indices]), "max_pool2d") {
                $0.maxPool2d(xc, g, values: values, indices: indices)
            }
        }
        let pooled = Autograd.record(values, Autograd.name(maxPool2d), [xc], saved: [indices]) { grad in
            let gc = try Ops.contiguous(grad)
            let gradIn = try TensorImpl.empty(xc.shape, dtype: gc.dtype, on: gc.backend)
            gradIn.run(
                PoolingKernels.self, KernelCall(.maxPool2dBackward, reads: [gc, indices], writes: [gradIn]),
                "max_pool2d_backward"
            ) { $0.maxPool2dBackward(gc, indices: indices, g, into: gradIn) }
            return [gradIn]
        }
        return try ShapeOps.reshape(pooled, lead + [g.output.0, g.output.1])
    }

    /// Average pooling through the backend's direct kernels (in the divisors' dtype, with their
    /// backward), or nil when the backend composes it: [P, oh, ow].
    private static func directAvgPool(_ x: TensorImpl, _ g: WindowGeometry, _ divisor: TensorImpl) throws -> TensorImpl? {
        let wide = divisor.dtype
        let x32 = try Ops.contiguous(try Ops.cast(x, to: wide))
        let planes = x32.shape[0]
        let out = try TensorImpl.empty([planes, g.output.0, g.output.1], dtype: wide, on: x32.backend)
        let input = x32.withRequiresGrad(false)
        guard out.numel > 0,
            x32.runUnlessComposed(
                AveragePoolingKernels.self, KernelCall(.avgPool2d(g), reads: [input, divisor], writes: [out]),
                "avg_pool2d", { $0.avgPool2d(input, g, divisors: divisor, into: out) }) != nil
        else {
            return nil
        }
        let shape = x32.shape
        return Autograd.record(out, Autograd.name(avgPool2d), [x32]) { grad in
            let gc = try Ops.contiguous(try Ops.cast(grad, to: wide))
            let gradIn = try TensorImpl.empty(shape, dtype: wide, on: gc.backend)
            let call = KernelCall(.avgPool2dBackward(g), reads: [gc, divisor], writes: [gradIn])
            guard
                gradIn.runUnlessComposed(
                    AveragePoolingKernels.self, call, "avg_pool2d_backward",
                    {
                        $0.avgPool2dBackward(gc, g, divisors: divisor, into: gradIn)
                    }) != nil
            else {
                throw LucidError.runtime("avg_pool2d: the backend's backward kernel refused what its forward took")
            }
            return [gradIn]
        }
    }

    /// Positions of a window row (or column) that count towards its divisor.
    private static func counts(_ n: Int, size: Int, kernel: Int, stride: Int, padding: Int, includePad: Bool) -> [Double] {
        (0..<n).map { i in
            let start = i * stride - padding
            let end = Swift.min(start + kernel, size + padding)
            return Double(includePad ? end - start : Swift.min(end, size) - Swift.max(start, 0))
        }
    }

    /// The mean over each window (PyTorch's divisor rules for padding and ceil mode).
    package static func avgPool2d(
        _ input: TensorImpl, kernel: Pair, stride: Pair, padding: Pair, ceilMode: Bool,
        countIncludePad: Bool, divisorOverride: Int?
    ) throws -> TensorImpl {
        let op = avgPool2d.name
        let (x, lead) = try planes(op, input)
        if let d = divisorOverride, d <= 0 { throw LucidError.value("\(op): divisor_override must be positive, got \(d)") }
        let g = try geometry(
            op, input: (x.shape[2], x.shape[3]), kernel: kernel, stride: stride, padding: padding,
            dilation: (1, 1), ceil: ceilMode)
        try checkHalfKernel(op, padding, kernel)
        return try avgPool2d.run([x]) { t in
            let cells = g.output.0 * g.output.1
            let wide = t[0].dtype.computeType
            let divisor: TensorImpl
            if let d = divisorOverride {
                divisor = try Creation.full([cells], value: ScalarOperand(int: Int64(d)), dtype: wide, device: x.device)
            } else {
                let rows = counts(g.output.0, size: g.input.0, kernel: kernel.0, stride: stride.0, padding: padding.0, includePad: countIncludePad)
                let cols = counts(g.output.1, size: g.input.1, kernel: kernel.1, stride: stride.1, padding: padding.1, includePad: countIncludePad)
                divisor = try Creation.fromDoubles(
                    rows.flatMap { r in cols.map { r * $0 } }, shape: [cells],
                    dtype: wide, device: x.device)
            }
            if let pooled = try directAvgPool(t[0], g, divisor) {
                return try ShapeOps.reshape(try Ops.cast(pooled, to: t[0].dtype), lead + [g.output.0, g.output.1])
            }
            let sums = try Composite.sum(try unfold(t[0], g), [1])  // [N·C, oh·ow]
            let mean = try Ops.cast(try Composite.div(try Ops.cast(sums, to: wide), divisor), to: t[0].dtype)
            return try ShapeOps.reshape(mean, lead + [g.output.0, g.output.1])
        }
    }

    /// The averaging matrix [out, size] of adaptive pooling: row i averages the inputs
    /// floor(i·size/out) ..< ceil((i+1)·size/out).
    private static func adaptiveMatrix(_ out: Int, _ size: Int, dtype: DType, device: Device) throws -> TensorImpl {
        try Creation.reserveStaging(out * size, bytesEach: 12)
        var values = [Double](repeating: 0, count: out * size)
        for i in 0..<out {
            let start = (i * size) / out, end = ((i + 1) * size + out - 1) / out
            for j in start..<end { values[i * size + j] = 1 / Double(end - start) }
        }
        return try Creation.fromDoubles(values, shape: [out, size], dtype: dtype, device: device)
    }

    /// Averages over the windows that split each plane into `outputSize` cells.
    package static func adaptiveAvgPool2d(_ input: TensorImpl, outputSize: Pair) throws -> TensorImpl {
        let op = adaptiveAvgPool2d.name
        let (x, lead) = try planes(op, input)
        try checkPositive(op, "output_size", outputSize)
        let h = x.shape[2], w = x.shape[3]
        guard h > 0, w > 0 else { throw LucidError.value("\(op): the input planes of shape \(input.shape) are empty") }
        // The averaging matrices hold output x input entries, the result planes x output.
        _ = try Shape.numel([outputSize.0, h])
        _ = try Shape.numel([outputSize.1, w])
        _ = try Shape.numel(lead + [outputSize.0, outputSize.1])
        return try adaptiveAvgPool2d.run([x]) { t in
            let wide = t[0].dtype.computeType
            if h % outputSize.0 == 0 && w % outputSize.1 == 0 {
                // Equal windows that tile the plane: a mean over each window's two axes, in
                // float32 (one reduction; global pooling is the (1, 1) case).
                let (kh, kw) = (h / outputSize.0, w / outputSize.1)
                let cells = try ShapeOps.reshape(
                    try Ops.cast(t[0], to: wide),
                    [lead.reduce(1, *), outputSize.0, kh, outputSize.1, kw])
                let y = try Reductions.reduce(.mean, cells, dims: [2, 4], keepdim: false)
                return try ShapeOps.reshape(try Ops.cast(y, to: t[0].dtype), lead + [outputSize.0, outputSize.1])
            }
            // Otherwise a linear map per axis: out = A_h · X · A_wᵀ, in float32 (A's entries
            // are not exact in 16 bits).
            let ah = try adaptiveMatrix(outputSize.0, h, dtype: wide, device: x.device)
            let aw = try adaptiveMatrix(outputSize.1, w, dtype: wide, device: x.device)
            let planes = try Ops.cast(try ShapeOps.reshape(t[0], [lead.reduce(1, *), h, w]), to: wide)
            let y = try LinearAlgebra.matmul(try LinearAlgebra.matmul(ah, planes), try ShapeOps.transpose(aw, 0, 1))
            return try ShapeOps.reshape(try Ops.cast(y, to: t[0].dtype), lead + [outputSize.0, outputSize.1])
        }
    }
}
