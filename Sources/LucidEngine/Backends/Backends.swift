/// The backend that serves each device, made once per process on first use: a table with a
/// row per device.
enum Backends {
    /// The host kernels: the CPU stream, and the kernels that run the calls another backend
    /// routes to the host (`Backend.route`), over that backend's memory.
    static let host = HostBackend(device: .cpu, name: "cpu")
    static let cpu: any Backend = host

    #if canImport(Metal) && !LUCID_NO_METAL
    /// The Metal backend of this machine's GPU, whether or not it passed its self-test.
    static let metalBackend: MetalBackend? = MetalBackend.make()
    #endif

    /// The GPU stream: the Metal backend where Metal is available (Apple Silicon, or the
    /// emulated Metal of the check build) and its self-test passes, else the host fallback,
    /// which warns once and can be turned off.
    private static let metal: Result<any Backend, LucidError> = {
        #if canImport(Metal) && !LUCID_NO_METAL
        if let m = metalBackend {
            if let message = m.libraryError { return HostFallback.make(because: message) }
            let failed = MetalSelfTest.run(m).filter { !$0.passed }
            if failed.isEmpty { return .success(m) }
            let names =
                failed.prefix(8).map { "\($0.op) (\($0.dtype.name))" }.joined(separator: ", ")
                + (failed.count > 8 ? " and \(failed.count - 8) more" : "")
            return HostFallback.make(
                because: "the Metal backend's self-test found kernels that disagree with the CPU: \(names) (lucid.metal.self_test() gives the report)"
            )
        }
        #endif
        return HostFallback.make(because: "Metal is not available on this machine")
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
