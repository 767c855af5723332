#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Host optimizer steps (SGD, Adam/AdamW, threaded) and GradScaler's unscale, in float32.
extension HostBackend: OptimizerKernels {
    func sgdStep(param: TensorImpl, grad: TensorImpl, momentum: TensorImpl?, hyper: SGDHyper,
                 newParam: TensorImpl, newMomentum: TensorImpl?) {
        dispatch(param.dtype, SGDKernel(p: param, g: grad, buf: momentum, h: hyper, outP: newParam, outBuf: newMomentum))
    }

    func adamStep(param: TensorImpl, grad: TensorImpl, m: TensorImpl, v: TensorImpl, hyper: AdamHyper,
                  newParam: TensorImpl, newM: TensorImpl, newV: TensorImpl) {
        dispatch(param.dtype, AdamKernel(p: param, g: grad, m: m, v: v, h: hyper, outP: newParam, outM: newM, outV: newV))
    }

    func unscale(_ grads: [TensorImpl], invScale: Float, into outs: [TensorImpl]) -> Bool {
        var found = false
        for (g, o) in zip(grads, outs) where dispatch(g.dtype, UnscaleKernel(g: g, inv: invScale, out: o)) { found = true }
        return found
    }
}

private struct SGDKernel: ElementVisitor {
    let p: TensorImpl, g: TensorImpl, buf: TensorImpl?, h: SGDHyper, outP: TensorImpl, outBuf: TensorImpl?
    func visit<E: HostElement>(_: E.Type) {
        let pp = hostPointer(p, E.self), gp = hostPointer(g, E.self), op = hostPointer(outP, E.self)
        let bp = buf.map { hostPointer($0, E.self) }, obp = outBuf.map { hostPointer($0, E.self) }
        for i in 0..<p.numel {
            let w = E.float(pp, i)
            var d = E.float(gp, i)
            if h.maximize { d = -d }
            if h.weightDecay != 0 { d += h.weightDecay * w }
            if let obp {
                var b = d
                if let bp, !h.firstStep { b = h.momentum * E.float(bp, i) + (1 - h.dampening) * d }
                E.setFloat(obp, i, b)
                d = h.nesterov ? d + h.momentum * b : b
            }
            E.setFloat(op, i, w - h.lr * d)
        }
    }
}

private struct UnscaleKernel: ElementVisitor {
    let g: TensorImpl, inv: Float, out: TensorImpl
    func visit<E: HostElement>(_: E.Type) -> Bool {
        let gp = hostPointer(g, E.self), op = hostPointer(out, E.self)
        var nonFinite = false
        for i in 0..<g.numel {
            let x = E.float(gp, i) * inv
            E.setFloat(op, i, x)
            if !x.isFinite || !E.float(op, i).isFinite { nonFinite = true }
        }
        return nonFinite
    }
}

private struct AdamKernel: ElementVisitor {
    let p: TensorImpl, g: TensorImpl, m: TensorImpl, v: TensorImpl, h: AdamHyper
    let outP: TensorImpl, outM: TensorImpl, outV: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let pp = UnsafePointer(hostPointer(p, E.self)), gp = UnsafePointer(hostPointer(g, E.self))
        let mp = UnsafePointer(hostPointer(m, E.self)), vp = UnsafePointer(hostPointer(v, E.self))
        let op = hostPointer(outP, E.self), om = hostPointer(outM, E.self), ov = hostPointer(outV, E.self)
        let h = h
        HostThreads.forEachRange(p.numel) { r in Self.update(E.self, h, pp, gp, mp, vp, op, om, ov, r) }
    }

    /// One range of the update, the step's constants hoisted (a function of its own so that
    /// they stay in registers and the loop vectorises).
    private static func update<E: HostElement>(_: E.Type, _ h: AdamHyper, _ pp: UnsafePointer<E.Stored>,
                                               _ gp: UnsafePointer<E.Stored>, _ mp: UnsafePointer<E.Stored>,
                                               _ vp: UnsafePointer<E.Stored>, _ op: UnsafeMutablePointer<E.Stored>,
                                               _ om: UnsafeMutablePointer<E.Stored>, _ ov: UnsafeMutablePointer<E.Stored>,
                                               _ r: Range<Int>) {
        let (stepSize, bc2Root, sign, coupled, shrink) = h.constants
        let b1 = h.beta1, b2 = h.beta2, eps = h.eps
        for i in r {
            let w0 = E.float(pp, i)
            let d = coupled == 0 ? sign * E.float(gp, i) : sign * E.float(gp, i) + coupled * w0
            let w = shrink * w0
            let mi = b1 * E.float(mp, i) + (1 - b1) * d
            let vi = b2 * E.float(vp, i) + (1 - b2) * d * d
            E.setFloat(om, i, mi)
            E.setFloat(ov, i, vi)
            E.setFloat(op, i, w - stepSize * mi / (vi.squareRoot() / bc2Root + eps))
        }
    }
}
