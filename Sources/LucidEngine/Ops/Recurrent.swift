/// The LSTM under the recurrent layers: a whole layer over a sequence as one op (one graph
/// node, its backward through time run by the engine), and one step's gate arithmetic as one
/// op, through the backend's fused cell kernel where it has one, composed from elementwise ops
/// elsewhere.
package enum Recurrent {
    static let lstmCell = OpInfo("lstm_cell", .none)
    /// The products run in lower precision under autocast, as PyTorch's autocast lists `lstm`;
    /// the gates compute in the products' dtype.
    static let lstm = OpInfo("lstm", .lowerPrecision)
    static let infos = [lstmCell, lstm]

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
        let op = lstm.name
        guard input.ndim == 3 else { throw LucidError.value("\(op): expected input of shape [steps, batch, features], got \(input.shape)") }
        let (steps, batch, features) = (input.shape[0], input.shape[1], input.shape[2])
        guard wHh.ndim == 2, wHh.shape[0] == 4 * wHh.shape[1], wHh.shape[1] > 0 else {
            throw LucidError.value("\(op): weight_hh must have shape [4 * hidden, hidden], got \(wHh.shape)")
        }
        let n = wHh.shape[1]
        guard wIh.shape == [4 * n, features] else {
            throw LucidError.value("\(op): weight_ih must have shape \([4 * n, features]), got \(wIh.shape)")
        }
        for (name, b) in [("bias_ih", bIh), ("bias_hh", bHh)] where b != nil && b!.shape != [4 * n] {
            throw LucidError.value("\(op): \(name) must have shape [\(4 * n)], got \(b!.shape)")
        }
        guard h0.shape == [batch, n], c0.shape == [batch, n] else {
            throw LucidError.value("\(op): the initial states must have shape [\(batch), \(n)], got \(h0.shape) and \(c0.shape)")
        }
        let given = [input, h0, c0, wIh, wHh] + [bIh, bHh].compactMap { $0 }
        try Ops.checkSameDevice(op, given)
        try Composite.checkFloat(op, given)
        return try lstm.run(given) { t in
            let dtype = t.dropFirst().reduce(t[0].dtype) { DType.promote($0, $1.dtype) }
            let v = try t.map { try Ops.contiguous(try Ops.cast($0, to: dtype)) }
            var rest = v[5...].makeIterator()
            let bi = bIh == nil ? nil : rest.next(), bh = bHh == nil ? nil : rest.next()
            if steps > 0, batch > 0,
                let fused = try fusedLayer(v[0], v[1], v[2], v[3], v[4], bi, bh, reverse: reverse, n: n)
            {
                return fused
            }
            return try composedLayer(v[0], v[1], v[2], v[3], v[4], bi, bh, reverse: reverse)
        }
    }

    /// `a @ bᵀ (+ bias)` for 2-D views into `out` (contiguous [rows, cols]), unrecorded.
    private static func product(_ a: TensorImpl, _ b: TensorImpl, bias: TensorImpl?, into out: TensorImpl) {
        let (m, k, cols) = (a.shape[0], a.shape[1], b.shape[0])
        let a3 = a.view(shape: [1, m, k], strides: [0, a.strides[0], a.strides[1]])
        let b3 = b.view(shape: [1, k, cols], strides: [0, b.strides[1], b.strides[0]])
        let o3 = out.view(shape: [1, m, cols], strides: [0, cols, 1])
        out.run(MatmulKernels.self, KernelCall(.gemm, reads: [a3, b3] + (bias.map { [$0] } ?? []), writes: [o3]), "lstm") {
            $0.gemm(a3, b3, bias: bias, into: o3)
        }
    }

    /// A weight [rows, cols] (its values, recording nothing) as the same matrix whose memory is
    /// its transpose, row-major [cols, rows]: `product(a, w)` then reads a row-major right
    /// operand, which the host's kernels multiply about 15% faster for an LSTM's shapes.
    private static func transposedInMemory(_ w: TensorImpl) throws -> TensorImpl {
        try ShapeOps.transpose(try Ops.contiguous(try ShapeOps.transpose(w, 0, 1)), 0, 1)
    }

    /// Row `i` of a contiguous tensor's first dimension, as a contiguous view.
    private static func row(_ t: TensorImpl, _ i: Int) -> TensorImpl {
        let shape = Array(t.shape.dropFirst())
        return t.view(shape: shape, strides: Shape.contiguousStrides(shape), offset: t.offset + i * t.strides[0])
    }

    /// The layer on the backend's fused cell, nil when the backend composes the cell.
    private static func fusedLayer(
        _ x: TensorImpl, _ h0: TensorImpl, _ c0: TensorImpl, _ wIh: TensorImpl,
        _ wHh: TensorImpl, _ bIh: TensorImpl?, _ bHh: TensorImpl?, reverse: Bool,
        n: Int
    ) throws -> (TensorImpl, TensorImpl, TensorImpl)? {
        let (steps, batch, features) = (x.shape[0], x.shape[1], x.shape[2])
        let dtype = x.dtype, backend = x.backend
        let values = [x, h0, c0, wIh, wHh].map { $0.withRequiresGrad(false) }
        let (xv, h0v, c0v, wi, wh) = (values[0], values[1], values[2], values[3], values[4])
        let (wiT, whT) = (try transposedInMemory(wi), try transposedInMemory(wh))
        let xFlat = xv.view(shape: [steps * batch, features], strides: [features, 1])
        // The input's products for every step at once, then per step the hidden state's.
        let xw = try TensorImpl.empty([steps, batch, 4 * n], dtype: dtype, on: backend)
        product(
            xFlat, wiT, bias: bIh?.withRequiresGrad(false),
            into: xw.view(shape: [steps * batch, 4 * n], strides: [4 * n, 1]))
        // Every step's h, then the last c; every step's c; the cell's activations.
        let out = try TensorImpl.empty([steps + 1, batch, n], dtype: dtype, on: backend)
        let cells = try TensorImpl.empty([steps, batch, n], dtype: dtype, on: backend)
        let acts = try TensorImpl.empty([steps, batch, 5 * n], dtype: dtype.computeType, on: backend)
        let hw = try TensorImpl.empty([batch, 4 * n], dtype: dtype, on: backend)
        let order = reverse ? Array((0..<steps).reversed()) : Array(0..<steps)
        var h = h0v, c = c0v
        for t in order {
            product(h, whT, bias: bHh?.withRequiresGrad(false), into: hw)
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
        out.backend.copy(c, into: row(out, steps))
        let inputs = [x, h0, c0, wIh, wHh] + [bIh, bHh].compactMap { $0 }
        let result = Autograd.record(out, Autograd.name(lstm), inputs, saved: [xv, h0v, c0v, wi, wh, out, cells, acts]) { g in
            try layerBackward(
                g, x: xFlat, h0: h0v, c0: c0v, wIh: wi, wHh: wh, out: out, cells: cells, acts: acts,
                order: order, biases: [bIh, bHh].compactMap { $0 }.count)
        }
        let last = reverse ? 0 : steps - 1
        return (
            try ShapeOps.narrow(result, dim: 0, start: 0, length: steps),
            try Indexing.subscripted(result, [.int(last)]), try Indexing.subscripted(result, [.int(steps)])
        )
    }

    /// The layer's backward through time: the gradient of every step's h (with the recurrent
    /// part carried back) and of the last c run the cell's backward step by step, each
    /// giving the gates' gradient; the weights', biases' and input's gradients are then one
    /// product (or sum) each over all steps.
    private static func layerBackward(
        _ g: TensorImpl, x: TensorImpl, h0: TensorImpl, c0: TensorImpl, wIh: TensorImpl,
        wHh: TensorImpl, out: TensorImpl, cells: TensorImpl, acts: TensorImpl, order: [Int],
        biases: Int
    ) throws -> [TensorImpl?] {
        let (steps, batch, n) = (cells.shape[0], cells.shape[1], cells.shape[2])
        let dtype = out.dtype, backend = out.backend
        let grad = try Ops.contiguous(try Ops.cast(g, to: dtype))
        let dGates = try TensorImpl.empty([steps, batch, 4 * n], dtype: dtype, on: backend)
        // h of the step before each step (h0 for the first), in the steps' own positions.
        let previous = try TensorImpl.empty([steps, batch, n], dtype: dtype, on: backend)
        var dh = try Creation.full([batch, n], value: ScalarOperand(int: 0), dtype: dtype, device: backend.device)
        var dc = try Ops.clone(row(grad, steps))
        for (s, t) in order.enumerated().reversed() {
            let before = s == 0 ? nil : order[s - 1]
            backend.copy(before.map { row(out, $0) } ?? h0, into: row(previous, t))
            // The step's h gets its output's gradient and the next step's (summed in the kernel).
            let gh = row(grad, t), dct = row(dGates, t)
            let dcPrevious = try TensorImpl.empty([batch, n], dtype: dtype, on: backend)
            let cPrevious = before.map { row(cells, $0) } ?? c0
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
            product(dct, try ShapeOps.transpose(wHh, 0, 1), bias: nil, into: next)
            (dh, dc) = (next, dcPrevious)
        }
        let rows = steps * batch
        let flat = dGates.view(shape: [rows, 4 * n], strides: [4 * n, 1])
        // The weights' gradients read the gates' gradient transposed: copied so (in tiles), the
        // two products read it row-major, which more than repays the copy.
        let flatT = try Ops.contiguous(try ShapeOps.transpose(flat, 0, 1))
        let dx = try LinearAlgebra.matmul(flat, wIh)
        let dWih = try LinearAlgebra.matmul(flatT, x)
        let dWhh = try LinearAlgebra.matmul(flatT, previous.view(shape: [rows, n], strides: [n, 1]))
        let db: TensorImpl? = biases > 0 ? try Reductions.reduce(.sum, flat, dims: [0], keepdim: false) : nil
        let features = x.shape[1]
        return [try ShapeOps.reshape(dx, [steps, batch, features]), dh, dc, dWih, dWhh] + Array(repeating: db, count: biases)
    }

    /// The layer composed step by step from recorded ops (the cell composed where the backend
    /// has no fused one).
    private static func composedLayer(
        _ x: TensorImpl, _ h0: TensorImpl, _ c0: TensorImpl, _ wIh: TensorImpl,
        _ wHh: TensorImpl, _ bIh: TensorImpl?, _ bHh: TensorImpl?,
        reverse: Bool
    ) throws -> (TensorImpl, TensorImpl, TensorImpl) {
        let steps = x.shape[0]
        guard steps > 0 else {
            return (
                try Creation.full(
                    [0, x.shape[1], h0.shape[1]], value: ScalarOperand(int: 0), dtype: x.dtype,
                    device: x.device), h0, c0
            )
        }
        let xw = try LinearAlgebra.linear(x, wIh, bIh)
        var h = h0, c = c0
        var hs = [TensorImpl?](repeating: nil, count: steps)
        for t in reverse ? Array((0..<steps).reversed()) : Array(0..<steps) {
            (h, c) = try lstmCell(try Indexing.subscripted(xw, [.int(t)]), try LinearAlgebra.linear(h, wHh, bHh), c)
            hs[t] = h
        }
        return (try ShapeOps.stack(hs.compactMap { $0 }, dim: 0), h, c)
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
        guard batch * n > 0 else { return try composed(x, y, state, n) }
        let h = try TensorImpl.empty([batch, n], dtype: dtype, on: x.backend)
        let cNew = try TensorImpl.empty([batch, n], dtype: dtype, on: x.backend)
        let act = try TensorImpl.empty([batch, 5 * n], dtype: dtype.computeType, on: x.backend)
        let values = [x, y, state].map { $0.withRequiresGrad(false) }
        let call = KernelCall(.lstmCell, reads: values, writes: [h, cNew, act])
        guard
            h.runUnlessComposed(
                RecurrentCellKernels.self, call, op,
                {
                    $0.lstmCell(values[0], values[1], values[2], h: h, cNew: cNew, activations: act)
                }) != nil
        else { return try composed(x, y, state, n) }
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
    private static func composed(_ x: TensorImpl, _ y: TensorImpl, _ c: TensorImpl, _ n: Int) throws -> (TensorImpl, TensorImpl) {
        let gates = try Composite.add(x, y)
        let part = { (k: Int) throws -> TensorImpl in try ShapeOps.narrow(gates, dim: 1, start: k * n, length: n) }
        let i = try Elementwise.unary(.sigmoid, try part(0)), f = try Elementwise.unary(.sigmoid, try part(1))
        let g = try Elementwise.unary(.tanh, try part(2)), o = try Elementwise.unary(.sigmoid, try part(3))
        let cNew = try Composite.add(try Composite.mul(f, c), try Composite.mul(i, g))
        return (try Composite.mul(o, try Elementwise.unary(.tanh, cNew)), cNew)
    }
}
