/// A tensor for Swift callers: a shape, a dtype, a device and the engine's storage. Ops return
/// new tensors (views share storage); the in-place forms (`copy(from:)`, `fill(_:)`, an
/// optimizer's `step()`) write into the storage, where every view sees the values. Ops throw
/// `LucidError` instead of trapping, so operators are used with `try`.
///
/// ```swift
/// import LucidEngine
/// let x = try Tensor.randn([8, 4], device: .metal)
/// let w = try Tensor.randn([2, 4], device: .metal)
/// let y = try withAutocast(.metal) { try x.linear(w) }   // y.dtype == .float16
/// print(try y.toArray())
/// ```
public struct Tensor: @unchecked Sendable, CustomStringConvertible {
    let impl: TensorImpl

    init(_ impl: TensorImpl) { self.impl = impl }

    public var shape: [Int] { impl.shape }
    public var strides: [Int] { impl.strides }
    public var dtype: DType { impl.dtype }
    public var device: Device { impl.device }
    public var ndim: Int { impl.ndim }
    public var numel: Int { impl.numel }
    public var isContiguous: Bool { impl.isContiguous }

    public var description: String { "Tensor(shape: \(shape), dtype: \(dtype), device: \(device))" }

    // MARK: Creation

    /// A tensor holding `values` (row-major) with `shape`, converted to `dtype` (rounding to
    /// nearest even for the 16-bit floats).
    public init(_ values: [Float], shape: [Int], dtype: DType = .float32, device: Device = .cpu) throws {
        let t = try values.withUnsafeBytes { try Conversion.fromHost($0, shape: shape, dtype: .float32, device: device) }
        impl = try Ops.cast(t, to: dtype)
    }

    /// An int64 tensor holding `values`, converted to `dtype`.
    public init(integers values: [Int64], shape: [Int], dtype: DType = .int64, device: Device = .cpu) throws {
        let t = try values.withUnsafeBytes { try Conversion.fromHost($0, shape: shape, dtype: .int64, device: device) }
        impl = try Ops.cast(t, to: dtype)
    }

    public static func full(_ shape: [Int], _ value: Double, dtype: DType = .float32, device: Device = .cpu) throws -> Tensor {
        Tensor(try Creation.full(shape, value: ScalarOperand(float: value), dtype: dtype, device: device))
    }
    public static func zeros(_ shape: [Int], dtype: DType = .float32, device: Device = .cpu) throws -> Tensor {
        try full(shape, 0, dtype: dtype, device: device)
    }
    public static func ones(_ shape: [Int], dtype: DType = .float32, device: Device = .cpu) throws -> Tensor {
        try full(shape, 1, dtype: dtype, device: device)
    }
    public static func arange(_ start: Double, _ end: Double, step: Double = 1, dtype: DType = .float32, device: Device = .cpu) throws -> Tensor {
        Tensor(try Creation.arange(start: start, end: end, step: step, dtype: dtype, device: device))
    }
    /// Uniform samples in [0, 1) from the seedable global generator (`manualSeed`).
    public static func rand(_ shape: [Int], dtype: DType = .float32, device: Device = .cpu) throws -> Tensor {
        Tensor(try Creation.rand(shape, dtype: dtype, device: device))
    }
    /// Standard normal samples from the seedable global generator (`manualSeed`).
    public static func randn(_ shape: [Int], dtype: DType = .float32, device: Device = .cpu) throws -> Tensor {
        Tensor(try Creation.randn(shape, dtype: dtype, device: device))
    }

    /// Reseeds the generator behind `rand` and `randn`.
    public static func manualSeed(_ seed: UInt64) { Random.manualSeed(seed) }

    // MARK: Reading values

    /// The elements, row-major, converted to Float.
    public func toArray() throws -> [Float] {
        let f = try Ops.contiguous(try Ops.cast(impl, to: .float32))
        var out = [Float](repeating: 0, count: f.numel)
        try out.withUnsafeMutableBytes { try Conversion.toHost(f, $0) }
        return out
    }

    /// The single element of a one-element tensor.
    public func item() throws -> Float {
        guard numel == 1 else { throw LucidError.value("item: expected a tensor with one element, got shape \(shape)") }
        return try toArray()[0]
    }

    // MARK: Conversion

    public func to(_ dtype: DType) throws -> Tensor { Tensor(try Conversion.to(impl, dtype: dtype, device: nil)) }
    public func to(_ device: Device) throws -> Tensor { Tensor(try Conversion.to(impl, dtype: nil, device: device)) }

    // MARK: Ops

    public static func + (a: Tensor, b: Tensor) throws -> Tensor { Tensor(try Elementwise.binary(.add, a.impl, b.impl)) }
    public static func - (a: Tensor, b: Tensor) throws -> Tensor { Tensor(try Elementwise.binary(.sub, a.impl, b.impl)) }
    public static func * (a: Tensor, b: Tensor) throws -> Tensor { Tensor(try Elementwise.binary(.mul, a.impl, b.impl)) }
    public static func / (a: Tensor, b: Tensor) throws -> Tensor { Tensor(try Elementwise.binary(.div, a.impl, b.impl)) }
    public static func + (a: Tensor, s: Double) throws -> Tensor { try a.scalar(.add, s, first: false) }
    public static func - (a: Tensor, s: Double) throws -> Tensor { try a.scalar(.sub, s, first: false) }
    public static func * (a: Tensor, s: Double) throws -> Tensor { try a.scalar(.mul, s, first: false) }
    public static func / (a: Tensor, s: Double) throws -> Tensor { try a.scalar(.div, s, first: false) }
    public static func + (s: Double, a: Tensor) throws -> Tensor { try a.scalar(.add, s, first: true) }
    public static func - (s: Double, a: Tensor) throws -> Tensor { try a.scalar(.sub, s, first: true) }
    public static func * (s: Double, a: Tensor) throws -> Tensor { try a.scalar(.mul, s, first: true) }
    public static func / (s: Double, a: Tensor) throws -> Tensor { try a.scalar(.div, s, first: true) }
    public static prefix func - (a: Tensor) throws -> Tensor { Tensor(try Elementwise.unary(.neg, a.impl)) }

    private func scalar(_ k: BinaryKernel, _ s: Double, first: Bool) throws -> Tensor {
        Tensor(try Elementwise.binary(k, impl, scalar: ScalarOperand(float: s), scalarFirst: first))
    }

    /// torch.matmul semantics (vectors, matrices, broadcast batches). Lower precision under autocast.
    public func matmul(_ other: Tensor) throws -> Tensor { Tensor(try LinearAlgebra.matmul(impl, other.impl)) }
    /// `self @ weight.T + bias`. Lower precision under autocast.
    public func linear(_ weight: Tensor, bias: Tensor? = nil) throws -> Tensor {
        Tensor(try LinearAlgebra.linear(impl, weight.impl, bias?.impl))
    }
    public func relu() throws -> Tensor { Tensor(try Elementwise.unary(.relu, impl)) }
    /// Sum over `dims` (all when nil). float32 for low-precision input under autocast.
    public func sum(dims: [Int]? = nil, keepdim: Bool = false) throws -> Tensor {
        Tensor(try Reductions.reduce(.sum, impl, dims: dims, keepdim: keepdim))
    }
    public func mean(dims: [Int]? = nil, keepdim: Bool = false) throws -> Tensor {
        Tensor(try Reductions.reduce(.mean, impl, dims: dims, keepdim: keepdim))
    }
    public func reshape(_ shape: [Int]) throws -> Tensor { Tensor(try ShapeOps.reshape(impl, shape)) }
    public func view(_ shape: [Int]) throws -> Tensor { Tensor(try ShapeOps.view(impl, shape)) }
    public func transpose(_ d0: Int, _ d1: Int) throws -> Tensor { Tensor(try ShapeOps.transpose(impl, d0, d1)) }
    public func permute(_ dims: [Int]) throws -> Tensor { Tensor(try ShapeOps.permute(impl, dims)) }
    public func contiguous() throws -> Tensor { Tensor(try Ops.contiguous(impl)) }
    /// A new tensor: this one with `values` written at the rows `index` names along the first
    /// dimension (added there with `accumulate`), torch's `index_put` with one index tensor.
    /// A row named twice takes its last write unless `accumulate`. Gradients flow to both.
    public func indexPut(_ index: Tensor, _ values: Tensor, accumulate: Bool = false) throws -> Tensor {
        Tensor(try Indexing.assign(impl, [.tensor(index.impl)], values.impl, accumulate: accumulate))
    }

    // MARK: In place

    /// Writes `source` (broadcast to this shape, converted to this dtype and moved to this
    /// device) into this tensor's elements, in its storage: a buffer update. Every tensor that
    /// views the storage sees the values. Only where autograd records nothing (grad mode off,
    /// or neither tensor requires gradients).
    public func copy(from source: Tensor) throws {
        try checkUnrecorded("copy(from:)", source.impl)
        _ = try InPlace.assign(impl, source.impl, base: nil, op: "copy(from:)")
    }

    /// Sets every element to `value`, in place (an expanded view's shared elements included).
    /// Only where autograd records nothing.
    public func fill(_ value: Double) throws {
        try checkUnrecorded("fill(_:)", nil)
        _ = try InPlace.fill(impl, ScalarOperand(float: value), base: nil, op: "fill(_:)")
    }

    private func checkUnrecorded(_ op: String, _ source: TensorImpl?) throws {
        if GradMode.isEnabled && (impl.requiresGrad || source?.requiresGrad == true) {
            throw LucidError.runtime(
                "\(op): an in-place write that autograd would record is not available from Swift; make it under GradMode.with(false), or "
                    + "use the functional ops"
            )
        }
    }

    // MARK: Autograd

    /// Whether gradients flow to this tensor.
    public var requiresGrad: Bool { impl.requiresGrad }
    /// The op that produced this tensor in the backward graph (nil for a leaf).
    public var gradFn: String? { impl.gradFn?.name }
    /// A leaf with the same values that requires gradients (floating-point only).
    public func requiringGrad(_ flag: Bool = true) throws -> Tensor {
        if flag && !dtype.isFloatingPoint {
            throw LucidError.type("only floating-point tensors can require gradients, got \(dtype)")
        }
        return Tensor(impl.withRequiresGrad(flag))
    }
    /// The same values cut from the graph.
    public func detach() -> Tensor { Tensor(impl.withRequiresGrad(false)) }
    /// The gradient accumulated into this leaf by `backward`, or nil.
    public var grad: Tensor? { Autograd.grad(of: impl).map(Tensor.init) }
    /// Clears this leaf's gradient.
    public func zeroGrad() throws { try Autograd.setGrad(of: impl, to: nil) }
    /// Accumulates d(self)/d(leaf) into every leaf's `grad` (`gradient` defaults to 1 for a
    /// one-element tensor).
    public func backward(_ gradient: Tensor? = nil, retainGraph: Bool = false) throws {
        try swiftSpelled { try Autograd.backward(impl, grad: gradient?.impl, retainGraph: retainGraph) }
    }

    /// Calls `hook` with this tensor's gradient each time a backward pass computes it (for a
    /// leaf, before it is accumulated into `grad`); a tensor it returns replaces the gradient
    /// (same shape, dtype and device). Hooks run in the order they were registered; an error one
    /// throws fails the backward pass. The tensor must require gradients.
    @discardableResult
    public func registerHook(_ hook: @escaping (Tensor) throws -> Tensor?) throws -> HookHandle {
        HookHandle(try Hooks.register(impl) { g in try hook(Tensor(g))?.impl })
    }

    /// Calls `hook` with this leaf once a backward pass has accumulated its gradient into `grad`.
    @discardableResult
    public func registerPostAccumulateGradHook(_ hook: @escaping (Tensor) throws -> Void) throws -> HookHandle {
        HookHandle(try Hooks.registerPostAccumulate(impl) { t in try hook(Tensor(t)) })
    }

    /// Makes this op result keep its gradient in `grad` during backward passes, as a leaf does.
    public func retainGrad() throws { try swiftSpelled { try Hooks.retainGrad(impl) } }
    /// Whether this op result keeps its gradient (`retainGrad()`).
    public var retainsGrad: Bool { Hooks.retainsGrad(impl) }

    /// The gradients of `outputs` (weighted by `gradOutputs`; nil: 1 for a one-element output)
    /// with respect to `inputs`, leaving every `grad` as it is; nil for an input the outputs do
    /// not depend on (an error unless `allowUnused`).
    public static func gradients(
        of outputs: [Tensor], withRespectTo inputs: [Tensor], gradOutputs: [Tensor?]? = nil,
        retainGraph: Bool = false, allowUnused: Bool = false
    ) throws -> [Tensor?] {
        try swiftSpelled {
            try Autograd.gradients(
                of: outputs.map(\.impl), gradOutputs?.map { $0?.impl } ?? outputs.map { _ in nil },
                wrt: inputs.map(\.impl), retainGraph: retainGraph, allowUnused: allowUnused
            )
            .map { $0.map(Tensor.init) }
        }
    }
}

/// What registering a gradient hook returns: `remove()` unregisters the hook.
public final class HookHandle: @unchecked Sendable {
    private let key: UInt64
    init(_ key: UInt64) { self.key = key }
    /// Unregisters the hook; false when it was already gone.
    @discardableResult
    public func remove() -> Bool { Hooks.remove(key) }
}

// MARK: - Layers and losses for Swift callers

extension Tensor {
    public func gelu() throws -> Tensor { Tensor(try Elementwise.unary(.gelu, impl)) }
    public func tanh() throws -> Tensor { Tensor(try Elementwise.unary(.tanh, impl)) }
    public func exp() throws -> Tensor { Tensor(try Elementwise.unary(.exp, impl)) }
    public func log() throws -> Tensor { Tensor(try Elementwise.unary(.log, impl)) }
    /// Softmax along `dim`; float32 under autocast.
    public func softmax(dim: Int) throws -> Tensor { Tensor(try Activations.softmax(impl, dim: dim)) }
    public func logSoftmax(dim: Int) throws -> Tensor { Tensor(try Activations.logSoftmax(impl, dim: dim)) }
    /// Index of the max along `dim` (int64).
    public func argmax(dim: Int, keepdim: Bool = false) throws -> Tensor {
        Tensor(try Reductions.argExtreme(impl, dim: dim, keepdim: keepdim, largest: true))
    }
    /// Elementwise equality as a bool tensor.
    public func equals(_ other: Tensor) throws -> Tensor { Tensor(try Comparison.compare(.eq, impl, other.impl)) }
    public func layerNorm(_ normalizedShape: [Int], weight: Tensor? = nil, bias: Tensor? = nil, eps: Double = 1e-5) throws -> Tensor {
        Tensor(try Normalization.layerNorm(impl, normalizedShape: normalizedShape, weight: weight?.impl, bias: bias?.impl, eps: eps))
    }
    /// 2-D convolution of [N, C, H, W] input with [O, C/groups, kh, kw] weights.
    public func conv2d(
        _ weight: Tensor, bias: Tensor? = nil, stride: Int = 1, padding: Int = 0, dilation: Int = 1,
        groups: Int = 1
    ) throws -> Tensor {
        Tensor(
            try Convolution.conv2d(
                impl, weight.impl, bias?.impl, stride: (stride, stride), padding: (padding, padding),
                dilation: (dilation, dilation), groups: groups))
    }
    public func maxPool2d(_ kernel: Int, stride: Int? = nil) throws -> Tensor {
        Tensor(
            try Convolution.maxPool2d(
                impl, kernel: (kernel, kernel), stride: (stride ?? kernel, stride ?? kernel),
                padding: (0, 0), dilation: (1, 1), ceilMode: false))
    }
}

/// Cross-entropy of logits [N, C] against int64 class indices [N] (mean over the batch);
/// float32 under autocast.
public func crossEntropy(_ logits: Tensor, _ target: Tensor, labelSmoothing: Double = 0) throws -> Tensor {
    try swiftSpelled {
        Tensor(
            try Losses.crossEntropy(
                logits.impl, target.impl, weight: nil, ignoreIndex: -100, reduction: .mean,
                labelSmoothing: labelSmoothing))
    }
}

/// Mean squared error; float32 under autocast.
public func mseLoss(_ input: Tensor, _ target: Tensor) throws -> Tensor {
    Tensor(try Losses.mse(input.impl, target.impl, reduction: .mean))
}
