/// scaled_dot_product_attention: softmax(q·kᵀ·scale + mask) · v. The two products run in
/// lower precision under autocast; the softmax runs in float32.
package enum Attention {
    static let sdpa = OpInfo("scaled_dot_product_attention", .lowerPrecision)
    static let infos = [sdpa]

    /// (output [..., L, Ev], attention weights [..., L, S]) for q [..., L, E], k [..., S, E],
    /// v [..., S, Ev]. A bool `mask` marks the positions that may be attended to; a floating
    /// one is added to the scores. `causal` masks out future positions (top-left aligned).
    /// The weights come back when `needWeights` (they are then part of the graph).
    package static func attention(
        _ q: TensorImpl, _ k: TensorImpl, _ v: TensorImpl, mask: TensorImpl?, causal: Bool,
        scale: Double?, dropout: Double, training: Bool = true,
        needWeights: Bool = true
    ) throws -> (TensorImpl, TensorImpl?) {
        let op = sdpa.name
        try Ops.checkSameDevice(op, [q, k, v] + (mask.map { [$0] } ?? []))
        guard q.ndim >= 2, k.ndim >= 2, v.ndim >= 2 else {
            throw LucidError.value("\(op): query, key and value need at least 2 dimensions, got \(q.shape), \(k.shape), \(v.shape)")
        }
        let l = q.shape[q.ndim - 2], e = q.shape[q.ndim - 1], s = k.shape[k.ndim - 2]
        guard k.shape[k.ndim - 1] == e else {
            throw LucidError.value("\(op): query and key must have the same embedding size, got \(q.shape) and \(k.shape)")
        }
        guard v.shape[v.ndim - 2] == s else {
            throw LucidError.value("\(op): key and value must have the same sequence length, got \(k.shape) and \(v.shape)")
        }
        if causal && mask != nil { throw LucidError.value("\(op): pass either attn_mask or is_causal, not both") }
        guard dropout >= 0 && dropout < 1 else { throw LucidError.value("\(op): dropout_p must be in [0, 1), got \(dropout)") }
        if let scale, !(scale.isFinite) { throw LucidError.value("\(op): scale must be finite, got \(scale)") }
        let factor = scale ?? 1 / Double(e).squareRoot()
        return try sdpa.run([q, k, v]) { t -> (TensorImpl, TensorImpl?) in
            try Composite.checkSameDType(op, t)
            let dtype = t[0].dtype
            if mask == nil || mask?.dtype == .bool, dropout == 0 || !training,
                let fused = try fused(t, mask: mask, causal: causal, scale: factor, needWeights: needWeights)
            {
                return fused
            }
            let products = try LinearAlgebra.matmul(t[0], try ShapeOps.transpose(t[1], -2, -1))
            let wide = dtype.computeType
            var scores = try Composite.mul(try Ops.cast(products, to: wide), factor)
            var allowed: TensorImpl? = nil
            if causal {
                let rows = try ShapeOps.reshape(try Creation.arange(start: 0, end: Int64(l), step: 1, dtype: .int64, device: q.device), [l, 1])
                let cols = try ShapeOps.reshape(try Creation.arange(start: 0, end: Int64(s), step: 1, dtype: .int64, device: q.device), [1, s])
                allowed = try Comparison.compare(.le, cols, rows)
            } else if let mask, mask.dtype == .bool {
                allowed = mask
            } else if let mask {
                try Composite.checkFloat(op + " (attn_mask)", [mask])
                scores = try Composite.add(scores, try Ops.cast(mask, to: wide))
            }
            if let allowed {
                scores = try Comparison.where(allowed, scores, try Ops.scalarTensor(ScalarOperand(float: -.infinity), dtype: wide, device: q.device))
            }
            var weights = try Activations.softmax(scores, dim: -1)
            if dropout > 0 { weights = try Activations.dropout(weights, p: dropout, training: training) }
            let p = try Ops.cast(weights, to: dtype)
            return (try LinearAlgebra.matmul(p, t[2]), p)
        }
    }

    /// The backend's fused kernel for attention without dropout, unmasked, causal or with a
    /// bool mask, with its backward composed from products and the softmax derivative; nil
    /// when the backend has none or the batch dimensions differ. Weights the caller wants
    /// while gradients are tracked come from the composite form, where they are part of the
    /// graph.
    private static func fused(
        _ t: [TensorImpl], mask: TensorImpl?, causal: Bool, scale: Double,
        needWeights: Bool
    ) throws -> (TensorImpl, TensorImpl?)? {
        let (q, k, v) = (t[0], t[1], t[2])
        let tracked = GradMode.isEnabled && t.contains { $0.requiresGrad }
        let lead = Array(q.shape.dropLast(2))
        guard !(needWeights && tracked), q.dtype.isFloatingPoint, q.numel > 0, k.numel > 0, v.numel > 0,
            Array(k.shape.dropLast(2)) == lead, Array(v.shape.dropLast(2)) == lead
        else { return nil }
        let l = q.shape[q.ndim - 2], s = k.shape[k.ndim - 2], ev = v.shape[v.ndim - 1]
        let q3 = try LinearAlgebra.batched(q), k3 = try LinearAlgebra.batched(k), v3 = try LinearAlgebra.batched(v)
        // The mask broadcast to [..., L, S] (a view), as [B, L, S].
        let m3 = try mask.map { try LinearAlgebra.batched(try ShapeOps.expand($0, lead + [l, s])) }
        let batch = q3.shape[0]
        let out = try TensorImpl.empty([batch, l, ev], dtype: q.dtype, on: q.backend)
        let p = needWeights || tracked ? try TensorImpl.empty([batch, l, s], dtype: q.dtype, on: q.backend) : nil
        let call = KernelCall(.attention, reads: Operands([q3, k3, v3] + (m3.map { [$0] } ?? [])), writes: Operands([out] + (p.map { [$0] } ?? [])))
        guard
            try q.runUnlessComposed(
                AttentionKernels.self, call, "attention",
                {
                    try $0.attention(q3, k3, v3, mask: m3, scale: Float(scale), causal: causal, weights: p, into: out)
                }) != nil
        else { return nil }
        let result = out.view(shape: lead + [l, ev], strides: Shape.contiguousStrides(lead + [l, ev]))
        let weights = needWeights ? p?.view(shape: lead + [l, s], strides: Shape.contiguousStrides(lead + [l, s])) : nil
        guard tracked, let p else { return (result, weights) }
        return (
            Autograd.record(result, Autograd.name(sdpa), t, saved: [q3, k3, v3, p]) { g in
                // dV = Pᵀ·G; dS = P ⊙ (dP − Σ(dP ⊙ P)) · scale with dP = G·Vᵀ, the softmax
                // derivative in float32: the backend's kernel reads dP and P in their dtype (no
                // float32 copy of the scores), else composed on float32 copies; dQ = dS·K,
                // dK = dSᵀ·Q.
                let g3 = try ShapeOps.reshape(g, [batch, l, ev])
                let dv = try LinearAlgebra.matmul(try ShapeOps.transpose(p, 1, 2), g3)
                let dp = try LinearAlgebra.matmul(g3, try ShapeOps.transpose(v3, 1, 2))
                let ds: TensorImpl
                if let direct = try Activations.softmaxBackward(dp, p, axis: 2, log: false, name: "\(sdpa.name)_backward") {
                    ds = try Composite.mul(direct, scale)
                } else {
                    let wide = q.dtype.computeType
                    let dpf = try Ops.cast(dp, to: wide), pf = try Ops.cast(p, to: wide)
                    ds = try Ops.cast(
                        try Composite.mul(
                            try Activations.composedSoftmaxBackward(dpf, pf, axis: 2, log: false),
                            scale), to: q.dtype)
                }
                let dq = try LinearAlgebra.matmul(ds, k3)
                let dk = try LinearAlgebra.matmul(try ShapeOps.transpose(ds, 1, 2), q3)
                return [try ShapeOps.reshape(dq, q.shape), try ShapeOps.reshape(dk, k.shape), try ShapeOps.reshape(dv, v.shape)]
            }, weights
        )
    }
}
