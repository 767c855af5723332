/// Host fused attention: oneDNN products and softmax where it is linked (for the problems it
/// takes); the op layer composes the others.
extension HostBackend: AttentionKernels {
    /// Whether oneDNN takes this attention.
    static func takesAttention(
        _ q: TensorImpl, _ k: TensorImpl, _ v: TensorImpl, weights: TensorImpl?,
        into out: TensorImpl
    ) -> Bool {
        #if canImport(CDNNL)
        return DNNL.takesAttention(q, k, v, weights: weights, into: out)
        #else
        return false
        #endif
    }

    func attention(
        _ q: TensorImpl, _ k: TensorImpl, _ v: TensorImpl, mask: TensorImpl?, scale: Float, causal: Bool,
        weights: TensorImpl?, into out: TensorImpl
    ) throws {
        #if canImport(CDNNL)
        if mask == nil, DNNL.attention(q, k, v, scale: scale, causal: causal, weights: weights, into: out) { return }
        #endif
        throw LucidError.runtime("attention: oneDNN did not run an attention it had taken (q \(q.shape), k \(k.shape))")
    }
}
