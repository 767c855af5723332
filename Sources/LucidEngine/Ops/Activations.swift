/// softmax, log_softmax, dropout and leaky_relu.
package enum Activations {
    static let softmax = OpInfo("softmax", .float32)
    static let logSoftmax = OpInfo("log_softmax", .float32)
    static let dropout = OpInfo("dropout", .none)
    static let leakyRelu = OpInfo("leaky_relu", .none)
    static let infos = [softmax, logSoftmax, dropout, leakyRelu]

    /// torch.nn.functional.leaky_relu: `x > 0 ? x : slope·x` for floating `x`, with the
    /// gradient `slope` at 0 (as PyTorch). A backend's fused kernel runs float32 input; other
    /// dtypes and backends compose it (the product rounds once into x's dtype).
    package static func leakyRelu(_ x: TensorImpl, slope: Double) throws -> TensorImpl {
        try leakyRelu.run(x) { x in try leakyReluBody(x, slope: slope) }
    }

    private static func leakyReluBody(_ x: TensorImpl, slope: Double) throws -> TensorImpl {
        let op = leakyRelu.name
        guard x.dtype.isFloatingPoint else { throw LucidError.type("\(op): expected a floating-point tensor, got \(x.dtype)") }
        let s = Float(slope)
        if x.dtype == .float32 {
            let out = try TensorImpl.empty(x.shape, dtype: .float32, like: x)
            if out.runUnlessComposed(
                FusedElementwiseKernels.self, KernelCall(.leakyRelu, reads: [x], writes: [out]), op,
                {
                    $0.leakyRelu(x, slope: s, into: out)
                }) != nil
            {
                guard Autograd.tracks(x) else { return out }
                return Autograd.record(out, Autograd.name(leakyRelu), [x], saved: [x]) { g in
                    let g32 = try Ops.contiguousOrSplat(try Ops.cast(g, to: .float32))
                    let dx = try TensorImpl.empty(x.shape, dtype: .float32, like: x)
                    let call = KernelCall(.leakyReluBackward, reads: [x, g32], writes: [dx])
                    if dx.runUnlessComposed(
                        FusedElementwiseKernels.self, call, op,
                        {
                            $0.leakyReluBackward(x, grad: g32, slope: s, into: dx)
                        }) != nil
                    {
                        return [dx]
                    }
                    return [try composed(g, x, slope)]
                }
            }
        }
        return try composed(x, x, slope)
    }

    /// `v > 0 ? v : slope·v` where the sign is taken from `x` (v is x, or a gradient for x).
    private static func composed(_ v: TensorImpl, _ x: TensorImpl, _ slope: Double) throws -> TensorImpl {
        let negative = try Elementwise.binary(.mul, v, scalar: ScalarOperand(float: slope), scalarFirst: false)
        return try Comparison.where(try Comparison.compare(.gt, x, scalar: ScalarOperand(int: 0)), v, negative)
    }

    /// `x - max(x)` along `dim`, the max held constant (it cancels in the result).
    private static func shifted(_ x: TensorImpl, _ d: Int) throws -> TensorImpl {
        if x.numel == 0 { return x }
        let m = try GradMode.with(false) {
            try Reductions.extreme(x.withRequiresGrad(false), dims: [d], keepdim: true, largest: true)
        }
        // Rows that are all -inf (or hold +inf) shift by 0 so that they stay -inf / NaN as
        // the math says instead of turning every entry into NaN.
        let finite = try Comparison.compare(.lt, try Elementwise.unary(.abs, m), scalar: ScalarOperand(float: .infinity))
        return try Composite.sub(x, try Comparison.where(finite, m, try Composite.zeroLike(m)))
    }

    private static func prepared(_ op: OpInfo, _ a: TensorImpl, _ dim: Int) throws -> (TensorImpl, Int) {
        let d = try Shape.wrapDim(dim, ndim: a.ndim, op: op.name)
        try Composite.checkFloat(op.name, [a])
        return (a.ndim == 0 ? try ShapeOps.reshape(a, [1]) : a, d)
    }

    /// The backend's direct kernel, with the backward written on its output:
    /// softmax: g·y - y·Σ(g·y); log_softmax: g - exp(y)·Σg.
    private static func direct(_ op: OpInfo, _ x: TensorImpl, _ d: Int, log: Bool) throws -> TensorImpl? {
        guard x.numel >= 1024 else { return nil }  // small: the composite costs less than a call
        let xc = try Ops.contiguous(x)
        let out = try TensorImpl.empty(xc.shape, dtype: xc.dtype, on: xc.backend)
        let input = xc.withRequiresGrad(false)
        let call = KernelCall(.softmax(axis: d, log: log), reads: [input], writes: [out])
        guard
            try out.runUnlessComposed(
                SoftmaxKernels.self, call, op.name,
                {
                    try $0.softmax(input, axis: d, log: log, into: out)
                }) != nil
        else { return nil }
        return Autograd.record(out, Autograd.name(op), [xc], saved: [out]) { g in
            let name = "\(op.name)_backward"
            if let dx = try softmaxBackward(g, out, axis: d, log: log, name: name) { return [dx] }
            // Otherwise in float32 at least (the kernel on float32 copies, or composed), rounding
            // once into a 16-bit dtype, as the kernels do: composed in bfloat16, each step
            // would round, and g − Σ cancels.
            let wide = out.dtype.computeType
            let gw = try Ops.cast(g, to: wide), yw = try Ops.cast(out, to: wide)
            if wide != out.dtype, let dx = try softmaxBackward(gw, yw, axis: d, log: log, name: name) {
                return [try Ops.cast(dx, to: out.dtype)]
            }
            return [try Ops.cast(try composedSoftmaxBackward(gw, yw, axis: d, log: log), to: out.dtype)]
        }
    }

    /// The backend's softmax (or log-softmax) backward kernel from the output `y` and its
    /// gradient, in y's dtype (float32 sums inside, one rounding); nil where the backend
    /// composes it.
    static func softmaxBackward(
        _ grad: TensorImpl, _ y: TensorImpl, axis: Int, log: Bool,
        name: String
    ) throws -> TensorImpl? {
        let gc = try Ops.contiguous(try Ops.cast(grad, to: y.dtype))
        let dx = try TensorImpl.empty(y.shape, dtype: y.dtype, on: y.backend)
        let call = KernelCall(.softmaxBackward(axis: axis), reads: [gc, y], writes: [dx])
        return y.runUnlessComposed(
            SoftmaxBackwardKernels.self, call, name,
            {
                $0.softmaxBackward(gc, y, axis: axis, log: log, into: dx)
            }
        ).map { _ in dx }
    }

    /// The softmax (or log-softmax) backward composed from elementwise ops and a sum, in the
    /// operands' dtype: softmax g·y - y·Σ(g·y); log-softmax g - exp(y)·Σg.
    static func composedSoftmaxBackward(_ g: TensorImpl, _ y: TensorImpl, axis d: Int, log: Bool) throws -> TensorImpl {
        if log {
            return try Composite.sub(g, try Composite.mul(try Elementwise.unary(.exp, y), try Composite.sum(g, [d], keepdim: true)))
        }
        let gy = try Composite.mul(g, y)
        return try Composite.sub(gy, try Composite.mul(y, try Composite.sum(gy, [d], keepdim: true)))
    }

    /// The composed form runs in float32 for a float16/bfloat16 input and rounds once at the
    /// end, as the direct kernels do.
    private static func inFloat32(_ x: TensorImpl, _ body: (TensorImpl) throws -> TensorImpl) throws -> TensorImpl {
        guard x.dtype.isLowPrecision else { return try body(x) }
        return try Ops.cast(try body(try Ops.cast(x, to: .float32)), to: x.dtype)
    }

    /// exp(x) / sum(exp(x)) along `dim`, computed after subtracting the max; float32 under
    /// autocast.
    package static func softmax(_ a: TensorImpl, dim: Int) throws -> TensorImpl {
        try softmax.run([a]) { inputs in
            let (x, d) = try prepared(softmax, inputs[0], dim)
            if let y = try direct(softmax, x, d, log: false) { return try ShapeOps.reshape(y, inputs[0].shape) }
            let y = try inFloat32(x) { x in
                let e = try Elementwise.unary(.exp, try shifted(x, d))
                return try Composite.div(e, try Composite.sum(e, [d], keepdim: true))
            }
            return try ShapeOps.reshape(y, inputs[0].shape)
        }
    }

    /// x - log(sum(exp(x))) along `dim`, stably; float32 under autocast.
    package static func logSoftmax(_ a: TensorImpl, dim: Int) throws -> TensorImpl {
        try logSoftmax.run([a]) { inputs in
            let (x, d) = try prepared(logSoftmax, inputs[0], dim)
            if let y = try direct(logSoftmax, x, d, log: true) { return try ShapeOps.reshape(y, inputs[0].shape) }
            let y = try inFloat32(x) { x in
                let z = try shifted(x, d)
                let lse = try Elementwise.unary(.log, try Composite.sum(try Elementwise.unary(.exp, z), [d], keepdim: true))
                return try Composite.sub(z, lse)
            }
            return try ShapeOps.reshape(y, inputs[0].shape)
        }
    }

    /// Zeroes each element with probability `p` and scales the rest by 1/(1-p) when
    /// `training`; the identity otherwise.
    package static func dropout(_ a: TensorImpl, p: Double, training: Bool) throws -> TensorImpl {
        guard p >= 0 && p <= 1 else { throw LucidError.value("dropout: probability has to be between 0 and 1, got \(p)") }
        try Composite.checkFloat(dropout.name, [a])
        guard training, p > 0 else { return a }  // the identity: nothing is computed
        return try dropout.run(a) { a in
            if p == 1 { return try Composite.mul(a, 0) }
            let keep = try Comparison.compare(.ge, try Creation.rand(a.shape, dtype: .float32, device: a.device), scalar: ScalarOperand(float: p))
            return try Composite.mul(try Composite.mul(a, try Ops.cast(keep, to: a.dtype)), 1 / (1 - p))
        }
    }
}
