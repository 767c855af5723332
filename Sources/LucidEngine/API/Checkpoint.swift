#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// Checkpoints in the safetensors format, the one Python's `lucid.save` and `lucid.load` write
// and read (the same reader and writer: Core/Safetensors.swift).

/// Writes `tensors` (their values: detached, row-major, little-endian, every dtype bit for
/// bit) and `metadata` to `path`, atomically: the file is written beside it under a
/// temporary name, flushed to disk and renamed over `path`, so that an interrupted save
/// leaves any previous checkpoint there intact. A module's state dict saved so loads in
/// Python with `lucid.load(path)` under the same names.
///
/// ```swift
/// try saveSafetensors(["0.weight": w, "0.bias": b], to: "model.safetensors")
/// let state = try loadSafetensors("model.safetensors", device: .metal)
/// ```
public func saveSafetensors(_ tensors: [String: Tensor], to path: String, metadata: [String: String] = [:]) throws {
    let data = try prefixed("saveSafetensors") {
        try Safetensors.encode(tensors.mapValues(\.impl), metadata: metadata.map { ($0.key, $0.value) })
    }
    try FileIO.writeAtomically(data, to: path, op: "saveSafetensors")
}

/// The tensors of the safetensors file at `path` (a regular file), by name, on `device`. The
/// file is read whole and checked before any tensor is made: a file that is truncated, lies about its
/// lengths, offsets, shapes or dtypes, names a key twice, or holds a dtype lucid cannot hold
/// (float8, uint64, ...) is refused with a `LucidError` (`.value`) saying what is wrong.
/// U16 and U32 tensors load as int32 and int64, as Python's `lucid.load` loads them. A file
/// written by Python's `lucid.save(model.state_dict(), path)` loads here under the same names,
/// bit for bit (its `lucid.structure` metadata, which rebuilds nested Python objects, is
/// left aside).
public func loadSafetensors(_ path: String, device: Device = .cpu) throws -> [String: Tensor] {
    let bytes = try FileIO.read(path, op: "loadSafetensors")
    return try prefixed("loadSafetensors") {
        try bytes.withUnsafeBytes { raw in
            try Safetensors.tensors(Safetensors.read(raw), in: raw, device: device).mapValues(Tensor.init)
        }
    }
}

/// The `__metadata__` of the safetensors file at `path` (empty when it has none), checked
/// as `loadSafetensors` checks the file.
public func loadSafetensorsMetadata(_ path: String) throws -> [String: String] {
    let bytes = try FileIO.read(path, op: "loadSafetensorsMetadata")
    return try prefixed("loadSafetensorsMetadata") {
        let contents = try bytes.withUnsafeBytes { try Safetensors.read($0) }
        return Dictionary(contents.metadata.map { ($0.key, $0.value) }, uniquingKeysWith: { a, _ in a })
    }
}

/// Runs `body`, prefixing the message of a `LucidError` it throws with `op`.
private func prefixed<T>(_ op: String, _ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let e as LucidError {
        throw LucidError(e.kind, "\(op): \(e.message)")
    }
}

extension Safetensors {
    /// The file of `tensors` (by name) and `metadata`, as bytes.
    package static func encode(_ tensors: [String: TensorImpl], metadata: [(key: String, value: String)]) throws -> [UInt8] {
        let names = tensors.keys.sorted()
        var buffers: [UnsafeMutableRawBufferPointer] = []
        defer { for b in buffers { b.deallocate() } }
        var items: [Item] = []
        for name in names {
            let t = try Ops.contiguous(tensors[name]!.withRequiresGrad(false))
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: t.numel * t.dtype.itemSize, alignment: 8)
            buffers.append(buffer)
            try Conversion.toHost(t, buffer)
            items.append(Item(name: name, type: ElementType(t.dtype), shape: t.shape, bytes: UnsafeRawBufferPointer(buffer)))
        }
        let layout = try layout(items, metadata: metadata)
        var out = [UInt8](repeating: 0, count: layout.size)
        out.withUnsafeMutableBytes { write(items, layout, into: $0) }
        return out
    }

    /// The tensors `contents` describes, made from the file's `bytes` on `device` (U16 and
    /// U32 widened to int32 and int64).
    package static func tensors(_ contents: Contents, in bytes: UnsafeRawBufferPointer, device: Device) throws -> [String: TensorImpl] {
        // Every tensor's device is checked before any is made.
        for e in contents.entries { try device.check(e.type.dtype!, op: "tensor '\(e.name)'") }
        var out: [String: TensorImpl] = [:]
        for e in contents.entries {
            let raw = UnsafeRawBufferPointer(rebasing: bytes[e.range])
            switch e.type {
            case .u16:
                let wide = (0..<(raw.count / 2)).map { Int32(raw.loadUnaligned(fromByteOffset: 2 * $0, as: UInt16.self).littleEndian) }
                out[e.name] = try wide.withUnsafeBytes { try Conversion.fromHost($0, shape: e.shape, dtype: .int32, device: device) }
            case .u32:
                let wide = (0..<(raw.count / 4)).map { Int64(raw.loadUnaligned(fromByteOffset: 4 * $0, as: UInt32.self).littleEndian) }
                out[e.name] = try wide.withUnsafeBytes { try Conversion.fromHost($0, shape: e.shape, dtype: .int64, device: device) }
            default:
                out[e.name] = try Conversion.fromHost(raw, shape: e.shape, dtype: e.type.dtype!, device: device)
            }
        }
        return out
    }
}

/// Whole-file reads and atomic writes, with failures as `LucidError`s naming the path.
enum FileIO {
    static func failure(_ op: String, _ what: String, _ path: String) -> LucidError {
        LucidError.runtime("\(op): cannot \(what) '\(path)': \(String(cString: strerror(errno)))")
    }

    static func read(_ path: String, op: String) throws -> [UInt8] {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw failure(op, "open", path) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw failure(op, "read", path) }
        guard (info.st_mode & S_IFMT) != S_IFDIR else { throw LucidError.runtime("\(op): '\(path)' is a directory") }
        // A device or a pipe may never end (/dev/zero): only a file's size bounds what is read.
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw LucidError.runtime("\(op): '\(path)' is not a regular file") }
        var out = [UInt8]()
        out.reserveCapacity(Int(info.st_size))
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = chunk.withUnsafeMutableBytes { systemRead(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw failure(op, "read", path)
            }
            if n == 0 { return out }
            out += chunk[0..<n]
        }
    }

    static func writeAtomically(_ data: [UInt8], to path: String, op: String) throws {
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { String(path[..<$0]).isEmpty ? "/" : String(path[..<$0]) } ?? "."
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        var fd: Int32 = -1
        var temporary = ""
        for _ in 0..<100 {
            let token = String(UInt64.random(in: 0..<(1 << 48)), radix: 16)
            temporary = "\(directory)/.\(name).\(token).tmp"
            fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL, 0o666)
            if fd >= 0 || errno != EEXIST { break }
        }
        guard fd >= 0 else { throw failure(op, "create a file in the directory of", path) }
        var ok = false
        defer {
            if !ok { unlink(temporary) }
        }
        do {
            defer { close(fd) }
            var written = 0
            while written < data.count {
                let n = data.withUnsafeBytes { systemWrite(fd, $0.baseAddress! + written, $0.count - written) }
                if n < 0 {
                    if errno == EINTR { continue }
                    throw failure(op, "write", path)
                }
                written += n
            }
            guard fsync(fd) == 0 else { throw failure(op, "flush", path) }
        }
        guard rename(temporary, path) == 0 else { throw failure(op, "rename a file over", path) }
        ok = true
        let dir = open(directory, O_RDONLY)
        if dir >= 0 {
            _ = fsync(dir)
            close(dir)
        }
    }
}

// `read` and `write` of the C library (FileIO has methods of those names).
private func systemRead(_ fd: Int32, _ p: UnsafeMutableRawPointer?, _ n: Int) -> Int {
    #if canImport(Glibc)
    return Glibc.read(fd, p, n)
    #else
    return Darwin.read(fd, p, n)
    #endif
}

private func systemWrite(_ fd: Int32, _ p: UnsafeRawPointer?, _ n: Int) -> Int {
    #if canImport(Glibc)
    return Glibc.write(fd, p, n)
    #else
    return Darwin.write(fd, p, n)
    #endif
}
