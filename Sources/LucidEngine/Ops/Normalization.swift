/// layer_norm, group_norm and batch_norm. Statistics are computed in float32 at least (float64
/// for float64: `DType.computeType`).
package enum Normalization {
    static let layerNorm = OpInfo("layer_norm", .float32)
    static let groupNorm = OpInfo("group_norm", .float32)
    /// Keeps its input dtype, computing in float32 with float32 running statistics.
    static let batchNorm = OpInfo("batch_norm", .none)
    static let infos = [layerNorm, groupNorm, batchNorm]

    /// (x - mean) / sqrt(var + eps) over `dims` (biased variance).
    private static func normalized(_ x: TensorImpl, dims: [Int], eps: Double) throws -> TensorImpl {
        let centered = try Composite.sub(x, try Composite.mean(x, dims, keepdim: true))
        let variance = try Composite.mean(try Composite.mul(centered, centered), dims, keepdim: true)
        return try Composite.mul(centered, try Elementwise.unary(.rsqrt, try Composite.add(variance, eps)))
    }

    /// `y * weight + bias`, each optional, viewed with `shape`.
    private static func affine(_ y: TensorImpl, _ w: TensorImpl?, _ b: TensorImpl?, shape: [Int]) throws -> TensorImpl {
        var out = y
        if let w { out = try Composite.mul(out, try ShapeOps.reshape(w, shape)) }
        if let b { out = try Composite.add(out, try ShapeOps.reshape(b, shape)) }
        return out
    }

    private static func checkParam(_ op: String, _ name: String, _ t: TensorImpl?, _ shape: [Int]) throws {
        if let t, t.shape != shape {
            throw LucidError.value("\(op): \(name) must have shape \(shape), got \(t.shape)")
        }
    }

    private static func checkEps(_ op: String, _ eps: Double) throws {
        guard eps >= 0, eps.isFinite else { throw LucidError.value("\(op): eps must be a non-negative number, got \(eps)") }
    }

    /// Weight and bias may have the input's dtype, or float32 for a float16/bfloat16 input
    /// (PyTorch's mixed-precision rule).
    private static func checkParamDTypes(_ op: String, _ x: TensorImpl, _ params: [TensorImpl?]) throws {
        try Composite.checkFloat(op, [x] + params.compactMap { $0 })
        for p in params.compactMap({ $0 }) where p.dtype != x.dtype && !(x.dtype.isLowPrecision && p.dtype == .float32) {
            throw LucidError.type(
                "\(op): weight and bias must have the input's dtype (\(x.dtype)) or float32 for a float16/bfloat16 input, got \(p.dtype)")
        }
    }

    private static func cast(_ t: TensorImpl?, _ dtype: DType) throws -> TensorImpl? { try t.map { try Ops.cast($0, to: dtype) } }

    /// Row normalisation through the backend's kernel, with its backward: `x` viewed as
    /// [rows, n], an optional affine (`weight`, `bias`, laid out as `affine` says), the result
    /// in `dtype`, rounded once. nil when the backend has no normalisation kernels (the caller
    /// composes it then).
    private static func fusedRows(
        _ op: OpInfo, _ x: TensorImpl, rows: Int, eps: Double, weight: TensorImpl?,
        bias: TensorImpl?, affine: RowAffine, dtype: DType
    ) throws -> TensorImpl? {
        guard x.numel > 0, rows > 0 else { return nil }
        let xc = try Ops.contiguous(x)
        let n = xc.numel / rows
        let plain = { (t: TensorImpl?) throws -> TensorImpl? in
            try t.map { try Ops.contiguous(try Ops.cast($0.withRequiresGrad(false), to: .float32)) }
        }
        let w32 = try plain(weight), b32 = try plain(bias)
        let out = try TensorImpl.empty(xc.shape, dtype: dtype, on: xc.backend)
        let mean = try TensorImpl.empty([rows, 1], dtype: .float32, on: xc.backend)
        let rstd = try TensorImpl.empty([rows, 1], dtype: .float32, on: xc.backend)
        let input = xc.withRequiresGrad(false)
        let call = KernelCall(.normalizeRows, reads: Operands([input] + [w32, b32].compactMap { $0 }), writes: [out, mean, rstd])
        guard
            xc.runUnlessComposed(
                NormalizationKernels.self, call, op.name,
                {
                    $0.normalizeRows(
                        input, rows: rows, eps: Float(eps), weight: w32, bias: b32, affine: affine, into: out, mean: mean,
                        rstd: rstd)
                }) != nil
        else { return nil }
        return Autograd.record(out, Autograd.name(op), [xc] + [weight, bias].compactMap { $0 }, saved: [xc, w32]) { g in
            if let grads = try fusedRowsBackward(
                op, g, xc, rows: rows, mean: mean, rstd: rstd, weight: weight,
                w32: w32, bias: bias, affine: affine)
            {
                return grads
            }
            // With x̂ = (x - mean)·rstd and gy = g·weight: dx = rstd·(gy - mean(gy) - x̂·mean(gy·x̂)),
            // the means along each row, dweight = Σ g·x̂ and dbias = Σ g over the elements that
            // read each entry; in float32. Viewed as [rows / groups, groups, n / span, span], the
            // weight is [1, groups, n / span, 1].
            let view = [rows / affine.groups, affine.groups, n / affine.span, affine.span]
            let g32 = try ShapeOps.reshape(try Ops.cast(g, to: .float32), view)
            let x32 = try ShapeOps.reshape(try Ops.cast(xc.withRequiresGrad(false), to: .float32), view)
            let stat = { (t: TensorImpl) in try ShapeOps.reshape(t, [rows / affine.groups, affine.groups, 1, 1]) }
            let xhat = try Composite.mul(try Composite.sub(x32, try stat(mean)), try stat(rstd))
            let gy = try w32.map { try Composite.mul(g32, try ShapeOps.reshape($0, [1, affine.groups, n / affine.span, 1])) } ?? g32
            let along = try Composite.mean(gy, [2, 3], keepdim: true)
            let projected = try Composite.mean(try Composite.mul(gy, xhat), [2, 3], keepdim: true)
            let dx = try Composite.mul(
                try Composite.sub(try Composite.sub(gy, along), try Composite.mul(xhat, projected)), try stat(rstd))
            var grads: [TensorImpl?] = [try ShapeOps.reshape(try Ops.cast(dx, to: xc.dtype), xc.shape)]
            if let weight {
                let dw = try Composite.sum(try Composite.mul(g32, xhat), [0, 3], keepdim: false)
                grads.append(try ShapeOps.reshape(try Ops.cast(dw, to: weight.dtype), weight.shape))
            }
            if let bias {
                grads.append(try ShapeOps.reshape(try Ops.cast(try Composite.sum(g32, [0, 3], keepdim: false), to: bias.dtype), bias.shape))
            }
            return grads
        }
    }

    /// The gradients of `fusedRows` through the backend's fused kernel (float32 throughout,
    /// each rounded once into its tensor's dtype), or nil when the backend composes them.
    private static func fusedRowsBackward(
        _ op: OpInfo, _ g: TensorImpl, _ x: TensorImpl, rows: Int,
        mean: TensorImpl, rstd: TensorImpl, weight: TensorImpl?, w32: TensorImpl?,
        bias: TensorImpl?, affine: RowAffine
    ) throws -> [TensorImpl?]? {
        let g32 = try Ops.contiguousOrSplat(try Ops.cast(g, to: .float32))
        let x32 = try Ops.contiguous(try Ops.cast(x.withRequiresGrad(false), to: .float32))
        let count = affine.parameters(x.numel / rows)
        let dx = try TensorImpl.empty(x.shape, dtype: .float32, on: x.backend)
        let dw = weight == nil ? nil : try TensorImpl.empty([count], dtype: .float32, on: x.backend)
        let db = bias == nil ? nil : try TensorImpl.empty([count], dtype: .float32, on: x.backend)
        let call = KernelCall(
            .normalizeRowsBackward(rows: rows), reads: Operands([g32, x32, mean, rstd] + [w32].compactMap { $0 }),
            writes: Operands([dx] + [dw, db].compactMap { $0 }))
        guard
            x.runUnlessComposed(
                FusedNormalizationKernels.self, call, "\(op.name)_backward",
                {
                    $0.normalizeRowsBackward(
                        g32, x32, rows: rows, mean: mean, rstd: rstd, weight: w32, affine: affine, dx: dx, dweight: dw,
                        dbias: db)
                }) != nil
        else { return nil }
        var grads: [TensorImpl?] = [try Ops.cast(dx, to: x.dtype)]
        if let weight, let dw { grads.append(try ShapeOps.reshape(try Ops.cast(dw, to: weight.dtype), weight.shape)) }
        if let bias, let db { grads.append(try ShapeOps.reshape(try Ops.cast(db, to: bias.dtype), bias.shape)) }
        return grads
    }

    /// Normalises over the trailing `normalizedShape` dimensions in float32, rounding once into
    /// the input's dtype; float32 under autocast.
    package static func layerNorm(
        _ a: TensorImpl, normalizedShape: [Int], weight: TensorImpl?, bias: TensorImpl?,
        eps: Double
    ) throws -> TensorImpl {
        let op = layerNorm.name
        let k = normalizedShape.count
        guard k > 0, k <= a.ndim, Array(a.shape.suffix(k)) == normalizedShape else {
            throw LucidError.value(
                "layer_norm: normalized_shape \(normalizedShape) must be non-empty and match the trailing dimensions of the input shape \(a.shape)")
        }
        try checkParam(op, "weight", weight, normalizedShape)
        try checkParam(op, "bias", bias, normalizedShape)
        try checkEps(op, eps)
        try Ops.checkSameDevice(op, [a] + [weight, bias].compactMap { $0 })
        let given = [a] + [weight, bias].compactMap { $0 }
        return try layerNorm.run(given) { inputs in
            let x = inputs[0]
            var rest = inputs.dropFirst().makeIterator()
            let w = weight == nil ? nil : rest.next(), b = bias == nil ? nil : rest.next()
            try checkParamDTypes(op, x, [w, b])
            let n = normalizedShape.reduce(1, *)
            if n > 0,
                let y = try fusedRows(
                    layerNorm, x, rows: x.numel / n, eps: eps, weight: w, bias: b, affine: .perColumn, dtype: x.dtype)
            {
                return try ShapeOps.reshape(y, x.shape)
            }
            let wide = x.dtype.computeType
            let y = try normalized(try Ops.cast(x, to: wide), dims: Array((x.ndim - k)..<x.ndim), eps: eps)
            return try Ops.cast(try affine(y, try cast(w, wide), try cast(b, wide), shape: normalizedShape), to: x.dtype)
        }
    }

    /// Normalises each of `groups` channel groups of [N, C, *] input in float32, rounding once
    /// into the input's dtype; float32 under autocast.
    package static func groupNorm(
        _ a: TensorImpl, groups: Int, weight: TensorImpl?, bias: TensorImpl?,
        eps: Double
    ) throws -> TensorImpl {
        let op = groupNorm.name
        guard a.ndim >= 2 else { throw LucidError.value("group_norm: expected input of shape [N, C, *], got \(a.shape)") }
        let c = a.shape[1]
        guard groups > 0, c % groups == 0 else {
            throw LucidError.value("group_norm: num_groups \(groups) must be positive and divide the \(c) channels")
        }
        try checkParam(op, "weight", weight, [c])
        try checkParam(op, "bias", bias, [c])
        try checkEps(op, eps)
        try Ops.checkSameDevice(op, [a] + [weight, bias].compactMap { $0 })
        return try groupNorm.run([a] + [weight, bias].compactMap { $0 }) { inputs in
            let x = inputs[0]
            var rest = inputs.dropFirst().makeIterator()
            let w = weight == nil ? nil : rest.next(), b = bias == nil ? nil : rest.next()
            try checkParamDTypes(op, x, [w, b])
            let rows = x.shape[0] * groups
            if x.numel > 0 {
                // A row is one group of one sample: C / groups channels of `span` values each.
                let span = x.numel / (x.shape[0] * c)
                let layout = RowAffine(groups: groups, span: span)
                if let y = try fusedRows(groupNorm, x, rows: rows, eps: eps, weight: w, bias: b, affine: layout, dtype: x.dtype) {
                    return try ShapeOps.reshape(y, x.shape)
                }
            }
            let wide = x.dtype.computeType
            let grouped = try ShapeOps.reshape(try Ops.cast(x, to: wide), [x.shape[0], groups, -1])
            let y = try ShapeOps.reshape(try normalized(grouped, dims: [2], eps: eps), x.shape)
            let view = [1, c] + [Int](repeating: 1, count: x.ndim - 2)
            return try Ops.cast(try affine(y, try cast(w, wide), try cast(b, wide), shape: view), to: x.dtype)
        }
    }

    /// Batch normalisation with the batch's statistics through the backend's fused kernels
    /// (float32 `x`, [N, C, *]), with its backward; nil when the backend composes it.
    private static func fusedBatchNorm(
        _ x: TensorImpl, weight: TensorImpl?, bias: TensorImpl?,
        eps: Double
    ) throws -> (out: TensorImpl, mean: TensorImpl, variance: TensorImpl)? {
        guard x.numel > 0 else { return nil }
        let xc = try Ops.contiguous(x)
        let plain = { (t: TensorImpl?) throws -> TensorImpl? in
            try t.map { try Ops.contiguous(try Ops.cast($0.withRequiresGrad(false), to: .float32)) }
        }
        let w32 = try plain(weight), b32 = try plain(bias)
        let n = xc.shape[0], c = xc.shape[1], e = Float(eps)
        let out = try TensorImpl.empty(xc.shape, dtype: .float32, on: xc.backend)
        let mean = try TensorImpl.empty([c], dtype: .float32, on: xc.backend)
        let variance = try TensorImpl.empty([c], dtype: .float32, on: xc.backend)
        let data = xc.withRequiresGrad(false)
        let call = KernelCall(
            .normalizeChannels(batch: n, channels: c), reads: Operands([data] + [w32, b32].compactMap { $0 }),
            writes: [out, mean, variance])
        guard
            xc.runUnlessComposed(
                FusedNormalizationKernels.self, call, "batch_norm",
                {
                    $0.normalizeChannels(
                        data, batch: n, channels: c, eps: e, weight: w32, bias: b32, into: out, mean: mean,
                        variance: variance)
                }) != nil
        else { return nil }
        let result = Autograd.record(
            out, Autograd.name(batchNorm), [xc] + [weight, bias].compactMap { $0 },
            saved: [xc, w32]
        ) { g in
            let g32 = try Ops.contiguousOrSplat(try Ops.cast(g, to: .float32))
            let dx = try TensorImpl.empty(xc.shape, dtype: .float32, on: xc.backend)
            let dw = weight == nil ? nil : try TensorImpl.empty([c], dtype: .float32, on: xc.backend)
            let db = bias == nil ? nil : try TensorImpl.empty([c], dtype: .float32, on: xc.backend)
            let call = KernelCall(
                .normalizeChannelsBackward(batch: n, channels: c),
                reads: Operands([g32, data, mean, variance] + [w32].compactMap { $0 }), writes: Operands([dx] + [dw, db].compactMap { $0 }))
            guard
                xc.runUnlessComposed(
                    FusedNormalizationKernels.self, call, "batch_norm_backward",
                    {
                        $0.normalizeChannelsBackward(
                            g32, data, batch: n, channels: c, eps: e, mean: mean, variance: variance,
                            weight: w32, dx: dx, dweight: dw, dbias: db)
                    }) != nil
            else {
                throw LucidError.runtime("batch_norm: the backend's backward kernel refused what its forward took")
            }
            var grads: [TensorImpl?] = [dx]
            if let weight, let dw { grads.append(try Ops.cast(dw, to: weight.dtype)) }
            if let bias, let db { grads.append(try Ops.cast(db, to: bias.dtype)) }
            return grads
        }
        return (result, mean, variance)
    }

    /// Batch normalisation of [N, C, *] input. In training, normalises with the batch
    /// statistics and returns running statistics updated with `momentum` (unbiased variance,
    /// as PyTorch); in evaluation, uses the running statistics. Computes in float32 and returns
    /// the input's dtype; running statistics stay float32.
    package static func batchNorm(
        _ a: TensorImpl, runningMean: TensorImpl?, runningVar: TensorImpl?,
        weight: TensorImpl?, bias: TensorImpl?, training: Bool, momentum: Double,
        eps: Double
    ) throws -> (TensorImpl, TensorImpl?, TensorImpl?) {
        let op = batchNorm.name
        guard a.ndim >= 2 else { throw LucidError.value("batch_norm: expected input of shape [N, C, *], got \(a.shape)") }
        let c = a.shape[1]
        for (name, t) in [("running_mean", runningMean), ("running_var", runningVar), ("weight", weight), ("bias", bias)] {
            try checkParam(op, name, t, [c])
        }
        guard (runningMean == nil) == (runningVar == nil) else {
            throw LucidError.value("batch_norm: running_mean and running_var must be given together")
        }
        try checkEps(op, eps)
        try Ops.checkSameDevice(op, [a] + [runningMean, runningVar, weight, bias].compactMap { $0 })
        try Composite.checkFloat(op, [a] + [runningMean, runningVar, weight, bias].compactMap { $0 })
        let dims = [0] + Array(2..<a.ndim)
        let view = [1, c] + [Int](repeating: 1, count: a.ndim - 2)
        var count = 1
        for d in dims { count *= a.shape[d] }
        return try batchNorm.run(a) { a in
            let wide = a.dtype.computeType
            let x = try Ops.cast(a, to: wide)
            let y: TensorImpl
            var newMean: TensorImpl? = nil, newVar: TensorImpl? = nil
            /// The running statistics blended with this batch's mean and biased variance ([c]).
            func updateRunning(_ mean: TensorImpl, _ biased: TensorImpl) throws {
                guard training, let rm = runningMean, let rv = runningVar else { return }
                try GradMode.with(false) {
                    let m = try ShapeOps.reshape(mean.withRequiresGrad(false), [c])
                    let unbiased = try Composite.mul(
                        try ShapeOps.reshape(biased.withRequiresGrad(false), [c]),
                        Double(count) / Double(Swift.max(count - 1, 1)))
                    let blend = { (old: TensorImpl, new: TensorImpl) throws -> TensorImpl in
                        try Composite.add(try Composite.mul(try Ops.cast(old, to: wide), 1 - momentum), try Composite.mul(new, momentum))
                    }
                    newMean = try blend(rm, m)
                    newVar = try blend(rv, unbiased)
                }
            }
            if training || runningMean == nil, count > 1 || !training,
                let fused = try fusedBatchNorm(x, weight: weight, bias: bias, eps: eps)
            {
                try updateRunning(fused.mean, fused.variance)
                return (try Ops.cast(fused.out, to: a.dtype), newMean, newVar)
            }
            if !training, let rm0 = runningMean, let rv0 = runningVar {
                let rm = try ShapeOps.reshape(try Ops.cast(rm0, to: wide), view)
                let rv = try ShapeOps.reshape(try Ops.cast(rv0, to: wide), view)
                y = try Composite.mul(try Composite.sub(x, rm), try Elementwise.unary(.rsqrt, try Composite.add(rv, eps)))
            } else {
                guard count > 1 || !training else {
                    throw LucidError.value("batch_norm: expected more than 1 value per channel when training, got input shape \(a.shape)")
                }
                let mean = try Composite.mean(x, dims, keepdim: true)
                let centered = try Composite.sub(x, mean)
                let biased = try Composite.mean(try Composite.mul(centered, centered), dims, keepdim: true)
                y = try Composite.mul(centered, try Elementwise.unary(.rsqrt, try Composite.add(biased, eps)))
                try updateRunning(mean, biased)
            }
            let out = try affine(y, try cast(weight, wide), try cast(bias, wide), shape: view)
            return (try Ops.cast(out, to: a.dtype), newMean, newVar)
        }
    }
}
