/// Optimizers for Swift callers. `step()` updates each parameter, and its state, in place:
/// the tensors given are the parameters, before and after. Each update is one engine call
/// per parameter, with PyTorch's rules.
///
/// ```swift
/// let opt = Adam([w, b], lr: 1e-2)
/// for _ in 0..<100 {
///     let loss = try crossEntropy(try x.linear(w, bias: b), labels)
///     try opt.zeroGrad()
///     try loss.backward()
///     try opt.step()
/// }
/// ```
public class Optimizer {
    /// The parameters (leaves that require gradients), in the order given.
    public let parameters: [Tensor]

    init(_ parameters: [Tensor]) throws {
        for (i, p) in parameters.enumerated() where !p.requiresGrad || p.gradFn != nil {
            throw LucidError.value("optimizer: parameter \(i) must be a leaf that requires gradients (use requiringGrad())")
        }
        self.parameters = parameters
    }

    /// Clears every parameter's gradient.
    public func zeroGrad() throws { for p in parameters { try p.zeroGrad() } }

    /// Updates every parameter that has a gradient, in place.
    public func step() throws {
        for i in parameters.indices {
            guard let g = parameters[i].grad else { continue }
            try update(i, parameters[i].impl, g.impl)
        }
    }

    func update(_ index: Int, _ param: TensorImpl, _ grad: TensorImpl) throws {
        throw LucidError.runtime("optimizer: subclasses implement update")
    }
}

/// Stochastic gradient descent with optional momentum, Nesterov and weight decay.
public final class SGD: Optimizer {
    public let lr: Double, momentum: Double, dampening: Double, weightDecay: Double, nesterov: Bool
    private var buffers: [TensorImpl?]

    public init(
        _ parameters: [Tensor], lr: Double, momentum: Double = 0, dampening: Double = 0, weightDecay: Double = 0,
        nesterov: Bool = false
    ) throws {
        self.lr = lr
        self.momentum = momentum
        self.dampening = dampening
        self.weightDecay = weightDecay
        self.nesterov = nesterov
        buffers = [TensorImpl?](repeating: nil, count: parameters.count)
        try super.init(parameters)
    }

    override func update(_ i: Int, _ param: TensorImpl, _ grad: TensorImpl) throws {
        let made = try Optimizers.sgd(
            param: param, grad: grad, momentumBuffer: buffers[i], lr: lr, momentum: momentum,
            dampening: dampening, weightDecay: weightDecay, nesterov: nesterov, maximize: false)
        if let made { buffers[i] = made }
    }
}

/// Adam, or AdamW when `decoupledWeightDecay` (weight decay applied to the parameter).
public final class Adam: Optimizer {
    public let lr: Double, beta1: Double, beta2: Double, eps: Double, weightDecay: Double, decoupled: Bool
    private var moments: [(TensorImpl, TensorImpl)?]
    /// Each parameter's step count, a float32 element on its device (made on its first step).
    private var steps: [TensorImpl?]

    public init(
        _ parameters: [Tensor], lr: Double = 1e-3, betas: (Double, Double) = (0.9, 0.999), eps: Double = 1e-8,
        weightDecay: Double = 0, decoupledWeightDecay: Bool = false
    ) throws {
        self.lr = lr
        (beta1, beta2) = betas
        self.eps = eps
        self.weightDecay = weightDecay
        decoupled = decoupledWeightDecay
        moments = [(TensorImpl, TensorImpl)?](repeating: nil, count: parameters.count)
        steps = [TensorImpl?](repeating: nil, count: parameters.count)
        try super.init(parameters)
    }

    override func update(_ i: Int, _ param: TensorImpl, _ grad: TensorImpl) throws {
        let step = try steps[i] ?? Creation.full([], value: ScalarOperand(float: 0), dtype: .float32, device: param.device)
        steps[i] = step
        moments[i] = try Optimizers.adam(
            param: param, grad: grad, m: moments[i]?.0, v: moments[i]?.1, step: step, lr: lr,
            beta1: beta1, beta2: beta2, eps: eps, weightDecay: weightDecay,
            decoupled: decoupled, maximize: false)
    }
}
