import CHostKernels

/// Host kernels of automatic mixed precision: GradScaler's unscale and scale update (in
/// float32) and autocast inspection's statistics. Flags, scales and counts are read and
/// written in place, as a GPU does.
extension HostBackend: AMPKernels {
    func unscale(_ grads: [TensorImpl], invScale: TensorImpl, found: TensorImpl, into outs: [TensorImpl]) {
        let inv = Self.float32Element(invScale).pointee
        var nonFinite = false
        for (g, o) in zip(grads, outs) where dispatch(g.dtype, UnscaleKernel(g: g, inv: inv, out: o)) { nonFinite = true }
        if nonFinite { Self.float32Element(found).pointee = 1 }
    }

    func castStatistics(_ x: TensorImpl, into acc: TensorImpl, word: Int) {
        var limits = CastStatistics.limits(for: x.dtype)
        var found = [UInt64](repeating: 0, count: 7)
        if x.dtype.itemSize == 4 {
            lucid_host_cast_stats32(Self.address(x).assumingMemoryBound(to: UInt32.self), x.numel, &limits, &found)
        } else {
            lucid_host_cast_stats16(Self.address(x).assumingMemoryBound(to: UInt16.self), x.numel, &limits, &found)
        }
        found[0] = UInt64(CastStatistics.float32Bits(UInt32(truncatingIfNeeded: found[0]), from: x.dtype))
        CastStatistics.merge(found, into: Self.address(acc).assumingMemoryBound(to: UInt32.self), word: word)
    }

    func updateScale(_ scale: TensorImpl, growthTracker: TensorImpl, found: TensorImpl, _ u: ScaleUpdate) {
        let s = Self.float32Element(scale), tracker = Self.address(growthTracker).assumingMemoryBound(to: Int32.self)
        if Self.isSet(found) {
            s.pointee *= u.backoffFactor
            tracker.pointee = 0
            return
        }
        tracker.pointee += 1
        if tracker.pointee == u.growthInterval {
            let grown = s.pointee * u.growthFactor
            if grown.isFinite { s.pointee = grown }
            tracker.pointee = 0
        }
    }
}

private struct UnscaleKernel: ElementVisitor {
    let g: TensorImpl, inv: Float, out: TensorImpl
    func visit<E: HostElement>(_: E.Type) -> Bool {
        let gp = hostPointer(g, E.self), op = hostPointer(out, E.self)
        var nonFinite = false
        for i in 0..<g.numel {
            let x = E.float(gp, i) * E.Real(inv)
            E.setFloat(op, i, x)
            if !x.isFinite || !E.float(op, i).isFinite { nonFinite = true }
        }
        return nonFinite
    }
}
