/// The LSTM: a layer over a sequence, and one step's gate arithmetic.
extension Recurrent {
    /// One layer of an LSTM over a sequence: `input` [T, B, C], initial states `h0`, `c0`
    /// [B, H], weights `wIh` [4H, C] and `wHh` [4H, H] and optional biases [4H] (PyTorch's
    /// layout and gate order), run from the last step to the first when `reverse`. Returns the
    /// hidden states of every step [T, B, H] and the final (h, c), as views of one recorded
    /// result whose backward runs the recurrence back in the engine: per step a product and
    /// the fused cell's backward, then the weights' gradients as one product each over all
    /// steps. Without the fused cell on the backend, the steps are composed.
    package static func lstmLayer(
        _ input: TensorImpl, h0: TensorImpl, c0: TensorImpl, wIh: TensorImpl, wHh: TensorImpl,
        bIh: TensorImpl?, bHh: TensorImpl?, reverse: Bool
    ) throws
        -> (TensorImpl, TensorImpl, TensorImpl)
    {
        try runLayer(lstm, gates: 4, input, states: [("h_0", h0), ("c_0", c0)], wIh: wIh, wHh: wHh, bIh: bIh, bHh: bHh) { layer in
            if layer.steps > 0, layer.batch > 0, let fused = try fusedLSTM(layer, reverse: reverse) { return fused }
            let (seq, (h, c)) = try composedSteps(layer, reverse: reverse, state: (layer.states[0], layer.states[1])) { xw, s in
                let (h, c) = try lstmCell(xw, try LinearAlgebra.linear(s.0, layer.wHh, layer.bHh), s.1)
                return (h, (h, c))
            }
            return (seq, h, c)
        }
    }

    /// The layer on the backend's fused cell, nil when the backend composes the cell.
    private static func fusedLSTM(_ given: Layer, reverse: Bool) throws -> (TensorImpl, TensorImpl, TensorImpl)? {
        let layer = given.detached
        let (steps, batch, n) = (layer.steps, layer.batch, layer.n)
        let dtype = layer.x.dtype, backend = layer.x.backend
        let xw = try inputProducts(layer.x, layer.wIh, layer.bIh, "lstm")
        // Every step's h, then the last c; every step's c; the cell's activations.
        let out = try TensorImpl.empty([steps + 1, batch, n], dtype: dtype, on: backend)
        let cells = try TensorImpl.empty([steps, batch, n], dtype: dtype, on: backend)
        let acts = try TensorImpl.empty([steps, batch, 5 * n], dtype: dtype.computeType, on: backend)
        let order = stepOrder(steps, reverse: reverse)
        // The whole recurrence in one kernel call where the backend has it, else step by step.
        let (h0, c0) = (layer.states[0], layer.states[1])
        let whole = KernelCall(
            .lstmRecurrence, reads: Operands([xw, layer.wHh, h0, c0] + (layer.bHh.map { [$0] } ?? [])), writes: [out, cells, acts])
        let c: TensorImpl
        if out.runUnlessComposed(
            RecurrentCellKernels.self, whole, "lstm",
            {
                $0.lstmRecurrence(
                    xw, wHh: layer.wHh, bHh: layer.bHh, h0: h0, c0: c0, order: order, out: out, cells: cells, activations: acts)
            }) != nil
        {
            c = order.last.map { row(cells, $0) } ?? c0
        } else {
            guard let last = try lstmSteps(layer, xw, order, out: out, cells: cells, acts: acts) else { return nil }
            c = last
        }
        out.backend.copy(c, into: row(out, steps))
        let saved = [layer.x, layer.states[0], layer.states[1], layer.wIh, layer.wHh, out, cells, acts]
        let result = Autograd.record(out, Autograd.name(lstm), given.all, saved: saved) { g in
            try lstmBackward(g, layer, out: out, cells: cells, acts: acts, order: order)
        }
        let last = reverse ? 0 : steps - 1
        return (
            try ShapeOps.narrow(result, dim: 0, start: 0, length: steps),
            try Indexing.subscripted(result, [.int(last)]), try Indexing.subscripted(result, [.int(steps)])
        )
    }

    /// The layer's steps one at a time, each a product and the fused cell, into `out`'s,
    /// `cells`' and `acts`' rows: the last step's c, or nil when the backend composes the cell.
    private static func lstmSteps(
        _ layer: Layer, _ xw: TensorImpl, _ order: [Int], out: TensorImpl, cells: TensorImpl, acts: TensorImpl
    ) throws -> TensorImpl? {
        let hw = try TensorImpl.empty([layer.batch, 4 * layer.n], dtype: xw.dtype, on: xw.backend)
        let (wHh, packed) = try stepWeight(layer, rows: layer.batch)
        var h = layer.states[0], c = layer.states[1]
        for t in order {
            product(h, wHh, prepared: packed, bias: layer.bHh, into: hw, "lstm")
            let xt = row(xw, t), ht = row(out, t), ct = row(cells, t), at = row(acts, t)
            let call = KernelCall(.lstmCell, reads: [xt, hw, c], writes: [ht, ct, at])
            guard
                ht.runUnlessComposed(
                    RecurrentCellKernels.self, call, "lstm",
                    {
                        $0.lstmCell(xt, hw, c, h: ht, cNew: ct, activations: at)
                    }) != nil
            else { return nil }
            (h, c) = (ht, ct)
        }
        return c
    }

    /// The layer's backward through time: the gradient of every step's h (with the recurrent
    /// part carried back) and of the last c run the cell's backward step by step, each
    /// giving the gates' gradient (in one kernel call where the backend has it, as the
    /// forward); the weights', biases' and input's gradients are then one product (or sum)
    /// each over all steps.
    private static func lstmBackward(
        _ g: TensorImpl, _ layer: Layer, out: TensorImpl, cells: TensorImpl, acts: TensorImpl, order: [Int]
    ) throws -> [TensorImpl?] {
        let (steps, batch, n) = (layer.steps, layer.batch, layer.n)
        let dtype = out.dtype, backend = out.backend
        let grad = try Ops.contiguous(try Ops.cast(g, to: dtype))
        let dGates = try TensorImpl.empty([steps, batch, 4 * n], dtype: dtype, on: backend)
        let hs = out.view(shape: [steps, batch, n], strides: out.strides, offset: out.offset)
        let previous = try previousStates(hs, h0: layer.states[0], order: order)
        let dh = try TensorImpl.empty([batch, n], dtype: dtype, on: backend)
        let dc = try TensorImpl.empty([batch, n], dtype: dtype, on: backend)
        let c0 = layer.states[1]
        let whole = KernelCall(.lstmRecurrenceBackward, reads: [grad, layer.wHh, c0, cells, acts], writes: [dGates, dh, dc])
        var states = (dh, dc)
        if dGates.runUnlessComposed(
            RecurrentCellKernels.self, whole, "lstm_backward",
            {
                $0.lstmRecurrenceBackward(
                    grad, wHh: layer.wHh, c0: c0, cells: cells, activations: acts, order: order, gradGates: dGates,
                    gradH0: dh, gradC0: dc)
            }) == nil
        {
            states = try lstmStepsBackward(grad, layer, cells: cells, acts: acts, order: order, into: dGates)
        }
        let (dx, dWih, dWhh, db) = try weightGradients(layer, dxw: dGates, dhw: dGates, previous: previous)
        return [dx, states.0, states.1, dWih, dWhh] + db
    }

    /// The backward's steps one at a time, each the cell's backward and a product, into
    /// `dGates`' rows: h0's and c0's gradients.
    private static func lstmStepsBackward(
        _ grad: TensorImpl, _ layer: Layer, cells: TensorImpl, acts: TensorImpl, order: [Int], into dGates: TensorImpl
    ) throws -> (TensorImpl, TensorImpl) {
        let (batch, n) = (layer.batch, layer.n)
        let dtype = grad.dtype, backend = grad.backend
        var dh = try Creation.full([batch, n], value: ScalarOperand(int: 0), dtype: dtype, device: backend.device)
        var dc = try Ops.clone(row(grad, layer.steps))
        let back = try ShapeOps.transpose(layer.wHh, 0, 1)
        let packed = prepared(back, rows: batch, bias: false)
        for (s, t) in order.enumerated().reversed() {
            // The step's h gets its output's gradient and the next step's (summed in the kernel).
            let gh = row(grad, t), dct = row(dGates, t)
            let dcPrevious = try TensorImpl.empty([batch, n], dtype: dtype, on: backend)
            let cPrevious = s == 0 ? layer.states[1] : row(cells, order[s - 1])
            let call = KernelCall(.lstmCellBackward, reads: [row(acts, t), cPrevious, gh, dh, dc], writes: [dct, dcPrevious])
            guard
                dct.runUnlessComposed(
                    RecurrentCellKernels.self, call, "lstm_backward",
                    {
                        $0.lstmCellBackward(
                            activations: row(acts, t), c: cPrevious, gradH: gh, gradHRecurrent: dh, gradC: dc,
                            gradGates: dct, gradCPrevious: dcPrevious)
                    }) != nil
            else {
                throw LucidError.runtime("lstm: the backend's backward kernel refused what its forward took")
            }
            let next = try TensorImpl.empty([batch, n], dtype: dtype, on: backend)
            product(dct, back, prepared: packed, bias: nil, into: next, "lstm")
            (dh, dc) = (next, dcPrevious)
        }
        return (dh, dc)
    }

    /// One LSTM step from the input's and the hidden state's products `xw` and `hw` ([B, 4H],
    /// gates in PyTorch's order: input, forget, cell, output) and the cell state `c` ([B, H]):
    /// `(h', c')` with `c' = σ(f)·c + σ(i)·tanh(g)` and `h' = σ(o)·tanh(c')`. The gates compute
    /// in the products' dtype (promoted when they differ), `c` converted to it, as the
    /// composite step does; under autocast the products' lower precision carries the state.
    ///
    /// h' and c' are recorded as two graph nodes over the same inputs, each with the gradient
    /// of its own output; the fused backward saves the activations, tanh(c') and `c`, so
    /// either output may later be changed in place without breaking the other's backward.
    package static func lstmCell(_ xw: TensorImpl, _ hw: TensorImpl, _ c: TensorImpl) throws -> (TensorImpl, TensorImpl) {
        try lstmCell.run([xw, hw, c]) { t in try lstmCellBody(t[0], t[1], t[2]) }
    }

    private static func lstmCellBody(_ xw: TensorImpl, _ hw: TensorImpl, _ c: TensorImpl) throws -> (TensorImpl, TensorImpl) {
        let op = lstmCell.name
        guard xw.ndim == 2, c.ndim == 2, hw.shape == xw.shape, c.shape[0] == xw.shape[0], xw.shape[1] == 4 * c.shape[1] else {
            throw LucidError.value(
                "\(op): expected gate inputs of shape [batch, 4 * hidden] and a cell state of shape "
                    + "[batch, hidden], got \(xw.shape), \(hw.shape) and \(c.shape)")
        }
        try Ops.checkSameDevice(op, [xw, hw, c])
        try Composite.checkFloat(op, [xw, hw, c])
        let dtype = DType.promote(xw.dtype, hw.dtype)
        let x = try Ops.contiguous(try Ops.cast(xw, to: dtype)), y = try Ops.contiguous(try Ops.cast(hw, to: dtype))
        let state = try Ops.contiguous(try Ops.cast(c, to: dtype))
        let (batch, n) = (c.shape[0], c.shape[1])
        guard batch * n > 0 else { return try composedLSTMCell(x, y, state, n) }
        let h = try TensorImpl.empty([batch, n], dtype: dtype, on: x.backend)
        let cNew = try TensorImpl.empty([batch, n], dtype: dtype, on: x.backend)
        let act = try TensorImpl.empty([batch, 5 * n], dtype: dtype.computeType, on: x.backend)
        let values = [x, y, state].map { $0.withRequiresGrad(false) }
        let call = KernelCall(.lstmCell, reads: Operands(values), writes: [h, cNew, act])
        guard
            h.runUnlessComposed(
                RecurrentCellKernels.self, call, op,
                {
                    $0.lstmCell(values[0], values[1], values[2], h: h, cNew: cNew, activations: act)
                }) != nil
        else { return try composedLSTMCell(x, y, state, n) }
        guard GradMode.isEnabled, [x, y, state].contains(where: { $0.requiresGrad }) else { return (h, cNew) }
        let previous = values[2]
        /// The backward of one output: the gradient reaching h' (`fromH`) or c'.
        func rule(fromH: Bool) -> (TensorImpl) throws -> [TensorImpl?] {
            { g in
                let grad = try Ops.contiguous(try Ops.cast(g, to: dtype))
                let dGates = try TensorImpl.empty([batch, 4 * n], dtype: dtype, on: act.backend)
                let dc = try TensorImpl.empty([batch, n], dtype: dtype, on: act.backend)
                let call = KernelCall(.lstmCellBackward, reads: [act, previous, grad], writes: [dGates, dc])
                guard
                    dGates.runUnlessComposed(
                        RecurrentCellKernels.self, call, "\(op)_backward",
                        {
                            $0.lstmCellBackward(
                                activations: act, c: previous, gradH: fromH ? grad : nil, gradHRecurrent: nil,
                                gradC: fromH ? nil : grad, gradGates: dGates, gradCPrevious: dc)
                        }) != nil
                else {
                    throw LucidError.runtime("\(op): the backend's backward kernel refused what its forward took")
                }
                return [dGates, dGates, dc]
            }
        }
        let name = Autograd.name(lstmCell)
        return (
            Autograd.record(h, name, [x, y, state], saved: [act, previous], rule(fromH: true)),
            Autograd.record(cNew, name, [x, y, state], saved: [act, previous], rule(fromH: false))
        )
    }

    /// The step composed from elementwise ops, each recorded on its own.
    private static func composedLSTMCell(_ x: TensorImpl, _ y: TensorImpl, _ c: TensorImpl, _ n: Int) throws -> (TensorImpl, TensorImpl) {
        let gates = try Composite.add(x, y)
        let part = { (k: Int) throws -> TensorImpl in try ShapeOps.narrow(gates, dim: 1, start: k * n, length: n) }
        let i = try Elementwise.unary(.sigmoid, try part(0)), f = try Elementwise.unary(.sigmoid, try part(1))
        let g = try Elementwise.unary(.tanh, try part(2)), o = try Elementwise.unary(.sigmoid, try part(3))
        let cNew = try Composite.add(try Composite.mul(f, c), try Composite.mul(i, g))
        return (try Composite.mul(o, try Elementwise.unary(.tanh, cNew)), cNew)
    }
}
