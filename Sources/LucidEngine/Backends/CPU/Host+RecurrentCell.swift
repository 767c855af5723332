import CHostKernels

/// The host's fused LSTM cell (family `elementwise`): the gates' arithmetic of one step in one
/// pass instead of a dozen elementwise ops and their graph nodes. float32 runs the vector loops
/// of CHostKernels; the other dtypes the generic loops below, which compute the same way.
extension HostBackend: RecurrentCellKernels {
    func lstmCell(_ xw: TensorImpl, _ hw: TensorImpl, _ c: TensorImpl, h: TensorImpl, cNew: TensorImpl,
                  activations: TensorImpl) {
        guard c.dtype == .float32 else {
            return dispatch(c.dtype, LSTMCellForward(xw: xw, hw: hw, c: c, h: h, cNew: cNew, act: activations))
        }
        lucid_host_lstm_cell(floats(xw), floats(hw), floats(c), floats(h), floats(cNew), floats(activations),
                             c.shape[0], c.shape[1])
    }

    func lstmCellBackward(activations: TensorImpl, c: TensorImpl, gradH: TensorImpl?, gradHRecurrent: TensorImpl?,
                          gradC: TensorImpl?, gradGates: TensorImpl, gradCPrevious: TensorImpl) {
        guard c.dtype == .float32 else {
            return dispatch(c.dtype, LSTMCellBackward(act: activations, c: c, gh: gradH, ghMore: gradHRecurrent, gc: gradC,
                                                      dGates: gradGates, dc: gradCPrevious))
        }
        lucid_host_lstm_cell_backward(floats(activations), floats(c), gradH.map(floats), gradHRecurrent.map(floats),
                                      gradC.map(floats), floats(gradGates), floats(gradCPrevious), c.shape[0], c.shape[1])
    }
}

/// A float32 tensor's host memory.
@inline(__always)
private func floats(_ t: TensorImpl) -> UnsafeMutablePointer<Float> { hostPointer(t, F32Element.self) }

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
        if E.Real.self == Float.self {  // float16, bfloat16
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

    /// One row of a 16-bit dtype computed in float32, a loop per function so that each
    /// vectorises: the gates' inputs summed into `pre`, the activations from there into the
    /// row's activations (not in place: the vector loops take only separate buffers), then the
    /// states, from the cell state as stored (rounded to the dtype).
    @inline(__always)
    private static func floatRow<E: HostElement>(_: E.Type, _ px: UnsafePointer<E.Stored>, _ ph: UnsafePointer<E.Stored>,
                                                 _ pc: UnsafePointer<E.Stored>, _ pn: UnsafeMutablePointer<E.Stored>,
                                                 _ pout: UnsafeMutablePointer<E.Stored>, _ pa: UnsafeMutablePointer<Float>,
                                                 _ pre: UnsafeMutablePointer<Float>, _ b: Int, _ n: Int) {
        let row = b * 4 * n, state = b * n
        let z = pa + b * 5 * n, t = z + 4 * n
        for k in 0..<(4 * n) { pre[k] = Float(E.float(px, row + k) + E.float(ph, row + k)) }
        FloatFastPath.unary(.sigmoid, pre, z, 2 * n)
        FloatFastPath.unary(.tanh, pre + 2 * n, z + 2 * n, n)
        FloatFastPath.unary(.sigmoid, pre + 3 * n, z + 3 * n, n)
        for j in 0..<n {
            E.setFloat(pn, state + j, E.Real(z[n + j] * Float(E.float(pc, state + j)) + z[j] * z[2 * n + j]))
            pre[j] = Float(E.float(UnsafePointer(pn), state + j))
        }
        FloatFastPath.unary(.tanh, pre, t, n)
        for j in 0..<n { E.setFloat(pout, state + j, E.Real(z[3 * n + j] * t[j])) }
    }
}

private struct LSTMCellBackward: ElementVisitor {
    let act: TensorImpl, c: TensorImpl, gh: TensorImpl?, ghMore: TensorImpl?, gc: TensorImpl?, dGates: TensorImpl
    let dc: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let pa = UnsafePointer(reals(act, E.self)), pc = UnsafePointer(hostPointer(c, E.self))
        let pgh = gh.map { UnsafePointer(hostPointer($0, E.self)) }, pgc = gc.map { UnsafePointer(hostPointer($0, E.self)) }
        let pmore = ghMore.map { UnsafePointer(hostPointer($0, E.self)) }
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
                    let tc = pa[a + 4 * n], dh = pmore.map { E.float(pgh, k) + E.float($0, k) } ?? E.float(pgh, k)
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
