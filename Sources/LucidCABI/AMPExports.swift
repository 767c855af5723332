#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LucidEngine

// Autocast through the C ABI. `guard_create` enters a scope on the calling thread and hands
// out its handle; `guard_destroy` leaves it, and only on that thread. The handle is the
// engine's scope id, so a Swift caller on the same thread sees the same state.

@_cdecl("guard_create")
public func guard_create(_ device: Int32, _ enabled: Int32, _ dtype: Int32, _ out: UnsafeMutablePointer<UInt64>?) -> Int32 {
    abiCall {
        guard let out else { throw LucidError(.value, "out pointer is null") }
        out.pointee = try Autocast.enterScope(
            try decode(device, as: Device.self, "device"), dtype: try optionalDType(dtype),
            enabled: enabled != 0)
    }
}

@_cdecl("guard_destroy")
public func guard_destroy(_ handle: UInt64) -> Int32 {
    abiCall { try Autocast.exitScope(handle) }
}

@_cdecl("lucid_autocast_override")
public func lucid_autocast_override(_ handle: UInt64, _ op: UnsafePointer<CChar>?, _ policy: Int32) -> Int32 {
    abiCall {
        guard let op else { throw LucidError(.value, "op name is null") }
        try Autocast.override(handle, op: String(cString: op), policy: try decode(policy, as: CastPolicy.self, "autocast policy"))
    }
}

@_cdecl("lucid_autocast_effective_policy")
public func lucid_autocast_effective_policy(_ device: Int32, _ op: UnsafePointer<CChar>?, _ out: UnsafeMutablePointer<Int32>?) -> Int32 {
    abiCall {
        guard let op else { throw LucidError(.value, "op name is null") }
        try store(try Autocast.effectivePolicy(String(cString: op), device: try optionalDevice(device)).rawValue, out)
    }
}

@_cdecl("lucid_autocast_is_enabled")
public func lucid_autocast_is_enabled(_ device: Int32, _ out: UnsafeMutablePointer<Int32>?) -> Int32 {
    abiCall { try store(Autocast.isEnabled(try optionalDevice(device)) ? 1 : 0, out) }
}

@_cdecl("lucid_autocast_get_dtype")
public func lucid_autocast_get_dtype(_ device: Int32, _ out: UnsafeMutablePointer<Int32>?) -> Int32 {
    abiCall { try store(Autocast.dtype(try optionalDevice(device))?.rawValue ?? -1, out) }
}

@_cdecl("lucid_autocast_live_guards")
public func lucid_autocast_live_guards(_ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall { try store(Int64(Autocast.liveScopes), out) }
}

@_cdecl("lucid_autocast_cached_casts")
public func lucid_autocast_cached_casts(_ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall { try store(Int64(Autocast.cachedCasts), out) }
}

@_cdecl("lucid_autocast_is_cache_enabled")
public func lucid_autocast_is_cache_enabled(_ out: UnsafeMutablePointer<Int32>?) -> Int32 {
    abiCall { try store(Autocast.cacheEnabled ? 1 : 0, out) }
}

@_cdecl("lucid_autocast_set_cache_enabled")
public func lucid_autocast_set_cache_enabled(_ enabled: Int32, _ previous: UnsafeMutablePointer<Int32>?) -> Int32 {
    abiCall {
        guard enabled == 0 || enabled == 1 else { throw LucidError(.value, "enabled must be 0 or 1, got \(enabled)") }
        let was = Autocast.setCacheEnabled(enabled == 1)
        if let previous { previous.pointee = was ? 1 : 0 }
    }
}

@_cdecl("lucid_autocast_default_dtype")
public func lucid_autocast_default_dtype(_ device: Int32, _ out: UnsafeMutablePointer<Int32>?) -> Int32 {
    abiCall { try store(Autocast.defaultDType(for: try decode(device, as: Device.self, "device")).rawValue, out) }
}

@_cdecl("lucid_autocast_check_dtype")
public func lucid_autocast_check_dtype(_ device: Int32, _ dtype: Int32) -> Int32 {
    abiCall { _ = try Autocast.validatedDType(try decode(dtype, as: DType.self, "dtype"), device: try decode(device, as: Device.self, "device")) }
}

/// dtype and device names as C strings that live as long as the process.
nonisolated(unsafe) private let dtypeNames: [UnsafeMutablePointer<CChar>] = DType.allCases.map { strdup($0.name) }
nonisolated(unsafe) private let deviceNames: [UnsafeMutablePointer<CChar>] = Device.allCases.map { strdup($0.name) }

@_cdecl("lucid_dtype_info")
public func lucid_dtype_info(
    _ code: Int32, _ name: UnsafeMutablePointer<UnsafePointer<CChar>?>?,
    _ itemSize: UnsafeMutablePointer<Int32>?, _ floating: UnsafeMutablePointer<Int32>?
) -> Int32 {
    abiCall {
        let d = try decode(code, as: DType.self, "dtype")
        guard let name, let itemSize, let floating else { throw LucidError(.value, "name, itemsize or floating pointer is null") }
        name.pointee = UnsafePointer(dtypeNames[Int(d.rawValue)])
        itemSize.pointee = Int32(d.itemSize)
        floating.pointee = d.isFloatingPoint ? 1 : 0
    }
}

@_cdecl("lucid_device_info")
public func lucid_device_info(_ code: Int32, _ name: UnsafeMutablePointer<UnsafePointer<CChar>?>?) -> Int32 {
    abiCall {
        let d = try decode(code, as: Device.self, "device")
        guard let name else { throw LucidError(.value, "name pointer is null") }
        name.pointee = UnsafePointer(deviceNames[Int(d.rawValue)])
    }
}

/// Op names as C strings that live as long as the process.
nonisolated(unsafe) private let opNames: [UnsafeMutablePointer<CChar>] = OpTable.all.map { strdup($0.name) }

@_cdecl("lucid_op_count")
public func lucid_op_count(_ out: UnsafeMutablePointer<Int32>?) -> Int32 {
    abiCall { try store(Int32(OpTable.all.count), out) }
}

@_cdecl("lucid_op_info")
public func lucid_op_info(
    _ index: Int32, _ name: UnsafeMutablePointer<UnsafePointer<CChar>?>?,
    _ policy: UnsafeMutablePointer<Int32>?, _ cpuBFloat16: UnsafeMutablePointer<Int32>?
) -> Int32 {
    abiCall {
        let info = try entry(OpTable.all, Int64(index), "op index")
        guard let name, let policy, let cpuBFloat16 else {
            throw LucidError(.value, "name, policy or cpu_bf16 pointer is null")
        }
        name.pointee = UnsafePointer(opNames[Int(index)])
        policy.pointee = info.policy.rawValue
        cpuBFloat16.pointee = info.cpuBFloat16 ? 1 : 0
    }
}

// Autocast's inspection (lucid.amp.inspect): statistics kept by the engine's kernels while an
// inspection is live on the calling thread, read back once when it ends.

@_cdecl("lucid_amp_inspect_begin")
public func lucid_amp_inspect_begin(_ out: UnsafeMutablePointer<UInt64>?) -> Int32 {
    abiCall {
        guard let out else { throw LucidError(.value, "out pointer is null") }
        out.pointee = AutocastInspection.begin()
    }
}

@_cdecl("lucid_amp_inspect_set_module")
public func lucid_amp_inspect_set_module(_ path: UnsafePointer<CChar>?) -> Int32 {
    abiCall { AutocastInspection.setModule(path.map { String(cString: $0) } ?? "") }
}

@_cdecl("lucid_amp_inspect_end")
public func lucid_amp_inspect_end(_ id: UInt64, _ entries: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall {
        guard let entries else { throw LucidError(.value, "entries pointer is null") }
        let report = try AutocastInspection.end(id)
        try LastInspection.current().keep(report)
        entries.pointee = Int64(report.count)
    }
}

/// What `lucid_amp_inspect_entry` hands out: the calling thread's last ended inspection, with
/// C copies of its reasons, kept until its next one ends or the thread does.
private final class LastInspection {
    private(set) var report: [InspectionEntry] = []
    private(set) var reasons: [UnsafeMutablePointer<CChar>] = []

    func keep(_ entries: [InspectionEntry]) throws {
        reasons.forEach { free($0) }
        (report, reasons) = ([], [])
        for e in entries {
            guard let copy = strdup(e.judgement.reason) else {
                throw LucidError(.runtime, "out of memory copying an inspection's reasons")
            }
            reasons.append(copy)
        }
        report = entries
    }

    deinit { reasons.forEach { free($0) } }

    private static let key: pthread_key_t = {
        var k = pthread_key_t()
        pthread_key_create(&k) { value in
            // Darwin passes the value as non-optional, Glibc as optional: bind it either way.
            let raw: UnsafeMutableRawPointer? = value
            guard let raw else { return }
            Unmanaged<LastInspection>.fromOpaque(raw).release()
        }
        return k
    }()

    /// The calling thread's.
    static func current() -> LastInspection {
        if let raw = pthread_getspecific(key) { return Unmanaged<LastInspection>.fromOpaque(raw).takeUnretainedValue() }
        let last = LastInspection()
        pthread_setspecific(key, Unmanaged.passRetained(last).toOpaque())
        return last
    }
}

@_cdecl("lucid_amp_inspect_entry")
public func lucid_amp_inspect_entry(
    _ index: Int64, _ op: UnsafeMutablePointer<UnsafePointer<CChar>?>?,
    _ module: UnsafeMutablePointer<UnsafePointer<CChar>?>?,
    _ device: UnsafeMutablePointer<Int32>?, _ dtype: UnsafeMutablePointer<Int32>?,
    _ calls: UnsafeMutablePointer<Int64>?, _ values: UnsafeMutablePointer<Double>?,
    _ verdict: UnsafeMutablePointer<Int32>?,
    _ reason: UnsafeMutablePointer<UnsafePointer<CChar>?>?
) -> Int32 {
    abiCall {
        guard let op, let module, let device, let dtype, let calls, let values, let verdict, let reason else {
            throw LucidError(.value, "an output pointer is null")
        }
        let last = LastInspection.current()
        let hint = " (of this thread's last ended inspection)"
        let e = try entry(last.report, index, "inspection entry", hint)
        let why = try entry(last.reasons, index, "inspection entry", hint)
        guard let opName = opNameStrings.cString(e.op), let path = opNameStrings.cString(e.module) else {
            throw LucidError(.runtime, "out of memory copying '\(e.op)'")
        }
        op.pointee = opName
        module.pointee = path
        device.pointee = e.device.rawValue
        dtype.pointee = e.dtype.rawValue
        calls.pointee = Int64(e.calls)
        var k = 0
        for (elements, block) in [(e.inputElements, e.inputs), (e.resultElements, e.results)] {
            values[k] = Double(elements)
            values[k + 1] = Double(block.maxAbs)
            for (j, c) in block.counts.enumerated() { values[k + 2 + j] = Double(c) }
            k += 8
        }
        verdict.pointee = e.judgement.verdict.rawValue
        reason.pointee = UnsafePointer(why)
    }
}
