/// Where a tensor lives and which stream computes it.
///
/// Raw values are the C ABI's device codes. A device is a case here and a row of each table
/// keyed by it: its name (`table`) and its backend (`Backends`).
public enum Device: Int32, CaseIterable, Sendable, CustomStringConvertible {
    /// The Apple CPU stream (Accelerate on Apple platforms, OpenBLAS elsewhere).
    case cpu = 0
    /// The GPU stream: Metal on Apple Silicon, the host fallback where Metal is missing.
    case metal = 1

    /// What the engine says of each device, in code order.
    struct Entry: Sendable {
        let device: Device
        /// The name the C ABI and Python give the device.
        let name: String
    }

    /// The device table, one row per case, in code order.
    static let table: [Entry] = [
        Entry(device: .cpu, name: "cpu"),
        Entry(device: .metal, name: "metal"),
    ]

    public var name: String { Self.table[Int(rawValue)].name }
    public var description: String { name }

    /// Refuses a dtype the device cannot hold: the Apple GPU has no float64 arithmetic (nor
    /// does Metal Performance Shaders), so "metal" holds no float64 tensor, as PyTorch's MPS
    /// device holds none. `op` names the call in the message.
    func check(_ dtype: DType, op: String) throws {
        guard self == .metal, dtype == .float64 else { return }
        throw LucidError.type("\(op.isEmpty ? "" : "\(op): ")'metal' does not support float64 (the GPU has no float64 "
                              + "arithmetic); use float32 instead, e.g. tensor.float() before moving it to 'metal'")
    }
}
