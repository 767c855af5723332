import CHostKernels

/// Memory owned by a backend. A Metal backend keeps an `MTLBuffer` behind this protocol; the
/// host backends keep aligned host memory.
///
/// A buffer is host-visible when the host can address it (`hostContents`: host memory, or on
/// Apple Silicon a Metal buffer in shared storage). The host reaches any other buffer (a
/// discrete GPU's own memory) by copies only: the host kernels that run a call routed to the
/// host then work on staged host copies (`HostStaging`). Either way, read or write a buffer
/// only after its backend's `synchronize()`.
protocol DeviceBuffer: AnyObject, Sendable {
    var byteCount: Int { get }
    /// The buffer's memory as the host sees it, or nil when the host cannot address it.
    var hostContents: UnsafeMutableRawPointer? { get }
    /// Copies the buffer's `byteCount` bytes into host memory at `dst`.
    func copy(to dst: UnsafeMutableRawPointer)
    /// Copies `byteCount` bytes of host memory at `src` into the buffer.
    func copy(from src: UnsafeRawPointer)
}

extension DeviceBuffer {
    var isHostVisible: Bool { hostContents != nil }

    func copy(to dst: UnsafeMutableRawPointer) {
        guard let memory = hostContents else { preconditionFailure("a buffer the host cannot address must copy itself") }
        dst.copyMemory(from: memory, byteCount: byteCount)
    }

    func copy(from src: UnsafeRawPointer) {
        guard let memory = hostContents else { preconditionFailure("a buffer the host cannot address must copy itself") }
        memory.copyMemory(from: src, byteCount: byteCount)
    }
}

/// A buffer shared by a tensor and every view of it, tied to the backend that made it. Its
/// values change only through in-place writes, each of which bumps `version`: a tensor saved
/// for backward remembers the version it saw, and backward refuses to use it once it changed.
///
/// `alias()` is a second storage over the same buffer with a version of its own (PyTorch's
/// `.data`: writes through it are hidden from autograd's checks). `writes` counts the writes
/// through every storage of the buffer, for caches of values made from it.
final class Storage: ManagedBuffer<StorageParts, Int64>, @unchecked Sendable {
    // Its elements are three atomic counts (C11 atomics in CHostKernels), allocated with the
    // object, as every op result makes a storage: this storage's version, then the writes
    // through every storage of the buffer and the live aliases of it (both read from `root`'s
    // for an alias).

    /// A storage of its own over `buffer`.
    static func make(buffer: any DeviceBuffer, backend: any Backend) -> Storage {
        make(StorageParts(buffer: buffer, backend: backend, device: backend.device, root: nil))
    }

    private static func make(_ parts: StorageParts) -> Storage {
        let made = unsafeDowncast(create(minimumCapacity: 3) { _ in parts }, to: Storage.self)
        made.withUnsafeMutablePointerToElements { $0.initialize(repeating: 0, count: 3) }
        return made
    }

    deinit {
        header.root?.count(2) { lucid_counter_add($0, -1) }
    }

    var buffer: any DeviceBuffer { header.buffer }
    var backend: any Backend { header.backend }
    var device: Device { header.device }
    private var root: Storage? { header.root }

    /// `body` on count `index` of this storage.
    @inline(__always)
    private func count<R>(_ index: Int, _ body: (UnsafeMutablePointer<Int64>) -> R) -> R {
        withUnsafeMutablePointerToElements { body($0 + index) }
    }

    /// How many in-place writes this storage has had.
    var version: Int64 { count(0) { lucid_counter_load($0) } }

    /// How many in-place writes the buffer has had, through this storage or any alias of it.
    var writes: Int64 { (root ?? self).count(1) { lucid_counter_load($0) } }

    /// Records one in-place write.
    func bumpVersion() {
        _ = count(0) { lucid_counter_bump($0) }
        _ = (root ?? self).count(1) { lucid_counter_bump($0) }
    }

    /// A storage over the same buffer whose version counts only the writes made through it.
    func alias() -> Storage {
        let root = root ?? self
        root.count(2) { lucid_counter_add($0, 1) }
        return Self.make(StorageParts(buffer: buffer, backend: backend, device: device, root: root))
    }

    /// Whether no alias shares this storage's buffer (nor is this storage one).
    var hasNoAlias: Bool { root == nil && count(2) { lucid_counter_load($0) } == 0 }

    /// Whether `other` is this buffer's memory (this storage or an alias of it).
    func sharesMemory(with other: Storage) -> Bool { buffer === other.buffer }
}

/// What a storage holds besides its counts.
struct StorageParts {
    let buffer: any DeviceBuffer
    let backend: any Backend
    /// The backend's device, kept here: every op asks each operand's (a call through the
    /// backend's existential otherwise).
    let device: Device
    /// The storage an alias aliases (itself never an alias), which keeps the buffer's count of
    /// writes; nil for a storage of its own.
    let root: Storage?
}
