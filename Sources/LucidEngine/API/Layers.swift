/// A parameter drawn uniformly from ±`bound` (PyTorch's default layer initialisation), made as
/// Python's layers make it, so that one seed gives both the same values.
func uniformParameter(_ shape: [Int], bound: Double, dtype: DType, device: Device) throws -> Tensor {
    try ((try (try Tensor.rand(shape) * 2) - 1) * bound).to(dtype).to(device).requiringGrad()
}

/// A parameter filled with `value`.
func filledParameter(_ shape: [Int], _ value: Double, dtype: DType, device: Device) throws -> Tensor {
    try Tensor.full(shape, value, dtype: dtype, device: device).requiringGrad()
}

extension Module {
    /// The parameter `name`, which this layer always has.
    func required(_ name: String) throws -> Tensor {
        guard let t = parameter(name) ?? buffer(name) else {
            throw LucidError.runtime("\(typeName): its \"\(name)\" slot is empty")
        }
        return t
    }
}

func checkPositive(_ layer: String, _ values: [(String, Int)]) throws {
    for (name, v) in values where v <= 0 { throw LucidError.value("\(layer): \(name) must be positive, got \(v)") }
}

/// `y = x · weightᵀ + bias`, with `weight` [outFeatures, inFeatures] and `bias` [outFeatures]
/// drawn uniformly from ±1/√inFeatures, as PyTorch's `nn.Linear`. Lower precision under
/// autocast.
public final class Linear: Module {
    public let inFeatures: Int, outFeatures: Int

    public init(_ inFeatures: Int, _ outFeatures: Int, bias: Bool = true, dtype: DType = .float32, device: Device = .cpu) throws {
        guard inFeatures >= 0, outFeatures >= 0 else {
            throw LucidError.value("Linear: features must be non-negative, got \(inFeatures) and \(outFeatures)")
        }
        self.inFeatures = inFeatures
        self.outFeatures = outFeatures
        super.init()
        let bound = inFeatures > 0 ? 1 / Double(inFeatures).squareRoot() : 0
        try registerParameter("weight", try uniformParameter([outFeatures, inFeatures], bound: bound, dtype: dtype, device: device))
        try registerParameter("bias", bias ? try uniformParameter([outFeatures], bound: bound, dtype: dtype, device: device) : nil)
    }

    /// [outFeatures, inFeatures].
    public var weight: Tensor { get throws { try required("weight") } }
    /// [outFeatures], or nil for a layer made with `bias: false`.
    public var bias: Tensor? { parameter("bias") }

    public override func forward(_ input: Tensor) throws -> Tensor { try input.linear(try weight, bias: bias) }
}

/// 2-D convolution of [N, C, H, W] (or [C, H, W]) input, as PyTorch's `nn.Conv2d`: `weight`
/// [outChannels, inChannels/groups, kh, kw] and `bias` [outChannels], drawn uniformly from
/// ±1/√(inChannels/groups·kh·kw). Lower precision under autocast.
public final class Conv2d: Module {
    public let inChannels: Int, outChannels: Int, groups: Int
    public let kernelSize: (Int, Int), stride: (Int, Int), padding: (Int, Int), dilation: (Int, Int)

    public init(
        _ inChannels: Int, _ outChannels: Int, kernelSize: (Int, Int), stride: (Int, Int) = (1, 1),
        padding: (Int, Int) = (0, 0), dilation: (Int, Int) = (1, 1), groups: Int = 1, bias: Bool = true,
        dtype: DType = .float32, device: Device = .cpu
    ) throws {
        try checkPositive("Conv2d", [("groups", groups), ("kernelSize", Swift.min(kernelSize.0, kernelSize.1))])
        guard inChannels % groups == 0, outChannels % groups == 0 else {
            throw LucidError.value("Conv2d: inChannels (\(inChannels)) and outChannels (\(outChannels)) must be divisible by groups (\(groups))")
        }
        (self.inChannels, self.outChannels, self.groups) = (inChannels, outChannels, groups)
        (self.kernelSize, self.stride, self.padding, self.dilation) = (kernelSize, stride, padding, dilation)
        super.init()
        let fanIn = inChannels / groups * kernelSize.0 * kernelSize.1
        let bound = fanIn > 0 ? 1 / Double(fanIn).squareRoot() : 0
        let shape = [outChannels, inChannels / groups, kernelSize.0, kernelSize.1]
        try registerParameter("weight", try uniformParameter(shape, bound: bound, dtype: dtype, device: device))
        try registerParameter("bias", bias ? try uniformParameter([outChannels], bound: bound, dtype: dtype, device: device) : nil)
    }

    /// A square kernel, and the same stride, padding and dilation in both dimensions.
    public convenience init(
        _ inChannels: Int, _ outChannels: Int, kernelSize: Int, stride: Int = 1, padding: Int = 0, dilation: Int = 1,
        groups: Int = 1, bias: Bool = true, dtype: DType = .float32, device: Device = .cpu
    ) throws {
        try self.init(
            inChannels, outChannels, kernelSize: (kernelSize, kernelSize), stride: (stride, stride), padding: (padding, padding),
            dilation: (dilation, dilation), groups: groups, bias: bias, dtype: dtype, device: device)
    }

    public var weight: Tensor { get throws { try required("weight") } }
    public var bias: Tensor? { parameter("bias") }

    public override func forward(_ input: Tensor) throws -> Tensor {
        Tensor(
            try Convolution.conv2d(
                input.impl, try weight.impl, bias?.impl, stride: stride, padding: padding, dilation: dilation, groups: groups))
    }
}

/// 1-D convolution of [N, C, L] (or [C, L]) input, as PyTorch's `nn.Conv1d`: `weight`
/// [outChannels, inChannels/groups, k] and `bias` [outChannels]. Lower precision under
/// autocast.
public final class Conv1d: Module {
    public let inChannels: Int, outChannels: Int, kernelSize: Int, stride: Int, padding: Int, dilation: Int, groups: Int

    public init(
        _ inChannels: Int, _ outChannels: Int, kernelSize: Int, stride: Int = 1, padding: Int = 0, dilation: Int = 1,
        groups: Int = 1, bias: Bool = true, dtype: DType = .float32, device: Device = .cpu
    ) throws {
        try checkPositive("Conv1d", [("groups", groups), ("kernelSize", kernelSize)])
        guard inChannels % groups == 0, outChannels % groups == 0 else {
            throw LucidError.value("Conv1d: inChannels (\(inChannels)) and outChannels (\(outChannels)) must be divisible by groups (\(groups))")
        }
        (self.inChannels, self.outChannels, self.kernelSize) = (inChannels, outChannels, kernelSize)
        (self.stride, self.padding, self.dilation, self.groups) = (stride, padding, dilation, groups)
        super.init()
        let fanIn = inChannels / groups * kernelSize
        let bound = fanIn > 0 ? 1 / Double(fanIn).squareRoot() : 0
        try registerParameter(
            "weight", try uniformParameter([outChannels, inChannels / groups, kernelSize], bound: bound, dtype: dtype, device: device))
        try registerParameter("bias", bias ? try uniformParameter([outChannels], bound: bound, dtype: dtype, device: device) : nil)
    }

    public var weight: Tensor { get throws { try required("weight") } }
    public var bias: Tensor? { parameter("bias") }

    public override func forward(_ input: Tensor) throws -> Tensor {
        try input.conv1d(try weight, bias: bias, stride: stride, padding: padding, dilation: dilation, groups: groups)
    }
}

/// Batch normalisation, as PyTorch's `nn.BatchNorm1d`/`nn.BatchNorm2d`: `weight` (ones) and
/// `bias` (zeros) per channel, and the buffers `running_mean`, `running_var` (float32) and
/// `num_batches_tracked` (int64). In training mode it normalises with the batch's statistics
/// and updates the running ones; in evaluation mode it uses the running ones.
public class BatchNorm: Module {
    public let numFeatures: Int, eps: Double, affine: Bool, trackRunningStats: Bool
    /// The weight of each batch in the running statistics; nil: a cumulative average.
    public var momentum: Double?
    let ranks: [Int]

    init(
        ranks: [Int], numFeatures: Int, eps: Double, momentum: Double?, affine: Bool, trackRunningStats: Bool,
        dtype: DType, device: Device
    ) throws {
        try checkPositive(String(describing: Self.self), [("numFeatures", numFeatures)])
        (self.ranks, self.numFeatures, self.eps, self.momentum) = (ranks, numFeatures, eps, momentum)
        (self.affine, self.trackRunningStats) = (affine, trackRunningStats)
        super.init()
        try registerParameter("weight", affine ? try filledParameter([numFeatures], 1, dtype: dtype, device: device) : nil)
        try registerParameter("bias", affine ? try filledParameter([numFeatures], 0, dtype: dtype, device: device) : nil)
        // The running statistics stay float32 whatever the parameters' dtype.
        try registerBuffer("running_mean", trackRunningStats ? try Tensor.zeros([numFeatures], device: device) : nil)
        try registerBuffer("running_var", trackRunningStats ? try Tensor.ones([numFeatures], device: device) : nil)
        try registerBuffer("num_batches_tracked", trackRunningStats ? try Tensor.zeros([], dtype: .int64, device: device) : nil)
    }

    public var weight: Tensor? { parameter("weight") }
    public var bias: Tensor? { parameter("bias") }
    public var runningMean: Tensor? { buffer("running_mean") }
    public var runningVar: Tensor? { buffer("running_var") }
    public var numBatchesTracked: Tensor? { buffer("num_batches_tracked") }

    public override func forward(_ input: Tensor) throws -> Tensor {
        guard ranks.contains(input.ndim) else {
            let want = ranks.map { "\($0)-D" }.joined(separator: " or ")
            throw LucidError.value("\(typeName): expected \(want) input, got shape \(input.shape)")
        }
        var momentum = self.momentum
        if training, trackRunningStats, let count = numBatchesTracked {
            try GradMode.with(false) {
                try count.copy(from: Tensor(try Elementwise.binary(.add, count.impl, scalar: ScalarOperand(int: 1), scalarFirst: false)))
            }
            if momentum == nil { momentum = 1 / Double(try count.item()) }
        }
        if input.numel == 0 { return try input + 0 }  // nothing to normalise; the statistics stay, as PyTorch's
        return try batchNorm(
            input, runningMean: runningMean, runningVar: runningVar, weight: weight, bias: bias,
            training: training || runningMean == nil, momentum: momentum ?? 0, eps: eps)
    }
}

/// Batch normalisation of [N, C] or [N, C, L] input (see `BatchNorm`).
public final class BatchNorm1d: BatchNorm {
    public init(
        _ numFeatures: Int, eps: Double = 1e-5, momentum: Double? = 0.1, affine: Bool = true, trackRunningStats: Bool = true,
        dtype: DType = .float32, device: Device = .cpu
    ) throws {
        try super.init(
            ranks: [2, 3], numFeatures: numFeatures, eps: eps, momentum: momentum, affine: affine,
            trackRunningStats: trackRunningStats, dtype: dtype, device: device)
    }
}

/// Batch normalisation of [N, C, H, W] input (see `BatchNorm`).
public final class BatchNorm2d: BatchNorm {
    public init(
        _ numFeatures: Int, eps: Double = 1e-5, momentum: Double? = 0.1, affine: Bool = true, trackRunningStats: Bool = true,
        dtype: DType = .float32, device: Device = .cpu
    ) throws {
        try super.init(
            ranks: [4], numFeatures: numFeatures, eps: eps, momentum: momentum, affine: affine,
            trackRunningStats: trackRunningStats, dtype: dtype, device: device)
    }
}

/// Normalisation over the trailing `normalizedShape`, as PyTorch's `nn.LayerNorm`: `weight`
/// (ones) and `bias` (zeros) of that shape. float32 under autocast.
public final class LayerNorm: Module {
    public let normalizedShape: [Int], eps: Double

    public init(
        _ normalizedShape: [Int], eps: Double = 1e-5, elementwiseAffine: Bool = true, bias: Bool = true,
        dtype: DType = .float32, device: Device = .cpu
    ) throws {
        (self.normalizedShape, self.eps) = (normalizedShape, eps)
        super.init()
        let affine = elementwiseAffine
        try registerParameter("weight", affine ? try filledParameter(normalizedShape, 1, dtype: dtype, device: device) : nil)
        try registerParameter("bias", affine && bias ? try filledParameter(normalizedShape, 0, dtype: dtype, device: device) : nil)
    }

    /// Normalisation over the last dimension, of size `features`.
    public convenience init(
        _ features: Int, eps: Double = 1e-5, elementwiseAffine: Bool = true, bias: Bool = true, dtype: DType = .float32,
        device: Device = .cpu
    ) throws {
        try self.init([features], eps: eps, elementwiseAffine: elementwiseAffine, bias: bias, dtype: dtype, device: device)
    }

    public var weight: Tensor? { parameter("weight") }
    public var bias: Tensor? { parameter("bias") }

    public override func forward(_ input: Tensor) throws -> Tensor {
        try input.layerNorm(normalizedShape, weight: weight, bias: bias, eps: eps)
    }
}

/// A lookup table of `numEmbeddings` vectors of `embeddingDim`, as PyTorch's `nn.Embedding`:
/// `weight` drawn from the standard normal; the `paddingIndex` row starts at zero and gets no
/// gradient. Its input is a tensor of integer indices.
public final class Embedding: Module {
    public let numEmbeddings: Int, embeddingDim: Int
    public let paddingIndex: Int?

    public init(
        _ numEmbeddings: Int, _ embeddingDim: Int, paddingIndex: Int? = nil, dtype: DType = .float32, device: Device = .cpu
    ) throws {
        try checkPositive("Embedding", [("numEmbeddings", numEmbeddings), ("embeddingDim", embeddingDim)])
        if let p = paddingIndex, !(-numEmbeddings..<numEmbeddings).contains(p) {
            throw LucidError.value("Embedding: paddingIndex \(p) must be within numEmbeddings (\(numEmbeddings))")
        }
        (self.numEmbeddings, self.embeddingDim) = (numEmbeddings, embeddingDim)
        self.paddingIndex = paddingIndex.map { ($0 + numEmbeddings) % numEmbeddings }
        super.init()
        let w = try Tensor.randn([numEmbeddings, embeddingDim])
        if let p = self.paddingIndex { try w[p].fill(0) }
        try registerParameter("weight", try w.to(dtype).to(device).requiringGrad())
    }

    public var weight: Tensor { get throws { try required("weight") } }

    public override func forward(_ input: Tensor) throws -> Tensor {
        try embedding(input, weight: try weight, paddingIndex: paddingIndex)
    }
}

/// Zeroes each element with probability `p` and scales the others by 1/(1-p) in training
/// mode; the identity in evaluation mode (PyTorch's `nn.Dropout`).
public final class Dropout: Module {
    public let p: Double

    public init(_ p: Double = 0.5) throws {
        guard (0...1).contains(p) else { throw LucidError.value("dropout probability has to be between 0 and 1, got \(p)") }
        self.p = p
        super.init()
    }

    public override func forward(_ input: Tensor) throws -> Tensor { try input.dropout(p: p, training: training) }
}

/// Runs its modules in order, each on the previous one's output; they are named "0", "1", …
/// as PyTorch's `nn.Sequential` names them.
public final class Sequential: Module {
    public private(set) var layers: [Module] = []

    public init(_ layers: [Module]) {
        super.init()
        for m in layers { append(m) }
    }

    public convenience init(_ layers: Module...) { self.init(layers) }

    /// Adds `module` at the end, named by its position.
    public func append(_ module: Module) {
        // A position is never a name a parameter or buffer has: registration cannot fail.
        try? registerModule(String(layers.count), module)
        layers.append(module)
    }

    public var count: Int { layers.count }
    public subscript(_ i: Int) -> Module { layers[i] }

    public override func forward(_ input: Tensor) throws -> Tensor {
        try layers.reduce(input) { x, m in try m(x) }
    }
}

/// max(x, 0).
public final class ReLU: Module {
    public override init() { super.init() }
    public override func forward(_ input: Tensor) throws -> Tensor { try input.relu() }
}

/// The Gaussian error linear unit: exact, or with the tanh approximation (`approximateTanh`,
/// PyTorch's `approximate="tanh"`).
public final class GELU: Module {
    public let approximateTanh: Bool
    public init(approximateTanh: Bool = false) {
        self.approximateTanh = approximateTanh
        super.init()
    }
    public override func forward(_ input: Tensor) throws -> Tensor { approximateTanh ? try input.geluTanh() : try input.gelu() }
}

/// The hyperbolic tangent.
public final class Tanh: Module {
    public override init() { super.init() }
    public override func forward(_ input: Tensor) throws -> Tensor { try input.tanh() }
}

/// 1 / (1 + e^-x).
public final class Sigmoid: Module {
    public override init() { super.init() }
    public override func forward(_ input: Tensor) throws -> Tensor { try input.sigmoid() }
}

/// x · sigmoid(x).
public final class SiLU: Module {
    public override init() { super.init() }
    public override func forward(_ input: Tensor) throws -> Tensor { try input.silu() }
}

/// x where x > 0, else `negativeSlope` · x.
public final class LeakyReLU: Module {
    public let negativeSlope: Double
    public init(negativeSlope: Double = 0.01) {
        self.negativeSlope = negativeSlope
        super.init()
    }
    public override func forward(_ input: Tensor) throws -> Tensor { try input.leakyRelu(negativeSlope: negativeSlope) }
}

/// Softmax along `dim`; float32 under autocast.
public final class Softmax: Module {
    public let dim: Int
    public init(dim: Int) {
        self.dim = dim
        super.init()
    }
    public override func forward(_ input: Tensor) throws -> Tensor { try input.softmax(dim: dim) }
}

/// Dimensions `startDim` through `endDim` merged into one (PyTorch's `nn.Flatten`: from 1).
public final class Flatten: Module {
    public let startDim: Int, endDim: Int
    public init(startDim: Int = 1, endDim: Int = -1) {
        (self.startDim, self.endDim) = (startDim, endDim)
        super.init()
    }
    public override func forward(_ input: Tensor) throws -> Tensor { try input.flatten(start: startDim, end: endDim) }
}

/// Max pooling over `kernelSize` × `kernelSize` windows (stride defaults to the kernel size).
public final class MaxPool2d: Module {
    public let kernelSize: Int, stride: Int
    public init(_ kernelSize: Int, stride: Int? = nil) {
        (self.kernelSize, self.stride) = (kernelSize, stride ?? kernelSize)
        super.init()
    }
    public override func forward(_ input: Tensor) throws -> Tensor { try input.maxPool2d(kernelSize, stride: stride) }
}

/// Returns its input.
public final class Identity: Module {
    public override init() { super.init() }
    public override func forward(_ input: Tensor) throws -> Tensor { input }
}
