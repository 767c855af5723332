/// Where a tensor lives and which stream computes it.
///
/// Raw values are the C ABI's device codes.
public enum Device: Int32, CaseIterable, Sendable, CustomStringConvertible {
    /// The Apple CPU stream (Accelerate on Apple platforms, OpenBLAS elsewhere).
    case cpu = 0
    /// The GPU stream: Metal on Apple Silicon, the host fallback where Metal is missing.
    case metal = 1

    public var name: String { self == .cpu ? "cpu" : "metal" }
    public var description: String { name }

    package init(code: Int32) throws {
        guard let d = Device(rawValue: code) else {
            throw LucidError.value("unknown device code \(code) (0 is cpu, 1 is metal)")
        }
        self = d
    }
}
