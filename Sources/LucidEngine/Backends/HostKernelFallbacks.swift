/// Kernel calls that ran on the host kernels instead of their device's, counted per op so
/// that nobody takes a host op for a GPU op (`lucid.metal.host_fallback_counts()`). Every such
/// call goes through `TensorImpl.run`, which records it here.
package enum HostKernelFallbacks {
    private static let lock = Lock()
    nonisolated(unsafe) private static var counts: [String: Int] = [:]
    /// Op names in the order they first fell back, so that an index into them stays valid.
    nonisolated(unsafe) private static var order: [String] = []

    static func record(_ op: String) {
        lock.withLock {
            if counts[op] == nil { order.append(op) }
            counts[op, default: 0] += 1
        }
    }

    /// How many times any op has fallen back so far.
    package static var total: Int { lock.withLock { counts.values.reduce(0, +) } }

    /// How many ops have fallen back so far (each counted once, whatever its count).
    package static var entryCount: Int { lock.withLock { order.count } }

    /// The `index`th op to fall back and its count, or nil past the end.
    package static func entry(_ index: Int) -> (op: String, count: Int)? {
        lock.withLock {
            guard order.indices.contains(index) else { return nil }
            let op = order[index]
            return (op, counts[op] ?? 0)
        }
    }
}
