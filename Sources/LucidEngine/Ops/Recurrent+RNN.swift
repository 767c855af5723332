/// The Elman RNN's layer over a sequence, PyTorch's equation: `h' = act(xw + hw)` with
/// `xw = x·W_ihᵀ + b_ih`, `hw = h·W_hhᵀ + b_hh` and act tanh or ReLU.
extension Recurrent {
    /// One layer of an Elman RNN over a sequence: `input` [T, B, C], the initial state `h0`
    /// [B, H], weights `wIh` [H, C] and `wHh` [H, H] and optional biases [H] (PyTorch's layout),
    /// with ReLU instead of tanh when `relu`, run from the last step to the first when
    /// `reverse`. Returns the hidden states of every step [T, B, H] and the final one, from one
    /// recorded result whose backward runs the recurrence back in the engine, as `gruLayer`'s.
    /// Without the fused cell on the backend, the steps are composed.
    package static func rnnLayer(
        _ input: TensorImpl, h0: TensorImpl, wIh: TensorImpl, wHh: TensorImpl, bIh: TensorImpl?, bHh: TensorImpl?,
        relu: Bool, reverse: Bool
    ) throws -> (TensorImpl, TensorImpl) {
        let info = relu ? rnnRelu : rnnTanh
        return try runLayer(info, gates: 1, input, states: [("h_0", h0)], wIh: wIh, wHh: wHh, bIh: bIh, bHh: bHh) { layer in
            if layer.steps > 0, layer.batch > 0, let fused = try fusedRNN(layer, info, relu: relu, reverse: reverse) {
                return fused
            }
            return try composedSteps(layer, reverse: reverse, state: layer.states[0]) { xw, h in
                let pre = try Composite.add(xw, try LinearAlgebra.linear(h, layer.wHh, layer.bHh))
                let next = try Elementwise.unary(relu ? .relu : .tanh, pre)
                return (next, next)
            }
        }
    }

    /// The layer on the backend's fused cell, nil when the backend composes the cell.
    private static func fusedRNN(_ given: Layer, _ info: OpInfo, relu: Bool, reverse: Bool) throws -> (TensorImpl, TensorImpl)? {
        let layer = given.detached
        let (steps, batch, n) = (layer.steps, layer.batch, layer.n)
        let dtype = layer.x.dtype, backend = layer.x.backend
        let xw = try inputProducts(layer.x, layer.wIh, layer.bIh, info.name)
        let out = try TensorImpl.empty([steps, batch, n], dtype: dtype, on: backend)
        let hw = try TensorImpl.empty([batch, n], dtype: dtype, on: backend)
        let order = stepOrder(steps, reverse: reverse)
        let (wHh, packed) = try stepWeight(layer, rows: batch)
        var h = layer.states[0]
        for t in order {
            product(h, wHh, prepared: packed, bias: layer.bHh, into: hw, info.name)
            let xt = row(xw, t), ht = row(out, t)
            let call = KernelCall(.rnnCell(relu: relu), reads: [xt, hw], writes: [ht])
            guard
                ht.runUnlessComposed(RecurrentCellKernels.self, call, info.name, { $0.rnnCell(xt, hw, relu: relu, h: ht) })
                    != nil
            else { return nil }
            h = ht
        }
        let saved = [layer.x, layer.states[0], layer.wIh, layer.wHh, out]
        let result = Autograd.record(out, Autograd.name(info), given.all, saved: saved) { g in
            try rnnBackward(g, layer, info, relu: relu, out: out, order: order)
        }
        return (result, try Indexing.subscripted(result, [.int(order[steps - 1])]))
    }

    /// The layer's backward through time: from the last step to run back to the first, the
    /// cell's backward from the gradient of the step's h (its output's and the next step's
    /// product's, summed in the kernel) gives the gradient of the products' sum, and the hidden
    /// state's product carries it back; then the weights', biases' and input's gradients.
    private static func rnnBackward(
        _ g: TensorImpl, _ layer: Layer, _ info: OpInfo, relu: Bool, out: TensorImpl, order: [Int]
    ) throws -> [TensorImpl?] {
        let (steps, batch, n) = (layer.steps, layer.batch, layer.n)
        let dtype = out.dtype, backend = out.backend
        let grad = try Ops.contiguous(try Ops.cast(g, to: dtype))
        let previous = try previousStates(out, h0: layer.states[0], order: order)
        let dPre = try TensorImpl.empty([steps, batch, n], dtype: dtype, on: backend)
        let back = try ShapeOps.transpose(layer.wHh, 0, 1)
        let packed = prepared(back, rows: batch, bias: false)
        var recurrent: TensorImpl?
        for t in order.reversed() {
            let ht = row(out, t), gt = row(grad, t), dt = row(dPre, t), more = recurrent
            let call = KernelCall(.rnnCellBackward(relu: relu), reads: Operands([ht, gt] + [more].compactMap { $0 }), writes: [dt])
            guard
                dt.runUnlessComposed(
                    RecurrentCellKernels.self, call, "\(info.name)_backward",
                    { $0.rnnCellBackward(h: ht, relu: relu, gradH: gt, gradHRecurrent: more, gradPre: dt) }) != nil
            else {
                throw LucidError.runtime("\(info.name): the backend's backward kernel refused what its forward took")
            }
            let next = try TensorImpl.empty([batch, n], dtype: dtype, on: backend)
            product(dt, back, prepared: packed, bias: nil, into: next, info.name)
            recurrent = next
        }
        let (dx, dWih, dWhh, db) = try weightGradients(layer, dxw: dPre, dhw: dPre, previous: previous)
        return [dx, recurrent, dWih, dWhh] + db
    }
}
