/// One item of a subscript: an index, a range, a strided slice, a new axis, the rest of the
/// dimensions, or an integer or boolean tensor, as NumPy and PyTorch subscripts take them.
/// Swift's `Int`, ranges of `Int` and `Tensor` are items too.
///
/// ```swift
/// let row = try x[0]                    // drops the first dimension
/// let cols = try x[.all, 1..<3]         // a view of columns 1 and 2
/// let evens = try x[.slice(step: 2)]    // every other row
/// let picked = try x[indices]           // rows at an int64 tensor's indices
/// ```
public struct TensorIndex: TensorIndexConvertible, Sendable {
    private enum Kind: Sendable {
        case index(Int)
        case slice(start: Int?, stop: Int?, step: Int?)
        case newAxis
        case ellipsis
        case tensor(Tensor)
    }

    private let kind: Kind

    private init(_ kind: Kind) { self.kind = kind }

    public var tensorIndex: TensorIndex { self }

    /// One position (negative counts from the end); the dimension is dropped.
    public static func index(_ i: Int) -> TensorIndex { TensorIndex(.index(i)) }
    /// Positions given by an integer tensor, or a mask given by a bool tensor.
    public static func tensor(_ t: Tensor) -> TensorIndex { TensorIndex(.tensor(t)) }

    static func makeSlice(_ start: Int?, _ stop: Int?, _ step: Int?) -> TensorIndex {
        TensorIndex(.slice(start: start, stop: stop, step: step))
    }
    static let newAxisItem = TensorIndex(.newAxis)
    static let ellipsisItem = TensorIndex(.ellipsis)

    var item: Indexing.Item {
        switch kind {
        case .index(let i): return .int(i)
        case .slice(let start, let stop, let step): return .slice(start: start, stop: stop, step: step)
        case .newAxis: return .newAxis
        case .ellipsis: return .ellipsis
        case .tensor(let t): return .tensor(t.impl)
        }
    }
}

extension TensorIndexConvertible where Self == TensorIndex {
    /// Positions `start ..< stop` by `step` (nil: the whole extent; negative bounds count from
    /// the end), as Python's `start:stop:step`.
    public static func slice(start: Int? = nil, stop: Int? = nil, step: Int? = nil) -> TensorIndex {
        TensorIndex.makeSlice(start, stop, step)
    }
    /// The whole extent of one dimension (Python's `:`).
    public static var all: TensorIndex { TensorIndex.makeSlice(nil, nil, nil) }
    /// A new dimension of size 1 (Python's `None`).
    public static var newAxis: TensorIndex { TensorIndex.newAxisItem }
    /// As many whole dimensions as the other items leave (Python's `...`).
    public static var ellipsis: TensorIndex { TensorIndex.ellipsisItem }
}

/// What can be written inside a tensor's subscript: `Int`, Swift's ranges of `Int`, `Tensor`
/// and `TensorIndex`.
public protocol TensorIndexConvertible {
    var tensorIndex: TensorIndex { get }
}

extension Int: TensorIndexConvertible {
    public var tensorIndex: TensorIndex { .index(self) }
}
extension Range: TensorIndexConvertible where Bound == Int {
    public var tensorIndex: TensorIndex { .makeSlice(lowerBound, upperBound, nil) }
}
extension ClosedRange: TensorIndexConvertible where Bound == Int {
    public var tensorIndex: TensorIndex { .makeSlice(lowerBound, upperBound == -1 ? nil : upperBound + 1, nil) }
}
extension PartialRangeFrom: TensorIndexConvertible where Bound == Int {
    public var tensorIndex: TensorIndex { .makeSlice(lowerBound, nil, nil) }
}
extension PartialRangeUpTo: TensorIndexConvertible where Bound == Int {
    public var tensorIndex: TensorIndex { .makeSlice(nil, upperBound, nil) }
}
extension PartialRangeThrough: TensorIndexConvertible where Bound == Int {
    public var tensorIndex: TensorIndex { .makeSlice(nil, upperBound == -1 ? nil : upperBound + 1, nil) }
}
extension Tensor: TensorIndexConvertible {
    public var tensorIndex: TensorIndex { .tensor(self) }
}

// MARK: - Indexing and shapes

extension Tensor {
    /// `self[items]` with NumPy's rules: indices and ranges give a view that shares storage;
    /// integer or boolean tensors select copies. Gradients flow back to this tensor.
    /// - Throws: `LucidError` (`.index`) for a position out of range, (`.value`) for too many
    ///   items.
    public subscript(_ items: any TensorIndexConvertible...) -> Tensor {
        get throws { Tensor(try Indexing.subscripted(impl, items.map(\.tensorIndex.item))) }
    }

    /// The dimensions of size 1 removed (only `dims` when given).
    public func squeeze(dims: [Int]? = nil) throws -> Tensor { Tensor(try ShapeOps.squeeze(impl, dims: dims)) }
    /// A view with a dimension of size 1 inserted at `dim`.
    public func unsqueeze(_ dim: Int) throws -> Tensor { Tensor(try ShapeOps.unsqueeze(impl, dim)) }
    /// Dimensions `start` through `end` merged into one.
    public func flatten(start: Int = 0, end: Int = -1) throws -> Tensor { Tensor(try ShapeOps.flatten(impl, start: start, end: end)) }
    /// A view broadcast to `shape` (-1 keeps a dimension's size), without copying.
    public func expand(_ shape: [Int]) throws -> Tensor { Tensor(try ShapeOps.expand(impl, shape)) }
    /// A view of `length` positions of dimension `dim` from `start`.
    public func narrow(dim: Int, start: Int, length: Int) throws -> Tensor {
        Tensor(try ShapeOps.narrow(impl, dim: dim, start: start, length: length))
    }
    /// The tensor cut along `dim` into `chunks` views of equal size (the last one smaller when
    /// the size does not divide).
    public func chunk(_ chunks: Int, dim: Int = 0) throws -> [Tensor] {
        try ShapeOps.chunk(impl, chunks: chunks, dim: dim).map(Tensor.init)
    }
    /// The tensor cut along `dim` into views of `size` positions (the last one smaller).
    public func split(size: Int, dim: Int = 0) throws -> [Tensor] {
        try ShapeOps.split(impl, size: size, dim: dim).map(Tensor.init)
    }
    /// The tensor cut along `dim` into views of the given `sizes`, which must add up to its size.
    public func split(sizes: [Int], dim: Int = 0) throws -> [Tensor] {
        try ShapeOps.split(impl, sizes: sizes, dim: dim).map(Tensor.init)
    }
    /// Rows of this tensor along `dim` at the int64 positions in `index` (0-d or 1-D).
    public func indexSelect(dim: Int, index: Tensor) throws -> Tensor {
        Tensor(try Indexing.indexSelect(impl, dim: dim, index: index.impl))
    }
    /// Values along `dim` at the positions `index` gives (the same rank as this tensor).
    public func gather(dim: Int, index: Tensor) throws -> Tensor {
        Tensor(try Indexing.gather(impl, dim: dim, index: index.impl))
    }

    /// `tensors` joined along `dim`; their other dimensions must agree. Mixed floating dtypes
    /// join in the widest (the `promote` autocast policy).
    public static func cat(_ tensors: [Tensor], dim: Int = 0) throws -> Tensor {
        Tensor(try ShapeOps.cat(tensors.map(\.impl), dim: dim))
    }
    /// `tensors`, all of one shape, stacked along a new dimension `dim`.
    public static func stack(_ tensors: [Tensor], dim: Int = 0) throws -> Tensor {
        Tensor(try ShapeOps.stack(tensors.map(\.impl), dim: dim))
    }
}

// MARK: - Elementwise

extension Tensor {
    private func unary(_ k: UnaryKernel) throws -> Tensor { Tensor(try Elementwise.unary(k, impl)) }

    /// |x|.
    public func abs() throws -> Tensor { try unary(.abs) }
    /// √x (integers promote to float32).
    public func sqrt() throws -> Tensor { try unary(.sqrt) }
    /// 1/√x; float32 under autocast.
    public func rsqrt() throws -> Tensor { try unary(.rsqrt) }
    /// 1 / (1 + e^-x).
    public func sigmoid() throws -> Tensor { try unary(.sigmoid) }
    /// x · sigmoid(x).
    public func silu() throws -> Tensor { try unary(.silu) }
    /// GELU with the tanh approximation (PyTorch's `approximate="tanh"`).
    public func geluTanh() throws -> Tensor { try unary(.geluTanh) }
    /// log(1 + x), exact for small x; float32 under autocast.
    public func log1p() throws -> Tensor { try unary(.log1p) }
    /// The sine.
    public func sin() throws -> Tensor { try unary(.sin) }
    /// The cosine.
    public func cos() throws -> Tensor { try unary(.cos) }
    /// x where x > 0, else `negativeSlope` · x.
    public func leakyRelu(negativeSlope: Double = 0.01) throws -> Tensor {
        Tensor(try Activations.leakyRelu(impl, slope: negativeSlope))
    }
    /// x raised to `exponent`, elementwise; float32 under autocast.
    public func pow(_ exponent: Double) throws -> Tensor {
        Tensor(try Elementwise.binary(.pow, impl, scalar: ScalarOperand(float: exponent), scalarFirst: false))
    }
    /// The larger of the two elementwise (broadcast); gradients go to the larger.
    public func maximum(_ other: Tensor) throws -> Tensor { Tensor(try Elementwise.binary(.maximum, impl, other.impl)) }
    /// The smaller of the two elementwise (broadcast).
    public func minimum(_ other: Tensor) throws -> Tensor { Tensor(try Elementwise.binary(.minimum, impl, other.impl)) }

    /// The values limited to `[min, max]`; either bound may be nil, not both. The gradient
    /// passes where `min <= x <= max`.
    public func clamp(min: Double? = nil, max: Double? = nil) throws -> Tensor {
        Tensor(try Comparison.clamp(impl, min: min.map { ScalarOperand(float: $0) }, max: max.map { ScalarOperand(float: $0) }))
    }

    /// `condition ? a : b` elementwise, broadcast; `condition` is a bool tensor. Gradients flow
    /// to the branch chosen.
    public static func `where`(_ condition: Tensor, _ a: Tensor, _ b: Tensor) throws -> Tensor {
        Tensor(try Comparison.where(condition.impl, a.impl, b.impl))
    }
    /// `condition ? a : b` with a scalar `b`.
    public static func `where`(_ condition: Tensor, _ a: Tensor, _ b: Double) throws -> Tensor {
        Tensor(try Comparison.where(condition.impl, scalar: ScalarOperand(float: b), a.impl, scalarSecond: true))
    }
    /// `condition ? a : b` with a scalar `a`.
    public static func `where`(_ condition: Tensor, _ a: Double, _ b: Tensor) throws -> Tensor {
        Tensor(try Comparison.where(condition.impl, scalar: ScalarOperand(float: a), b.impl))
    }

    private func compare(_ k: CompareKernel, _ other: Tensor) throws -> Tensor { Tensor(try Comparison.compare(k, impl, other.impl)) }
    private func compare(_ k: CompareKernel, _ s: Double) throws -> Tensor {
        Tensor(try Comparison.compare(k, impl, scalar: ScalarOperand(float: s)))
    }
    /// `self > other` elementwise, as a bool tensor.
    public func greater(_ other: Tensor) throws -> Tensor { try compare(.gt, other) }
    /// `self > value` elementwise, as a bool tensor.
    public func greater(_ value: Double) throws -> Tensor { try compare(.gt, value) }
    /// `self < other` elementwise, as a bool tensor.
    public func less(_ other: Tensor) throws -> Tensor { try compare(.lt, other) }
    /// `self < value` elementwise, as a bool tensor.
    public func less(_ value: Double) throws -> Tensor { try compare(.lt, value) }
    /// `self != other` elementwise, as a bool tensor.
    public func notEquals(_ other: Tensor) throws -> Tensor { try compare(.ne, other) }
    /// `self == value` elementwise, as a bool tensor.
    public func equals(_ value: Double) throws -> Tensor { try compare(.eq, value) }
}

// MARK: - Reductions

extension Tensor {
    /// The largest value over `dims` (all when nil), as `torch.amax`; ties share the gradient.
    public func max(dims: [Int]? = nil, keepdim: Bool = false) throws -> Tensor {
        Tensor(try Reductions.extreme(impl, dims: dims, keepdim: keepdim, largest: true))
    }
    /// The smallest value over `dims` (all when nil), as `torch.amin`.
    public func min(dims: [Int]? = nil, keepdim: Bool = false) throws -> Tensor {
        Tensor(try Reductions.extreme(impl, dims: dims, keepdim: keepdim, largest: false))
    }
    /// The largest value along `dim` and its index (int64), as `torch.max(x, dim)`.
    public func max(dim: Int, keepdim: Bool = false) throws -> (values: Tensor, indices: Tensor) {
        let (v, i) = try Reductions.extremeWithIndices(impl, dim: dim, keepdim: keepdim, largest: true)
        return (Tensor(v), Tensor(i))
    }
    /// The smallest value along `dim` and its index (int64), as `torch.min(x, dim)`.
    public func min(dim: Int, keepdim: Bool = false) throws -> (values: Tensor, indices: Tensor) {
        let (v, i) = try Reductions.extremeWithIndices(impl, dim: dim, keepdim: keepdim, largest: false)
        return (Tensor(v), Tensor(i))
    }
    /// The index of the smallest value along `dim` (int64).
    public func argmin(dim: Int, keepdim: Bool = false) throws -> Tensor {
        Tensor(try Reductions.argExtreme(impl, dim: dim, keepdim: keepdim, largest: false))
    }
    /// The variance over `dims` (all when nil) with Bessel's `correction` (1: unbiased, as
    /// PyTorch's default); float32 under autocast.
    public func variance(dims: [Int]? = nil, correction: Double = 1, keepdim: Bool = false) throws -> Tensor {
        Tensor(try Reductions.variance(impl, dims: dims, correction: correction, keepdim: keepdim, root: false))
    }
    /// The standard deviation over `dims` (all when nil), with Bessel's `correction`.
    public func std(dims: [Int]? = nil, correction: Double = 1, keepdim: Bool = false) throws -> Tensor {
        Tensor(try Reductions.variance(impl, dims: dims, correction: correction, keepdim: keepdim, root: true))
    }
    /// log Σ exp(x) over `dims` (all when nil), computed stably; float32 under autocast.
    public func logsumexp(dims: [Int]? = nil, keepdim: Bool = false) throws -> Tensor {
        Tensor(try Reductions.logsumexp(impl, dims: dims, keepdim: keepdim))
    }
}

// MARK: - Layers as functions

extension Tensor {
    /// Zeroes each element with probability `p` and scales the rest by 1/(1-p) when
    /// `training`; the identity otherwise. Draws from the generator `manualSeed` seeds.
    public func dropout(p: Double = 0.5, training: Bool = true) throws -> Tensor {
        try swiftSpelled { Tensor(try Activations.dropout(impl, p: p, training: training)) }
    }

    /// 1-D convolution of [N, C, L] (or [C, L]) input with [O, C/groups, k] weights.
    public func conv1d(
        _ weight: Tensor, bias: Tensor? = nil, stride: Int = 1, padding: Int = 0, dilation: Int = 1, groups: Int = 1
    ) throws -> Tensor {
        Tensor(
            try Convolution.conv1d(
                impl, weight.impl, bias?.impl, stride: stride, padding: padding, dilation: dilation, groups: groups))
    }

    /// 2-D average pooling over `kernel` × `kernel` windows (stride defaults to the kernel).
    public func avgPool2d(_ kernel: Int, stride: Int? = nil, padding: Int = 0) throws -> Tensor {
        Tensor(
            try Convolution.avgPool2d(
                impl, kernel: (kernel, kernel), stride: (stride ?? kernel, stride ?? kernel), padding: (padding, padding),
                ceilMode: false, countIncludePad: true, divisorOverride: nil))
    }

    /// Averages of [N, C, H, W] input over a grid of `outputSize` cells.
    public func adaptiveAvgPool2d(_ outputSize: (Int, Int)) throws -> Tensor {
        Tensor(try Convolution.adaptiveAvgPool2d(impl, outputSize: outputSize))
    }
}

/// Attention: softmax(query · keyᵀ · scale + mask) · value, as PyTorch's
/// `scaled_dot_product_attention`, for query [..., L, E], key [..., S, E] and value
/// [..., S, Ev]; the products run in lower precision under autocast, the softmax in float32.
///
/// - Parameters:
///   - mask: a bool mask, true where attention is allowed, or a floating one added to the
///     scores; broadcast to [..., L, S].
///   - isCausal: masks out the positions after each query's (not with `mask`).
///   - scale: the factor of the scores; nil means 1/√E.
///   - dropout: the probability of dropping an attention weight, in [0, 1).
/// - Returns: the output [..., L, Ev].
public func scaledDotProductAttention(
    query: Tensor, key: Tensor, value: Tensor, mask: Tensor? = nil, isCausal: Bool = false, scale: Double? = nil,
    dropout: Double = 0
) throws -> Tensor {
    try swiftSpelled {
        Tensor(
            try Attention.attention(
                query.impl, key.impl, value.impl, mask: mask?.impl, causal: isCausal, scale: scale, dropout: dropout,
                needWeights: false
            ).0)
    }
}

/// Rows of `weight` ([numEmbeddings, dim]) at the integer `indices` (any shape):
/// [*indices.shape, dim]. The `paddingIndex` row, when given, receives no gradient.
public func embedding(_ indices: Tensor, weight: Tensor, paddingIndex: Int? = nil) throws -> Tensor {
    try swiftSpelled { Tensor(try Indexing.embedding(weight.impl, indices.impl, paddingIndex: paddingIndex)) }
}

/// Batch normalisation of [N, C, *] input, computed in float32 and returned in the input's
/// dtype. In training, normalises with the batch's statistics and writes the updated running
/// statistics (with `momentum`, the variance unbiased) into `runningMean` and `runningVar`, in
/// place; otherwise normalises with them.
public func batchNorm(
    _ input: Tensor, runningMean: Tensor?, runningVar: Tensor?, weight: Tensor? = nil, bias: Tensor? = nil,
    training: Bool, momentum: Double = 0.1, eps: Double = 1e-5
) throws -> Tensor {
    try swiftSpelled {
        let (y, m, v) = try Normalization.batchNorm(
            input.impl, runningMean: runningMean?.impl, runningVar: runningVar?.impl, weight: weight?.impl,
            bias: bias?.impl, training: training, momentum: momentum, eps: eps)
        if let m, let v, let runningMean, let runningVar {
            try GradMode.with(false) {
                try runningMean.copy(from: Tensor(m))
                try runningVar.copy(from: Tensor(v))
            }
        }
        return Tensor(y)
    }
}
