import CHostKernels

/// The host's fused Elman, LSTM and GRU cells (family `elementwise`): the gates' arithmetic of one step
/// in one pass instead of a dozen elementwise ops and their graph nodes. float32 and bfloat16 run the
/// vector loops of CHostKernels, float16 runs them on float32 copies (each result rounded once
/// into the dtype); float64 (and float16 when the copies cannot be had) runs the generic loops
/// below, which compute the same way in the dtype's real type.
extension HostBackend: RecurrentCellKernels {
    func lstmCell(
        _ xw: TensorImpl, _ hw: TensorImpl, _ c: TensorImpl, h: TensorImpl, cNew: TensorImpl,
        activations: TensorImpl
    ) {
        let (batch, n) = (c.shape[0], c.shape[1])
        if c.dtype == .float32 {
            let (x, y, s, o, on, a) = (floats(xw), floats(hw), floats(c), floats(h), floats(cNew), floats(activations))
            return Self.cellRows(batch, n) { r, count in
                lucid_host_lstm_cell(x + 4 * r, y + 4 * r, s + r, o + r, on + r, a + 5 * r, count, n)
            }
        }
        if c.dtype == .bfloat16 {
            let (x, y, s, o, on, a) = (bits(xw), bits(hw), bits(c), bits(h), bits(cNew), floats(activations))
            return Self.cellRows(batch, n) { r, count in
                lucid_host_lstm_cell_bf16(x + 4 * r, y + 4 * r, s + r, o + r, on + r, a + 5 * r, count, n)
            }
        }
        if c.dtype == .float16, let wide = float32([xw, hw, c], [h, cNew]) {
            lucid_host_lstm_cell(
                floats(wide[0]), floats(wide[1]), floats(wide[2]), floats(wide[3]), floats(wide[4]),
                floats(activations), batch, n)
            copy(wide[3], into: h)
            copy(wide[4], into: cNew)
            return
        }
        dispatch(c.dtype, LSTMCellForward(xw: xw, hw: hw, c: c, h: h, cNew: cNew, act: activations))
    }

    /// Each thread takes a part of the batch's rows through every step: one parallel region for
    /// the layer instead of two a step (the step's product, then its cell), and each step's
    /// product a thread's own, on its rows alone, over wHh packed once into panels. bfloat16
    /// multiplies its values widened (exactly) and rounds each step's product once, before
    /// the cell, as a bfloat16 product does.
    func lstmRecurrence(
        _ xw: TensorImpl, wHh: TensorImpl, bHh: TensorImpl?, h0: TensorImpl, c0: TensorImpl, order: [Int],
        out: TensorImpl, cells: TensorImpl, activations: TensorImpl
    ) {
        let (batch, n) = (c0.shape[0], c0.shape[1])
        let wide = xw.dtype == .bfloat16
        // wHh's panels (hw = h · wHhᵀ), then (bfloat16) its values and the bias widened.
        let scratch = UnsafeMutablePointer<Float>.allocate(capacity: wide ? 8 * n * n + 4 * n : 4 * n * n)
        defer { scratch.deallocate() }
        var bias = bHh.map { UnsafePointer(floats($0)) }
        if wide {
            let w = scratch + 4 * n * n, b = w + 4 * n * n
            lucid_host_widen_bf16(bits(wHh), w, 4 * n * n)
            lucid_host_pack_panels(w, scratch, 4 * n, n)
            if let bHh {
                lucid_host_widen_bf16(bits(bHh), b, 4 * n)
                bias = UnsafePointer(b)
            }
        } else {
            lucid_host_pack_panels(floats(wHh), scratch, 4 * n, n)
        }
        let panels = UnsafePointer(scratch), acts = floats(activations)
        func run<E: RecurrentRowElement>(_: E.Type) {
            HostThreads.forEachRange(batch, grain: 1, align: 1) { rows in
                let (first, count) = (rows.lowerBound, rows.count)
                let (x, h, c) = (E.pointer(xw), E.pointer(out), E.pointer(cells))
                let hw = UnsafeMutablePointer<E>.allocate(capacity: count * 4 * n)
                let work = UnsafeMutablePointer<Float>.allocate(capacity: E.productScratch(rows: count, n: 4 * n, k: n))
                defer {
                    hw.deallocate()
                    work.deallocate()
                }
                var (hPrevious, cPrevious) = (UnsafePointer(E.pointer(h0) + first * n), UnsafePointer(E.pointer(c0) + first * n))
                for t in order {
                    let at = t * batch + first
                    E.product(hPrevious, panels, bias, hw, count, 4 * n, n, scratch: work)
                    E.lstmCell(x + 4 * n * at, hw, cPrevious, h + n * at, c + n * at, acts + 5 * n * at, count, n)
                    (hPrevious, cPrevious) = (UnsafePointer(h + n * at), UnsafePointer(c + n * at))
                }
            }
        }
        wide ? run(UInt16.self) : run(Float.self)
    }

    /// The same per-thread split backward through the steps: each thread runs its rows' cell
    /// backward and their recurrent product (the gates' gradient times wHh, over wHh packed
    /// once) step by step, in reverse; bfloat16 rounds each product once, as the forward.
    func lstmRecurrenceBackward(
        _ grad: TensorImpl, wHh: TensorImpl, c0: TensorImpl, cells: TensorImpl, activations: TensorImpl, order: [Int],
        gradGates: TensorImpl, gradH0: TensorImpl, gradC0: TensorImpl
    ) {
        let (batch, n, steps) = (c0.shape[0], c0.shape[1], order.count)
        let wide = grad.dtype == .bfloat16
        // wHh's panels (dh = dGates · wHh), then (bfloat16) its values widened.
        let scratch = UnsafeMutablePointer<Float>.allocate(capacity: wide ? 8 * n * n : 4 * n * n)
        defer { scratch.deallocate() }
        if wide {
            lucid_host_widen_bf16(bits(wHh), scratch + 4 * n * n, 4 * n * n)
            lucid_host_pack_panels_plain(scratch + 4 * n * n, scratch, n, 4 * n)
        } else {
            lucid_host_pack_panels_plain(floats(wHh), scratch, n, 4 * n)
        }
        let panels = UnsafePointer(scratch), acts = UnsafePointer(floats(activations))
        func run<E: RecurrentRowElement>(_: E.Type) {
            HostThreads.forEachRange(batch, grain: 1, align: 1) { rows in
                let (first, count) = (rows.lowerBound, rows.count)
                let (g, c, dGates) = (E.pointer(grad), E.pointer(cells), E.pointer(gradGates))
                // h's recurrent gradient, c's gradient, and the step's result for the c before.
                let states = UnsafeMutablePointer<E>.allocate(capacity: 3 * count * n)
                let work = UnsafeMutablePointer<Float>.allocate(capacity: E.productScratch(rows: count, n: n, k: 4 * n))
                defer {
                    states.deallocate()
                    work.deallocate()
                }
                var (dh, dc, dcPrevious) = (states, states + count * n, states + 2 * count * n)
                dh.initialize(repeating: .zero, count: count * n)
                dc.update(from: g + (steps * batch + first) * n, count: count * n)
                for s in order.indices.reversed() {
                    let at = order[s] * batch + first, dg = dGates + 4 * n * at
                    // The rows' cell state before the step: c0's, or the one the step before left.
                    let cPrevious = s == 0 ? E.pointer(c0) + first * n : c + (order[s - 1] * batch + first) * n
                    E.lstmCellBackward(acts + 5 * n * at, cPrevious, g + n * at, dh, dc, dg, dcPrevious, count, n)
                    E.product(dg, panels, nil, dh, count, n, 4 * n, scratch: work)
                    swap(&dc, &dcPrevious)
                }
                (E.pointer(gradH0) + first * n).update(from: dh, count: count * n)
                (E.pointer(gradC0) + first * n).update(from: dc, count: count * n)
            }
        }
        wide ? run(UInt16.self) : run(Float.self)
    }

    /// Runs `body(first, rows)` over a cell's `batch` rows of `n` values, in parallel parts of
    /// whole rows when there are enough: each value costs five exponentials, so a part of about a
    /// thousand values (10 µs) repays waking a thread. `first` is the part's first value's
    /// index in a [batch, n] tensor.
    private static func cellRows(_ batch: Int, _ n: Int, _ body: (Int, Int) -> Void) {
        HostThreads.forEachRange(batch, grain: max(1, (1 << 10) / max(n, 1)), align: 1) { rows in
            body(rows.lowerBound * n, rows.count)
        }
    }

    func lstmCellBackward(
        activations: TensorImpl, c: TensorImpl, gradH: TensorImpl?, gradHRecurrent: TensorImpl?,
        gradC: TensorImpl?, gradGates: TensorImpl, gradCPrevious: TensorImpl
    ) {
        let (batch, n) = (c.shape[0], c.shape[1])
        if c.dtype == .float32 {
            return lucid_host_lstm_cell_backward(
                floats(activations), floats(c), gradH.map(floats), gradHRecurrent.map(floats),
                gradC.map(floats), floats(gradGates), floats(gradCPrevious), batch, n)
        }
        if c.dtype == .bfloat16 {
            return lucid_host_lstm_cell_backward_bf16(
                floats(activations), bits(c), gradH.map(bits), gradHRecurrent.map(bits),
                gradC.map(bits), bits(gradGates), bits(gradCPrevious), batch, n)
        }
        let given = [gradH, gradHRecurrent, gradC]
        if c.dtype == .float16, let wide = float32([c] + given.compactMap { $0 }, [gradGates, gradCPrevious]) {
            var rest = wide[1...].makeIterator()
            let g = given.map { $0 == nil ? nil : rest.next() }
            let (dg, dc) = (wide[wide.count - 2], wide[wide.count - 1])
            lucid_host_lstm_cell_backward(
                floats(activations), floats(wide[0]), g[0].map(floats), g[1].map(floats),
                g[2].map(floats), floats(dg), floats(dc), batch, n)
            copy(dg, into: gradGates)
            copy(dc, into: gradCPrevious)
            return
        }
        dispatch(
            c.dtype,
            LSTMCellBackward(
                act: activations, c: c, gh: gradH, ghMore: gradHRecurrent, gc: gradC,
                dGates: gradGates, dc: gradCPrevious))
    }

    func rnnCell(_ xw: TensorImpl, _ hw: TensorImpl, relu: Bool, h: TensorImpl) {
        let count = h.numel, r: Int32 = relu ? 1 : 0
        if h.dtype == .float32 { return lucid_host_rnn_cell(floats(xw), floats(hw), floats(h), count, r) }
        if h.dtype == .bfloat16 { return lucid_host_rnn_cell_bf16(bits(xw), bits(hw), bits(h), count, r) }
        if h.dtype == .float16, let wide = float32([xw, hw], [h]) {
            lucid_host_rnn_cell(floats(wide[0]), floats(wide[1]), floats(wide[2]), count, r)
            return copy(wide[2], into: h)
        }
        dispatch(h.dtype, RNNCellForward(xw: xw, hw: hw, relu: relu, h: h))
    }

    func rnnCellBackward(h: TensorImpl, relu: Bool, gradH: TensorImpl, gradHRecurrent: TensorImpl?, gradPre: TensorImpl) {
        let count = h.numel, r: Int32 = relu ? 1 : 0
        if h.dtype == .float32 {
            return lucid_host_rnn_cell_backward(floats(h), floats(gradH), gradHRecurrent.map(floats), floats(gradPre), count, r)
        }
        if h.dtype == .bfloat16 {
            return lucid_host_rnn_cell_backward_bf16(bits(h), bits(gradH), gradHRecurrent.map(bits), bits(gradPre), count, r)
        }
        if h.dtype == .float16, let wide = float32([h, gradH] + [gradHRecurrent].compactMap { $0 }, [gradPre]) {
            let more = gradHRecurrent == nil ? nil : wide[2]
            lucid_host_rnn_cell_backward(floats(wide[0]), floats(wide[1]), more.map(floats), floats(wide[wide.count - 1]), count, r)
            return copy(wide[wide.count - 1], into: gradPre)
        }
        dispatch(h.dtype, RNNCellBackward(h: h, relu: relu, gh: gradH, ghMore: gradHRecurrent, d: gradPre))
    }

    func gruCell(_ xw: TensorImpl, _ hw: TensorImpl, _ h: TensorImpl, hNew: TensorImpl, activations: TensorImpl) {
        let (batch, n) = (h.shape[0], h.shape[1])
        if h.dtype == .float32 {
            return lucid_host_gru_cell(floats(xw), floats(hw), floats(h), floats(hNew), floats(activations), batch, n)
        }
        if h.dtype == .bfloat16 {
            return lucid_host_gru_cell_bf16(bits(xw), bits(hw), bits(h), bits(hNew), floats(activations), batch, n)
        }
        if h.dtype == .float16, let wide = float32([xw, hw, h], [hNew]) {
            lucid_host_gru_cell(floats(wide[0]), floats(wide[1]), floats(wide[2]), floats(wide[3]), floats(activations), batch, n)
            copy(wide[3], into: hNew)
            return
        }
        dispatch(h.dtype, GRUCellForward(xw: xw, hw: hw, h: h, hNew: hNew, act: activations))
    }

    func gruCellBackward(
        activations: TensorImpl, h: TensorImpl, gradH: TensorImpl, gradHRecurrent: TensorImpl?, gradHCarry: TensorImpl?,
        gradXW: TensorImpl, gradHW: TensorImpl, gradHDirect: TensorImpl
    ) {
        let (batch, n) = (h.shape[0], h.shape[1])
        if h.dtype == .float32 {
            return lucid_host_gru_cell_backward(
                floats(activations), floats(h), floats(gradH), gradHRecurrent.map(floats), gradHCarry.map(floats),
                floats(gradXW), floats(gradHW), floats(gradHDirect), batch, n)
        }
        if h.dtype == .bfloat16 {
            return lucid_host_gru_cell_backward_bf16(
                floats(activations), bits(h), bits(gradH), gradHRecurrent.map(bits), gradHCarry.map(bits),
                bits(gradXW), bits(gradHW), bits(gradHDirect), batch, n)
        }
        let given = [gradHRecurrent, gradHCarry]
        if h.dtype == .float16, let wide = float32([h, gradH] + given.compactMap { $0 }, [gradXW, gradHW, gradHDirect]) {
            var rest = wide[2...].makeIterator()
            let g = given.map { $0 == nil ? nil : rest.next() }
            let (dx, dy, dh) = (wide[wide.count - 3], wide[wide.count - 2], wide[wide.count - 1])
            lucid_host_gru_cell_backward(
                floats(activations), floats(wide[0]), floats(wide[1]), g[0].map(floats), g[1].map(floats), floats(dx),
                floats(dy), floats(dh), batch, n)
            copy(dx, into: gradXW)
            copy(dy, into: gradHW)
            copy(dh, into: gradHDirect)
            return
        }
        dispatch(
            h.dtype,
            GRUCellBackward(
                act: activations, h: h, gh: gradH, ghMore: gradHRecurrent, ghCarry: gradHCarry, dx: gradXW, dy: gradHW,
                dh: gradHDirect))
    }

    /// float32 copies of `inputs` (exact widenings), then float32 buffers shaped as `outputs`;
    /// nil when their memory cannot be had.
    private func float32(_ inputs: [TensorImpl], _ outputs: [TensorImpl]) -> [TensorImpl]? {
        var made: [TensorImpl] = []
        for (i, t) in (inputs + outputs).enumerated() {
            guard let w = try? TensorImpl.empty(t.shape, dtype: .float32, on: HostBackend.scratch(beside: t)) else { return nil }
            if i < inputs.count { copy(t, into: w) }
            made.append(w)
        }
        return made
    }
}

/// A float32 tensor's host memory.
@inline(__always)
private func floats(_ t: TensorImpl) -> UnsafeMutablePointer<Float> { hostPointer(t, F32Element.self) }

/// A bfloat16 tensor's host memory, as bits.
@inline(__always)
private func bits(_ t: TensorImpl) -> UnsafeMutablePointer<UInt16> { hostPointer(t, BF16Element.self) }

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

private struct GRUCellForward: ElementVisitor {
    let xw: TensorImpl, hw: TensorImpl, h: TensorImpl, hNew: TensorImpl, act: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let px = UnsafePointer(hostPointer(xw, E.self)), py = UnsafePointer(hostPointer(hw, E.self))
        let ph = UnsafePointer(hostPointer(h, E.self))
        let pout = hostPointer(hNew, E.self), pa = reals(act, E.self)
        let n = h.shape[1]
        for b in 0..<h.shape[0] {
            let row = b * 3 * n, state = b * n, kept = b * 4 * n
            for j in 0..<n {
                let q = row + j, a = kept + j
                let r = E.Real.sigmoid(E.float(px, q) + E.float(py, q))
                let z = E.Real.sigmoid(E.float(px, q + n) + E.float(py, q + n))
                let hn = E.float(py, q + 2 * n)
                let g = E.Real.tanh(E.float(px, q + 2 * n) + r * hn)
                E.setFloat(pout, state + j, g + z * (E.float(ph, state + j) - g))
                pa[a] = r
                pa[a + n] = z
                pa[a + 2 * n] = g
                pa[a + 3 * n] = hn
            }
        }
    }
}

private struct GRUCellBackward: ElementVisitor {
    let act: TensorImpl, h: TensorImpl, gh: TensorImpl, ghMore: TensorImpl?, ghCarry: TensorImpl?
    let dx: TensorImpl, dy: TensorImpl, dh: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let pa = UnsafePointer(reals(act, E.self)), ph = UnsafePointer(hostPointer(h, E.self))
        let pg = UnsafePointer(hostPointer(gh, E.self))
        let pmore = ghMore.map { UnsafePointer(hostPointer($0, E.self)) }
        let pcarry = ghCarry.map { UnsafePointer(hostPointer($0, E.self)) }
        let pdx = hostPointer(dx, E.self), pdy = hostPointer(dy, E.self), pdh = hostPointer(dh, E.self)
        let n = h.shape[1]
        for b in 0..<h.shape[0] {
            let row = b * 3 * n, state = b * n, kept = b * 4 * n
            for j in 0..<n {
                let q = row + j, k = state + j, a = kept + j
                let r = pa[a], z = pa[a + n], g = pa[a + 2 * n], hn = pa[a + 3 * n]
                var d = E.float(pg, k)
                if let pmore { d += E.float(pmore, k) }
                if let pcarry { d += E.float(pcarry, k) }
                let dg = d * (1 - z) * (1 - g * g)
                let dr = dg * hn * r * (1 - r)
                let dz = d * (E.float(ph, k) - g) * z * (1 - z)
                E.setFloat(pdx, q, dr)
                E.setFloat(pdx, q + n, dz)
                E.setFloat(pdx, q + 2 * n, dg)
                E.setFloat(pdy, q, dr)
                E.setFloat(pdy, q + n, dz)
                E.setFloat(pdy, q + 2 * n, dg * r)
                E.setFloat(pdh, k, d * z)
            }
        }
    }
}

private struct RNNCellForward: ElementVisitor {
    let xw: TensorImpl, hw: TensorImpl, relu: Bool, h: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let px = UnsafePointer(hostPointer(xw, E.self)), py = UnsafePointer(hostPointer(hw, E.self))
        let pout = hostPointer(h, E.self)
        for i in 0..<h.numel {
            let v = E.float(px, i) + E.float(py, i)
            E.setFloat(pout, i, relu ? (v < 0 ? 0 : v) : E.Real.tanh(v))
        }
    }
}

private struct RNNCellBackward: ElementVisitor {
    let h: TensorImpl, relu: Bool, gh: TensorImpl, ghMore: TensorImpl?, d: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let ph = UnsafePointer(hostPointer(h, E.self)), pg = UnsafePointer(hostPointer(gh, E.self))
        let pmore = ghMore.map { UnsafePointer(hostPointer($0, E.self)) }
        let pd = hostPointer(d, E.self)
        for i in 0..<h.numel {
            let g = pmore.map { E.float(pg, i) + E.float($0, i) } ?? E.float(pg, i)
            let y = E.float(ph, i)
            E.setFloat(pd, i, relu ? (y > 0 ? g : 0) : g * (1 - y * y))
        }
    }
}

/// What the whole-layer recurrences need of an element type: float32 (`Float`), or bfloat16
/// held as its bits (`UInt16`), whose products run on float32 copies and round once.
private protocol RecurrentRowElement: AdditiveArithmetic {
    static func pointer(_ t: TensorImpl) -> UnsafeMutablePointer<Self>
    /// Floats of scratch `product` needs for `rows` rows of `n` results over `k` terms.
    static func productScratch(rows: Int, n: Int, k: Int) -> Int
    /// out[m, n] = a[m, k] · b (+ bias), b in lucid_host_product_rows' panels.
    static func product(
        _ a: UnsafePointer<Self>, _ panels: UnsafePointer<Float>, _ bias: UnsafePointer<Float>?, _ out: UnsafeMutablePointer<Self>,
        _ m: Int, _ n: Int, _ k: Int, scratch: UnsafeMutablePointer<Float>)
    static func lstmCell(
        _ x: UnsafePointer<Self>, _ y: UnsafePointer<Self>, _ c: UnsafePointer<Self>, _ h: UnsafeMutablePointer<Self>,
        _ cNew: UnsafeMutablePointer<Self>, _ act: UnsafeMutablePointer<Float>, _ batch: Int, _ n: Int)
    static func lstmCellBackward(
        _ act: UnsafePointer<Float>, _ c: UnsafePointer<Self>, _ gh: UnsafePointer<Self>, _ ghMore: UnsafePointer<Self>,
        _ gc: UnsafePointer<Self>, _ dg: UnsafeMutablePointer<Self>, _ dc: UnsafeMutablePointer<Self>, _ batch: Int, _ n: Int)
}

extension Float: RecurrentRowElement {
    fileprivate static func pointer(_ t: TensorImpl) -> UnsafeMutablePointer<Float> { floats(t) }
    fileprivate static func productScratch(rows: Int, n: Int, k: Int) -> Int { 1 }
    fileprivate static func product(
        _ a: UnsafePointer<Float>, _ panels: UnsafePointer<Float>, _ bias: UnsafePointer<Float>?, _ out: UnsafeMutablePointer<Float>,
        _ m: Int, _ n: Int, _ k: Int, scratch: UnsafeMutablePointer<Float>
    ) {
        lucid_host_product_rows(a, panels, bias, out, m, n, k)
    }
    fileprivate static func lstmCell(
        _ x: UnsafePointer<Float>, _ y: UnsafePointer<Float>, _ c: UnsafePointer<Float>, _ h: UnsafeMutablePointer<Float>,
        _ cNew: UnsafeMutablePointer<Float>, _ act: UnsafeMutablePointer<Float>, _ batch: Int, _ n: Int
    ) {
        lucid_host_lstm_cell(x, y, c, h, cNew, act, batch, n)
    }
    fileprivate static func lstmCellBackward(
        _ act: UnsafePointer<Float>, _ c: UnsafePointer<Float>, _ gh: UnsafePointer<Float>, _ ghMore: UnsafePointer<Float>,
        _ gc: UnsafePointer<Float>, _ dg: UnsafeMutablePointer<Float>, _ dc: UnsafeMutablePointer<Float>, _ batch: Int, _ n: Int
    ) {
        lucid_host_lstm_cell_backward(act, c, gh, ghMore, gc, dg, dc, batch, n)
    }
}

extension UInt16: RecurrentRowElement {
    fileprivate static func pointer(_ t: TensorImpl) -> UnsafeMutablePointer<UInt16> { bits(t) }
    fileprivate static func productScratch(rows: Int, n: Int, k: Int) -> Int { rows * (k + n) }
    /// a widened (exactly), multiplied in float32, the result rounded once.
    fileprivate static func product(
        _ a: UnsafePointer<UInt16>, _ panels: UnsafePointer<Float>, _ bias: UnsafePointer<Float>?, _ out: UnsafeMutablePointer<UInt16>,
        _ m: Int, _ n: Int, _ k: Int, scratch: UnsafeMutablePointer<Float>
    ) {
        let (wideA, wideOut) = (scratch, scratch + m * k)
        lucid_host_widen_bf16(a, wideA, m * k)
        lucid_host_product_rows(wideA, panels, bias, wideOut, m, n, k)
        lucid_host_narrow_bf16(wideOut, out, m * n)
    }
    fileprivate static func lstmCell(
        _ x: UnsafePointer<UInt16>, _ y: UnsafePointer<UInt16>, _ c: UnsafePointer<UInt16>, _ h: UnsafeMutablePointer<UInt16>,
        _ cNew: UnsafeMutablePointer<UInt16>, _ act: UnsafeMutablePointer<Float>, _ batch: Int, _ n: Int
    ) {
        lucid_host_lstm_cell_bf16(x, y, c, h, cNew, act, batch, n)
    }
    fileprivate static func lstmCellBackward(
        _ act: UnsafePointer<Float>, _ c: UnsafePointer<UInt16>, _ gh: UnsafePointer<UInt16>, _ ghMore: UnsafePointer<UInt16>,
        _ gc: UnsafePointer<UInt16>, _ dg: UnsafeMutablePointer<UInt16>, _ dc: UnsafeMutablePointer<UInt16>, _ batch: Int, _ n: Int
    ) {
        lucid_host_lstm_cell_backward_bf16(act, c, gh, ghMore, gc, dg, dc, batch, n)
    }
}
