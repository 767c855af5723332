/// Attention over `numHeads` heads of `embedDim / numHeads` features, as PyTorch's
/// `nn.MultiheadAttention` (query, key and value of `embedDim` features): `in_proj_weight`
/// [3·embedDim, embedDim] (Xavier-uniform), `in_proj_bias` [3·embedDim] (zeros) and `out_proj`,
/// a `Linear` whose bias starts at zero.
///
/// Inputs are [L, N, E] ([N, L, E] with `batchFirst`) or unbatched [L, E]. A bool `attnMask` or
/// `keyPaddingMask` is true where attention is *not* allowed; a floating one is added to the
/// scores.
public final class MultiheadAttention: Module {
    public let embedDim: Int, numHeads: Int, headDim: Int, dropout: Double, batchFirst: Bool

    public init(
        _ embedDim: Int, numHeads: Int, dropout: Double = 0, bias: Bool = true, batchFirst: Bool = false,
        dtype: DType = .float32, device: Device = .cpu
    ) throws {
        try checkPositive("MultiheadAttention", [("embedDim", embedDim), ("numHeads", numHeads)])
        guard embedDim % numHeads == 0 else {
            throw LucidError.value("MultiheadAttention: embedDim (\(embedDim)) must be divisible by numHeads (\(numHeads))")
        }
        guard (0...1).contains(dropout) else { throw LucidError.value("MultiheadAttention: dropout must be in [0, 1], got \(dropout)") }
        (self.embedDim, self.numHeads, self.headDim) = (embedDim, numHeads, embedDim / numHeads)
        (self.dropout, self.batchFirst) = (dropout, batchFirst)
        super.init()
        let e = embedDim
        let bound = (6 / Double(e + 3 * e)).squareRoot()
        try registerParameter("in_proj_weight", try uniformParameter([3 * e, e], bound: bound, dtype: dtype, device: device))
        try registerParameter("in_proj_bias", bias ? try filledParameter([3 * e], 0, dtype: dtype, device: device) : nil)
        let out = try Linear(e, e, bias: bias, dtype: dtype, device: device)
        if bias { try out.registerParameter("bias", try filledParameter([e], 0, dtype: dtype, device: device)) }
        try registerModule("out_proj", out)
    }

    public var inProjWeight: Tensor { get throws { try required("in_proj_weight") } }
    public var inProjBias: Tensor? { parameter("in_proj_bias") }
    public var outProj: Linear { get throws { try linear("out_proj") } }

    /// Self-attention of `input`: `self(input, input, input).output`.
    public override func forward(_ input: Tensor) throws -> Tensor {
        try attend(input, input, input, keyPaddingMask: nil, needWeights: false, attnMask: nil, averageAttnWeights: true, isCausal: false).0
    }

    /// Attention of `query` over `key` and `value`.
    ///
    /// - Parameters:
    ///   - keyPaddingMask: [N, S] (or [S] unbatched): the key positions to leave out.
    ///   - needWeights: whether to return the attention weights.
    ///   - attnMask: [L, S] or [N·numHeads, L, S].
    ///   - averageAttnWeights: the weights averaged over heads ([N, L, S]) or per head
    ///     ([N, numHeads, L, S]).
    ///   - isCausal: with no `attnMask`, masks out the positions after each query's.
    /// - Returns: the output (the query's shape) and the weights (nil unless `needWeights`).
    public func callAsFunction(
        _ query: Tensor, _ key: Tensor, _ value: Tensor, keyPaddingMask: Tensor? = nil, needWeights: Bool = true,
        attnMask: Tensor? = nil, averageAttnWeights: Bool = true, isCausal: Bool = false
    ) throws -> (output: Tensor, weights: Tensor?) {
        let masks = [keyPaddingMask, attnMask].compactMap { $0 }
        return try call([query, key, value] + masks) { t in
            try attend(
                t[0], t[1], t[2], keyPaddingMask: keyPaddingMask.map { _ in t[3] }, needWeights: needWeights,
                attnMask: attnMask.map { _ in t[t.count - 1] }, averageAttnWeights: averageAttnWeights, isCausal: isCausal)
        }
    }

    private func attend(
        _ query: Tensor, _ key: Tensor, _ value: Tensor, keyPaddingMask: Tensor?, needWeights: Bool, attnMask: Tensor?,
        averageAttnWeights: Bool, isCausal: Bool
    ) throws -> (Tensor, Tensor?) {
        let name = "MultiheadAttention"
        guard [2, 3].contains(query.ndim), key.ndim == query.ndim, value.ndim == query.ndim else {
            throw LucidError.value(
                "\(name): expected 2-D or 3-D query, key and value of one rank, got \(query.shape), \(key.shape), \(value.shape)")
        }
        guard query.shape.last == embedDim, key.shape.last == embedDim, value.shape.last == embedDim else {
            throw LucidError.value(
                "\(name): query, key and value must have \(embedDim) features, got \(query.shape), \(key.shape), \(value.shape)")
        }
        var (q0, k0, v0) = (query, key, value)
        let batched = query.ndim == 3
        if batched && batchFirst { (q0, k0, v0) = (try q0.transpose(0, 1), try k0.transpose(0, 1), try v0.transpose(0, 1)) }
        var attnMask = attnMask
        if isCausal && attnMask == nil { attnMask = try causalMask(q0.shape[0], k0.shape[0], like: q0) }
        var kpm = keyPaddingMask
        if !batched {
            (q0, k0, v0) = (try q0.unsqueeze(1), try k0.unsqueeze(1), try v0.unsqueeze(1))
            kpm = try kpm?.unsqueeze(0)
        }
        let (l, n, e, s, h, hd) = (q0.shape[0], q0.shape[1], q0.shape[2], k0.shape[0], numHeads, headDim)
        guard k0.shape[0] == v0.shape[0], k0.shape[1] == n, v0.shape[1] == n else {
            throw LucidError.value("\(name): key \(key.shape) and value \(value.shape) must share their sequence and batch sizes with the query's")
        }
        let w = try inProjWeight.chunk(3)
        let b = try inProjBias?.chunk(3)
        var q = try q0.linear(w[0], bias: b?[0])
        var k = try k0.linear(w[1], bias: b?[1])
        var v = try v0.linear(w[2], bias: b?[2])
        let dtype = q.dtype
        var mask: Tensor?
        if let m = attnMask {
            var m = try additive(m, "attnMask", dtype)
            if m.ndim == 2 {
                guard m.shape == [l, s] else { throw LucidError.value("\(name): the 2-D attnMask should be of shape \([l, s]), got \(m.shape)") }
                m = try m.unsqueeze(0)
            } else if m.ndim == 3 {
                guard m.shape == [n * h, l, s] else {
                    throw LucidError.value("\(name): the 3-D attnMask should be of shape \([n * h, l, s]), got \(m.shape)")
                }
            } else {
                throw LucidError.value("\(name): attnMask must be 2-D or 3-D, got \(m.ndim)-D")
            }
            mask = try m.reshape([-1, m.shape[0] == 1 ? 1 : h, l, s])
        }
        if let p = kpm {
            let p = try additive(p, "keyPaddingMask", dtype)
            guard p.shape == [n, s] else { throw LucidError.value("\(name): keyPaddingMask should be of shape \([n, s]), got \(p.shape)") }
            let r = try p.reshape([n, 1, 1, s])
            mask = try mask.map { try $0 + r } ?? r
        }
        mask = try mask?.expand([n, h, l, s])
        q = try q.reshape([l, n * h, hd]).transpose(0, 1)
        k = try k.reshape([s, n * h, hd]).transpose(0, 1)
        v = try v.reshape([s, n * h, hd]).transpose(0, 1)
        let (o, weights) = try swiftSpelled {
            try Attention.attention(
                try q.reshape([n, h, l, hd]).impl, try k.reshape([n, h, s, hd]).impl, try v.reshape([n, h, s, hd]).impl,
                mask: mask?.impl, causal: false, scale: nil, dropout: training ? dropout : 0, needWeights: needWeights)
        }
        let proj = try outProj
        var out = try Tensor(o).permute([2, 0, 1, 3]).reshape([l * n, e])
        out = try out.linear(try proj.weight, bias: proj.bias).reshape([l, n, e])
        if !batched { out = try out.squeeze(dims: [1]) } else if batchFirst { out = try out.transpose(0, 1) }
        guard needWeights, let weights else { return (out, nil) }
        var wts = Tensor(weights)
        if averageAttnWeights { wts = try wts.mean(dims: [1]) }
        return (out, batched ? wts : try wts.squeeze(dims: [0]))
    }

    /// A bool mask (true: not allowed) as 0 / -inf in `dtype`, or a floating one in `dtype`.
    private func additive(_ mask: Tensor, _ what: String, _ dtype: DType) throws -> Tensor {
        if mask.dtype == .bool { return try Tensor.where(mask, -Double.infinity, try Tensor.zeros(mask.shape, dtype: dtype, device: mask.device)) }
        guard mask.dtype.isFloatingPoint else {
            throw LucidError.type("MultiheadAttention: \(what) must be a bool or floating tensor, got \(mask.dtype)")
        }
        return try mask.to(dtype)
    }
}

/// The causal mask of `l` queries over `s` keys: 0 on and below the diagonal, -inf above it.
func causalMask(_ l: Int, _ s: Int, like t: Tensor) throws -> Tensor {
    let rows = try Tensor.arange(0, Double(l), device: t.device).unsqueeze(1)
    let cols = try Tensor.arange(0, Double(s), device: t.device).unsqueeze(0)
    return try Tensor.where(try cols.greater(rows), -Double.infinity, try Tensor.zeros([l, s], dtype: t.dtype, device: t.device))
}

extension Module {
    /// The sub-module `name` as a `Linear`.
    func linear(_ name: String) throws -> Linear {
        guard let m = child(name) as? Linear else { throw LucidError.runtime("\(typeName): its \"\(name)\" is not a Linear") }
        return m
    }

    /// The sub-module `name` as a `T`.
    func sub<T: Module>(_ name: String, as type: T.Type) throws -> T {
        guard let m = child(name) as? T else { throw LucidError.runtime("\(typeName): its \"\(name)\" is not a \(T.self)") }
        return m
    }
}

/// Self-attention then a feed-forward block, each with a residual connection and a LayerNorm
/// (after each block, or before it with `normFirst`), as PyTorch's
/// `nn.TransformerEncoderLayer`, with its sub-module names: `self_attn`, `linear1`, `dropout`,
/// `linear2`, `norm1`, `norm2`, `dropout1`, `dropout2`.
public final class TransformerEncoderLayer: Module {
    /// The feed-forward block's activation.
    public enum Activation: Sendable { case relu, gelu }

    public let normFirst: Bool
    public let activation: Activation

    public init(
        dModel: Int, nhead: Int, dimFeedforward: Int = 2048, dropout: Double = 0.1, activation: Activation = .relu,
        layerNormEps: Double = 1e-5, batchFirst: Bool = false, normFirst: Bool = false, bias: Bool = true,
        dtype: DType = .float32, device: Device = .cpu
    ) throws {
        try checkPositive("TransformerEncoderLayer", [("dModel", dModel), ("dimFeedforward", dimFeedforward)])
        (self.normFirst, self.activation) = (normFirst, activation)
        super.init()
        try registerModule(
            "self_attn",
            try MultiheadAttention(dModel, numHeads: nhead, dropout: dropout, bias: bias, batchFirst: batchFirst, dtype: dtype, device: device))
        try registerModule("linear1", try Linear(dModel, dimFeedforward, bias: bias, dtype: dtype, device: device))
        try registerModule("dropout", try Dropout(dropout))
        try registerModule("linear2", try Linear(dimFeedforward, dModel, bias: bias, dtype: dtype, device: device))
        for i in 1...2 { try registerModule("norm\(i)", try LayerNorm(dModel, eps: layerNormEps, bias: bias, dtype: dtype, device: device)) }
        for i in 1...2 { try registerModule("dropout\(i)", try Dropout(dropout)) }
    }

    public var selfAttn: MultiheadAttention { get throws { try sub("self_attn", as: MultiheadAttention.self) } }

    public override func forward(_ input: Tensor) throws -> Tensor { try encode(input, mask: nil, keyPaddingMask: nil, isCausal: false) }

    /// The layer applied to `src` ([S, N, E], or [N, S, E] with `batchFirst`, or [S, E]), with
    /// an attention mask, a key padding mask and the causal hint as
    /// `MultiheadAttention.callAsFunction` takes them.
    public func callAsFunction(_ src: Tensor, mask: Tensor? = nil, keyPaddingMask: Tensor? = nil, isCausal: Bool = false) throws -> Tensor {
        try call([src]) { t in try encode(t[0], mask: mask, keyPaddingMask: keyPaddingMask, isCausal: isCausal) }
    }

    private func encode(_ src: Tensor, mask: Tensor?, keyPaddingMask: Tensor?, isCausal: Bool) throws -> Tensor {
        let (norm1, norm2) = (try sub("norm1", as: LayerNorm.self), try sub("norm2", as: LayerNorm.self))
        func sa(_ x: Tensor) throws -> Tensor {
            let y = try selfAttn(x, x, x, keyPaddingMask: keyPaddingMask, needWeights: false, attnMask: mask, isCausal: isCausal).output
            return try sub("dropout1", as: Dropout.self)(y)
        }
        func ff(_ x: Tensor) throws -> Tensor {
            var y = try linear("linear1")(x)
            y = activation == .relu ? try y.relu() : try y.gelu()
            y = try linear("linear2")(try sub("dropout", as: Dropout.self)(y))
            return try sub("dropout2", as: Dropout.self)(y)
        }
        if normFirst {
            let x = try src + (try sa(try norm1(src)))
            return try x + (try ff(try norm2(x)))
        }
        let x = try norm1(try src + (try sa(src)))
        return try norm2(try x + (try ff(x)))
    }
}
