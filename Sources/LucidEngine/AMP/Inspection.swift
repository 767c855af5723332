#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The value statistics autocast's inspection keeps, and the bands they count. Kernels count
/// by comparing magnitude bits, which order like the values, against limits given in the
/// operand's own format (`limits(for:)`), so one kernel serves every floating dtype.
public enum CastStatistics {
    /// What a statistics block counts, in the order of its 64-bit counts.
    public enum Band: Int, CaseIterable, Sendable {
        /// Finite values whose magnitude is above float16's largest finite value (65504).
        case overflowFloat16
        /// Non-zero values whose magnitude is below float16's smallest normal value (2⁻¹⁴):
        /// cast to float16 they become subnormal or zero.
        case underflowFloat16
        /// Finite values whose magnitude is above bfloat16's largest finite value.
        case overflowBFloat16
        /// Non-zero values whose magnitude is below bfloat16's smallest normal value (2⁻¹²⁶).
        case underflowBFloat16
        /// Values that are neither zero nor NaN.
        case nonzero
        /// Infinities and NaNs.
        case nonfinite
    }

    /// Words a block takes in an accumulator: the largest magnitude, six 64-bit counts and one
    /// spare, 64 bytes.
    static let blockWords = 16

    /// The magnitude bits, in `dtype`'s format, of: the infinity, and the largest magnitudes
    /// that do not overflow float16 and bfloat16 and the smallest normal ones of each (the
    /// kernels' `limits`). A band a format cannot reach gets a limit no value passes (the
    /// largest finite magnitude for an overflow, 1 for an underflow: no non-zero magnitude is
    /// below it).
    static func limits(for dtype: DType) -> [UInt32] {
        switch dtype {
        case .float16:
            // Every finite float16 fits either range, and none is below bfloat16's normals.
            return [0x7C00, 0x7BFF, 0x0400, 0x7BFF, 1]
        case .bfloat16:
            // 65504 lies between 0x477F and 0x4780; 2^-14 is 0x3880.
            return [0x7F80, 0x477F, 0x3880, 0x7F7F, 0x0080]
        default:
            return [0x7F80_0000, 0x477F_E000, 0x3880_0000, 0x7F7F_0000, 0x0080_0000]
        }
    }

    /// The float32 bits of the magnitude whose bits in `dtype`'s format are `bits`.
    static func float32Bits(_ bits: UInt32, from dtype: DType) -> UInt32 {
        switch dtype {
        case .float16: return halfToFloat(UInt16(truncatingIfNeeded: bits)).bitPattern
        case .bfloat16: return bits << 16
        default: return bits
        }
    }

    /// Adds one kernel's findings (`found[0]` the largest magnitude's float32 bits, then the
    /// six counts) to the block of `words` that starts at `word`.
    static func merge(_ found: [UInt64], into words: UnsafeMutablePointer<UInt32>, word: Int) {
        let block = words + word
        block[0] = max(block[0], UInt32(truncatingIfNeeded: found[0]))
        for k in 1...Band.allCases.count {
            let total = (UInt64(block[2 * k]) << 32 | UInt64(block[2 * k - 1])) &+ found[k]
            block[2 * k - 1] = UInt32(truncatingIfNeeded: total)
            block[2 * k] = UInt32(truncatingIfNeeded: total >> 32)
        }
    }

    /// One block read back: the largest magnitude and the counts, by band.
    public struct Block: Sendable, Equatable {
        public var maxAbs: Float = 0
        public var counts: [Int] = Array(repeating: 0, count: Band.allCases.count)

        public subscript(_ band: Band) -> Int { counts[band.rawValue] }

        init() {}

        init(_ words: ArraySlice<UInt32>) {
            let w = Array(words)
            maxAbs = Float(bitPattern: w[0])
            counts = (1...Band.allCases.count).map { Int(UInt64(w[2 * $0]) << 32 | UInt64(w[2 * $0 - 1])) }
        }
    }
}

/// What one inspection found for one op in one module, on one device, in one target dtype.
public struct InspectionEntry: Sendable {
    public let op: String
    /// The module path the op ran under (`encoder.layers.3.attn`); "" outside any module.
    public let module: String
    public let device: Device
    /// The lower precision its inputs were cast to.
    public let dtype: DType
    public let calls: Int
    /// Floating input values seen (before the cast), and their statistics.
    public let inputElements: Int
    public let inputs: CastStatistics.Block
    /// Result values seen, and their statistics.
    public let resultElements: Int
    public let results: CastStatistics.Block
}

/// What an inspection concludes about an op's precision (C: `LUCID_VERDICT_*`).
public enum PrecisionVerdict: Int32, Sendable, Comparable, CustomStringConvertible {
    case safeFloat16 = 0, useBFloat16 = 1, keepFloat32 = 2

    public var description: String {
        switch self {
        case .safeFloat16: "safe in float16"
        case .useBFloat16: "use bfloat16"
        case .keepFloat32: "keep in float32"
        }
    }

    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
}

extension InspectionEntry {
    /// The share of non-zero input values that the cast makes subnormal or zero above which a
    /// verdict asks for a wider dtype.
    public static let underflowLimit = 0.01

    /// Whether the result held inf or NaN while every input was finite: the op made them.
    public var madeNonfinite: Bool { results[.nonfinite] > 0 && inputs[.nonfinite] == 0 }

    /// Whether this op is safe in float16, needs bfloat16's range or needs float32, and the first
    /// finding that says so, as one line ("" when safe): inputs past a dtype's range, inf/NaN
    /// made in the lower dtype, results past float16's range, or more than `underflowLimit` of
    /// the non-zero inputs below a dtype's normals.
    public var judgement: (verdict: PrecisionVerdict, reason: String) {
        let nonzero = inputs[.nonzero], half = dtype == .float16
        func share(_ band: CastStatistics.Band) -> Double { nonzero == 0 ? 0 : Double(inputs[band]) / Double(nonzero) }
        let rules: [(PrecisionVerdict, Bool, () -> String)] = [
            (.keepFloat32, inputs[.overflowBFloat16] > 0, { "inputs past bfloat16's range (max |x| \(cFormat("%.3g", Double(inputs.maxAbs))))" }),
            (
                .keepFloat32, share(.underflowBFloat16) > Self.underflowLimit,
                { "\(cFormat("%.1f", share(.underflowBFloat16) * 100))% of non-zero inputs below bfloat16's normals" }
            ),
            (.keepFloat32, madeNonfinite && !half, { "made inf/NaN in bfloat16" }),
            (.useBFloat16, inputs[.overflowFloat16] > 0, { "inputs past float16's range (max |x| \(cFormat("%.3g", Double(inputs.maxAbs))))" }),
            (.useBFloat16, madeNonfinite && half, { "made inf/NaN in float16" }),
            (.useBFloat16, results[.overflowFloat16] > 0, { "results past float16's range (max \(cFormat("%.3g", Double(results.maxAbs))))" }),
            (
                .useBFloat16, share(.underflowFloat16) > Self.underflowLimit,
                { "\(cFormat("%.1f", share(.underflowFloat16) * 100))% of non-zero inputs below float16's normals" }
            ),
        ]
        for (verdict, found, reason) in rules where found { return (verdict, "\(op): \(reason())") }
        return (.safeFloat16, "")
    }
}

/// `value` formatted by C's printf `format` (one double).
private func cFormat(_ format: String, _ value: Double) -> String {
    var buffer = [CChar](repeating: 0, count: 64)
    _ = withVaList([value]) { vsnprintf(&buffer, buffer.count, format, $0) }
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// One live inspection of the calling thread: an accumulator per (op, module, device, dtype),
/// on that device. Kernels add to the accumulators as ops run; nothing is read back before
/// `end`.
final class Inspection {
    let id: UInt64

    struct Key: Hashable {
        let op: String
        let module: String
        let device: Device
        let dtype: DType
    }

    final class Record {
        var calls = 0
        var inputElements = 0
        var resultElements = 0
        /// Two blocks of `CastStatistics.blockWords` int32 words: the inputs', the results'.
        let acc: TensorImpl

        init(on device: Device) throws {
            acc = try Creation.full([2 * CastStatistics.blockWords], value: ScalarOperand(int: 0), dtype: .int32, device: device)
        }
    }

    private(set) var records: [Key: Record] = [:]
    private(set) var order: [Key] = []

    init(id: UInt64) { self.id = id }

    func record(_ key: Key) throws -> Record {
        if let r = records[key] { return r }
        let r = try Record(on: key.device)
        records[key] = r
        order.append(key)
        return r
    }

    /// Adds `x`'s statistics to `record`'s block `block` (0: inputs, 1: results).
    static func accumulate(_ x: TensorImpl, into record: Record, block: Int) throws {
        guard x.dtype.isFloatingPoint, x.dtype != .float64, x.numel > 0 else { return }
        let source = try Ops.dense(x)
        let acc = record.acc
        let call = KernelCall(.castStatistics, reads: [source, acc], writes: [acc])
        acc.run(AMPKernels.self, call, "cast_statistics") {
            $0.castStatistics(source, into: acc, word: block * CastStatistics.blockWords)
        }
        acc.storage.bumpVersion()
        if block == 0 { record.inputElements += x.numel } else { record.resultElements += x.numel }
    }

    /// Reads every record back (the device's queued work finishes first), in the order the
    /// records were made.
    func report() throws -> [InspectionEntry] {
        try order.map { key in
            let r = records[key]!
            var words = [UInt32](repeating: 0, count: r.acc.numel)
            try words.withUnsafeMutableBytes { try Conversion.toHost(r.acc, $0) }
            let n = CastStatistics.blockWords
            return InspectionEntry(
                op: key.op, module: key.module, device: key.device, dtype: key.dtype,
                calls: r.calls, inputElements: r.inputElements,
                inputs: CastStatistics.Block(words[0..<n]), resultElements: r.resultElements,
                results: CastStatistics.Block(words[n..<2 * n]))
        }
    }
}

/// An op call an inspection has seen start in a lower precision: its inputs before the cast
/// wait here until its result is made, so that a call the op refuses is not counted.
struct PendingInspection {
    let op: String
    let inputs: [TensorImpl]
    let target: DType
}

extension ThreadAMPState {
    /// Notes that `op` is about to run in `target` under autocast, with `inputs` before the
    /// cast; `finishInspection` counts the call when its result is made.
    func inspect(_ op: String, _ inputs: [TensorImpl], target: DType) {
        pendingInspection = PendingInspection(op: op, inputs: inputs, target: target)
    }

    /// Counts the pending call of `op` and its `result` in every live inspection.
    func finishInspection(_ op: String, _ result: TensorImpl) throws {
        guard let pending = pendingInspection, pending.op == op, let device = pending.inputs.first?.device else { return }
        pendingInspection = nil
        for inspection in inspections {
            let r = try inspection.record(.init(op: op, module: inspectedModule, device: device, dtype: pending.target))
            r.calls += 1
            for x in pending.inputs { try Inspection.accumulate(x, into: r, block: 0) }
            try Inspection.accumulate(result, into: r, block: 1)
        }
    }
}

/// `lucid.amp.inspect()` in the engine: per thread, the live inspections, the module path ops
/// are recorded under, and the reports of the ones that ended.
public enum AutocastInspection {
    private static let lock = Lock()
    nonisolated(unsafe) private static var nextID: UInt64 = 1

    /// Starts an inspection on the calling thread and returns its id. Until it ends, every op
    /// that runs in a lower precision under autocast on this thread has its floating inputs
    /// (before the cast) and its result counted by `CastStatistics.Band`, on their device.
    public static func begin() -> UInt64 {
        let id = lock.withLock { () -> UInt64 in
            defer { nextID += 1 }
            return nextID
        }
        AMPRegistry.current().inspections.append(Inspection(id: id))
        return id
    }

    /// Sets the module path the calling thread's ops are recorded under ("" for none).
    public static func setModule(_ path: String) {
        AMPRegistry.current().inspectedModule = path
    }

    /// Ends the inspection `id` (the calling thread's) and reads what it found: one wait for
    /// each device's queued work. Throws, changing nothing, for an id that is not a live
    /// inspection of this thread.
    public static func end(_ id: UInt64) throws -> [InspectionEntry] {
        guard let state = AMPRegistry.currentIfPresent(), let i = state.inspections.firstIndex(where: { $0.id == id }) else {
            throw LucidError(.handle, "inspection \(id) is not live on this thread (never begun, already ended, or begun on another thread)")
        }
        let inspection = state.inspections.remove(at: i)
        if state.inspections.isEmpty {
            state.pendingInspection = nil
            state.inspectedModule = ""
        }
        return try inspection.report()
    }

    /// Number of inspections live on the calling thread.
    public static var liveCount: Int { AMPRegistry.currentIfPresent()?.inspections.count ?? 0 }
}
