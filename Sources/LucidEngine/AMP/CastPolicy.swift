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
    /// Has no precision of its own, so no policy applies and none can be given: the views
    /// (`reshape`, `transpose`, …), whose result has its input's dtype and storage, and `to`,
    /// which converts to the dtype it is given.
    case view = 4

    public var description: String {
        switch self {
        case .none: return "none"
        case .lowerPrecision: return "lower_precision"
        case .float32: return "float32"
        case .promote: return "promote"
        case .view: return "view"
        }
    }
}

/// An op's declaration: its name (as the Python API spells it), its autocast policy, whether
/// it has float16/bfloat16 kernels at all (`lowPrecision`; LAPACK's decompositions do not) and
/// whether the CPU stream has a bfloat16 kernel for it (when not, a bfloat16 CPU scope runs it
/// in float32).
///
/// `run` is every op's one front door: the op's body is the closure it runs, so an op cannot
/// skip its policy, the overrides or the inspection. Inside the body autocast is off, so the
/// ops a composite op is built from (`clamp` from `maximum` and `minimum`) are neither cast nor
/// counted again: the call is cast and counted once, under the name the caller used.
public struct OpInfo: Sendable {
    public let name: String
    public let policy: CastPolicy
    public let lowPrecision: Bool
    public let cpuBFloat16: Bool
    /// The name of its backward graph nodes: `matmul` -> `MatmulBackward`.
    let backwardName: String

    init(_ name: String, _ policy: CastPolicy, lowPrecision: Bool = true, cpuBFloat16: Bool = true) {
        self.name = name
        self.policy = policy
        self.lowPrecision = lowPrecision
        self.cpuBFloat16 = lowPrecision && cpuBFloat16
        backwardName = name.prefix(1).uppercased() + name.dropFirst() + "Backward"
    }

    /// Runs the op: its effective policy (overrides included) applied to `inputs`, the call
    /// noted for the live inspections when it runs in a lower precision, then `body` on the
    /// cast inputs with autocast off (it records autograd and picks the backend's route), and
    /// its result counted. Outside autocast `body` runs on `inputs` as they are.
    @inline(__always)
    func run<R>(_ inputs: [TensorImpl], _ body: ([TensorImpl]) throws -> R) throws -> R {
        guard let first = inputs.first, Autocast.castTarget(first.device) != nil else { return try body(inputs) }
        let cast = try autocast(inputs)
        let result = try Autocast.disabled { try body(cast) }
        try inspected(result)
        return result
    }

    /// `run` for one operand, without the arrays of the general form outside autocast.
    @inline(__always)
    func run<R>(_ a: TensorImpl, _ body: (TensorImpl) throws -> R) throws -> R {
        guard Autocast.castTarget(a.device) != nil else { return try body(a) }
        return try run([a]) { try body($0[0]) }
    }

    /// `run` for two operands, without the arrays of the general form outside autocast.
    @inline(__always)
    func run<R>(_ a: TensorImpl, _ b: TensorImpl, _ body: (TensorImpl, TensorImpl) throws -> R) throws -> R {
        guard Autocast.castTarget(a.device) != nil else { return try body(a, b) }
        return try run([a, b]) { try body($0[0], $0[1]) }
    }

    /// Counts `result` (a tensor, or the first tensor of a tuple or array of results) with this
    /// call's inputs in the live inspections, when the call ran in a lower precision
    /// (`autocast` notes such a call while one is live).
    private func inspected<R>(_ result: R) throws {
        guard let state = AMPRegistry.currentIfPresent(), state.pendingInspection != nil,
            let t = Self.primary(result)
        else { return }
        try state.finishInspection(name, t)
    }

    private static func primary(_ result: Any) -> TensorImpl? {
        if let t = result as? TensorImpl { return t }
        if let ts = result as? [TensorImpl] { return ts.first }
        for child in Mirror(reflecting: result).children {
            if let t = child.value as? TensorImpl { return t }
            if case let t?? = child.value as? TensorImpl? { return t }
        }
        return nil
    }

    /// Throws unless an autocast scope may give this op `policy`: an op with no precision of its
    /// own takes no override, no op can be made a view, and an op without 16-bit kernels cannot
    /// be made to run in a lower precision.
    func check(override policy: CastPolicy) throws {
        if self.policy == .view {
            let why =
                name == "to"
                ? "it converts to the dtype it is given"
                : "it is a view: its result has its input's dtype and shares its storage"
            throw LucidError(
                .value, "autocast override: \(name) has no precision of its own (\(why)); override the op that computes its input instead")
        }
        if policy == .view {
            throw LucidError(
                .value, "autocast override: 'view' marks the ops with no precision of their own; it is not a policy \(name) can be given")
        }
        if policy == .lowerPrecision && !lowPrecision {
            throw LucidError(
                .value,
                "autocast override: "
                    + "\(name) has no float16 or bfloat16 kernel (it computes in float32 or float64), so it cannot run in a lower precision"
            )
        }
    }

    /// This op's policy on `device` for the calling thread: a live scope's override, or its
    /// declared one.
    func effectivePolicy(_ device: Device) -> CastPolicy {
        guard let state = AMPRegistry.currentIfPresent() else { return policy }
        let overrides = state.overrides(device)
        return overrides.isEmpty ? policy : overrides[name] ?? policy
    }

    private static func widestFloatingType(_ inputs: [TensorImpl]) -> DType? {
        let floats = inputs.lazy.map(\.dtype).filter(\.isFloatingPoint)
        return floats.dropFirst().reduce(floats.first) { acc, d in acc.map { DType.promote($0, d) } }
    }

    /// Applies this op's autocast policy (or a live scope's override of it) to its inputs (all
    /// on one device).
    private func autocast(_ inputs: [TensorImpl]) throws -> [TensorImpl] {
        guard let first = inputs.first, var target = Autocast.castTarget(first.device) else { return inputs }
        let policy = effectivePolicy(first.device)
        let inspecting = AMPRegistry.currentIfPresent().flatMap { $0.inspections.isEmpty ? nil : $0 }
        switch policy {
        case .view:
            return inputs
        case .none:
            // An op that keeps its inputs' dtypes computes in the widest of its floating ones (a
            // comparison too, though its result is bool): in a lower precision when that is one.
            if let inspecting, let widest = Self.widestFloatingType(inputs), widest.isLowPrecision {
                inspecting.inspect(name, inputs, target: widest)
            }
            return inputs
        case .lowerPrecision:
            if !lowPrecision || (target == .bfloat16 && first.device.entry.bfloat16KernelsDeclared && !cpuBFloat16) {
                target = .float32
            }
            if target.isLowPrecision, let inspecting, inputs.contains(where: { $0.dtype.isFloatingPoint && $0.dtype != .float64 }) {
                inspecting.inspect(name, inputs, target: target)
            }
            // float64 is left alone, as PyTorch's autocast leaves it: only float32 and the
            // 16-bit floats are eligible.
            return try inputs.map { $0.dtype.isFloatingPoint && $0.dtype != .float64 ? try Autocast.cast($0, to: target) : $0 }
        case .float32:
            return try inputs.map { $0.dtype.isLowPrecision ? try Ops.cast($0, to: .float32) : $0 }
        case .promote:
            guard let widest = Self.widestFloatingType(inputs) else { return inputs }
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
