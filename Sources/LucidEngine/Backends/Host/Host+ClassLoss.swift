/// The negative log-likelihood's weighted gather and its adjoint on the host, for every dtype
/// but float64 (composed, as the other fused kernels): each element computed in float and
/// rounded once.
extension HostBackend: ClassLossKernels {
    func nllTerms(
        _ logp: TensorImpl, target: TensorImpl, weight: TensorImpl?, ignoreIndex: Int64, loss: TensorImpl,
        weights: TensorImpl, outOfRange: @escaping @Sendable (Int64) -> LucidError
    ) throws {
        let kernel = NLLTermsKernel(logp: logp, target: target, weight: weight, ignoreIndex: ignoreIndex, loss: loss, weights: weights)
        if let bad = dispatch(logp.dtype, kernel) { throw outOfRange(bad) }
    }

    func nllBackward(
        _ grad: TensorImpl, total: TensorImpl?, target: TensorImpl, weights: TensorImpl, ignoreIndex: Int64,
        into gradIn: TensorImpl
    ) {
        dispatch(
            gradIn.dtype, NLLBackwardKernel(grad: grad, total: total, target: target, weights: weights, ignoreIndex: ignoreIndex, gradIn: gradIn))
    }
}

private struct NLLTermsKernel: ElementVisitor {
    let logp: TensorImpl, target: TensorImpl, weight: TensorImpl?, ignoreIndex: Int64, loss: TensorImpl, weights: TensorImpl
    func visit<E: HostElement>(_: E.Type) -> Int64? {
        let (n, c, m) = (logp.shape[0], logp.shape[1], logp.shape[2])
        let px = UnsafePointer(hostPointer(logp, E.self)), py = UnsafePointer(hostPointer(target, I64Element.self))
        let pw = weight.map { UnsafePointer(hostPointer($0, E.self)) }, ws = weight?.strides[0] ?? 0
        let pl = hostPointer(loss, E.self), po = hostPointer(weights, E.self)
        let xs = logp.strides, ys = target.strides
        for i in 0..<n {
            for j in 0..<m {
                let t = py[i &* ys[0] &+ j &* ys[1]], k = i &* m &+ j
                if t == ignoreIndex {
                    E.setFloat(pl, k, 0)
                    E.setFloat(po, k, 0)
                    continue
                }
                guard t >= 0 && t < Int64(c) else { return t }
                let w = pw.map { E.float($0, Int(t) &* ws) } ?? 1
                E.setFloat(pl, k, -(E.float(px, i &* xs[0] &+ Int(t) &* xs[1] &+ j &* xs[2]) * w))
                E.setFloat(po, k, w)
            }
        }
        return nil
    }
}

private struct NLLBackwardKernel: ElementVisitor {
    let grad: TensorImpl, total: TensorImpl?, target: TensorImpl, weights: TensorImpl, ignoreIndex: Int64, gradIn: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let (n, c, m) = (gradIn.shape[0], gradIn.shape[1], gradIn.shape[2])
        let pg = UnsafePointer(hostPointer(grad, E.self)), py = UnsafePointer(hostPointer(target, I64Element.self))
        let pw = UnsafePointer(hostPointer(weights, E.self)), out = hostPointer(gradIn, E.self)
        let gs = grad.strides, ys = target.strides, ws = weights.strides
        let sum = total.map { E.float(UnsafePointer(hostPointer($0, E.self)), 0) }
        HostBackend.address(gradIn).initializeMemory(as: UInt8.self, repeating: 0, count: gradIn.numel &* gradIn.dtype.itemSize)
        for i in 0..<n {
            for j in 0..<m {
                let t = py[i &* ys[0] &+ j &* ys[1]]
                // Ignored targets (and any out of range, which the forward refused) take nothing.
                guard t != ignoreIndex, t >= 0, t < Int64(c) else { continue }
                let g = E.float(pg, i &* gs[0] &+ j &* gs[1])
                let share = -(sum.map { g / $0 } ?? g) * E.float(pw, i &* ws[0] &+ j &* ws[1])
                E.setFloat(out, (i &* c &+ Int(t)) &* m &+ j, share)
            }
        }
    }
}
