/// The GPU stream's availability.
public enum Metal {
    /// True when Metal kernels serve the "metal" device; false where the host fallback serves
    /// it (Linux, CI, and any machine without Metal).
    public static var isAvailable: Bool { Backends.metalIsAvailable }

    /// Waits until every kernel queued on "metal" has finished (the Metal backend commits its
    /// open command buffer). Values are synchronised on their own whenever the host reads them;
    /// this is for timing and for handing buffers to other code. Nothing to do elsewhere.
    public static func synchronize() throws {
        try Backends.backend(for: .metal).synchronize()
    }

    /// One check of the Metal backend's self-test: a kernel on small inputs against the host.
    public struct SelfTestCheck: Sendable {
        public let op: String
        public let dtype: DType
        /// Largest |metal − host| / (1 + |host|) over the outputs.
        public let maxError: Double
        public let tolerance: Double
        public var passed: Bool { maxError <= tolerance }
    }

    /// Runs the Metal backend's self-test now and returns every check: each kernel the
    /// backend has, on small fixed inputs, compared with the host kernels. The same test runs
    /// once before the backend first serves "metal"; a failure keeps "metal" on the host
    /// fallback. Throws where there is no Metal backend.
    public static func selfTest() throws -> [SelfTestCheck] {
#if canImport(Metal) && !LUCID_NO_METAL
        guard let m = Backends.metalBackend else {
            throw LucidError.runtime("self_test: Metal is not available on this machine (no Metal device)")
        }
        return MetalSelfTest.run(m).map {
            SelfTestCheck(op: $0.op, dtype: $0.dtype, maxError: $0.maxError, tolerance: $0.tolerance)
        }
#else
        throw LucidError.runtime("self_test: this build of lucid has no Metal backend (Metal is not available on this platform)")
#endif
    }
}
