/// A function called with a tensor's gradient each time backward computes it; a result other
/// than nil replaces the gradient (same shape, dtype and device).
package typealias GradHook = (TensorImpl) throws -> TensorImpl?
/// A function called with a leaf once backward has accumulated its gradient into `grad`.
package typealias PostAccumulateHook = (TensorImpl) throws -> Void

/// The hooks of one tensor. An op result's are held by its graph node, so that they run on the
/// gradient of the value the tensor had when they were registered (a later in-place write gives
/// the tensor a new node) and live as long as the graph that needs them; a leaf's are held by
/// the leaf. Mutated under `Hooks.lock` only.
final class HookList: @unchecked Sendable {
    var grad: [(key: UInt64, hook: GradHook)] = []
    var postAccumulate: [(key: UInt64, hook: PostAccumulateHook)] = []
    /// The op result whose gradient is kept in its `grad` (`retain_grad`). Weak: the tensor
    /// holds the node that holds this list.
    weak var retained: TensorImpl?

    deinit {
        let keys = grad.map(\.key) + postAccumulate.map(\.key)
        if !keys.isEmpty { Hooks.forget(keys) }
    }
}

/// Registration and removal of gradient hooks (PyTorch's `Tensor.register_hook`,
/// `register_post_accumulate_grad_hook` and `retain_grad`), and their calls during backward.
package enum Hooks {
    static let lock = Lock()

    private final class WeakList {
        weak var list: HookList?
        init(_ list: HookList) { self.list = list }
    }

    nonisolated(unsafe) private static var lastKey: UInt64 = 0
    /// Where each registered hook is, by key, for `remove`.
    nonisolated(unsafe) private static var owners: [UInt64: WeakList] = [:]

    /// The hook list of `t` (its node's, or its own for a leaf), made on first use. Under `lock`.
    private static func list(of t: TensorImpl) -> HookList {
        if let node = t.gradFn {
            if let l = node.hooks { return l }
            let l = HookList()
            node.hooks = l
            return l
        }
        if let l = t.hooks { return l }
        let l = HookList()
        t.hooks = l
        return l
    }

    private static func newKey(for list: HookList) -> UInt64 {
        lastKey &+= 1
        owners[lastKey] = WeakList(list)
        return lastKey
    }

    /// Registers `hook` on the gradient of `t`, after the hooks it already has; returns the key
    /// that removes it. `t` must require gradients.
    package static func register(_ t: TensorImpl, _ hook: @escaping GradHook) throws -> UInt64 {
        guard t.requiresGrad else {
            throw LucidError.runtime("cannot register a hook on a tensor that doesn't require gradient")
        }
        return lock.withLock {
            let l = list(of: t)
            let key = newKey(for: l)
            l.grad.append((key, hook))
            return key
        }
    }

    /// Registers `hook` to run once backward has accumulated the gradient of the leaf `t` into
    /// its `grad`; returns the key that removes it.
    package static func registerPostAccumulate(_ t: TensorImpl, _ hook: @escaping PostAccumulateHook) throws -> UInt64 {
        guard t.requiresGrad else {
            throw LucidError.runtime("cannot register a hook on a tensor that doesn't require gradient")
        }
        guard t.isLeaf else {
            throw LucidError.runtime("post accumulate grad hooks cannot be registered on non-leaf tensors")
        }
        return lock.withLock {
            let l = list(of: t)
            let key = newKey(for: l)
            l.postAccumulate.append((key, hook))
            return key
        }
    }

    /// Unregisters the hook `key`; false when it is already gone (removed, or its tensor's
    /// graph freed).
    @discardableResult
    package static func remove(_ key: UInt64) -> Bool {
        // The hook is dropped after the lock is released: dropping it may call back into the
        // caller (a C client's release), which may take the lock again.
        var dropped: [Any] = []
        var holder: HookList?  // so that the list, if this is its last reference, goes after the lock
        let found = lock.withLock { () -> Bool in
            holder = owners.removeValue(forKey: key)?.list
            guard let l = holder else { return false }
            if let i = l.grad.firstIndex(where: { $0.key == key }) {
                dropped.append(l.grad.remove(at: i).hook)
                return true
            }
            if let i = l.postAccumulate.firstIndex(where: { $0.key == key }) {
                dropped.append(l.postAccumulate.remove(at: i).hook)
                return true
            }
            return false
        }
        dropped.removeAll()
        holder = nil
        return found
    }

    /// Forgets the keys of a hook list that is going away.
    static func forget(_ keys: [UInt64]) {
        lock.withLock { for k in keys { owners.removeValue(forKey: k) } }
    }

    /// Makes the op result `t` keep its gradient in `grad` from now on (a leaf keeps it anyway).
    package static func retainGrad(_ t: TensorImpl) throws {
        guard t.requiresGrad else {
            throw LucidError.runtime("can't retain_grad on Tensor that has requires_grad=False")
        }
        guard !t.isLeaf else { return }
        lock.withLock { list(of: t).retained = t }
    }

    /// Whether `t` keeps its gradient as an op result (`retain_grad`).
    package static func retainsGrad(_ t: TensorImpl) -> Bool {
        guard let node = t.gradFn else { return false }
        return lock.withLock { node.hooks?.retained === t }
    }

    /// The hooks of a leaf go with its values when another tensor takes its place (`t.data =
    /// value` makes a new engine tensor behind the same handle).
    package static func transfer(from old: TensorImpl, to new: TensorImpl) {
        guard old.isLeaf, new.isLeaf, new.requiresGrad else { return }
        lock.withLock {
            if let l = old.hooks, new.hooks == nil { new.hooks = l }
        }
    }

    // MARK: Calls during backward

    /// The hooks of a node (nil when it has none).
    static func of(_ node: GradNode) -> HookList? { lock.withLock { node.hooks } }
    /// The hooks of a leaf (nil when it has none).
    static func of(leaf t: TensorImpl) -> HookList? { lock.withLock { t.hooks } }

    /// `g` after the gradient hooks of `list`, in registration order, each given the previous
    /// one's result. A replacement must keep the gradient's shape, dtype and device.
    static func apply(_ list: HookList?, to g: TensorImpl) throws -> TensorImpl {
        guard let list else { return g }
        // A snapshot: a hook may register or remove hooks while it runs.
        let hooks = lock.withLock { list.grad }
        var g = g
        for (_, hook) in hooks {
            guard let r = try hook(g) else { continue }
            guard r.shape == g.shape else {
                throw LucidError.runtime("hook has changed the size of value: the gradient has shape \(g.shape), the hook returned shape \(r.shape)")
            }
            guard r.dtype == g.dtype else {
                throw LucidError.runtime("hook has changed the type of value (was \(g.dtype.name) got \(r.dtype.name))")
            }
            guard r.device == g.device else {
                throw LucidError.runtime("hook has changed the device of value (was \(g.device) got \(r.device))")
            }
            g = r
        }
        return g
    }

    /// The op result that keeps the gradient reaching `list`'s node, if any.
    static func retained(_ list: HookList?) -> TensorImpl? {
        guard let list else { return nil }
        return lock.withLock { list.retained }
    }

    /// Runs the post-accumulate hooks of the leaf `t`.
    static func afterAccumulation(_ t: TensorImpl) throws {
        let hooks = lock.withLock { t.hooks?.postAccumulate ?? [] }
        for (_, hook) in hooks { try hook(t) }
    }
}
