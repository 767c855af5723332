/// Kernels a device's backend declined and the host kernels ran instead, counted per op so
/// that nobody takes a host op for a GPU op (`lucid.metal.host_fallback_counts()`).
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

/// The kernels an op runs on its output's device: the backend's own for each family, or,
/// where the backend declines the family, the host kernels over the same memory once the
/// backend's queued work has finished. `op` names the op in the fallback counts; it is only
/// evaluated on a fallback.
extension TensorImpl {
    private func hostKernels(for op: () -> String) -> HostBackend {
        backend.synchronize()
        HostKernelFallbacks.record(op())
        return Backends.host
    }

    func elementwise(_ op: @autoclosure () -> String) -> any ElementwiseKernels {
        backend.elementwiseKernels ?? hostKernels(for: op)
    }

    func reduction(_ op: @autoclosure () -> String) -> any ReductionKernels {
        backend.reductionKernels ?? hostKernels(for: op)
    }

    func matmul(_ op: @autoclosure () -> String) -> any MatmulKernels {
        backend.matmulKernels ?? hostKernels(for: op)
    }

    func convolution(_ op: @autoclosure () -> String) -> any ConvolutionKernels {
        backend.convolutionKernels ?? hostKernels(for: op)
    }

    func pooling(_ op: @autoclosure () -> String) -> any PoolingKernels {
        backend.poolingKernels ?? hostKernels(for: op)
    }

    func indexing(_ op: @autoclosure () -> String) -> any IndexingKernels {
        backend.indexingKernels ?? hostKernels(for: op)
    }

    func optimizers(_ op: @autoclosure () -> String) -> any OptimizerKernels {
        backend.optimizerKernels ?? hostKernels(for: op)
    }
}
