/// The GPU stream's availability.
public enum Metal {
    /// True when Metal kernels serve the "metal" device; false where the host fallback serves
    /// it (Linux, CI, and any machine without Metal).
    public static var isAvailable: Bool { Backends.metalIsAvailable }

    /// Waits until every kernel queued on "metal" has finished (the Metal backend commits its
    /// open command buffer). Values are synchronised on their own whenever the host reads them;
    /// this is for timing and for handing buffers to other code. Nothing to do elsewhere.
    /// An index out of range that a kernel found on the GPU is raised here, or at whichever
    /// read comes first (set LUCID_METAL_SYNC=1 to have it raised by the op itself).
    public static func synchronize() throws {
        let backend = try Backends.backend(for: .metal)
        backend.synchronize()
        if let error = backend.takeDeferredError() { throw error }
    }

    /// What the Metal backend has done since the process started: command buffers committed,
    /// host waits for GPU work, dispatches per kernel, new `MTLBuffer`s, bytes cached, host
    /// fallbacks and kernel-library compiles. All zero where no Metal backend serves "metal".
    public struct Stats: Sendable, Equatable {
        /// Command buffers committed.
        public var commandBuffers = 0
        /// Times the host waited for queued GPU work (a read, a host kernel, a synchronize).
        public var hostWaits = 0
        /// Dispatches by kernel name (a Metal Performance Shaders product as "mps_matmul").
        public var dispatches: [String: Int] = [:]
        /// `MTLBuffer`s made rather than served from the cache.
        public var newBuffers = 0
        /// Bytes of freed buffers held for reuse.
        public var cachedBytes = 0
        /// Ops that ran on the host kernels over the device's memory.
        public var hostFallbacks = 0
        /// Kernel libraries compiled from source, one per kernel family, compiled or not: each
        /// once, when "metal" is first used (none for a family whose library compiled ahead of
        /// time was loaded).
        public var libraryCompiles = 0
    }

    public static var stats: Stats {
        #if canImport(Metal) && !LUCID_NO_METAL
        if let m = Backends.metalBackend { return m.stats }
        #endif
        return Stats(hostFallbacks: HostKernelFallbacks.total)
    }

    /// One of the Metal backend's kernel libraries, one per kernel family, made when "metal" is
    /// first used: `origin` is "prebuilt" (the library compiled ahead of time that a macOS wheel
    /// carries, loaded) or "source" (compiled at run time from the source embedded in the
    /// engine); `detail` is the prebuilt library's path, or why a family was compiled from source
    /// although a folder of prebuilt libraries exists ("" when there is none); `error` is why the
    /// library failed (its family then runs on the host), "" otherwise.
    public struct KernelLibrary: Sendable, Equatable {
        public let family: String
        public let origin: String
        public let detail: String
        public let error: String
    }

    /// The Metal backend's kernel libraries, made (and the backend readied) at the first call if
    /// "metal" has not been used yet; empty where no Metal backend exists.
    public static var kernelLibraries: [KernelLibrary] {
        #if canImport(Metal) && !LUCID_NO_METAL
        _ = Backends.metalIsAvailable  // readies "metal" as its first use does
        if let m = Backends.metalBackend {
            return m.kernelLibraries.map {
                KernelLibrary(family: $0.family.rawValue, origin: $0.origin.rawValue, detail: $0.detail, error: $0.error ?? "")
            }
        }
        #endif
        return []
    }

    /// One check of the Metal backend's self-test: a kernel on small inputs against the host.
    public struct SelfTestCheck: Sendable {
        public let op: String
        public let dtype: DType
        /// Largest |metal − host| / (1 + |host|) over the outputs.
        public let maxError: Double
        public let tolerance: Double
        /// What went wrong beyond the numbers (the kernel compiler's message); empty otherwise.
        public let detail: String
        public var passed: Bool { maxError <= tolerance }
    }

    /// Runs the Metal backend's self-test now and returns every check: each kernel the
    /// backend has, on small fixed inputs, compared with the host kernels (a library that did
    /// not compile is one failed `compile_library` check with the compiler's message). The same
    /// test runs before the backend first serves "metal", library by library: a family that
    /// fails runs on the host, and a failure of the fills and copies keeps "metal" on the host
    /// fallback. Throws where there is no Metal backend.
    public static func selfTest() throws -> [SelfTestCheck] {
        #if canImport(Metal) && !LUCID_NO_METAL
        let m: MetalBackend
        switch Backends.metalDevice {
        case .success(let backend): m = backend
        case .failure(let refusal): throw LucidError.runtime("self_test: \(refusal.reason)")
        }
        return MetalSelfTest.run(m).map {
            SelfTestCheck(op: $0.op, dtype: $0.dtype, maxError: $0.maxError, tolerance: $0.tolerance, detail: $0.detail)
        }
        #else
        throw LucidError.runtime("self_test: this build of lucid has no Metal backend (Metal is not available on this platform)")
        #endif
    }
}
