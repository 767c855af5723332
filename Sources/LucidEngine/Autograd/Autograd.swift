/// Records ops into the backward graph and runs backward passes.
package enum Autograd {
    static let lock = Lock()

    /// `out` recorded as the result of `name` applied to `inputs`, when grad mode is on and
    /// some input requires gradients; otherwise `out` itself. `rule` maps the gradient of the
    /// output to one gradient per input (nil where not needed). `saved` are the tensors whose
    /// values the rule reads (inputs, or `out` itself): backward refuses to run the rule once
    /// an in-place write has changed one of them.
    static func record(
        _ out: TensorImpl, _ name: String, _ inputs: [TensorImpl], saved: [TensorImpl?] = [],
        savesNothing: Bool = false,
        _ rule: @escaping (TensorImpl) throws -> [TensorImpl?]
    ) -> TensorImpl {
        guard GradMode.isEnabled, inputs.contains(where: { $0.requiresGrad }) else { return out }
        let tracked = inputs.map { $0.requiresGrad ? GradNode.Edge($0) : nil }
        return out.tracked(
            by: GradNode(
                name: name, inputs: tracked, saved: saved.compactMap { $0.map(GradNode.Saved.init) },
                savesNothing: savesNothing, rule: rule))
    }

    /// Whether an op on these inputs is recorded: checked before building a backward rule,
    /// so that untracked ops allocate none.
    @inline(__always)
    static func tracks(_ a: TensorImpl, _ b: TensorImpl? = nil) -> Bool {
        (a.requiresGrad || b?.requiresGrad == true) && GradMode.isEnabled
    }

    /// The graph node name for an op: `matmul` -> `MatmulBackward`.
    @inline(__always)
    static func name(_ op: OpInfo) -> String { op.backwardName }

    /// The accumulated gradient of a leaf (nil when none has arrived).
    package static func grad(of t: TensorImpl) -> TensorImpl? { lock.withLock { t.gradStorage } }

    /// Replaces (or clears) a leaf's gradient.
    package static func setGrad(of t: TensorImpl, to g: TensorImpl?) throws {
        if let g {
            guard g.shape == t.shape else {
                throw LucidError.value("grad: shape \(g.shape) does not match the tensor's shape \(t.shape)")
            }
            guard g.dtype == t.dtype, g.device == t.device else {
                throw LucidError.type("grad: expected a \(t.dtype) gradient on \(t.device), got \(g.dtype) on \(g.device)")
            }
        }
        lock.withLock { t.gradStorage = g }
    }

    /// Backpropagates from `root`. `grad` defaults to 1 for a one-element root. Leaves that
    /// require gradients accumulate into `grad`; the graph's saved tensors are freed unless
    /// `retainGraph`. Runs with grad mode and autocast off, so its result is the same inside
    /// an autocast scope as outside it.
    package static func backward(_ root: TensorImpl, grad: TensorImpl?, retainGraph: Bool) throws {
        try backward([root], grads: [grad], retainGraph: retainGraph)
    }

    /// Backpropagates from several roots in one pass (PyTorch's `torch.autograd.backward`), each
    /// with its gradient (nil: 1 for a one-element root). With `inputs`, only those tensors
    /// accumulate gradients, an op result among them into its own `grad`.
    package static func backward(
        _ roots: [TensorImpl], grads: [TensorImpl?], retainGraph: Bool,
        inputs: [TensorImpl]? = nil
    ) throws {
        let seeds = try seeds(roots, grads, "backward")
        if let inputs { try checkDifferentiated(inputs, "backward") }
        try Autocast.disabled {
            try GradMode.with(false) { _ = try run(seeds, retainGraph: retainGraph, targets: inputs, accumulating: true) }
        }
    }

    /// The gradients of `outputs` (weighted by `gradOutputs`, nil: 1 for a one-element output)
    /// with respect to `inputs` (PyTorch's `torch.autograd.grad`); no `grad` changes. An input
    /// the outputs do not depend on gets nil, which is an error unless `allowUnused`.
    package static func gradients(
        of outputs: [TensorImpl], _ gradOutputs: [TensorImpl?], wrt inputs: [TensorImpl],
        retainGraph: Bool, allowUnused: Bool
    ) throws -> [TensorImpl?] {
        let seeds = try seeds(outputs, gradOutputs, "grad")
        try checkDifferentiated(inputs, "grad")
        let found = try Autocast.disabled {
            try GradMode.with(false) { try run(seeds, retainGraph: retainGraph, targets: inputs, accumulating: false) }
        }
        if !allowUnused, let i = found.firstIndex(where: { $0 == nil }) {
            throw LucidError.runtime(
                "grad: the differentiated tensor at index "
                    + "\(i) appears to not have been used in the graph. Set allow_unused=True if this is the desired behavior."
            )
        }
        return found
    }

    /// (root, gradient) pairs: each root requires grad; its gradient has its shape and device and
    /// is cast to its dtype, and defaults to 1 for a one-element root.
    private static func seeds(_ roots: [TensorImpl], _ grads: [TensorImpl?], _ op: String) throws -> [(TensorImpl, TensorImpl)] {
        guard !roots.isEmpty else { throw LucidError.value("\(op): no tensors to differentiate") }
        guard grads.count == roots.count else {
            throw LucidError.value("\(op): got \(grads.count) gradients for \(roots.count) tensors")
        }
        return try zip(roots, grads).enumerated().map { i, pair in
            let (root, grad) = pair
            let which = roots.count == 1 ? "the tensor" : "element \(i) of tensors"
            guard root.requiresGrad else {
                throw LucidError.runtime("\(op): \(which) does not require grad and has no grad_fn")
            }
            if let grad {
                guard grad.shape == root.shape else {
                    throw LucidError.value("\(op): gradient shape \(grad.shape) does not match the shape \(root.shape) of \(which)")
                }
                try Ops.checkSameDevice(op, [root, grad])
                return (root, try Ops.cast(grad, to: root.dtype))
            }
            guard root.numel == 1 else {
                throw LucidError.runtime(
                    "\(op): grad can be implicitly created only for one-element outputs, got shape \(root.shape) for \(which); pass a gradient")
            }
            return (root, try Creation.full(root.shape, value: ScalarOperand(float: 1), dtype: root.dtype, device: root.device))
        }
    }

    private static func checkDifferentiated(_ inputs: [TensorImpl], _ op: String) throws {
        guard !inputs.isEmpty else { throw LucidError.value("\(op): inputs is empty; pass the tensors to differentiate with respect to") }
        if let i = inputs.firstIndex(where: { !$0.requiresGrad }) {
            throw LucidError.runtime("\(op): the differentiated tensor at index \(i) does not require grad")
        }
    }

    private static func sum(_ a: TensorImpl?, _ b: TensorImpl) throws -> TensorImpl {
        guard let a else { return b }
        return try Elementwise.binary(.add, a, b)
    }

    /// One backward pass from `seeds`, run as PyTorch's engine runs one: each node once all its
    /// consumers have contributed, each tensor's hooks on its whole gradient, each leaf's
    /// gradient accumulated (then its post-accumulate hooks run) as soon as no node left can add
    /// to it. Without `targets`, every leaf reached accumulates. With them, only the nodes that
    /// lead to a target run, the targets' gradients are returned (nil where none arrived) and,
    /// when `accumulating`, added into their `grad`.
    private static func run(
        _ seeds: [(TensorImpl, TensorImpl)], retainGraph: Bool, targets: [TensorImpl]?,
        accumulating: Bool
    ) throws -> [TensorImpl?] {
        var pending: [ObjectIdentifier: TensorImpl] = [:]
        var leafPending: [ObjectIdentifier: (leaf: TensorImpl, grad: TensorImpl)] = [:]
        var roots: [GradNode] = []
        for (root, g) in seeds {
            if let fn = root.gradFn {
                let key = ObjectIdentifier(fn)
                if pending[key] == nil { roots.append(fn) }
                pending[key] = try sum(pending[key], g)
            } else {
                let key = ObjectIdentifier(root)
                leafPending[key] = (root, try sum(leafPending[key]?.grad, g))
            }
        }
        // Nodes in topological order (each after the nodes its inputs come from); backward runs
        // them in reverse, so each runs after every consumer has added its contribution. A
        // node's inputs are explored first to last, so that its last inputs come last in this
        // order and first in backward: for `linear(x, cast(w))` the weight's cast runs right
        // after the linear, not after everything that made x, and the weight's gradient is
        // ready (its post-accumulate hooks run) as early as under float32.
        var order: [GradNode] = []
        var visited = Set<ObjectIdentifier>()
        var stack: [(GradNode, Bool)] = roots.reversed().map { ($0, false) }
        while let (node, expanded) = stack.popLast() {
            if expanded { order.append(node); continue }
            guard visited.insert(ObjectIdentifier(node)).inserted else { continue }
            stack.append((node, true))
            for case let edge? in node.inputs.reversed() {
                if let fn = edge.node, !visited.contains(ObjectIdentifier(fn)) { stack.append((fn, false)) }
            }
        }

        var targetNodes: [ObjectIdentifier: [Int]] = [:], targetLeaves: [ObjectIdentifier: [Int]] = [:]
        for (i, t) in (targets ?? []).enumerated() {
            if let fn = t.gradFn {
                targetNodes[ObjectIdentifier(fn), default: []].append(i)
            } else {
                targetLeaves[ObjectIdentifier(t), default: []].append(i)
            }
        }
        var captured = [TensorImpl?](repeating: nil, count: targets?.count ?? 0)
        // With targets, a node's rule runs only when one of its inputs leads to a target.
        var leadsToTarget = Set<ObjectIdentifier>()
        if targets != nil {
            for node in order
            where node.inputs.contains(where: { edge in
                guard let edge else { return false }
                if let fn = edge.node {
                    let k = ObjectIdentifier(fn)
                    return leadsToTarget.contains(k) || targetNodes[k] != nil
                }
                return edge.leaf.map { targetLeaves[ObjectIdentifier($0)] != nil } ?? false
            }) {
                leadsToTarget.insert(ObjectIdentifier(node))
            }
        }
        func wanted(_ node: GradNode) -> Bool {
            targets == nil || leadsToTarget.contains(ObjectIdentifier(node)) || targetNodes[ObjectIdentifier(node)] != nil
        }
        func wanted(leaf: TensorImpl) -> Bool { targets == nil || targetLeaves[ObjectIdentifier(leaf)] != nil }

        // The step after which each leaf has all of its gradient.
        let sequence = Array(order.reversed())
        var finishing: [Int: [ObjectIdentifier]] = [:]
        var lastUse: [ObjectIdentifier: Int] = [:]
        var leaves: [ObjectIdentifier] = []  // in the order first reached, so that hooks run in a fixed order
        for (i, node) in sequence.enumerated() where targets == nil || leadsToTarget.contains(ObjectIdentifier(node)) {
            for case let edge? in node.inputs {
                guard let leaf = edge.leaf, wanted(leaf: leaf) else { continue }
                if lastUse.updateValue(i, forKey: ObjectIdentifier(leaf)) == nil { leaves.append(ObjectIdentifier(leaf)) }
            }
        }
        for leaf in leaves { if let i = lastUse[leaf] { finishing[i, default: []].append(leaf) } }

        // A leaf's whole gradient, taken out of `leafPending` so that the pass keeps no other
        // reference to it (see `accumulate`).
        func finish(_ key: ObjectIdentifier) throws {
            var g = leafPending[key]?.grad
            guard let leaf = leafPending.removeValue(forKey: key)?.leaf, g != nil, wanted(leaf: leaf) else { return }
            g = try Hooks.apply(Hooks.of(leaf: leaf), to: g!)
            for i in targetLeaves[key] ?? [] { captured[i] = g }
            if targets == nil || (accumulating && targetLeaves[key] != nil) {
                try accumulate(leaf, &g)
                try Hooks.afterAccumulation(leaf)
            }
        }

        // Leaves that are roots and that no node feeds.
        for (root, _) in seeds where root.gradFn == nil && lastUse[ObjectIdentifier(root)] == nil {
            try finish(ObjectIdentifier(root))
        }
        for (i, node) in sequence.enumerated() {
            let key = ObjectIdentifier(node)
            if var g = pending.removeValue(forKey: key), wanted(node) {
                let hooks = Hooks.of(node)
                g = try Hooks.apply(hooks, to: g)
                if let indices = targetNodes[key] {
                    for j in indices {
                        captured[j] = g
                        if accumulating, let t = targets?[j] { try accumulate(t, g) }
                    }
                } else if targets == nil, let kept = Hooks.retained(hooks) {
                    try accumulate(kept, g)
                }
                if targets == nil || leadsToTarget.contains(key) {
                    let grads = try node.gradients(for: g)
                    if !retainGraph { node.release() }
                    for (edge, ig) in zip(node.inputs, grads) {
                        guard let edge, let ig else { continue }
                        if let fn = edge.node {
                            guard wanted(fn) else { continue }
                            let k = ObjectIdentifier(fn)
                            pending[k] = try sum(pending[k], try Ops.cast(ig, to: edge.dtype))
                        } else if let leaf = edge.leaf, wanted(leaf: leaf) {
                            let k = ObjectIdentifier(leaf)
                            leafPending[k] = (leaf, try sum(leafPending[k]?.grad, try Ops.cast(ig, to: edge.dtype)))
                        }
                    }
                }
            }
            for k in finishing[i] ?? [] { try finish(k) }
        }
        return captured
    }

    /// Adds `g` to a leaf's gradient (or a retained op result's), in place: the gradient stays one tensor, so whoever holds
    /// it (`g = p.grad`) sees every backward pass. The first gradient is a copy in storage of
    /// its own, since `g` may share storage with a tensor the program holds. The read, the add
    /// and the write happen under the lock, so backward passes on several threads that reach
    /// one leaf lose no contribution (the add runs with grad mode off and takes no lock of its
    /// own).
    private static func accumulate(_ leaf: TensorImpl, _ g: TensorImpl) throws {
        var held: TensorImpl? = g
        try accumulate(leaf, &held)
    }

    /// `accumulate` for a gradient that `g` may be the pass's last reference to: when nothing
    /// else holds its values (`solelyHeld`), the first gradient is they themselves, as
    /// PyTorch's AccumulateGrad takes a gradient no one else holds; `g` may be nil after.
    private static func accumulate(_ leaf: TensorImpl, _ g: inout TensorImpl?) throws {
        try lock.withLock {
            guard let existing = leaf.gradStorage else {
                if let own = solelyHeld(&g) {
                    leaf.gradStorage = own
                } else if let g {
                    leaf.gradStorage = try Ops.clone(g)
                }
                return
            }
            guard let g else { return }
            let sum = try Elementwise.binary(.add, existing, g)
            existing.backend.copy(sum, into: existing)
            existing.storage.bumpVersion()
        }
    }

    /// A contiguous gradient's values as a tensor of their own, without a copy, when nothing
    /// else can reach them: `g` (set to nil) was the last reference to its tensor, that tensor
    /// the only one over its storage, and no alias shares the storage's buffer. Otherwise nil,
    /// with `g` a tensor of the same values and geometry as before.
    private static func solelyHeld(_ g: inout TensorImpl?) -> TensorImpl? {
        guard g?.isContiguous == true, g?.gradFn == nil, let shape = g?.shape, let strides = g?.strides,
            let offset = g?.offset, let dtype = g?.dtype, var storage = g?.storage
        else { return nil }
        g = nil
        let unique = isKnownUniquelyReferenced(&storage) && storage.hasNoAlias
        let values = TensorImpl(storage: storage, shape: shape, strides: strides, offset: offset, dtype: dtype)
        if unique { return values }
        g = values
        return nil
    }

    /// `g` summed down to `shape` (undoing broadcasting).
    static func reduce(_ g: TensorImpl, to shape: [Int]) throws -> TensorImpl {
        if g.shape == shape { return g }
        let lead = g.ndim - shape.count
        var dims = Array(0..<lead)
        for (i, s) in shape.enumerated() where s == 1 && g.shape[lead + i] != 1 { dims.append(lead + i) }
        let summed = dims.isEmpty ? g : try Reductions.reduce(.sum, g, dims: dims, keepdim: true)
        return try ShapeOps.reshape(summed, shape)
    }
}
