/// The GRU: a layer over a sequence, and one step's gate arithmetic, with PyTorch's equations
/// (gates reset, update, new; the reset gate scales the hidden state's product with its bias):
/// `r = σ(xw_r + hw_r)`, `z = σ(xw_z + hw_z)`, `n = tanh(xw_n + r·hw_n)`, `h' = n + z·(h − n)`,
/// where `xw = x·W_ihᵀ + b_ih` and `hw = h·W_hhᵀ + b_hh`.
extension Recurrent {
    /// One layer of a GRU over a sequence: `input` [T, B, C], the initial state `h0` [B, H],
    /// weights `wIh` [3H, C] and `wHh` [3H, H] and optional biases [3H] (PyTorch's layout and
    /// gate order), run from the last step to the first when `reverse`. Returns the hidden
    /// states of every step [T, B, H] and the final one, from one recorded result whose
    /// backward runs the recurrence back in the engine: per step the fused cell's backward and
    /// a product, then the weights' gradients as one product each over all steps. Without the
    /// fused cell on the backend, the steps are composed.
    package static func gruLayer(
        _ input: TensorImpl, h0: TensorImpl, wIh: TensorImpl, wHh: TensorImpl, bIh: TensorImpl?, bHh: TensorImpl?,
        reverse: Bool
    ) throws -> (TensorImpl, TensorImpl) {
        try runLayer(gru, gates: 3, input, states: [("h_0", h0)], wIh: wIh, wHh: wHh, bIh: bIh, bHh: bHh) { layer in
            if layer.steps > 0, layer.batch > 0, let fused = try fusedGRU(layer, reverse: reverse) { return fused }
            return try composedSteps(layer, reverse: reverse, state: layer.states[0]) { xw, h in
                let next = try gruCell(xw, try LinearAlgebra.linear(h, layer.wHh, layer.bHh), h)
                return (next, next)
            }
        }
    }

    /// The layer on the backend's fused cell, nil when the backend composes the cell.
    private static func fusedGRU(_ given: Layer, reverse: Bool) throws -> (TensorImpl, TensorImpl)? {
        let layer = given.detached
        let (steps, batch, n) = (layer.steps, layer.batch, layer.n)
        let dtype = layer.x.dtype, backend = layer.x.backend
        let xw = try inputProducts(layer.x, layer.wIh, layer.bIh, "gru")
        let out = try TensorImpl.empty([steps, batch, n], dtype: dtype, on: backend)
        let acts = try TensorImpl.empty([steps, batch, 4 * n], dtype: dtype.computeType, on: backend)
        let hw = try TensorImpl.empty([batch, 3 * n], dtype: dtype, on: backend)
        let order = stepOrder(steps, reverse: reverse)
        let (wHh, packed) = try stepWeight(layer, rows: batch)
        var h = layer.states[0]
        for t in order {
            product(h, wHh, prepared: packed, bias: layer.bHh, into: hw, "gru")
            let xt = row(xw, t), ht = row(out, t), at = row(acts, t)
            let call = KernelCall(.gruCell, reads: [xt, hw, h], writes: [ht, at])
            guard
                ht.runUnlessComposed(RecurrentCellKernels.self, call, "gru", { $0.gruCell(xt, hw, h, hNew: ht, activations: at) })
                    != nil
            else { return nil }
            h = ht
        }
        let saved = [layer.x, layer.states[0], layer.wIh, layer.wHh, out, acts]
        let result = Autograd.record(out, Autograd.name(gru), given.all, saved: saved) { g in
            try gruBackward(g, layer, out: out, acts: acts, order: order)
        }
        return (result, try Indexing.subscripted(result, [.int(order[steps - 1])]))
    }

    /// The layer's backward through time: from the last step to run back to the first, the
    /// cell's backward from the gradient of the step's h (its output's, the next step's
    /// product's and its direct part, summed in the kernel) gives the gates' gradients, and the
    /// hidden state's product carries them back; the weights', biases' and input's gradients
    /// are then one product (or sum) each over all steps.
    private static func gruBackward(_ g: TensorImpl, _ layer: Layer, out: TensorImpl, acts: TensorImpl, order: [Int]) throws
        -> [TensorImpl?]
    {
        let (steps, batch, n) = (layer.steps, layer.batch, layer.n)
        let dtype = out.dtype, backend = out.backend
        let grad = try Ops.contiguous(try Ops.cast(g, to: dtype))
        let previous = try previousStates(out, h0: layer.states[0], order: order)
        let dxw = try TensorImpl.empty([steps, batch, 3 * n], dtype: dtype, on: backend)
        let dhw = try TensorImpl.empty([steps, batch, 3 * n], dtype: dtype, on: backend)
        let back = try ShapeOps.transpose(layer.wHh, 0, 1)
        let packed = prepared(back, rows: batch, bias: false)
        var recurrent: TensorImpl?, carry: TensorImpl?
        for t in order.reversed() {
            let at = row(acts, t), ht = row(previous, t), gt = row(grad, t), dxt = row(dxw, t), dht = row(dhw, t)
            let direct = try TensorImpl.empty([batch, n], dtype: dtype, on: backend)
            let reads = [at, ht, gt] + [recurrent, carry].compactMap { $0 }
            let call = KernelCall(.gruCellBackward, reads: Operands(reads), writes: [dxt, dht, direct])
            guard
                dxt.runUnlessComposed(
                    RecurrentCellKernels.self, call, "gru_backward",
                    {
                        $0.gruCellBackward(
                            activations: at, h: ht, gradH: gt, gradHRecurrent: recurrent, gradHCarry: carry, gradXW: dxt,
                            gradHW: dht, gradHDirect: direct)
                    }) != nil
            else {
                throw LucidError.runtime("gru: the backend's backward kernel refused what its forward took")
            }
            let next = try TensorImpl.empty([batch, n], dtype: dtype, on: backend)
            product(dht, back, prepared: packed, bias: nil, into: next, "gru")
            (recurrent, carry) = (next, direct)
        }
        let dh0 = try Composite.add(recurrent!, carry!)
        let (dx, dWih, dWhh, db) = try weightGradients(layer, dxw: dxw, dhw: dhw, previous: previous)
        return [dx, dh0, dWih, dWhh] + db
    }

    /// One GRU step from the input's and the hidden state's products `xw` and `hw` ([B, 3H],
    /// each with its bias, gates in PyTorch's order: reset, update, new) and the state `h`
    /// ([B, H]): `h' = n + z·(h − n)`. The gates compute in the products' dtype (promoted when
    /// they differ), `h` converted to it; under autocast the products' lower precision carries
    /// the state. One graph node, through the backend's fused cell where it has one.
    package static func gruCell(_ xw: TensorImpl, _ hw: TensorImpl, _ h: TensorImpl) throws -> TensorImpl {
        try gruCell.run([xw, hw, h]) { t in try gruCellBody(t[0], t[1], t[2]) }
    }

    private static func gruCellBody(_ xw: TensorImpl, _ hw: TensorImpl, _ h: TensorImpl) throws -> TensorImpl {
        let op = gruCell.name
        guard xw.ndim == 2, h.ndim == 2, hw.shape == xw.shape, h.shape[0] == xw.shape[0], xw.shape[1] == 3 * h.shape[1] else {
            throw LucidError.value(
                "\(op): expected gate inputs of shape [batch, 3 * hidden] and a hidden state of shape "
                    + "[batch, hidden], got \(xw.shape), \(hw.shape) and \(h.shape)")
        }
        try Ops.checkSameDevice(op, [xw, hw, h])
        try Composite.checkFloat(op, [xw, hw, h])
        let dtype = DType.promote(xw.dtype, hw.dtype)
        let x = try Ops.contiguous(try Ops.cast(xw, to: dtype)), y = try Ops.contiguous(try Ops.cast(hw, to: dtype))
        let state = try Ops.contiguous(try Ops.cast(h, to: dtype))
        let (batch, n) = (h.shape[0], h.shape[1])
        guard batch * n > 0 else { return try composedGRUCell(x, y, state, n) }
        let out = try TensorImpl.empty([batch, n], dtype: dtype, on: x.backend)
        let act = try TensorImpl.empty([batch, 4 * n], dtype: dtype.computeType, on: x.backend)
        let values = [x, y, state].map { $0.withRequiresGrad(false) }
        let call = KernelCall(.gruCell, reads: Operands(values), writes: [out, act])
        guard
            out.runUnlessComposed(
                RecurrentCellKernels.self, call, op, { $0.gruCell(values[0], values[1], values[2], hNew: out, activations: act) })
                != nil
        else { return try composedGRUCell(x, y, state, n) }
        let previous = values[2]
        return Autograd.record(out, Autograd.name(gruCell), [x, y, state], saved: [act, previous]) { g in
            let grad = try Ops.contiguous(try Ops.cast(g, to: dtype))
            let dx = try TensorImpl.empty([batch, 3 * n], dtype: dtype, on: act.backend)
            let dy = try TensorImpl.empty([batch, 3 * n], dtype: dtype, on: act.backend)
            let dh = try TensorImpl.empty([batch, n], dtype: dtype, on: act.backend)
            let call = KernelCall(.gruCellBackward, reads: [act, previous, grad], writes: [dx, dy, dh])
            guard
                dx.runUnlessComposed(
                    RecurrentCellKernels.self, call, "\(op)_backward",
                    {
                        $0.gruCellBackward(
                            activations: act, h: previous, gradH: grad, gradHRecurrent: nil, gradHCarry: nil, gradXW: dx,
                            gradHW: dy, gradHDirect: dh)
                    }) != nil
            else {
                throw LucidError.runtime("\(op): the backend's backward kernel refused what its forward took")
            }
            return [dx, dy, dh]
        }
    }

    /// The step composed from elementwise ops, each recorded on its own.
    private static func composedGRUCell(_ x: TensorImpl, _ y: TensorImpl, _ h: TensorImpl, _ n: Int) throws -> TensorImpl {
        let part = { (t: TensorImpl, k: Int) throws -> TensorImpl in try ShapeOps.narrow(t, dim: 1, start: k * n, length: n) }
        let r = try Elementwise.unary(.sigmoid, try Composite.add(try part(x, 0), try part(y, 0)))
        let z = try Elementwise.unary(.sigmoid, try Composite.add(try part(x, 1), try part(y, 1)))
        let g = try Elementwise.unary(.tanh, try Composite.add(try part(x, 2), try Composite.mul(r, try part(y, 2))))
        return try Composite.add(g, try Composite.mul(z, try Composite.sub(h, g)))
    }
}
