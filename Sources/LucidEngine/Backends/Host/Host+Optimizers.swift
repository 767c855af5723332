import CHostKernels

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Host optimizer steps (SGD, Adam/AdamW, threaded), in float32. The step count and the
/// found-inf flag are read and written in place, as a GPU does.
extension HostBackend: OptimizerKernels {
    func sgdStep(
        param: TensorImpl, grad: TensorImpl, momentum: TensorImpl?, hyper: SGDHyper,
        newParam: TensorImpl, newMomentum: TensorImpl?, skipIf found: TensorImpl?
    ) {
        guard !Self.isSet(found) else { return }
        dispatch(param.dtype, SGDKernel(p: param, g: grad, buf: momentum, h: hyper, outP: newParam, outBuf: newMomentum))
    }

    func adamStep(
        param: TensorImpl, grad: TensorImpl, m: TensorImpl, v: TensorImpl, step: TensorImpl, hyper: AdamHyper,
        newParam: TensorImpl, newM: TensorImpl, newV: TensorImpl, skipIf found: TensorImpl?
    ) {
        guard !Self.isSet(found) else { return }
        let count = Self.float32Element(step)
        count.pointee += 1
        dispatch(
            param.dtype,
            AdamKernel(
                p: param, g: grad, m: m, v: v, h: hyper, step: count.pointee, outP: newParam,
                outM: newM, outV: newV))
    }
}

private struct SGDKernel: ElementVisitor {
    let p: TensorImpl, g: TensorImpl, buf: TensorImpl?, h: SGDHyper, outP: TensorImpl, outBuf: TensorImpl?
    func visit<E: HostElement>(_: E.Type) {
        let pp = UnsafePointer(hostPointer(p, E.self)), gp = UnsafePointer(hostPointer(g, E.self))
        let op = hostPointer(outP, E.self)
        let bp = buf.map { UnsafePointer(hostPointer($0, E.self)) }, obp = outBuf.map { hostPointer($0, E.self) }
        let h = h
        HostThreads.forEachRange(p.numel) { r in Self.update(E.self, h, pp, gp, bp, op, obp, r) }
    }

    /// One range of the update (a function of its own so that the hyperparameters stay in
    /// registers).
    private static func update<E: HostElement>(
        _: E.Type, _ h: SGDHyper, _ pp: UnsafePointer<E.Stored>, _ gp: UnsafePointer<E.Stored>,
        _ bp: UnsafePointer<E.Stored>?, _ op: UnsafeMutablePointer<E.Stored>,
        _ obp: UnsafeMutablePointer<E.Stored>?, _ r: Range<Int>
    ) {
        let lr = E.Real(h.lr), decay = E.Real(h.weightDecay), momentum = E.Real(h.momentum)
        let dampening = E.Real(h.dampening)
        for i in r {
            let w = E.float(pp, i)
            var d = E.float(gp, i)
            if h.maximize { d = -d }
            if decay != 0 { d += decay * w }
            if let obp {
                var b = d
                if let bp, !h.firstStep { b = momentum * E.float(bp, i) + (1 - dampening) * d }
                E.setFloat(obp, i, b)
                d = h.nesterov ? d + momentum * b : b
            }
            E.setFloat(op, i, w - lr * d)
        }
    }
}

private struct AdamKernel: ElementVisitor {
    let p: TensorImpl, g: TensorImpl, m: TensorImpl, v: TensorImpl, h: AdamHyper, step: Float
    let outP: TensorImpl, outM: TensorImpl, outV: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let pp = UnsafePointer(hostPointer(p, E.self)), gp = UnsafePointer(hostPointer(g, E.self))
        let mp = UnsafePointer(hostPointer(m, E.self)), vp = UnsafePointer(hostPointer(v, E.self))
        let op = hostPointer(outP, E.self), om = hostPointer(outM, E.self), ov = hostPointer(outV, E.self)
        let h = h, c = h.constants(E.Real.self, step: step)
        if E.Stored.self == Float.self, UnsafePointer(op) == pp, UnsafePointer(om) == mp, UnsafePointer(ov) == vp,
            !p.storage.sharesMemory(with: g.storage)
        {
            // float32 in place (the optimizers' own call): the vector loops, the same arithmetic.
            let k =
                [c.stepSize, c.bc2Root, c.sign, c.coupled, c.shrink].map { Float($0) }
                + [h.beta1, h.beta2, h.eps].map { Float($0) }
            func float(_ q: UnsafeMutablePointer<E.Stored>) -> UnsafeMutablePointer<Float> {
                UnsafeMutableRawPointer(q).assumingMemoryBound(to: Float.self)
            }
            let (fp, fm, fv) = (float(op), float(om), float(ov))
            let fg = UnsafeRawPointer(gp).assumingMemoryBound(to: Float.self)
            k.withUnsafeBufferPointer { kp in
                HostThreads.forEachRange(p.numel) { r in
                    lucid_host_adam(
                        fp + r.lowerBound, fg + r.lowerBound, fm + r.lowerBound, fv + r.lowerBound, r.count,
                        kp.baseAddress!)
                }
            }
            return
        }
        HostThreads.forEachRange(p.numel) { r in Self.update(E.self, h, c, pp, gp, mp, vp, op, om, ov, r) }
    }

    /// One range of the update, the step's constants hoisted (a function of its own so that
    /// they stay in registers and the loop vectorises).
    private static func update<E: HostElement>(
        _: E.Type, _ h: AdamHyper,
        _ c: (stepSize: E.Real, bc2Root: E.Real, sign: E.Real, coupled: E.Real, shrink: E.Real),
        _ pp: UnsafePointer<E.Stored>,
        _ gp: UnsafePointer<E.Stored>, _ mp: UnsafePointer<E.Stored>,
        _ vp: UnsafePointer<E.Stored>, _ op: UnsafeMutablePointer<E.Stored>,
        _ om: UnsafeMutablePointer<E.Stored>, _ ov: UnsafeMutablePointer<E.Stored>,
        _ r: Range<Int>
    ) {
        let (stepSize, bc2Root, sign, coupled, shrink) = c
        let b1 = E.Real(h.beta1), b2 = E.Real(h.beta2), eps = E.Real(h.eps)
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
