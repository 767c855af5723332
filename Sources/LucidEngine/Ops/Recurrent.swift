/// The recurrent layers' ops: a whole Elman, LSTM or GRU layer over a sequence as one op (one graph
/// node, its backward through time run by the engine), and one step's gate arithmetic as one
/// op, through the backend's fused cell kernel where it has one, composed from elementwise ops
/// elsewhere. This file holds what the layers share: the operands' checks, the products, the
/// gradients of the weights over all steps, and the composed steps.
package enum Recurrent {
    static let lstmCell = OpInfo("lstm_cell", .none)
    /// The products run in lower precision under autocast, as PyTorch's autocast lists `lstm`;
    /// the gates compute in the products' dtype.
    static let lstm = OpInfo("lstm", .lowerPrecision)
    static let gruCell = OpInfo("gru_cell", .none)
    /// As `lstm`, for PyTorch's `gru`.
    static let gru = OpInfo("gru", .lowerPrecision)
    /// As `lstm`, for PyTorch's `rnn_tanh` and `rnn_relu`.
    static let rnnTanh = OpInfo("rnn_tanh", .lowerPrecision)
    static let rnnRelu = OpInfo("rnn_relu", .lowerPrecision)
    static let infos = [lstmCell, lstm, gruCell, gru, rnnTanh, rnnRelu]

    /// A layer op's operands, cast to one dtype and contiguous.
    struct Layer {
        let x: TensorImpl, states: [TensorImpl], wIh: TensorImpl, wHh: TensorImpl, bIh: TensorImpl?, bHh: TensorImpl?
        /// Steps, batch, features and hidden size.
        var steps: Int { x.shape[0] }
        var batch: Int { x.shape[1] }
        var features: Int { x.shape[2] }
        var n: Int { wHh.shape[1] }
        /// The operands as given to the op, biases last when present.
        var all: [TensorImpl] { [x] + states + [wIh, wHh] + [bIh, bHh].compactMap { $0 } }
        var biases: Int { [bIh, bHh].compactMap { $0 }.count }
        /// The same values, recording nothing: what a layer's kernels and backward read.
        var detached: Layer {
            Layer(
                x: x.withRequiresGrad(false), states: states.map { $0.withRequiresGrad(false) },
                wIh: wIh.withRequiresGrad(false), wHh: wHh.withRequiresGrad(false), bIh: bIh?.withRequiresGrad(false),
                bHh: bHh?.withRequiresGrad(false))
        }
    }

    /// Checks a layer's operands, PyTorch's layout for `gates` gates (`input` [T, B, C], each
    /// state [B, H], `wIh` [gates·H, C], `wHh` [gates·H, H], biases [gates·H]), and runs `body`
    /// through the op's front door on them promoted to one dtype and made contiguous.
    static func runLayer<R>(
        _ info: OpInfo, gates: Int, _ input: TensorImpl, states: [(String, TensorImpl)], wIh: TensorImpl,
        wHh: TensorImpl, bIh: TensorImpl?, bHh: TensorImpl?, _ body: (Layer) throws -> R
    ) throws -> R {
        let op = info.name
        guard input.ndim == 3 else { throw LucidError.value("\(op): expected input of shape [steps, batch, features], got \(input.shape)") }
        let (batch, features) = (input.shape[1], input.shape[2])
        guard wHh.ndim == 2, wHh.shape[0] == gates * wHh.shape[1], wHh.shape[1] > 0 else {
            throw LucidError.value("\(op): weight_hh must have shape [\(gates) * hidden, hidden], got \(wHh.shape)")
        }
        let n = wHh.shape[1]
        guard wIh.shape == [gates * n, features] else {
            throw LucidError.value("\(op): weight_ih must have shape \([gates * n, features]), got \(wIh.shape)")
        }
        for (name, b) in [("bias_ih", bIh), ("bias_hh", bHh)] where b != nil && b!.shape != [gates * n] {
            throw LucidError.value("\(op): \(name) must have shape [\(gates * n)], got \(b!.shape)")
        }
        for (name, s) in states where s.shape != [batch, n] {
            throw LucidError.value("\(op): the initial state \(name) must have shape [\(batch), \(n)], got \(s.shape)")
        }
        let given = [input] + states.map(\.1) + [wIh, wHh] + [bIh, bHh].compactMap { $0 }
        try Ops.checkSameDevice(op, given)
        try Composite.checkFloat(op, given)
        return try info.run(given) { t in
            let dtype = Composite.widestType(t)
            let v = try t.map { try Ops.contiguous(try Ops.cast($0, to: dtype)) }
            let k = states.count
            var rest = v[(k + 3)...].makeIterator()
            let bi = bIh == nil ? nil : rest.next(), bh = bHh == nil ? nil : rest.next()
            return try body(Layer(x: v[0], states: Array(v[1...k]), wIh: v[k + 1], wHh: v[k + 2], bIh: bi, bHh: bh))
        }
    }

    /// `a @ bᵀ (+ bias)` for 2-D views into `out` (contiguous [rows, cols]), unrecorded; with
    /// the form of `b` that `prepared` made, where there is one.
    static func product(
        _ a: TensorImpl, _ b: TensorImpl, prepared: AnyObject? = nil, bias: TensorImpl?, into out: TensorImpl, _ op: String
    ) {
        let (m, k, cols) = (a.shape[0], a.shape[1], b.shape[0])
        let a3 = a.view(shape: [1, m, k], strides: [0, a.strides[0], a.strides[1]])
        let b3 = rightOperand(b)
        let o3 = out.view(shape: [1, m, cols], strides: [0, cols, 1])
        out.run(MatmulKernels.self, KernelCall(.gemm, reads: Operands([a3, b3] + (bias.map { [$0] } ?? [])), writes: [o3]), op) {
            if let prepared, $0.gemm(a3, prepared: prepared, bias: bias, into: o3) { return }
            $0.gemm(a3, b3, bias: bias, into: o3)
        }
    }

    /// A weight `b` that `product` multiplies at every step (with `rows`-row left operands),
    /// prepared once by its backend's kernels for repeated products; nil where they have no
    /// faster form.
    static func prepared(_ b: TensorImpl, rows: Int, bias: Bool) -> AnyObject? {
        (b.backend as? any MatmulKernels)?.prepare(rightOperand(b), rows: rows, bias: bias, outType: b.dtype)
    }

    /// `b` [cols, k] as the right operand [1, k, cols] of `a @ bᵀ`.
    private static func rightOperand(_ b: TensorImpl) -> TensorImpl {
        b.view(shape: [1, b.shape[1], b.shape[0]], strides: [0, b.strides[1], b.strides[0]])
    }

    /// The hidden-state weights as the forward steps multiply them, with their prepared form:
    /// packed once where the backend's kernels pack them, else as the same matrix whose memory
    /// is its transpose (row-major [cols, rows]), a right operand the host's BLAS multiplies
    /// about 15% faster at the layers' shapes, repaid over the steps.
    static func stepWeight(_ layer: Layer, rows: Int) throws -> (TensorImpl, AnyObject?) {
        if let packed = prepared(layer.wHh, rows: rows, bias: layer.bHh != nil) { return (layer.wHh, packed) }
        return (try ShapeOps.transpose(try Ops.contiguous(try ShapeOps.transpose(layer.wHh, 0, 1)), 0, 1), nil)
    }

    /// Row `i` of a contiguous tensor's first dimension, as a contiguous view.
    static func row(_ t: TensorImpl, _ i: Int) -> TensorImpl {
        let shape = Array(t.shape.dropFirst())
        return t.view(shape: shape, strides: Shape.contiguousStrides(shape), offset: t.offset + i * t.strides[0])
    }

    /// The steps in the order they run.
    static func stepOrder(_ steps: Int, reverse: Bool) -> [Int] { reverse ? Array((0..<steps).reversed()) : Array(0..<steps) }

    /// The input's products for every step at once ([steps, batch, rows of wIh]), unrecorded.
    static func inputProducts(_ x: TensorImpl, _ wIh: TensorImpl, _ bIh: TensorImpl?, _ op: String) throws -> TensorImpl {
        let (steps, batch, features, g) = (x.shape[0], x.shape[1], x.shape[2], wIh.shape[0])
        let xw = try TensorImpl.empty([steps, batch, g], dtype: x.dtype, on: x.backend)
        product(
            x.view(shape: [steps * batch, features], strides: [features, 1]), wIh, bias: bIh?.withRequiresGrad(false),
            into: xw.view(shape: [steps * batch, g], strides: [g, 1]), op)
        return xw
    }

    /// The hidden state each step started from (`h0` for the first to run), in the steps' own
    /// positions, from every step's hidden state `hs` ([steps, batch, hidden]).
    static func previousStates(_ hs: TensorImpl, h0: TensorImpl, order: [Int]) throws -> TensorImpl {
        let previous = try TensorImpl.empty(hs.shape, dtype: hs.dtype, on: hs.backend)
        for (s, t) in order.enumerated() {
            hs.backend.copy(s == 0 ? h0 : row(hs, order[s - 1]), into: row(previous, t))
        }
        return previous
    }

    /// The gradients of a (detached) layer's input, weights and biases from those of the gates' products
    /// over all steps (`dxw` the input's, `dhw` the hidden state's, [steps, batch, gates·H]),
    /// one product (or sum) each: [dx, dW_ih, dW_hh] and the biases' when the layer has them.
    static func weightGradients(
        _ layer: Layer, dxw: TensorImpl, dhw: TensorImpl, previous: TensorImpl
    ) throws -> (TensorImpl, TensorImpl, TensorImpl, [TensorImpl?]) {
        let (steps, batch, n, g) = (layer.steps, layer.batch, layer.n, dxw.shape[2])
        let rows = steps * batch
        let x = layer.x.view(shape: [rows, layer.features], strides: [layer.features, 1])
        let flatX = dxw.view(shape: [rows, g], strides: [g, 1]), flatH = dhw.view(shape: [rows, g], strides: [g, 1])
        let dx = try LinearAlgebra.matmul(flatX, layer.wIh)
        // The weights' gradients read the gates' gradients transposed: copied so (in tiles), the
        // products read them row-major, which more than repays the copies.
        let flatXT = try Ops.contiguous(try ShapeOps.transpose(flatX, 0, 1))
        let flatHT = dxw === dhw ? flatXT : try Ops.contiguous(try ShapeOps.transpose(flatH, 0, 1))
        let dWih = try LinearAlgebra.matmul(flatXT, x)
        let dWhh = try LinearAlgebra.matmul(flatHT, previous.view(shape: [rows, n], strides: [n, 1]))
        var db: [TensorImpl?] = []
        if layer.biases > 0 {
            let di = try Reductions.reduce(.sum, flatX, dims: [0], keepdim: false)
            db = [di, dxw === dhw ? di : try Reductions.reduce(.sum, flatH, dims: [0], keepdim: false)]
        }
        return (try ShapeOps.reshape(dx, [steps, batch, layer.features]), dWih, dWhh, db)
    }

    /// A layer composed step by step from recorded ops: the input's products, then `step` from
    /// each step's product and the state; every step's hidden state stacked [steps, batch, H]
    /// (empty for no steps) and the final state.
    static func composedSteps<S>(
        _ layer: Layer, reverse: Bool, state: S, _ step: (TensorImpl, S) throws -> (TensorImpl, S)
    ) throws -> (TensorImpl, S) {
        let x = layer.x
        guard layer.steps > 0 else {
            return (try Creation.full([0, layer.batch, layer.n], value: ScalarOperand(int: 0), dtype: x.dtype, device: x.device), state)
        }
        let xw = try LinearAlgebra.linear(x, layer.wIh, layer.bIh)
        var s = state
        var hs = [TensorImpl?](repeating: nil, count: layer.steps)
        for t in stepOrder(layer.steps, reverse: reverse) {
            let (h, next) = try step(try Indexing.subscripted(xw, [.int(t)]), s)
            (hs[t], s) = (h, next)
        }
        return (try ShapeOps.stack(hs.compactMap { $0 }, dim: 0), s)
    }
}
