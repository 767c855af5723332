/// The "metal" device where Metal cannot serve it: a host backend that keeps the GPU stream's
/// dtype rules (true float16 storage, float32 accumulation — the same kernels as the CPU
/// stream, whose float16 also stores as float16), announces itself once per process, and can
/// be turned off with `LUCID_METAL_FALLBACK=0`.
enum HostFallback {
    static let environmentVariable = "LUCID_METAL_FALLBACK"

    static var isDisabled: Bool {
        guard let raw = environmentValue(environmentVariable) else { return false }
        return ["0", "false", "off", "no"].contains(raw.lowercased())
    }

    static func make() -> Result<any Backend, LucidError> {
        if isDisabled {
            return .failure(.runtime(
                "device 'metal' is unavailable: Metal is not available on this machine and the host fallback is disabled (\(environmentVariable)=0)"))
        }
        Warnings.emit(
            "Metal is not available on this machine; device 'metal' runs on the host fallback (float16 storage, float32 accumulation). Set \(environmentVariable)=0 to make 'metal' an error instead.")
        return .success(HostBackend(device: .metal, name: "host fallback"))
    }
}
