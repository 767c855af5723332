/// scaled_dot_product_attention: softmax(q·kᵀ·scale + mask) · v. The two products run in
/// lower precision under autocast; the softmax runs in float32.
package enum Attention {
    static let sdpa = OpInfo("scaled_dot_product_attention", .lowerPrecision)
    static let infos = [sdpa]

    /// (output [..., L, Ev], attention weights [..., L, S]) for q [..., L, E], k [..., S, E],
    /// v [..., S, Ev]. A bool `mask` marks the positions that may be attended to; a floating
    /// one is added to the scores. `causal` masks out future positions (top-left aligned).
    package static func attention(_ q: TensorImpl, _ k: TensorImpl, _ v: TensorImpl, mask: TensorImpl?, causal: Bool,
                                  scale: Double?, dropout: Double, training: Bool = true) throws -> (TensorImpl, TensorImpl) {
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
        return try sdpa.run([q, k, v]) { t in
            try Composite.checkSameDType(op, t)
            let dtype = t[0].dtype
            let products = try LinearAlgebra.matmul(t[0], try ShapeOps.transpose(t[1], -2, -1))
            var scores = try Composite.mul(try Ops.cast(products, to: .float32), factor)
            var allowed: TensorImpl? = nil
            if causal {
                let rows = try ShapeOps.reshape(try Creation.arange(start: 0, end: Int64(l), step: 1, dtype: .int64, device: q.device), [l, 1])
                let cols = try ShapeOps.reshape(try Creation.arange(start: 0, end: Int64(s), step: 1, dtype: .int64, device: q.device), [1, s])
                allowed = try Comparison.compare(.le, cols, rows)
            } else if let mask, mask.dtype == .bool {
                allowed = mask
            } else if let mask {
                try Composite.checkFloat(op + " (attn_mask)", [mask])
                scores = try Composite.add(scores, try Ops.cast(mask, to: .float32))
            }
            if let allowed {
                scores = try Comparison.where(allowed, scores, try Ops.scalarTensor(ScalarOperand(float: -.infinity), dtype: .float32, device: q.device))
            }
            var weights = try Activations.softmax(scores, dim: -1)
            if dropout > 0 { weights = try Activations.dropout(weights, p: dropout, training: training) }
            let p = try Ops.cast(weights, to: dtype)
            return (try LinearAlgebra.matmul(p, t[2]), p)
        }
    }
}
