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

    /// The fallback, announced with `reason` (why Metal does not serve "metal").
    static func make(because reason: String) -> Result<any Backend, LucidError> {
        if isDisabled {
            return .failure(
                .runtime(
                    "device 'metal' is unavailable: \(reason), and the host fallback is disabled (\(environmentVariable)=0)"))
        }
        Warnings.emit(
            "\(reason); device 'metal' runs on the host fallback (float16 storage, float32 accumulation). Set \(environmentVariable)=0 to "
                + "make 'metal' an error instead."
        )
        switch declinedFamilies() {
        case .success(let declined):
            return .success(HostBackend(device: .metal, name: "host fallback", declining: declined))
        case .failure(let error):
            return .failure(error)
        }
    }

    static let declineVariable = "LUCID_METAL_DECLINE"

    /// The kernel families `LUCID_METAL_DECLINE` (comma-separated names, or `all`) tells the
    /// fallback to decline, so that the op layer's paths for a backend without them (host
    /// kernels over the device's memory, counted, and composed softmax, attention and
    /// convolution) run without a GPU.
    static func declinedFamilies() -> Result<Set<KernelFamily>, LucidError> {
        guard let raw = environmentValue(declineVariable), !raw.isEmpty else { return .success([]) }
        var families: Set<KernelFamily> = []
        for name in raw.split(separator: ",").map({ $0.filter { $0 != " " }.lowercased() }) where !name.isEmpty {
            if name == "all" {
                families.formUnion(KernelFamily.allCases)
            } else if let f = KernelFamily(rawValue: name) {
                families.insert(f)
            } else {
                let known = KernelFamily.allCases.map(\.rawValue).joined(separator: ", ")
                return .failure(.value("\(declineVariable): unknown kernel family '\(name)' (known: \(known), all)"))
            }
        }
        return .success(families)
    }
}
