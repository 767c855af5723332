/// Host fused attention: oneDNN products and softmax where it is linked; elsewhere the op
/// layer composes it.
extension HostBackend: AttentionKernels {
    func attention(_ q: TensorImpl, _ k: TensorImpl, _ v: TensorImpl, scale: Float, causal: Bool,
                   weights: TensorImpl?, into out: TensorImpl) -> Bool {
#if canImport(CDNNL)
        return DNNL.attention(q, k, v, scale: scale, causal: causal, weights: weights, into: out)
#else
        return false
#endif
    }
}
