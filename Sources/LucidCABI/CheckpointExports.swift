#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

import LucidEngine

// Checkpoints: the engine's safetensors reader and writer (Core/Safetensors.swift), for
// Python's lucid.save and lucid.load, which keep their nesting of plain values on top.

/// What `lucid_safetensors_tensor` and `lucid_safetensors_metadata` hand out: the calling
/// thread's last checked file, with C copies of its names, kept until its next
/// `lucid_safetensors_read` or the thread's end.
private final class LastRead {
    private(set) var contents = Safetensors.Contents(entries: [], metadata: [])
    private var strings: [UnsafeMutablePointer<CChar>] = []
    private(set) var names: [UnsafeMutablePointer<CChar>] = []
    private(set) var keys: [UnsafeMutablePointer<CChar>] = []
    private(set) var values: [UnsafeMutablePointer<CChar>] = []

    func keep(_ c: Safetensors.Contents) throws {
        release()
        contents = c
        func copy(_ s: String) throws -> UnsafeMutablePointer<CChar> {
            guard let p = strdup(s) else { throw LucidError(.runtime, "out of memory copying a checkpoint's names") }
            strings.append(p)
            return p
        }
        names = try c.entries.map { try copy($0.name) }
        keys = try c.metadata.map { try copy($0.key) }
        values = try c.metadata.map { try copy($0.value) }
    }

    private func release() {
        strings.forEach { free($0) }
        (strings, names, keys, values) = ([], [], [], [])
        contents = Safetensors.Contents(entries: [], metadata: [])
    }

    deinit { strings.forEach { free($0) } }

    private static let key: pthread_key_t = {
        var k = pthread_key_t()
        pthread_key_create(&k) { value in
            // Darwin passes the value as non-optional, Glibc as optional: bind it either way.
            let raw: UnsafeMutableRawPointer? = value
            guard let raw else { return }
            Unmanaged<LastRead>.fromOpaque(raw).release()
        }
        return k
    }()

    static func current() -> LastRead {
        if let raw = pthread_getspecific(key) { return Unmanaged<LastRead>.fromOpaque(raw).takeUnretainedValue() }
        let last = LastRead()
        pthread_setspecific(key, Unmanaged.passRetained(last).toOpaque())
        return last
    }
}

nonisolated(unsafe) private let typeNames: [String: UnsafeMutablePointer<CChar>] = Dictionary(
    uniqueKeysWithValues: Safetensors.ElementType.allCases.map { ($0.rawValue, strdup($0.rawValue)!) })

@_cdecl("lucid_safetensors_read")
public func lucid_safetensors_read(
    _ data: UnsafeRawPointer?, _ nbytes: Int64, _ tensors: UnsafeMutablePointer<Int64>?,
    _ metadata: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        guard nbytes >= 0 else { throw LucidError(.value, "nbytes is negative (\(nbytes))") }
        guard nbytes == 0 || data != nil else { throw LucidError(.value, "data pointer is null") }
        guard tensors != nil, metadata != nil else { throw LucidError(.value, "an output pointer is null") }
        let last = LastRead.current()
        try last.keep(try Safetensors.read(UnsafeRawBufferPointer(start: data, count: Int(nbytes))))
        tensors!.pointee = Int64(last.contents.entries.count)
        metadata!.pointee = Int64(last.contents.metadata.count)
    }
}

@_cdecl("lucid_safetensors_declared_size")
public func lucid_safetensors_declared_size(
    _ header: UnsafeRawPointer?, _ nbytes: Int64, _ size: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        guard nbytes >= 0 else { throw LucidError(.value, "nbytes is negative (\(nbytes))") }
        guard nbytes == 0 || header != nil else { throw LucidError(.value, "header pointer is null") }
        try store(Int64(Safetensors.declaredDataSize(UnsafeRawBufferPointer(start: header, count: Int(nbytes)))), size, "size")
    }
}

@_cdecl("lucid_safetensors_tensor")
public func lucid_safetensors_tensor(
    _ index: Int64, _ name: UnsafeMutablePointer<UnsafePointer<CChar>?>?,
    _ dtype: UnsafeMutablePointer<UnsafePointer<CChar>?>?, _ shape: UnsafeMutablePointer<Int64>?,
    _ capacity: Int32, _ ndim: UnsafeMutablePointer<Int32>?, _ offset: UnsafeMutablePointer<Int64>?,
    _ nbytes: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        guard let name, let dtype, let ndim, let offset, let nbytes else { throw LucidError(.value, "an output pointer is null") }
        let last = LastRead.current()
        let hint = " (of this thread's last lucid_safetensors_read)"
        let e = try entry(last.contents.entries, index, "tensor", hint)
        guard e.shape.count <= Int(capacity) else {
            throw LucidError(.value, "tensor \(index) has \(e.shape.count) dimensions, more than the capacity \(capacity)")
        }
        guard e.shape.isEmpty || shape != nil else { throw LucidError(.value, "shape pointer is null") }
        for (i, s) in e.shape.enumerated() { shape![i] = Int64(s) }
        name.pointee = UnsafePointer(try entry(last.names, index, "tensor", hint))
        dtype.pointee = UnsafePointer(typeNames[e.type.rawValue]!)
        ndim.pointee = Int32(e.shape.count)
        offset.pointee = Int64(e.range.lowerBound)
        nbytes.pointee = Int64(e.range.count)
    }
}

@_cdecl("lucid_safetensors_metadata")
public func lucid_safetensors_metadata(
    _ index: Int64, _ key: UnsafeMutablePointer<UnsafePointer<CChar>?>?,
    _ value: UnsafeMutablePointer<UnsafePointer<CChar>?>?
) -> Int32 {
    abiCall {
        guard let key, let value else { throw LucidError(.value, "an output pointer is null") }
        let last = LastRead.current()
        let hint = " (of this thread's last lucid_safetensors_read)"
        key.pointee = UnsafePointer(try entry(last.keys, index, "metadata entry", hint))
        value.pointee = UnsafePointer(try entry(last.values, index, "metadata entry", hint))
    }
}

/// `count` C strings, rejecting null.
private func strings(_ p: UnsafePointer<UnsafePointer<CChar>?>?, _ count: Int32, _ what: String) throws -> [String] {
    guard count >= 0 else { throw LucidError(.value, "\(what): negative count \(count)") }
    if count == 0 { return [] }
    guard let p else { throw LucidError(.value, "\(what) pointer is null") }
    return try (0..<Int(count)).map { i in
        guard let s = p[i] else { throw LucidError(.value, "\(what)[\(i)] is null") }
        return String(cString: s)
    }
}

@_cdecl("lucid_safetensors_write")
public func lucid_safetensors_write(
    _ names: UnsafePointer<UnsafePointer<CChar>?>?, _ dtypes: UnsafePointer<UnsafePointer<CChar>?>?,
    _ ndims: UnsafePointer<Int32>?, _ shapes: UnsafePointer<Int64>?, _ data: UnsafePointer<UnsafeRawPointer?>?,
    _ nbytes: UnsafePointer<Int64>?, _ count: Int32, _ keys: UnsafePointer<UnsafePointer<CChar>?>?,
    _ values: UnsafePointer<UnsafePointer<CChar>?>?, _ metadataCount: Int32, _ out: UnsafeMutableRawPointer?,
    _ capacity: Int64, _ size: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        guard let size else { throw LucidError(.value, "size pointer is null") }
        let names = try strings(names, count, "names"), types = try strings(dtypes, count, "dtypes")
        guard count == 0 || (ndims != nil && data != nil && nbytes != nil) else {
            throw LucidError(.value, "ndims, data or nbytes pointer is null")
        }
        var items: [Safetensors.Item] = []
        var at = 0
        for i in 0..<Int(count) {
            let type = try Safetensors.ElementType.writable(types[i], for: names[i])
            let rank = Int(ndims![i])
            guard (0...64).contains(rank) else { throw LucidError(.value, "tensor '\(names[i])' has \(rank) dimensions (0 to 64)") }
            guard rank == 0 || shapes != nil else { throw LucidError(.value, "shapes pointer is null") }
            let shape = (0..<rank).map { Int(clamping: shapes![at + $0]) }
            at += rank
            let n = nbytes![i]
            guard n >= 0 else { throw LucidError(.value, "tensor '\(names[i])': negative nbytes \(n)") }
            guard n == 0 || data![i] != nil else { throw LucidError(.value, "tensor '\(names[i])': data pointer is null") }
            items.append(Safetensors.Item(name: names[i], type: type, shape: shape, bytes: UnsafeRawBufferPointer(start: data![i], count: Int(n))))
        }
        let metadata = zip(try strings(keys, metadataCount, "keys"), try strings(values, metadataCount, "values")).map { (key: $0, value: $1) }
        let layout = try Safetensors.layout(items, metadata: metadata)
        size.pointee = Int64(layout.size)
        guard let out, capacity >= Int64(layout.size) else { return }
        Safetensors.write(items, layout, into: UnsafeMutableRawBufferPointer(start: out, count: layout.size))
    }
}
