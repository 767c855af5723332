/// Where the op layer makes its kernel calls: on the backend of the tensor it is called on
/// (the op's output, as a rule), as that backend routes each call (`Backend.route`).
extension TensorImpl {
    /// The route of `call` on this tensor's backend, with the family's kernels when it is
    /// native: a backend that does not conform to `K` declines the call
    /// (`KernelOp.whenDeclined`).
    private func resolve<K>(_: K.Type, _ call: KernelCall) -> (KernelRoute, K?) {
        let backend = backend
        let route = backend.route(call)
        guard route == .native else { return (route, nil) }
        // The host backend, the commonest, by a class check: its conformances are known here.
        if let host = backend as? HostBackend, let kernels = Self.hostKernels(host, K.self) { return (.native, kernels) }
        if let kernels = backend as? K { return (.native, kernels) }
        return (call.op.whenDeclined, nil)
    }

    /// The host kernels as the family `K`. A cast `host as? K` looks the conformance up in the
    /// runtime's tables at every call, a tenth of a small op; matching `K` against the
    /// families the host backend is known to have needs no lookup (the same existential, two
    /// words, made statically and reinterpreted as the identical type `K`).
    @inline(__always)
    private static func hostKernels<K>(_ host: HostBackend, _: K.Type) -> K? {
        @inline(__always)
        func known<P>(_: P.Type, _ kernels: P) -> K? { P.self == K.self ? unsafeBitCast(kernels, to: K.self) : nil }
        return known((any ElementwiseKernels).self, host) ?? known((any MatmulKernels).self, host)
            ?? known((any ReductionKernels).self, host) ?? known((any FusedElementwiseKernels).self, host)
            ?? known((any AMPKernels).self, host) ?? known((any IndexingKernels).self, host)
            ?? known((any PlacementKernels).self, host) ?? known((any SoftmaxKernels).self, host)
            ?? known((any NormalizationKernels).self, host) ?? host as? K
    }

    /// Runs `body` with the host kernels for a call routed to the host: the backend's queued
    /// work finishes first, operands in memory the host cannot address are staged through host
    /// copies for the call, and the call is counted under `name`. For an op with a
    /// composition, the host kernels' own route (asked over the staged operands) may leave it
    /// to be composed instead: nil, and nothing counted.
    private func onHostKernels<K, R>(
        _: K.Type, _ call: KernelCall, _ name: () -> String, composable: Bool,
        _ body: (K) throws -> R
    ) rethrows -> R? {
        backend.synchronize()
        return try HostStaging.run(call) {
            if composable, Backends.host.route(call) != .native { return nil }
            HostKernelFallbacks.record(name())
            guard let kernels = Backends.host as? K else {
                preconditionFailure("the host kernels lack \(K.self), routed to them for \(name())")
            }
            return try body(kernels)
        }
    }

    /// Makes one kernel call of family `K` (`ElementwiseKernels.self`, ...) for an op that has
    /// no composition: `body` gets the kernels that run it. `name` names the op in the
    /// fallback counts and is only evaluated on a fallback.
    func run<K, R>(
        _ family: K.Type, _ call: KernelCall, _ name: @autoclosure () -> String,
        _ body: (K) throws -> R
    ) rethrows -> R {
        let (route, kernels) = resolve(family, call)
        if route == .native, let kernels { return try body(kernels) }
        // Without a composition, the host kernels take every call.
        return try onHostKernels(family, call, name, composable: false, body)!
    }

    /// The same for an op the op layer can compose from other kernels: nil, and no kernel
    /// called, when the backend routes it to be composed.
    func runUnlessComposed<K, R>(
        _ family: K.Type, _ call: KernelCall, _ name: @autoclosure () -> String,
        _ body: (K) throws -> R
    ) rethrows -> R? {
        let (route, kernels) = resolve(family, call)
        switch route {
        case .compose: return nil
        case .native: if let kernels { return try body(kernels) }
        case .host: break
        }
        return try onHostKernels(family, call, name, composable: true, body)
    }
}
