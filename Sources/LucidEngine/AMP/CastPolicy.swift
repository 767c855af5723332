/// How autocast treats an op's floating-point inputs (PyTorch's autocast op lists, adapted).
public enum CastPolicy: Int32, Sendable, CaseIterable, CustomStringConvertible {
    /// Keeps its inputs' dtypes (ordinary type promotion applies).
    case none = 0
    /// Casts float32 and 16-bit inputs to the autocast dtype (float64 stays): matmul, linear,
    /// conv, attention.
    case lowerPrecision = 1
    /// Casts float16/bfloat16 inputs to float32: softmax, norms, exp/log, reductions, losses.
    case float32 = 2
    /// Casts floating inputs to the widest floating input dtype: cat, stack, …
    case promote = 3

    public var description: String {
        switch self {
        case .none: return "none"
        case .lowerPrecision: return "lower_precision"
        case .float32: return "float32"
        case .promote: return "promote"
        }
    }
}

/// An op's declaration: its name (as the Python API spells it), its autocast policy, and
/// whether the CPU stream has a bfloat16 kernel for it (when not, a bfloat16 CPU scope runs
/// it in float32).
public struct OpInfo: Sendable {
    public let name: String
    public let policy: CastPolicy
    public let cpuBFloat16: Bool
    /// The name of its backward graph nodes: `matmul` -> `MatmulBackward`.
    let backwardName: String

    init(_ name: String, _ policy: CastPolicy, cpuBFloat16: Bool = true) {
        self.name = name
        self.policy = policy
        self.cpuBFloat16 = cpuBFloat16
        backwardName = name.prefix(1).uppercased() + name.dropFirst() + "Backward"
    }

    /// Applies this op's policy to `inputs`, then runs `body` on the cast inputs with autocast
    /// off: the ops a composite op is built from keep the dtypes its own policy chose.
    func run<R>(_ inputs: [TensorImpl], _ body: ([TensorImpl]) throws -> R) throws -> R {
        let cast = try autocast(inputs)
        let result = try Autocast.disabled { try body(cast) }
        // A tensor result is counted here; an op that returns more counts its output itself.
        if let t = result as? TensorImpl { try inspected(t) }
        return result
    }

    /// `result`, counted with this call's inputs by the live inspections when the call ran in
    /// a lower precision (`autocast` notes such a call while one is live).
    @discardableResult
    func inspected(_ result: TensorImpl) throws -> TensorImpl {
        if let state = AMPRegistry.currentIfPresent(), state.pendingInspection != nil {
            try state.finishInspection(name, result)
        }
        return result
    }

    /// Two operands through this op's policy; outside autocast, or for an op it leaves alone,
    /// they come back as they are without the arrays of the general form.
    func autocast(_ a: TensorImpl, _ b: TensorImpl) throws -> (TensorImpl, TensorImpl) {
        guard Autocast.castTarget(a.device) != nil else { return (a, b) }
        if effectivePolicy(a.device) == .none && AMPRegistry.currentIfPresent()?.inspections.isEmpty != false { return (a, b) }
        let cast = try autocast([a, b])
        return (cast[0], cast[1])
    }

    /// This op's policy on `device` for the calling thread: a live scope's override, or its
    /// declared one.
    func effectivePolicy(_ device: Device) -> CastPolicy {
        guard let state = AMPRegistry.currentIfPresent() else { return policy }
        let overrides = state.overrides(device)
        return overrides.isEmpty ? policy : overrides[name] ?? policy
    }

    /// Applies this op's autocast policy (or a live scope's override of it) to its inputs (all
    /// on one device).
    func autocast(_ inputs: [TensorImpl]) throws -> [TensorImpl] {
        guard let first = inputs.first, var target = Autocast.castTarget(first.device) else { return inputs }
        let policy = effectivePolicy(first.device)
        let inspecting = AMPRegistry.currentIfPresent().flatMap { $0.inspections.isEmpty ? nil : $0 }
        switch policy {
        case .none:
            // An op that keeps its inputs' dtypes runs in a lower precision when its result is in
            // one.
            if let inspecting, let low = inputs.first(where: { $0.dtype.isLowPrecision })?.dtype {
                inspecting.inspect(name, inputs, target: low, ifResultInTarget: true)
            }
            return inputs
        case .lowerPrecision:
            if first.device == .cpu && target == .bfloat16 && !cpuBFloat16 { target = .float32 }
            if target.isLowPrecision, let inspecting, inputs.contains(where: { $0.dtype.isFloatingPoint && $0.dtype != .float64 }) {
                inspecting.inspect(name, inputs, target: target)
            }
            // float64 is left alone, as PyTorch's autocast leaves it: only float32 and the
            // 16-bit floats are eligible.
            return try inputs.map { $0.dtype.isFloatingPoint && $0.dtype != .float64 ? try Autocast.cast($0, to: target) : $0 }
        case .float32:
            return try inputs.map { $0.dtype.isLowPrecision ? try Ops.cast($0, to: .float32) : $0 }
        case .promote:
            let floats = inputs.filter { $0.dtype.isFloatingPoint }.map(\.dtype)
            guard let widest = floats.dropFirst().reduce(floats.first, { acc, d in acc.map { DType.promote($0, d) } })
            else { return inputs }
            if widest.isLowPrecision, let inspecting { inspecting.inspect(name, inputs, target: widest) }
            return try inputs.map { $0.dtype.isFloatingPoint ? try Ops.cast($0, to: widest) : $0 }
        }
    }
}

/// Every op's declaration, for introspection (`lucid.amp.policy`).
public enum OpTable {
    public static let all: [OpInfo] = Ops.declarations

    private static let byName: [String: OpInfo] = Dictionary(all.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })

    /// The declaration of the op called `name`, or nil.
    public static func info(_ name: String) -> OpInfo? { byName[name] }
}
