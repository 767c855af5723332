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
        /// Whether it holds float64 tensors (the Apple GPU has no float64 arithmetic).
        let holdsFloat64: Bool
        /// Whether autocast can target float16 there (PyTorch's CPU autocast cannot: a float16
        /// scope on the CPU leaves its ops alone).
        let autocastsFloat16: Bool
        /// Whether an op has a bfloat16 kernel there only when its `OpInfo` says so
        /// (`cpuBFloat16`); elsewhere every op with 16-bit kernels has one.
        let bfloat16KernelsDeclared: Bool
        /// The device autocast's queries default to when none is named and no scope is on:
        /// the accelerator.
        let isDefault: Bool
    }

    /// The device table, one row per case, in code order.
    static let table: [Entry] = [
        Entry(
            device: .cpu, name: "cpu", holdsFloat64: true, autocastsFloat16: false, bfloat16KernelsDeclared: true,
            isDefault: false),
        Entry(
            device: .metal, name: "metal", holdsFloat64: false, autocastsFloat16: true, bfloat16KernelsDeclared: false,
            isDefault: true),
    ]

    var entry: Entry { Self.table[Int(rawValue)] }
    public var name: String { entry.name }

    /// The device autocast's queries mean when none is named (the table's default row).
    public static let autocastDefault: Device = table.first(where: \.isDefault)!.device
    public var description: String { name }

    /// Refuses a dtype the device cannot hold: the Apple GPU has no float64 arithmetic (nor
    /// does Metal Performance Shaders), so "metal" holds no float64 tensor, as PyTorch's MPS
    /// device holds none. `op` names the call in the message.
    func check(_ dtype: DType, op: String) throws {
        guard dtype == .float64, !entry.holdsFloat64 else { return }
        throw LucidError.type(
            "\(op.isEmpty ? "" : "\(op): ")'\(name)' does not support float64 (the GPU has no float64 "
                + "arithmetic); use float32 instead, e.g. tensor.float() before moving it to '\(name)'")
    }
}
