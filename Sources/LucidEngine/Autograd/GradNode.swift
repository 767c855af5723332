#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A node of the backward graph: the op that made a tensor, the inputs gradients flow to,
/// and the rule turning the output's gradient into theirs (nil entries for inputs that do
/// not require gradients). The rule is dropped once a backward pass has used it, unless the
/// graph is retained.
package final class GradNode: @unchecked Sendable {
    /// Where one input's gradient goes: the node that made it, or the leaf itself. A node
    /// keeps no reference to an intermediate input tensor, so an activation's memory is held
    /// only while a rule needs its values.
    struct Edge {
        let node: GradNode?
        let leaf: TensorImpl?
        let dtype: DType

        init(_ t: TensorImpl) {
            node = t.gradFn
            leaf = t.gradFn == nil ? t : nil
            dtype = t.dtype
        }
    }

    /// A tensor whose values the rule reads, and the version of its storage when it was saved.
    struct Saved {
        let storage: Storage
        let version: Int64
        let shape: [Int]
        let dtype: DType

        init(_ t: TensorImpl) {
            storage = t.storage
            version = t.storage.version
            shape = t.shape
            dtype = t.dtype
        }
    }

    package let name: String
    private(set) var inputs: [Edge?]
    private var rule: ((TensorImpl) throws -> [TensorImpl?])?
    private var saved: [Saved]
    /// A rule that saves no tensors (a dtype cast) is kept after backward: autocast's weight
    /// cache reuses a cast, and its node, across the graphs of one scope.
    let savesNothing: Bool
    /// The hooks registered on the tensor this node made (`Hooks`); guarded by `Hooks.lock`.
    var hooks: HookList?

    init(
        name: String, inputs: [Edge?], saved: [Saved] = [], savesNothing: Bool = false,
        rule: @escaping (TensorImpl) throws -> [TensorImpl?]
    ) {
        self.name = name
        self.inputs = inputs
        self.saved = saved
        self.savesNothing = savesNothing
        self.rule = rule
    }

    func gradients(for grad: TensorImpl) throws -> [TensorImpl?] {
        guard let rule else {
            throw LucidError.runtime(
                "backward through "
                    + "\(name) a second time: its saved tensors were freed after the first backward; pass retain_graph=True to the first call"
            )
        }
        for s in saved where s.storage.version != s.version {
            throw LucidError.runtime(
                "one of the variables needed for gradient computation has been modified by an inplace operation: "
                    + "[\(s.dtype.name) tensor of shape \(s.shape)], which \(name) saved, is at version \(s.storage.version); expected "
                    + "version \(s.version) instead. Hint: clone() it before changing it in place, or change it after backward"
            )
        }
        return try rule(grad)
    }

    /// What this node saved of `storage` is from now on `t` (the destination an in-place op's
    /// result was written into, at its version after the write). Only for a node just made,
    /// not yet seen by another thread.
    func resave(_ storage: Storage, as t: TensorImpl) {
        for i in saved.indices where saved[i].storage === storage { saved[i] = Saved(t) }
    }

    /// Freed without recursion: the nodes this one holds go to the thread's `GraphTeardown`
    /// list, and so do those of the nodes freed while its rule's captures are released, so a
    /// chain of any length is freed in a loop, not by one nested deinit per node.
    deinit {
        GraphTeardown.freeing { drain in
            for case let edge? in inputs { if let node = edge.node { drain.hold(node) } }
            inputs = []
            rule = nil
            saved = []
            hooks = nil
        }
    }

    func release() {
        if !savesNothing {
            rule = nil
            saved = []
        }
    }
}

/// Frees graphs iteratively. A node's deinit hands the nodes it held to the calling thread's
/// drain; the outermost deinit on the thread then releases them one by one, and each of those
/// hands over its own instead of freeing them in a nested call. The stack depth stays constant
/// whatever the graph's depth, on whichever thread frees it.
enum GraphTeardown {
    final class Drain {
        private var held: [GradNode] = []

        func hold(_ node: GradNode) { held.append(node) }

        fileprivate func run() {
            while let node = held.popLast() {
                withExtendedLifetime(node) {}  // the last reference may go here; its deinit adds to `held`
            }
        }
    }

    private static let key: pthread_key_t = {
        var k = pthread_key_t()
        pthread_key_create(&k, nil)
        return k
    }()

    /// Runs `body` with the thread's drain (made when none is running), then, on the outermost
    /// call, frees what was handed to it.
    static func freeing(_ body: (Drain) -> Void) {
        if let current = pthread_getspecific(key) {
            body(Unmanaged<Drain>.fromOpaque(current).takeUnretainedValue())
            return
        }
        let drain = Drain()
        pthread_setspecific(key, Unmanaged.passUnretained(drain).toOpaque())
        defer { pthread_setspecific(key, nil) }
        body(drain)
        drain.run()
    }
}
