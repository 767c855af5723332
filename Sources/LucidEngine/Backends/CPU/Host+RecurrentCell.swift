/// The host's fused LSTM cell (family `elementwise`), generic over the dtype: the gates'
/// arithmetic of one step in one pass instead of a dozen elementwise ops and their graph nodes.
extension HostBackend: RecurrentCellKernels {
    func lstmCell(_ xw: TensorImpl, _ hw: TensorImpl, _ c: TensorImpl, h: TensorImpl, cNew: TensorImpl,
                  activations: TensorImpl) {
        dispatch(c.dtype, LSTMCellForward(xw: xw, hw: hw, c: c, h: h, cNew: cNew, act: activations))
    }

    func lstmCellBackward(activations: TensorImpl, c: TensorImpl, gradH: TensorImpl?, gradC: TensorImpl?,
                          gradGates: TensorImpl, gradCPrevious: TensorImpl) {
        dispatch(c.dtype, LSTMCellBackward(act: activations, c: c, gh: gradH, gc: gradC, dGates: gradGates, dc: gradCPrevious))
    }
}

/// The activations' memory, in the dtype's real type (float32, or float64 for float64).
@inline(__always)
private func reals<E: HostElement>(_ t: TensorImpl, _: E.Type) -> UnsafeMutablePointer<E.Real> {
    HostBackend.address(t).assumingMemoryBound(to: E.Real.self)
}

private struct LSTMCellForward: ElementVisitor {
    let xw: TensorImpl, hw: TensorImpl, c: TensorImpl, h: TensorImpl, cNew: TensorImpl, act: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let px = UnsafePointer(hostPointer(xw, E.self)), ph = UnsafePointer(hostPointer(hw, E.self))
        let pc = UnsafePointer(hostPointer(c, E.self))
        let pn = hostPointer(cNew, E.self), pout = hostPointer(h, E.self), pa = reals(act, E.self)
        let n = c.shape[1]
        if E.Real.self == Float.self {
            let pf = UnsafeMutableRawPointer(pa).assumingMemoryBound(to: Float.self)
            withUnsafeTemporaryAllocation(of: Float.self, capacity: 4 * n) { pre in
                for b in 0..<c.shape[0] { Self.floatRow(E.self, px, ph, pc, pn, pout, pf, pre.baseAddress!, b, n) }
            }
            return
        }
        for b in 0..<c.shape[0] {
            let row = b * 4 * n, state = b * n, kept = b * 5 * n
            for j in 0..<n {
                let q = row + j, a = kept + j
                let i = E.Real.sigmoid(E.float(px, q) + E.float(ph, q))
                let f = E.Real.sigmoid(E.float(px, q + n) + E.float(ph, q + n))
                let g = E.Real.tanh(E.float(px, q + 2 * n) + E.float(ph, q + 2 * n))
                let o = E.Real.sigmoid(E.float(px, q + 3 * n) + E.float(ph, q + 3 * n))
                E.setFloat(pn, state + j, f * E.float(pc, state + j) + i * g)
                // tanh of the cell state as stored (rounded to the dtype).
                let t = E.Real.tanh(E.float(UnsafePointer(pn), state + j))
                E.setFloat(pout, state + j, o * t)
                pa[a] = i
                pa[a + n] = f
                pa[a + 2 * n] = g
                pa[a + 3 * n] = o
                pa[a + 4 * n] = t
            }
        }
    }

    /// One row computed in float32, a loop per function so that each vectorises: the gates'
    /// inputs summed into `pre`, the activations from there into the row's activations (not in
    /// place: the vector loops take only separate buffers), then the states.
    @inline(__always)
    private static func floatRow<E: HostElement>(_: E.Type, _ px: UnsafePointer<E.Stored>, _ ph: UnsafePointer<E.Stored>,
                                                 _ pc: UnsafePointer<E.Stored>, _ pn: UnsafeMutablePointer<E.Stored>,
                                                 _ pout: UnsafeMutablePointer<E.Stored>, _ pa: UnsafeMutablePointer<Float>,
                                                 _ pre: UnsafeMutablePointer<Float>, _ b: Int, _ n: Int) {
        let row = b * 4 * n, state = b * n
        let z = pa + b * 5 * n, t = z + 4 * n
        if E.Stored.self == Float.self {
            let x = UnsafeRawPointer(px + row).assumingMemoryBound(to: Float.self)
            let y = UnsafeRawPointer(ph + row).assumingMemoryBound(to: Float.self)
            for k in 0..<(4 * n) { pre[k] = x[k] + y[k] }
        } else {
            for k in 0..<(4 * n) { pre[k] = Float(E.float(px, row + k) + E.float(ph, row + k)) }
        }
        FloatFastPath.unary(.sigmoid, pre, z, 2 * n)
        FloatFastPath.unary(.tanh, pre + 2 * n, z + 2 * n, n)
        FloatFastPath.unary(.sigmoid, pre + 3 * n, z + 3 * n, n)
        if E.Stored.self == Float.self {
            let cs = UnsafeRawPointer(pc + state).assumingMemoryBound(to: Float.self)
            let ns = UnsafeMutableRawPointer(pn + state).assumingMemoryBound(to: Float.self)
            for j in 0..<n { ns[j] = z[n + j] * cs[j] + z[j] * z[2 * n + j] }
            FloatFastPath.unary(.tanh, ns, t, n)
            let hs = UnsafeMutableRawPointer(pout + state).assumingMemoryBound(to: Float.self)
            for j in 0..<n { hs[j] = z[3 * n + j] * t[j] }
        } else {
            // tanh of the cell state as stored (rounded to the dtype).
            for j in 0..<n {
                E.setFloat(pn, state + j, E.Real(z[n + j] * Float(E.float(pc, state + j)) + z[j] * z[2 * n + j]))
                pre[j] = Float(E.float(UnsafePointer(pn), state + j))
            }
            FloatFastPath.unary(.tanh, pre, t, n)
            for j in 0..<n { E.setFloat(pout, state + j, E.Real(z[3 * n + j] * t[j])) }
        }
    }
}

private struct LSTMCellBackward: ElementVisitor {
    let act: TensorImpl, c: TensorImpl, gh: TensorImpl?, gc: TensorImpl?, dGates: TensorImpl, dc: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let pa = UnsafePointer(reals(act, E.self)), pc = UnsafePointer(hostPointer(c, E.self))
        let pgh = gh.map { UnsafePointer(hostPointer($0, E.self)) }, pgc = gc.map { UnsafePointer(hostPointer($0, E.self)) }
        let pd = hostPointer(dGates, E.self), pdc = hostPointer(dc, E.self)
        let n = c.shape[1]
        for b in 0..<c.shape[0] {
            let row = b * 4 * n, state = b * n, kept = b * 5 * n
            for j in 0..<n {
                let q = row + j, k = state + j, a = kept + j
                let i = pa[a], f = pa[a + n], g = pa[a + 2 * n], o = pa[a + 3 * n]
                var dcn: E.Real = pgc.map { E.float($0, k) } ?? 0
                var dout: E.Real = 0
                if let pgh {
                    let tc = pa[a + 4 * n], dh = E.float(pgh, k)
                    dout = dh * tc
                    dcn += dh * o * (1 - tc * tc)
                }
                E.setFloat(pd, q, dcn * g * i * (1 - i))
                E.setFloat(pd, q + n, dcn * E.float(pc, k) * f * (1 - f))
                E.setFloat(pd, q + 2 * n, dcn * i * (1 - g * g))
                E.setFloat(pd, q + 3 * n, dout * o * (1 - o))
                E.setFloat(pdc, k, dcn * f)
            }
        }
    }
}
