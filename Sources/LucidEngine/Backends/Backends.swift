/// The backend that serves each device, made once per process on first use: a table with a
/// row per device.
enum Backends {
    /// The host kernels: the CPU stream, and the kernels that run the calls another backend
    /// routes to the host (`Backend.route`), over that backend's memory.
    static let host = HostBackend(device: .cpu, name: "cpu")
    static let cpu: any Backend = host

    #if canImport(Metal) && !LUCID_NO_METAL
    /// The Metal backend of this machine's GPU, whether or not it passed its self-test, or why
    /// there is none (no GPU, or not one of the Apple silicon GPUs the kernels are for).
    static let metalDevice: Result<MetalBackend, MetalRefusal> = MetalBackend.make()
    static var metalBackend: MetalBackend? { try? metalDevice.get() }
    #endif

    /// The GPU stream: the Metal backend where Metal is available (Apple Silicon, or the
    /// emulated Metal of the check build) and its core passes its self-test (families that do
    /// not compile or pass run on the host: `MetalSelfTest.admit`), else the host fallback,
    /// which warns once and can be turned off.
    private static let metal: Result<any Backend, LucidError> = {
        #if canImport(Metal) && !LUCID_NO_METAL
        switch metalDevice {
        case .success(let m):
            if let refusal = MetalSelfTest.admit(m) { return HostFallback.make(because: refusal.reason) }
            return .success(m)
        case .failure(let refusal):
            return HostFallback.make(because: refusal.reason)
        }
        #else
        return HostFallback.make(because: "Metal is not available on this machine")
        #endif
    }()

    /// Whether Metal kernels serve "metal".
    static var metalIsAvailable: Bool {
        #if canImport(Metal) && !LUCID_NO_METAL
        if metalBackend != nil, case .success(let b) = metal, b is MetalBackend { return true }
        #endif
        return false
    }

    /// Each device's backend.
    private static let table: [Device: @Sendable () throws -> any Backend] = [
        .cpu: { cpu },
        .metal: { try metal.get() },
    ]

    static func backend(for device: Device) throws -> any Backend {
        guard let backend = table[device] else { throw LucidError.runtime("no backend serves device '\(device)'") }
        return try backend()
    }
}
