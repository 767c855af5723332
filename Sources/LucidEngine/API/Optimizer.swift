/// Optimizers for Swift callers. `step()` updates each parameter, and its state, in place:
/// the tensors given are the parameters, before and after. Each update is one engine call
/// per parameter, with PyTorch's rules.
///
/// ```swift
/// let opt = try Adam([w, b], lr: 1e-2)
/// for _ in 0..<100 {
///     let loss = try crossEntropy(try x.linear(w, bias: b), labels)
///     try opt.zeroGrad()
///     try loss.backward()
///     try opt.step()
/// }
/// ```
///
/// `lr` may be changed between steps (a schedule such as `StepLR` sets it), and
/// `stateDict()` / `loadStateDict(_:)` save and restore the per-parameter state under
/// PyTorch's names, so that a checkpoint resumes training exactly.
public class Optimizer {
    /// The parameters (leaves that require gradients), in the order given.
    public let parameters: [Tensor]
    /// The learning rate of the next step (a finite non-negative number; checked by `step()`).
    public var lr: Double
    /// The rate a schedule started from (PyTorch's `initial_lr`): set by the first schedule
    /// made for this optimizer, kept by its state dict, needed to resume a schedule.
    public internal(set) var initialLR: Double?

    init(_ parameters: [Tensor], lr: Double) throws {
        for (i, p) in parameters.enumerated() where !p.requiresGrad || p.gradFn != nil {
            throw LucidError.value("optimizer: parameter \(i) must be a leaf that requires gradients (use requiringGrad())")
        }
        self.parameters = parameters
        self.lr = lr
    }

    /// Clears every parameter's gradient.
    public func zeroGrad() throws { for p in parameters { try p.zeroGrad() } }

    /// Updates every parameter that has a gradient, in place.
    public func step() throws { try step(skipIf: nil) }

    /// The step, skipped on the device when `found` (a float32 element on the parameters'
    /// device: GradScaler's found-inf flag) is set.
    func step(skipIf found: TensorImpl?) throws {
        for i in parameters.indices {
            guard let g = parameters[i].grad else { continue }
            try update(i, parameters[i].impl, g.impl, foundInf: found)
        }
    }

    func update(_ index: Int, _ param: TensorImpl, _ grad: TensorImpl, foundInf: TensorImpl?) throws {
        throw LucidError.runtime("optimizer: subclasses implement update")
    }

    // MARK: State

    /// The names of one parameter's state tensors, as PyTorch's state dict names them.
    var stateNames: [String] { [] }
    /// Parameter `index`'s state tensors, by name (absent before its first step).
    func state(_ index: Int) -> [String: TensorImpl] { [:] }
    /// Sets parameter `index`'s state (checked), or clears it with an empty dict.
    func setState(_ index: Int, _ state: [String: TensorImpl]) {}
    /// The dtype a state tensor must have for a parameter of `dtype`.
    func stateDType(_ name: String, parameter dtype: DType) -> DType { dtype }

    /// The optimizer's state as tensors, named as in PyTorch's state dict flattened with
    /// ".": `state.<i>.<name>` for parameter i's state (`step`, `exp_avg` and `exp_avg_sq`
    /// for Adam, `momentum_buffer` for SGD; parameters that have not stepped have none), and
    /// `param_groups.0.lr` (and `param_groups.0.initial_lr` once a schedule set it), float64
    /// scalars. The tensors are the optimizer's own (later steps
    /// change them), as PyTorch's are; `saveSafetensors` writes them.
    public func stateDict() throws -> [String: Tensor] {
        func scalar(_ v: Double) throws -> Tensor { Tensor(try Creation.full([], value: ScalarOperand(float: v), dtype: .float64, device: .cpu)) }
        var out = ["param_groups.0.lr": try scalar(lr)]
        if let initialLR { out["param_groups.0.initial_lr"] = try scalar(initialLR) }
        for i in parameters.indices {
            for (name, t) in state(i) { out["state.\(i).\(name)"] = Tensor(t.withRequiresGrad(false)) }
        }
        return out
    }

    /// Restores what `stateDict()` returned (or what Python's `lucid.save(optimizer.state_dict())`
    /// wrote, loaded with `loadSafetensors`): each parameter's state is copied to its device
    /// and dtype (a step count to float32); a parameter with no entries starts afresh. Refused,
    /// leaving the optimizer as it was: a name this optimizer does not have, a parameter
    /// index out of range, a partial state, a shape that differs from the parameter's.
    /// `param_groups.0.lr` and `param_groups.0.initial_lr` set `lr` and `initialLR` when present.
    public func loadStateDict(_ dict: [String: Tensor]) throws {
        var states = [[String: TensorImpl]](repeating: [:], count: parameters.count)
        var newLR: Double? = nil, newInitialLR: Double? = nil
        for (key, value) in dict {
            if key == "param_groups.0.lr" || key == "param_groups.0.initial_lr" {
                guard value.numel == 1 else { throw LucidError.value("loadStateDict: \(key) must have one element, got shape \(value.shape)") }
                let v = try value.item64()
                if key.hasSuffix(".lr") { newLR = v } else { newInitialLR = v }
                continue
            }
            if key.hasPrefix("param_groups.") { continue }  // hyperparameters Python keeps as metadata
            let parts = key.split(separator: ".", maxSplits: 2).map(String.init)
            guard parts.count == 3, parts[0] == "state", let i = Int(parts[1]), stateNames.contains(parts[2]) else {
                throw LucidError.value(
                    "loadStateDict: unexpected key '\(key)'; \(type(of: self)) keeps state.<index>.{\(stateNames.joined(separator: ","))} "
                        + "and param_groups.0.{lr,initial_lr}")
            }
            guard parameters.indices.contains(i) else {
                throw LucidError.index("loadStateDict: '\(key)' names parameter \(i), but the optimizer has \(parameters.count)")
            }
            let p = parameters[i].impl, name = parts[2]
            let wantShape = name == "step" ? [] : p.shape
            guard value.numel == (name == "step" ? 1 : p.numel), name == "step" || value.shape == wantShape else {
                throw LucidError.value("loadStateDict: '\(key)' has shape \(value.shape), parameter \(i) has \(p.shape)")
            }
            let converted = try Conversion.to(value.impl.withRequiresGrad(false), dtype: stateDType(name, parameter: p.dtype), device: p.device)
            states[i][name] = try Ops.clone(try ShapeOps.reshape(converted, wantShape))
        }
        for (i, s) in states.enumerated() where !s.isEmpty && Set(s.keys) != Set(stateNames) {
            let missing = stateNames.filter { s[$0] == nil }
            throw LucidError.value("loadStateDict: parameter \(i)'s state lacks \(missing.map { "state.\(i).\($0)" }.joined(separator: ", "))")
        }
        for (i, s) in states.enumerated() { setState(i, s) }
        if let newLR { lr = newLR }
        if let newInitialLR { initialLR = newInitialLR }
    }
}

extension Tensor {
    /// The single element as a Double (read as float64).
    fileprivate func item64() throws -> Double {
        let f = try Ops.contiguous(try Ops.cast(impl, to: .float64))
        var out = [Double](repeating: 0, count: 1)
        try out.withUnsafeMutableBytes { try Conversion.toHost(f, $0) }
        return out[0]
    }
}

/// Stochastic gradient descent with optional momentum, Nesterov and weight decay.
public final class SGD: Optimizer {
    public let momentum: Double, dampening: Double, weightDecay: Double, nesterov: Bool
    private var buffers: [TensorImpl?]

    public init(
        _ parameters: [Tensor], lr: Double, momentum: Double = 0, dampening: Double = 0, weightDecay: Double = 0,
        nesterov: Bool = false
    ) throws {
        self.momentum = momentum
        self.dampening = dampening
        self.weightDecay = weightDecay
        self.nesterov = nesterov
        buffers = [TensorImpl?](repeating: nil, count: parameters.count)
        try super.init(parameters, lr: lr)
    }

    override func update(_ i: Int, _ param: TensorImpl, _ grad: TensorImpl, foundInf: TensorImpl?) throws {
        let made = try Optimizers.sgd(
            param: param, grad: grad, momentumBuffer: buffers[i], foundInf: foundInf, lr: lr, momentum: momentum,
            dampening: dampening, weightDecay: weightDecay, nesterov: nesterov, maximize: false)
        if let made { buffers[i] = made }
    }

    override var stateNames: [String] { ["momentum_buffer"] }
    override func state(_ i: Int) -> [String: TensorImpl] { buffers[i].map { ["momentum_buffer": $0] } ?? [:] }
    override func setState(_ i: Int, _ state: [String: TensorImpl]) { buffers[i] = state["momentum_buffer"] }
}

/// Adam, or AdamW when `decoupledWeightDecay` (weight decay applied to the parameter).
public final class Adam: Optimizer {
    public let beta1: Double, beta2: Double, eps: Double, weightDecay: Double, decoupled: Bool
    private var moments: [(TensorImpl, TensorImpl)?]
    /// Each parameter's step count, a float32 element on its device (made on its first step).
    private var steps: [TensorImpl?]

    public init(
        _ parameters: [Tensor], lr: Double = 1e-3, betas: (Double, Double) = (0.9, 0.999), eps: Double = 1e-8,
        weightDecay: Double = 0, decoupledWeightDecay: Bool = false
    ) throws {
        (beta1, beta2) = betas
        self.eps = eps
        self.weightDecay = weightDecay
        decoupled = decoupledWeightDecay
        moments = [(TensorImpl, TensorImpl)?](repeating: nil, count: parameters.count)
        steps = [TensorImpl?](repeating: nil, count: parameters.count)
        try super.init(parameters, lr: lr)
    }

    override func update(_ i: Int, _ param: TensorImpl, _ grad: TensorImpl, foundInf: TensorImpl?) throws {
        let step = try steps[i] ?? Creation.full([], value: ScalarOperand(float: 0), dtype: .float32, device: param.device)
        steps[i] = step
        moments[i] = try Optimizers.adam(
            param: param, grad: grad, m: moments[i]?.0, v: moments[i]?.1, step: step, foundInf: foundInf, lr: lr,
            beta1: beta1, beta2: beta2, eps: eps, weightDecay: weightDecay,
            decoupled: decoupled, maximize: false)
    }

    override var stateNames: [String] { ["step", "exp_avg", "exp_avg_sq"] }
    override func state(_ i: Int) -> [String: TensorImpl] {
        guard let step = steps[i], let (m, v) = moments[i] else { return [:] }
        return ["step": step, "exp_avg": m, "exp_avg_sq": v]
    }
    override func setState(_ i: Int, _ state: [String: TensorImpl]) {
        steps[i] = state["step"]
        moments[i] = state["exp_avg"].flatMap { m in state["exp_avg_sq"].map { (m, $0) } }
    }
    override func stateDType(_ name: String, parameter dtype: DType) -> DType { name == "step" ? .float32 : dtype }
}
