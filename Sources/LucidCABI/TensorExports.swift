#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LucidEngine

// Tensor creation, inspection, transfer and release. Ownership: every `lucid_tensor` written
// to an out-pointer is a new reference the caller releases once with `lucid_tensor_release`.

let tensors = TensorTable()

/// What an op writes about its result, so that its caller needs no second call to learn it
/// (include/lucid.h, enum lucid_record_field; `RecordField`): the handle, dtype, device, ndim,
/// requires_grad, the bytes of storage it keeps alive, then up to `dims` sizes and strides,
/// then the sizes packed into one key.
enum Record {
    static let handle = RecordField.handle.index, dtype = RecordField.dtype.index, device = RecordField.device.index
    static let ndim = RecordField.ndim.index, requiresGrad = RecordField.requiresGrad.index
    static let storageBytes = RecordField.storageBytes.index, shape = RecordField.shape.index
    static let dims = RecordField.dims.index, strides = RecordField.strides.index
    static let shapeKey = RecordField.shapeKey.index, length = RecordField.len.index

    /// The sizes in one number: ndim in bits 0-2, then each size in 60/ndim bits, the first
    /// lowest; -1 when ndim > 4 or a size needs more bits.
    @inline(__always)
    static func key(_ shape: [Int]) -> Int64 {
        let n = shape.count
        if n == 0 { return 0 }
        if n > 4 { return -1 }
        let width = 60 / n
        var key = Int64(n), at = 3
        for s in shape {
            if s >> width != 0 { return -1 }
            key |= Int64(s) << at
            at += width
        }
        return key
    }

    /// Fills `out` for `t` under `handle`; sizes and strides only when ndim <= dims.
    @inline(__always)
    static func write(_ t: TensorImpl, handle h: UInt32, into out: UnsafeMutablePointer<Int64>) {
        out[handle] = Int64(h)
        out[dtype] = Int64(t.dtype.rawValue)
        out[device] = Int64(t.device.rawValue)
        let n = t.ndim
        out[ndim] = Int64(n)
        out[requiresGrad] = t.requiresGrad ? 1 : 0
        out[storageBytes] = Int64(t.storageBytes)
        if n <= dims {
            for i in 0..<n {
                out[shape + i] = Int64(t.shape[i])
                out[strides + i] = Int64(t.strides[i])
            }
        }
        out[shapeKey] = key(t.shape)
    }
}

/// Lends `t` across the ABI: a new handle, written with the rest of its record to `out`.
@inline(__always)
func emit(_ t: TensorImpl, _ out: UnsafeMutablePointer<Int64>?) throws {
    guard let out else { throw LucidError(.value, "record pointer is null") }
    Record.write(t, handle: try tensors.insert(t), into: out)
}

/// Lends `t`, which a view op made from the tensor behind `source`: a view of it when it shares
/// its storage (see `TensorRef`), else a tensor of its own.
func emitView(_ t: TensorImpl, of source: UInt32, _ out: UnsafeMutablePointer<Int64>?) throws {
    guard let out else { throw LucidError(.value, "record pointer is null") }
    Record.write(t, handle: try tensors.insert(t, madeFrom: source), into: out)
}

@_cdecl("lucid_last_error")
public func lucid_last_error() -> UnsafePointer<CChar>? { LastError.get() }

@_cdecl("lucid_tensor_from_host")
public func lucid_tensor_from_host(
    _ data: UnsafeRawPointer?, _ nbytes: Int64, _ shape: UnsafePointer<Int64>?, _ ndim: Int32,
    _ dtype: Int32, _ device: Int32, _ out: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        guard nbytes >= 0 else { throw LucidError(.value, "nbytes is negative (\(nbytes))") }
        let dims = try intArray(shape, ndim, "shape")
        let bytes = UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : Int(nbytes))
        if data == nil && nbytes > 0 { throw LucidError(.value, "data pointer is null") }
        try emit(
            try Conversion.fromHost(
                bytes, shape: dims, dtype: try decode(dtype, as: DType.self, "dtype"), device: try decode(device, as: Device.self, "device")), out)
    }
}

@_cdecl("lucid_tensor_full")
public func lucid_tensor_full(
    _ shape: UnsafePointer<Int64>?, _ ndim: Int32, _ value: Double, _ intValue: Int64, _ valueKind: Int32,
    _ dtype: Int32, _ device: Int32, _ out: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        let dims = try intArray(shape, ndim, "shape")
        try emit(
            try Creation.full(
                dims, value: try scalarOperand(value, intValue, valueKind), dtype: try decode(dtype, as: DType.self, "dtype"),
                device: try decode(device, as: Device.self, "device")), out)
    }
}

@_cdecl("lucid_tensor_arange")
public func lucid_tensor_arange(
    _ start: Double, _ end: Double, _ step: Double, _ dtype: Int32,
    _ device: Int32, _ out: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        try emit(
            try Creation.arange(
                start: start, end: end, step: step, dtype: try optionalDType(dtype),
                device: try decode(device, as: Device.self, "device")), out)
    }
}

@_cdecl("lucid_tensor_arange_int")
public func lucid_tensor_arange_int(
    _ start: Int64, _ end: Int64, _ step: Int64, _ dtype: Int32,
    _ device: Int32, _ out: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        try emit(
            try Creation.arange(
                start: start, end: end, step: step, dtype: try optionalDType(dtype),
                device: try decode(device, as: Device.self, "device")), out)
    }
}

@_cdecl("lucid_tensor_random")
public func lucid_tensor_random(
    _ shape: UnsafePointer<Int64>?, _ ndim: Int32, _ normal: Int32, _ dtype: Int32,
    _ device: Int32, _ out: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        let dims = try intArray(shape, ndim, "shape")
        let d = try decode(dtype, as: DType.self, "dtype"), dev = try decode(device, as: Device.self, "device")
        try emit(normal != 0 ? try Creation.randn(dims, dtype: d, device: dev) : try Creation.rand(dims, dtype: d, device: dev), out)
    }
}

@_cdecl("lucid_manual_seed")
public func lucid_manual_seed(_ seed: UInt64) -> Int32 {
    abiCall { Tensor.manualSeed(seed) }
}

@_cdecl("lucid_tensor_release")
public func lucid_tensor_release(_ t: UInt32) -> Int32 {
    abiCall { try tensors.remove(t) }
}

@_cdecl("lucid_tensor_release_many")
public func lucid_tensor_release_many(_ handles: UnsafePointer<UInt32>?, _ count: Int32) -> Int32 {
    abiCall {
        guard count >= 0 else { throw LucidError(.value, "count is negative (\(count))") }
        if count == 0 { return }
        guard let handles else { throw LucidError(.value, "handles pointer is null") }
        try tensors.remove(UnsafeBufferPointer(start: handles, count: Int(count)))
    }
}

@_cdecl("lucid_tensor_meta")
public func lucid_tensor_meta(
    _ t: UInt32, _ dtype: UnsafeMutablePointer<Int32>?, _ device: UnsafeMutablePointer<Int32>?,
    _ ndim: UnsafeMutablePointer<Int32>?, _ requiresGrad: UnsafeMutablePointer<Int32>?
) -> Int32 {
    abiCall {
        let x = try tensors.get(t)
        guard let dtype, let device, let ndim, let requiresGrad else {
            throw LucidError(.value, "dtype, device, ndim or requires_grad pointer is null")
        }
        dtype.pointee = x.dtype.rawValue
        device.pointee = x.device.rawValue
        ndim.pointee = Int32(x.ndim)
        requiresGrad.pointee = x.requiresGrad ? 1 : 0
    }
}

@_cdecl("lucid_tensor_shape")
public func lucid_tensor_shape(
    _ t: UInt32, _ shape: UnsafeMutablePointer<Int64>?, _ strides: UnsafeMutablePointer<Int64>?,
    _ capacity: Int32
) -> Int32 {
    abiCall {
        let x = try tensors.get(t)
        guard Int(capacity) >= x.ndim else {
            throw LucidError(.value, "capacity \(capacity) is smaller than the tensor's \(x.ndim) dimensions")
        }
        if x.ndim == 0 { return }
        guard let shape else { throw LucidError(.value, "shape pointer is null") }
        for i in 0..<x.ndim {
            shape[i] = Int64(x.shape[i])
            strides?[i] = Int64(x.strides[i])
        }
    }
}

@_cdecl("lucid_tensor_record")
public func lucid_tensor_record(_ t: UInt32, _ record: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall {
        let x = try tensors.get(t)
        guard let record else { throw LucidError(.value, "record pointer is null") }
        Record.write(x, handle: t, into: record)
    }
}

@_cdecl("lucid_tensor_to_host")
public func lucid_tensor_to_host(_ t: UInt32, _ data: UnsafeMutableRawPointer?, _ nbytes: Int64) -> Int32 {
    abiCall {
        guard nbytes >= 0 else { throw LucidError(.value, "nbytes is negative (\(nbytes))") }
        if data == nil && nbytes > 0 { throw LucidError(.value, "data pointer is null") }
        try Conversion.toHost(try tensors.get(t), UnsafeMutableRawBufferPointer(start: data, count: data == nil ? 0 : Int(nbytes)))
    }
}

@_cdecl("lucid_tensor_to")
public func lucid_tensor_to(_ t: UInt32, _ dtype: Int32, _ device: Int32, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall { try emitView(try Conversion.to(try tensors.get(t), dtype: try optionalDType(dtype), device: try optionalDevice(device)), of: t, out) }
}

@_cdecl("lucid_tensor_set_requires_grad")
public func lucid_tensor_set_requires_grad(_ t: UInt32, _ flag: Int32, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall {
        let x = try tensors.get(t)
        if flag != 0 && !x.dtype.isFloatingPoint {
            throw LucidError(.type, "only floating-point tensors can require gradients, got \(x.dtype)")
        }
        try emit(x.withRequiresGrad(flag != 0), out)
    }
}

@_cdecl("lucid_live_tensors")
public func lucid_live_tensors(_ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall { try store(Int64(tensors.count), out) }
}

@_cdecl("lucid_metal_is_available")
public func lucid_metal_is_available(_ out: UnsafeMutablePointer<Int32>?) -> Int32 {
    abiCall { try store(Metal.isAvailable ? 1 : 0, out) }
}

/// The names handed out by `lucid_metal_fallback_entry`, `lucid_metal_self_test_entry` and
/// `lucid_amp_inspect_entry`, copied once and kept for the process (op names are a small fixed
/// set; module paths are a program's own few).
let opNameStrings = InternedNames()

final class InternedNames: @unchecked Sendable {
    private let lock = Lock()
    private var names: [String: UnsafeMutablePointer<CChar>] = [:]

    func cString(_ name: String) -> UnsafePointer<CChar>? {
        lock.withLock {
            if let p = names[name] { return UnsafePointer(p) }
            guard let p = strdup(name) else { return nil }
            names[name] = p
            return UnsafePointer(p)
        }
    }
}

@_cdecl("lucid_metal_synchronize")
public func lucid_metal_synchronize() -> Int32 {
    abiCall { try Metal.synchronize() }
}

@_cdecl("lucid_metal_fallback_entries")
public func lucid_metal_fallback_entries(_ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall { try store(Int64(HostKernelFallbacks.entryCount), out) }
}

@_cdecl("lucid_metal_fallback_entry")
public func lucid_metal_fallback_entry(
    _ index: Int64, _ name: UnsafeMutablePointer<UnsafePointer<CChar>?>?,
    _ count: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        guard let name, let count else { throw LucidError(.value, "name or count pointer is null") }
        guard index >= 0, index <= Int64(Int.max), let entry = HostKernelFallbacks.entry(Int(index)) else {
            throw LucidError(.index, "fallback entry \(index) is out of range 0..<\(HostKernelFallbacks.entryCount)")
        }
        guard let cName = opNameStrings.cString(entry.op) else {
            throw LucidError(.runtime, "out of memory copying the op name '\(entry.op)'")
        }
        name.pointee = cName
        count.pointee = Int64(entry.count)
    }
}

/// The checks of the last self-test run, for `lucid_metal_self_test_entry`.
private let lastSelfTest = SelfTestRecord()

private final class SelfTestRecord: @unchecked Sendable {
    let lock = Lock()
    var checks: [Metal.SelfTestCheck] = []
}

@_cdecl("lucid_metal_self_test")
public func lucid_metal_self_test(_ checks: UnsafeMutablePointer<Int64>?, _ failures: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall {
        guard let checks, let failures else { throw LucidError(.value, "checks or failures pointer is null") }
        let results = try Metal.selfTest()
        lastSelfTest.lock.withLock { lastSelfTest.checks = results }
        checks.pointee = Int64(results.count)
        failures.pointee = Int64(results.filter { !$0.passed }.count)
    }
}

@_cdecl("lucid_metal_self_test_entry")
public func lucid_metal_self_test_entry(
    _ index: Int64, _ op: UnsafeMutablePointer<UnsafePointer<CChar>?>?,
    _ dtype: UnsafeMutablePointer<Int32>?, _ maxError: UnsafeMutablePointer<Double>?,
    _ tolerance: UnsafeMutablePointer<Double>?,
    _ detail: UnsafeMutablePointer<UnsafePointer<CChar>?>?
) -> Int32 {
    abiCall {
        guard let op, let dtype, let maxError, let tolerance, let detail else {
            throw LucidError(.value, "op, dtype, max_error, tolerance or detail pointer is null")
        }
        let c = try entry(
            lastSelfTest.lock.withLock { lastSelfTest.checks }, index, "self-test entry",
            " (run lucid_metal_self_test first)")
        guard let name = opNameStrings.cString(c.op), let text = opNameStrings.cString(c.detail) else {
            throw LucidError(.runtime, "out of memory copying '\(c.op)'")
        }
        op.pointee = name
        dtype.pointee = c.dtype.rawValue
        maxError.pointee = c.maxError
        tolerance.pointee = c.tolerance
        detail.pointee = text
    }
}

/// The kernel libraries of the last `lucid_metal_libraries` call.
private let lastLibraries = LibraryRecord()

private final class LibraryRecord: @unchecked Sendable {
    let lock = Lock()
    var entries: [Metal.KernelLibrary] = []
}

@_cdecl("lucid_metal_libraries")
public func lucid_metal_libraries(_ count: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall {
        guard let count else { throw LucidError(.value, "count pointer is null") }
        let entries = Metal.kernelLibraries
        lastLibraries.lock.withLock { lastLibraries.entries = entries }
        count.pointee = Int64(entries.count)
    }
}

@_cdecl("lucid_metal_library_entry")
public func lucid_metal_library_entry(
    _ index: Int64, _ family: UnsafeMutablePointer<UnsafePointer<CChar>?>?,
    _ origin: UnsafeMutablePointer<UnsafePointer<CChar>?>?, _ detail: UnsafeMutablePointer<UnsafePointer<CChar>?>?,
    _ error: UnsafeMutablePointer<UnsafePointer<CChar>?>?
) -> Int32 {
    abiCall {
        guard let family, let origin, let detail, let error else {
            throw LucidError(.value, "family, origin, detail or error pointer is null")
        }
        let e = try entry(
            lastLibraries.lock.withLock { lastLibraries.entries }, index, "library entry", " (call lucid_metal_libraries first)")
        let texts = [e.family, e.origin, e.detail, e.error].map { opNameStrings.cString($0) }
        guard let f = texts[0], let o = texts[1], let d = texts[2], let m = texts[3] else {
            throw LucidError(.runtime, "out of memory copying the entry of library '\(e.family)'")
        }
        (family.pointee, origin.pointee, detail.pointee, error.pointee) = (f, o, d, m)
    }
}

/// The dispatch counts of the last `lucid_metal_stats` call, by kernel name.
private let lastDispatches = DispatchRecord()

private final class DispatchRecord: @unchecked Sendable {
    let lock = Lock()
    var entries: [(kernel: String, count: Int)] = []
}

@_cdecl("lucid_metal_stats")
public func lucid_metal_stats(_ out: UnsafeMutablePointer<Int64>?, _ n: Int32) -> Int32 {
    abiCall {
        guard let out else { throw LucidError(.value, "out pointer is null") }
        guard n >= 0 else { throw LucidError(.value, "negative length \(n)") }
        let s = Metal.stats
        let entries = s.dispatches.sorted { $0.key < $1.key }.map { (kernel: $0.key, count: $0.value) }
        lastDispatches.lock.withLock { lastDispatches.entries = entries }
        let values = [s.commandBuffers, s.hostWaits, s.newBuffers, s.cachedBytes, s.hostFallbacks, s.libraryCompiles, entries.count]
        for (i, v) in values.prefix(Int(n)).enumerated() { out[i] = Int64(v) }
    }
}

@_cdecl("lucid_metal_dispatch_entry")
public func lucid_metal_dispatch_entry(
    _ index: Int64, _ kernel: UnsafeMutablePointer<UnsafePointer<CChar>?>?,
    _ count: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        guard let kernel, let count else { throw LucidError(.value, "kernel or count pointer is null") }
        let e = try entry(
            lastDispatches.lock.withLock { lastDispatches.entries }, index, "dispatch entry",
            " (call lucid_metal_stats first)")
        guard let name = opNameStrings.cString(e.kernel) else { throw LucidError(.runtime, "out of memory copying '\(e.kernel)'") }
        kernel.pointee = name
        count.pointee = Int64(e.count)
    }
}

@_cdecl("lucid_set_warning_handler")
public func lucid_set_warning_handler(_ handler: (@convention(c) (UnsafePointer<CChar>?) -> Void)?) -> Int32 {
    abiCall {
        if let handler {
            Warnings.setHandler { message in message.withCString { handler($0) } }
        } else {
            Warnings.resetHandler()
        }
    }
}

/// A scalar from its C form: `value` for floats, `intValue` for ints and bools.
func scalarOperand(_ value: Double, _ intValue: Int64, _ kind: Int32) throws -> ScalarOperand {
    switch try decode(kind, as: ScalarOperand.Kind.self, "scalar kind") {
    case .float: return ScalarOperand(float: value)
    case .int: return ScalarOperand(int: intValue)
    case .bool: return ScalarOperand(bool: intValue != 0)
    }
}

@_cdecl("lucid_memory_stats")
public func lucid_memory_stats(
    _ device: Int32, _ allocated: UnsafeMutablePointer<Int64>?,
    _ peak: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        let d = try optionalDevice(device)
        // Both pointers are checked before either is written: a failing call writes nothing.
        guard let allocated else { throw LucidError(.value, "allocated pointer is null") }
        guard let peak else { throw LucidError(.value, "peak pointer is null") }
        allocated.pointee = Int64(MemoryStats.allocatedBytes(d))
        peak.pointee = Int64(MemoryStats.peakBytes(d))
    }
}

@_cdecl("lucid_reset_peak_memory_stats")
public func lucid_reset_peak_memory_stats(_ device: Int32) -> Int32 {
    abiCall { MemoryStats.resetPeak(try optionalDevice(device)) }
}

/// Threads the host kernels (and oneDNN's and OpenBLAS's pools) use.
@_cdecl("lucid_set_num_threads")
public func lucid_set_num_threads(_ n: Int64) -> Int32 {
    abiCall { try HostThreads.set(Int(clamping: n)) }
}

@_cdecl("lucid_get_num_threads")
public func lucid_get_num_threads(_ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall { try store(Int64(HostThreads.current), out) }
}

@_cdecl("lucid_threads_contended")
public func lucid_threads_contended(_ out: UnsafeMutablePointer<Int32>?) -> Int32 {
    abiCall { try store(HostThreads.contended ? 1 : 0, out) }
}

/// The vector unit the host loops run on ("AVX512", "AVX2" or "DEFAULT").
@_cdecl("lucid_cpu_capability")
public func lucid_cpu_capability(_ name: UnsafeMutablePointer<UnsafePointer<CChar>?>?) -> Int32 {
    abiCall {
        guard let name else { throw LucidError(.value, "name pointer is null") }
        name.pointee = HostThreads.cpuCapability
    }
}

/// Returns the host allocator's cached blocks to the system; writes the bytes freed.
@_cdecl("lucid_empty_cache")
public func lucid_empty_cache(_ freed: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall { try store(Int64(MemoryStats.emptyCache()), freed, "freed") }
}
