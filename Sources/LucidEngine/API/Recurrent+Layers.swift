/// What LSTM and GRU share: PyTorch's parameter names (`weight_ih_l0`, `weight_hh_l0`,
/// `bias_ih_l0`, `bias_hh_l0`, `…_reverse` for the second direction), shapes (the gates
/// stacked in PyTorch's order) and initialisation (uniform in ±1/√hiddenSize), and the
/// layout of inputs and states.
public class RecurrentLayer: Module {
    public let inputSize: Int, hiddenSize: Int, numLayers: Int, hasBias: Bool, batchFirst: Bool
    public let dropout: Double, bidirectional: Bool
    let gates: Int
    private var names: [[String]] = []

    init(
        gates: Int, inputSize: Int, hiddenSize: Int, numLayers: Int, bias: Bool, batchFirst: Bool, dropout: Double,
        bidirectional: Bool, dtype: DType, device: Device
    ) throws {
        let layer = String(describing: Self.self)
        try checkPositive(layer, [("inputSize", inputSize), ("hiddenSize", hiddenSize), ("numLayers", numLayers)])
        guard (0...1).contains(dropout) else { throw LucidError.value("\(layer): dropout must be a number in [0, 1], got \(dropout)") }
        (self.gates, self.inputSize, self.hiddenSize, self.numLayers) = (gates, inputSize, hiddenSize, numLayers)
        (self.hasBias, self.batchFirst, self.dropout, self.bidirectional) = (bias, batchFirst, dropout, bidirectional)
        super.init()
        let g = gates * hiddenSize, bound = 1 / Double(hiddenSize).squareRoot()
        for l in 0..<numLayers {
            let size = l == 0 ? inputSize : hiddenSize * directions
            for suffix in ["", "_reverse"].prefix(directions) {
                var layerNames = ["weight_ih_l\(l)\(suffix)", "weight_hh_l\(l)\(suffix)"]
                try registerParameter(layerNames[0], try uniformParameter([g, size], bound: bound, dtype: dtype, device: device))
                try registerParameter(layerNames[1], try uniformParameter([g, hiddenSize], bound: bound, dtype: dtype, device: device))
                if bias {
                    layerNames += ["bias_ih_l\(l)\(suffix)", "bias_hh_l\(l)\(suffix)"]
                    try registerParameter(layerNames[2], try uniformParameter([g], bound: bound, dtype: dtype, device: device))
                    try registerParameter(layerNames[3], try uniformParameter([g], bound: bound, dtype: dtype, device: device))
                }
                names.append(layerNames)
            }
        }
    }

    var directions: Int { bidirectional ? 2 : 1 }

    /// (weight_ih, weight_hh, bias_ih, bias_hh) of one layer and direction.
    func weights(_ layer: Int, _ direction: Int) throws -> (Tensor, Tensor, Tensor?, Tensor?) {
        let n = names[layer * directions + direction]
        return (try required(n[0]), try required(n[1]), hasBias ? try required(n[2]) : nil, hasBias ? try required(n[3]) : nil)
    }

    /// The input as [steps, batch, features], and whether it was unbatched.
    func sequence(_ input: Tensor) throws -> (Tensor, Bool) {
        guard [2, 3].contains(input.ndim) else {
            throw LucidError.value("\(typeName): expected a 2-D (unbatched) or 3-D input, got shape \(input.shape)")
        }
        guard input.shape.last == inputSize else {
            throw LucidError.value("\(typeName): input has \(input.shape.last ?? 0) features, expected \(inputSize)")
        }
        if input.ndim == 2 { return (try input.unsqueeze(1), true) }
        return (batchFirst ? try input.transpose(0, 1) : input, false)
    }

    /// The initial state [numLayers·directions, batch, hiddenSize]: `given` checked (and made
    /// batched), or zeros like `x`.
    func initial(_ given: Tensor?, _ what: String, batch: Int, like x: Tensor, unbatched: Bool) throws -> Tensor {
        let want = [numLayers * directions, batch, hiddenSize]
        guard let given else { return try Tensor.zeros(want, dtype: x.dtype, device: x.device) }
        let expected = unbatched ? [want[0], want[2]] : want
        guard given.shape == expected else {
            throw LucidError.value("\(typeName): expected \(what) of shape \(expected), got \(given.shape)")
        }
        return unbatched ? try given.unsqueeze(1) : given
    }

    /// The output back in the input's layout.
    func output(_ out: Tensor, unbatched: Bool) throws -> Tensor {
        if unbatched { return try out.squeeze(dims: [1]) }
        return batchFirst ? try out.transpose(0, 1) : out
    }

    /// Runs every layer over `x` ([steps, batch, features]); `direction` runs one layer and
    /// direction and returns its outputs [steps, batch, hidden].
    func layers(_ x: Tensor, _ direction: (_ input: Tensor, _ layer: Int, _ direction: Int) throws -> Tensor) throws -> Tensor {
        var layerInput = x
        for l in 0..<numLayers {
            let outputs = try (0..<directions).map { try direction(layerInput, l, $0) }
            layerInput = directions == 1 ? outputs[0] : try Tensor.cat(outputs, dim: -1)
            if dropout > 0 && training && l < numLayers - 1 { layerInput = try layerInput.dropout(p: dropout, training: true) }
        }
        return layerInput
    }

    /// Throws: a recurrent layer returns its final state too, so it is called as
    /// `layer(input, state:)`.
    public override func forward(_ input: Tensor) throws -> Tensor {
        throw LucidError.runtime("\(typeName): call it as layer(input, state:), which returns the output and the final state")
    }
}

/// A multi-layer LSTM, as PyTorch's `nn.LSTM` (gates in its order: input, forget, cell,
/// output). Each layer over the sequence is one engine op whose backward through time runs in
/// the engine; its products run in lower precision under autocast.
public final class LSTM: RecurrentLayer {
    public init(
        _ inputSize: Int, _ hiddenSize: Int, numLayers: Int = 1, bias: Bool = true, batchFirst: Bool = false,
        dropout: Double = 0, bidirectional: Bool = false, dtype: DType = .float32, device: Device = .cpu
    ) throws {
        try super.init(
            gates: 4, inputSize: inputSize, hiddenSize: hiddenSize, numLayers: numLayers, bias: bias, batchFirst: batchFirst,
            dropout: dropout, bidirectional: bidirectional, dtype: dtype, device: device)
    }

    /// The LSTM over `input` ([L, N, inputSize], [N, L, inputSize] with `batchFirst`, or
    /// [L, inputSize]) from `state` (h₀, c₀), each [numLayers·directions, N, hiddenSize] (zeros
    /// when nil).
    /// - Returns: every step's output ([L, N, directions·hiddenSize] in the input's layout) and
    ///   the final (h, c).
    public func callAsFunction(_ input: Tensor, state: (h: Tensor, c: Tensor)? = nil) throws -> (output: Tensor, state: (h: Tensor, c: Tensor)) {
        let given = state.map { [$0.h, $0.c] } ?? []
        return try call([input] + given) { t in
            let (x, unbatched) = try sequence(t[0])
            let batch = x.shape[1]
            let h0 = try initial(t.count > 1 ? t[1] : nil, "h_0", batch: batch, like: x, unbatched: unbatched)
            let c0 = try initial(t.count > 1 ? t[2] : nil, "c_0", batch: batch, like: x, unbatched: unbatched)
            var hs: [Tensor] = [], cs: [Tensor] = []
            let out = try layers(x) { input, l, d in
                let k = l * directions + d
                let (wIh, wHh, bIh, bHh) = try weights(l, d)
                let (seq, h, c) = try Recurrent.lstmLayer(
                    input.impl, h0: try h0[k].impl, c0: try c0[k].impl, wIh: wIh.impl, wHh: wHh.impl, bIh: bIh?.impl,
                    bHh: bHh?.impl, reverse: d == 1)
                hs.append(Tensor(h))
                cs.append(Tensor(c))
                return Tensor(seq)
            }
            var (hN, cN) = (try Tensor.stack(hs), try Tensor.stack(cs))
            if unbatched { (hN, cN) = (try hN.squeeze(dims: [1]), try cN.squeeze(dims: [1])) }
            return (try output(out, unbatched: unbatched), (hN, cN))
        }
    }
}

/// A multi-layer GRU, as PyTorch's `nn.GRU` (gates in its order: reset, update, new). Each
/// layer over the sequence is one engine op whose backward through time runs in the engine; its
/// products run in lower precision under autocast.
public final class GRU: RecurrentLayer {
    public init(
        _ inputSize: Int, _ hiddenSize: Int, numLayers: Int = 1, bias: Bool = true, batchFirst: Bool = false,
        dropout: Double = 0, bidirectional: Bool = false, dtype: DType = .float32, device: Device = .cpu
    ) throws {
        try super.init(
            gates: 3, inputSize: inputSize, hiddenSize: hiddenSize, numLayers: numLayers, bias: bias, batchFirst: batchFirst,
            dropout: dropout, bidirectional: bidirectional, dtype: dtype, device: device)
    }

    /// The GRU over `input` ([L, N, inputSize], [N, L, inputSize] with `batchFirst`, or
    /// [L, inputSize]) from `state` h₀ ([numLayers·directions, N, hiddenSize]; zeros when nil).
    /// - Returns: every step's output and the final hidden state.
    public func callAsFunction(_ input: Tensor, state: Tensor? = nil) throws -> (output: Tensor, state: Tensor) {
        try call([input] + (state.map { [$0] } ?? [])) { t in
            let (x, unbatched) = try sequence(t[0])
            let h0 = try initial(t.count > 1 ? t[1] : nil, "h_0", batch: x.shape[1], like: x, unbatched: unbatched)
            var finals: [Tensor] = []
            let out = try layers(x) { input, l, d in
                let (wIh, wHh, bIh, bHh) = try weights(l, d)
                let (seq, h) = try Recurrent.gruLayer(
                    input.impl, h0: try h0[l * directions + d].impl, wIh: wIh.impl, wHh: wHh.impl, bIh: bIh?.impl,
                    bHh: bHh?.impl, reverse: d == 1)
                finals.append(Tensor(h))
                return Tensor(seq)
            }
            var hN = try Tensor.stack(finals)
            if unbatched { hN = try hN.squeeze(dims: [1]) }
            return (try output(out, unbatched: unbatched), hN)
        }
    }
}
