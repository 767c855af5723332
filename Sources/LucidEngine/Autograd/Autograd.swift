/// Records ops into the backward graph and runs backward passes.
package enum Autograd {
    static let lock = Lock()

    /// `out` recorded as the result of `name` applied to `inputs`, when grad mode is on and
    /// some input requires gradients; otherwise `out` itself. `rule` maps the gradient of the
    /// output to one gradient per input (nil where not needed). `saved` are the tensors whose
    /// values the rule reads (inputs, or `out` itself): backward refuses to run the rule once
    /// an in-place write has changed one of them.
    static func record(_ out: TensorImpl, _ name: String, _ inputs: [TensorImpl], saved: [TensorImpl?] = [],
                       savesNothing: Bool = false,
                       _ rule: @escaping (TensorImpl) throws -> [TensorImpl?]) -> TensorImpl {
        guard GradMode.isEnabled, inputs.contains(where: { $0.requiresGrad }) else { return out }
        let tracked = inputs.map { $0.requiresGrad ? GradNode.Edge($0) : nil }
        return out.tracked(by: GradNode(name: name, inputs: tracked, saved: saved.compactMap { $0.map(GradNode.Saved.init) },
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
        guard root.requiresGrad else {
            throw LucidError.runtime("backward: the tensor does not require grad and has no grad_fn")
        }
        let seed: TensorImpl
        if let grad {
            guard grad.shape == root.shape else {
                throw LucidError.value("backward: gradient shape \(grad.shape) does not match the tensor's shape \(root.shape)")
            }
            try Ops.checkSameDevice("backward", [root, grad])
            seed = try Ops.cast(grad, to: root.dtype)
        } else {
            guard root.numel == 1 else {
                throw LucidError.runtime("backward: grad can be implicitly created only for one-element outputs, got shape \(root.shape); pass a gradient")
            }
            seed = try Creation.full(root.shape, value: ScalarOperand(float: 1), dtype: root.dtype, device: root.device)
        }
        try Autocast.disabled { try GradMode.with(false) { try run(root, seed, retainGraph: retainGraph) } }
    }

    private static func run(_ root: TensorImpl, _ seed: TensorImpl, retainGraph: Bool) throws {
        guard let rootFn = root.gradFn else {  // backward on a leaf itself
            try accumulate(root, seed)
            return
        }
        // Nodes in reverse topological order, so each runs after every consumer has added
        // its contribution.
        var order: [GradNode] = []
        var visited = Set<ObjectIdentifier>()
        var stack: [(GradNode, Bool)] = [(rootFn, false)]
        while let (node, expanded) = stack.popLast() {
            if expanded { order.append(node); continue }
            guard visited.insert(ObjectIdentifier(node)).inserted else { continue }
            stack.append((node, true))
            for case let edge? in node.inputs {
                if let fn = edge.node, !visited.contains(ObjectIdentifier(fn)) { stack.append((fn, false)) }
            }
        }
        var pending: [ObjectIdentifier: TensorImpl] = [ObjectIdentifier(rootFn): seed]
        for node in order.reversed() {
            guard let g = pending.removeValue(forKey: ObjectIdentifier(node)) else { continue }
            let grads = try node.gradients(for: g)
            if !retainGraph { node.release() }
            for (edge, ig) in zip(node.inputs, grads) {
                guard let edge, let ig else { continue }
                let ig2 = try Ops.cast(ig, to: edge.dtype)
                if let fn = edge.node {
                    let key = ObjectIdentifier(fn)
                    pending[key] = try pending[key].map { try Elementwise.binary(.add, $0, ig2) } ?? ig2
                } else if let leaf = edge.leaf {
                    try accumulate(leaf, ig2)
                }
            }
        }
    }

    /// Adds `g` to a leaf's gradient, in place: the gradient stays one tensor, so whoever holds
    /// it (`g = p.grad`) sees every backward pass. The first gradient is a copy in storage of
    /// its own, since `g` may share storage with a tensor the program holds. The read, the add
    /// and the write happen under the lock, so backward passes on several threads that reach
    /// one leaf lose no contribution (the add runs with grad mode off and takes no lock of its
    /// own).
    private static func accumulate(_ leaf: TensorImpl, _ g: TensorImpl) throws {
        try lock.withLock {
            guard let existing = leaf.gradStorage else {
                leaf.gradStorage = try Ops.clone(g)
                return
            }
            let sum = try Elementwise.binary(.add, existing, g)
            existing.backend.copy(sum, into: existing)
            existing.storage.bumpVersion()
        }
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
