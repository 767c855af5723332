/// The base class of every layer: it holds parameters, buffers and sub-modules by name, in the
/// order they were registered, as PyTorch's `torch.nn.Module` does, so that `stateDict()` has
/// PyTorch's keys (`encoder.0.weight`, `bn.running_mean`) and a Python `state_dict()` maps onto
/// it one to one.
///
/// A layer registers its tensors in its initialiser (`registerParameter`, `registerBuffer`,
/// `registerModule`) and computes in `forward(_:)`; calling the module (`try model(x)`) runs
/// `forward` inside the module's call: its `autocastPolicy` applied, and its path recorded for
/// a live `inspect` scope.
///
/// ```swift
/// let model = Sequential(try Linear(4, 8), ReLU(), try Linear(8, 2))
/// let y = try model(try Tensor.randn([3, 4]))
/// print(model.stateDict().keys.sorted())   // ["0.bias", "0.weight", "2.bias", "2.weight"]
/// ```
open class Module {
    private var parameterSlots: [(name: String, tensor: Tensor?)] = []
    private var bufferSlots: [(name: String, tensor: Tensor?, persistent: Bool)] = []
    private var moduleSlots: [(name: String, module: Module)] = []

    /// Whether the module is in training mode (`train()`) or evaluation mode (`eval()`):
    /// dropout and batch norm behave differently in each.
    public private(set) var training = true

    /// The precision this module's forward runs in inside any autocast scope: nil (the
    /// default: its ops follow the scope's policies), `.float32`, `.float16` or `.bfloat16`.
    ///
    /// With `.float32`, inside a scope its floating tensor inputs are cast to float32 on entry
    /// and its forward runs with autocast off, so its outputs are float32. With `.float16` or
    /// `.bfloat16`, its inputs are cast to that dtype and its forward runs in an autocast scope
    /// of that dtype. Outside autocast it changes nothing. Another dtype makes the next call
    /// throw.
    public var autocastPolicy: DType?

    public init() {}

    // MARK: Registration

    /// Registers `tensor` (nil: an empty slot, as a layer without a bias has) as the parameter
    /// `name`, or replaces the one registered under that name.
    /// - Throws: `LucidError` (`.value`) for an empty name, one with a ".", or one a buffer or
    ///   sub-module already has.
    public func registerParameter(_ name: String, _ tensor: Tensor?) throws {
        try checkName(name, "parameter", taken: bufferSlots.contains { $0.name == name } || moduleSlots.contains { $0.name == name })
        if let i = parameterSlots.firstIndex(where: { $0.name == name }) {
            parameterSlots[i].tensor = tensor
        } else {
            parameterSlots.append((name, tensor))
        }
    }

    /// Registers `tensor` as the buffer `name`: state that is not a parameter (running
    /// statistics), moved by `to(_:)` and, when `persistent`, saved by `stateDict()`.
    /// - Throws: `LucidError` (`.value`) for an empty name, one with a ".", or one a parameter
    ///   or sub-module already has.
    public func registerBuffer(_ name: String, _ tensor: Tensor?, persistent: Bool = true) throws {
        try checkName(name, "buffer", taken: parameterSlots.contains { $0.name == name } || moduleSlots.contains { $0.name == name })
        if let i = bufferSlots.firstIndex(where: { $0.name == name }) {
            bufferSlots[i] = (name, tensor, persistent)
        } else {
            bufferSlots.append((name, tensor, persistent))
        }
    }

    /// Registers `module` as the sub-module `name`, or replaces the one registered under it.
    /// - Throws: `LucidError` (`.value`) for an empty name, one with a ".", or one a parameter
    ///   or buffer already has.
    public func registerModule(_ name: String, _ module: Module) throws {
        try checkName(name, "module", taken: parameterSlots.contains { $0.name == name } || bufferSlots.contains { $0.name == name })
        if let i = moduleSlots.firstIndex(where: { $0.name == name }) {
            moduleSlots[i].module = module
        } else {
            moduleSlots.append((name, module))
        }
    }

    private func checkName(_ name: String, _ what: String, taken: Bool) throws {
        if name.isEmpty || name.contains(".") {
            throw LucidError.value("\(what) name must be a non-empty string without '.', got \"\(name)\"")
        }
        if taken { throw LucidError.value("\(typeName): attribute \"\(name)\" already exists") }
    }

    /// The parameter registered directly on this module as `name` (nil for an empty slot or an
    /// unknown name).
    public func parameter(_ name: String) -> Tensor? {
        parameterSlots.first { $0.name == name }?.tensor
    }

    /// The buffer registered directly on this module as `name` (nil for an empty slot or an
    /// unknown name).
    public func buffer(_ name: String) -> Tensor? {
        bufferSlots.first { $0.name == name }?.tensor
    }

    /// The direct sub-module `name`, or nil.
    public func child(_ name: String) -> Module? {
        moduleSlots.first { $0.name == name }?.module
    }

    /// The sub-module at the dotted path `path` (`"encoder.layers.3"`); `""` is this module.
    /// - Throws: `LucidError` (`.value`) naming the first part that is not a sub-module.
    public func submodule(_ path: String) throws -> Module {
        var module: Module = self
        for part in path.split(separator: ".", omittingEmptySubsequences: false) where !path.isEmpty {
            guard let next = module.child(String(part)) else {
                throw LucidError.value("\(module.typeName) has no submodule `\(part)` (looking up \"\(path)\")")
            }
            module = next
        }
        return module
    }

    // MARK: Traversal

    /// The direct sub-modules with their names, in registration order.
    public var namedChildren: [(String, Module)] { moduleSlots.map { ($0.name, $0.module) } }

    /// This module and every sub-module below it, each with its dotted path ("" for this one),
    /// depth first in registration order. A module registered twice is listed once.
    public func namedModules() -> [(String, Module)] {
        var out: [(String, Module)] = []
        var seen = Set<ObjectIdentifier>()
        // An explicit work list: a deep model does not grow the call stack.
        var pending: [(String, Module)] = [("", self)]
        while let (path, m) = pending.popLast() {
            guard seen.insert(ObjectIdentifier(m)).inserted else { continue }
            out.append((path, m))
            for (name, c) in m.moduleSlots.reversed() { pending.append((path.isEmpty ? name : "\(path).\(name)", c)) }
        }
        return out
    }

    /// Every parameter with its dotted name (`"0.weight"`), in PyTorch's order: this module's
    /// own, then each sub-module's. A tensor registered in two places is listed once.
    public func namedParameters() -> [(String, Tensor)] {
        var out: [(String, Tensor)] = []
        var seen = Set<ObjectIdentifier>()
        for (path, m) in namedModules() {
            for (name, t) in m.parameterSlots {
                guard let t, seen.insert(ObjectIdentifier(t.impl)).inserted else { continue }
                out.append((path.isEmpty ? name : "\(path).\(name)", t))
            }
        }
        return out
    }

    /// Every parameter, in the order of `namedParameters()`: what an optimizer takes.
    public func parameters() -> [Tensor] { namedParameters().map(\.1) }

    /// Every buffer with its dotted name, persistent or not.
    public func namedBuffers() -> [(String, Tensor)] {
        namedModules().flatMap { path, m in
            m.bufferSlots.compactMap { slot in slot.tensor.map { (path.isEmpty ? slot.name : "\(path).\(slot.name)", $0) } }
        }
    }

    /// Every buffer, in the order of `namedBuffers()`.
    public func buffers() -> [Tensor] { namedBuffers().map(\.1) }

    // MARK: State

    /// A parameter or persistent buffer of the state dict: its dotted name and the tensor.
    private struct StateEntry {
        let key: String
        let tensor: Tensor
    }

    /// Each parameter and persistent buffer with its dotted name, module by module: a module's
    /// parameters, then its persistent buffers.
    private func namedState() -> [StateEntry] {
        var out: [StateEntry] = []
        for (path, m) in namedModules() {
            let key = { (name: String) in path.isEmpty ? name : "\(path).\(name)" }
            for s in m.parameterSlots { if let t = s.tensor { out.append(StateEntry(key: key(s.name), tensor: t)) } }
            for s in m.bufferSlots where s.persistent { if let t = s.tensor { out.append(StateEntry(key: key(s.name), tensor: t)) } }
        }
        return out
    }

    /// The keys of `stateDict()`, in PyTorch's order (each module's parameters, then its
    /// persistent buffers, module by module).
    public func stateDictKeys() -> [String] { namedState().map(\.key) }

    /// Every parameter and persistent buffer by its dotted name (`"bn.running_mean"`), detached
    /// and sharing storage with the module's own tensors. `stateDictKeys()` gives the order.
    public func stateDict() -> [String: Tensor] {
        Dictionary(namedState().map { ($0.key, $0.tensor.detach()) }, uniquingKeysWith: { a, _ in a })
    }

    /// Copies `state` into the parameters and buffers, in place (each value converted to the
    /// tensor's dtype and moved to its device), so optimizers that hold the parameters see the
    /// loaded values.
    ///
    /// - Parameters:
    ///   - state: tensors by dotted name, as `stateDict()` gives them or a checkpoint holds them.
    ///   - strict: when true, a key the module has and `state` lacks, or one `state` has and the
    ///     module lacks, is an error; when false they are skipped and returned.
    /// - Returns: the missing keys and the unexpected keys.
    /// - Throws: `LucidError` (`.value`) naming the keys, with `strict`, and naming the key and
    ///   both shapes for a shape mismatch (strict or not). Nothing is copied when it throws.
    @discardableResult
    public func loadStateDict(_ state: [String: Tensor], strict: Bool = true) throws -> (missingKeys: [String], unexpectedKeys: [String]) {
        let own = namedState()
        let ownKeys = Set(own.map(\.key))
        let missing = own.map(\.key).filter { state[$0] == nil }
        let unexpected = state.keys.filter { !ownKeys.contains($0) }.sorted()
        if strict && !(missing.isEmpty && unexpected.isEmpty) {
            var parts: [String] = []
            if !missing.isEmpty { parts.append("missing keys \(missing)") }
            if !unexpected.isEmpty { parts.append("unexpected keys \(unexpected)") }
            throw LucidError.value("loadStateDict(_:strict:): \(parts.joined(separator: ", ")) (pass strict: false to skip them)")
        }
        for entry in own {
            guard let v = state[entry.key] else { continue }
            if v.shape != entry.tensor.shape {
                throw LucidError.value(
                    "loadStateDict(_:strict:): \"\(entry.key)\" has shape \(v.shape) in the state dict, the module's has \(entry.tensor.shape)")
            }
        }
        try GradMode.with(false) {
            for entry in own {
                guard let v = state[entry.key] else { continue }
                try entry.tensor.copy(from: v)
            }
        }
        return (missing, unexpected)
    }

    // MARK: Modes

    /// Sets training mode (`mode` true) or evaluation mode on this module and every sub-module;
    /// returns this module.
    @discardableResult
    public func train(_ mode: Bool = true) -> Self {
        for (_, m) in namedModules() { m.training = mode }
        return self
    }

    /// Sets evaluation mode on this module and every sub-module; returns this module.
    @discardableResult
    public func eval() -> Self { train(false) }

    /// Makes every parameter require gradients (`true`) or freezes them (`false`), as
    /// PyTorch's `requires_grad_`. The parameters keep their storage; an optimizer made before
    /// holds the earlier tensors, so make it after freezing, from the parameters that still
    /// require gradients.
    /// - Throws: `LucidError` (`.type`) when unfreezing a parameter that is not floating-point.
    @discardableResult
    public func requiresGrad(_ flag: Bool = true) throws -> Self {
        for (_, m) in namedModules() {
            for i in m.parameterSlots.indices {
                guard let t = m.parameterSlots[i].tensor, t.requiresGrad != flag else { continue }
                m.parameterSlots[i].tensor = try t.requiringGrad(flag)
            }
        }
        return self
    }

    /// Freezes every parameter: `requiresGrad(false)`.
    @discardableResult
    public func freeze() throws -> Self { try requiresGrad(false) }

    /// Makes every parameter require gradients again: `requiresGrad(true)`.
    @discardableResult
    public func unfreeze() throws -> Self { try requiresGrad(true) }

    /// Clears every parameter's gradient.
    public func zeroGrad() throws { for p in parameters() { try p.zeroGrad() } }

    /// Moves the parameters and buffers to `device` and/or converts the floating ones to
    /// `dtype` (integer buffers such as `num_batches_tracked` keep theirs); returns this module.
    /// Parameters keep whether they require gradients. Optimizers made before hold the earlier
    /// tensors: make them after moving the module.
    /// - Throws: `LucidError` (`.type`) for a dtype that is not floating-point, or one the
    ///   device cannot hold.
    @discardableResult
    public func to(device: Device? = nil, dtype: DType? = nil) throws -> Self {
        if let dtype, !dtype.isFloatingPoint {
            throw LucidError.type("Module.to(device:dtype:) only accepts floating-point dtypes, got \(dtype)")
        }
        func moved(_ t: Tensor) throws -> Tensor {
            var r = t
            if let dtype, t.dtype.isFloatingPoint, t.dtype != dtype { r = try r.to(dtype) }
            if let device, t.device != device { r = try r.to(device) }
            return r.impl === t.impl ? t : Tensor(r.impl.withRequiresGrad(t.requiresGrad))
        }
        for (_, m) in namedModules() {
            for i in m.parameterSlots.indices { if let t = m.parameterSlots[i].tensor { m.parameterSlots[i].tensor = try moved(t) } }
            for i in m.bufferSlots.indices { if let t = m.bufferSlots[i].tensor { m.bufferSlots[i].tensor = try moved(t) } }
        }
        return self
    }

    // MARK: Calling

    /// The computation of a module of one input and one output. A layer overrides it; callers
    /// call the module itself (`try layer(x)`), which runs it under the module's policy.
    open func forward(_ input: Tensor) throws -> Tensor {
        throw LucidError.runtime("\(typeName) does not define forward(_:); call it with the arguments its own callAsFunction takes")
    }

    /// Runs `forward(_:)` as this module's call (see `call(_:_:)`).
    public func callAsFunction(_ input: Tensor) throws -> Tensor {
        try call([input]) { try self.forward($0[0]) }
    }

    /// Runs `body` as a call of this module, on `inputs`: inside an autocast scope with an
    /// `autocastPolicy`, the floating inputs cast to that precision and the body run in it; and
    /// while an inspection is live, the ops recorded under this module's path. A layer whose
    /// forward takes several tensors calls its body through this.
    public func call<R>(_ inputs: [Tensor], _ body: ([Tensor]) throws -> R) throws -> R {
        let inspecting = AutocastInspection.liveCount > 0
        if inspecting { ModuleCalls.enter(self) }
        defer { if inspecting { ModuleCalls.exit() } }
        guard let precision = autocastPolicy else { return try swiftSpelled { try body(inputs) } }
        guard [DType.float32, .float16, .bfloat16].contains(precision) else {
            throw LucidError.value("autocastPolicy must be nil, .float32, .float16 or .bfloat16, got .\(precision)")
        }
        let devices = Device.allCases.filter { Autocast.isEnabled($0) }
        if devices.isEmpty { return try swiftSpelled { try body(inputs) } }
        let cast = try inputs.map { $0.dtype.isFloatingPoint && $0.dtype != precision ? try $0.to(precision) : $0 }
        let scopes = try devices.map {
            precision == .float32 ? try AutocastGuard($0, enabled: false) : try AutocastGuard($0, dtype: precision)
        }
        defer { for s in scopes.reversed() { try? s.close() } }
        return try swiftSpelled { try body(cast) }
    }

    /// The class's name, for messages (`Linear`).
    public var typeName: String { String(describing: type(of: self)) }
}

/// The calling thread's module calls in progress while an inspection is live, and the path of
/// each, which the inspection records its ops under.
enum ModuleCalls {
    static func enter(_ module: Module) {
        let state = AMPRegistry.current()
        let path: String
        if let top = state.moduleCalls.last, let parent = top.module as? Module {
            let name = childName(parent, module)
            path = top.path.isEmpty ? name : "\(top.path).\(name)"
        } else {
            path = ""
        }
        state.moduleCalls.append((module, path))
        AutocastInspection.setModule(path)
    }

    static func exit() {
        guard let state = AMPRegistry.currentIfPresent(), !state.moduleCalls.isEmpty else { return }
        state.moduleCalls.removeLast()
        AutocastInspection.setModule(state.moduleCalls.last?.path ?? "")
    }

    /// The path of the module call in progress ("" for none).
    static var currentPath: String { AMPRegistry.currentIfPresent()?.moduleCalls.last?.path ?? "" }

    /// `child`'s dotted name under `parent` (a direct child, or one deeper), else its class name.
    private static func childName(_ parent: Module, _ child: Module) -> String {
        if let direct = parent.namedChildren.first(where: { $0.1 === child }) { return direct.0 }
        if let deeper = parent.namedModules().first(where: { $0.1 === child && !$0.0.isEmpty }) { return deeper.0 }
        return child.typeName
    }
}
