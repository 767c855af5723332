#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
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
final class Storage: @unchecked Sendable {
    let buffer: any DeviceBuffer
    let backend: any Backend
    /// The backend's device, kept here: every op asks each operand's (a call through the
    /// backend's existential otherwise).
    let device: Device
    /// Three atomic counts in one `malloc` block (C11 atomics in CHostKernels): this storage's
    /// version, then the writes through every storage of the buffer and the live aliases of it
    /// (both read from `root`'s for an alias). One plain allocation instead of a counter object
    /// each: every op result makes one.
    private let counts: UnsafeMutablePointer<Int64>
    /// The storage this one aliases (itself never an alias), which keeps the buffer's count of
    /// writes; nil for a storage of its own.
    private let root: Storage?

    init(buffer: any DeviceBuffer, backend: any Backend) {
        self.buffer = buffer
        self.backend = backend
        device = backend.device
        counts = Self.newCounts()
        root = nil
    }

    private init(aliasing other: Storage) {
        buffer = other.buffer
        backend = other.backend
        device = other.device
        counts = Self.newCounts()
        let root = other.root ?? other
        self.root = root
        lucid_counter_add(root.counts + 2, 1)
    }

    deinit {
        if let root { lucid_counter_add(root.counts + 2, -1) }
        free(counts)
    }

    /// Three zeroed counts, from `calloc`: `allocate(capacity:)` asks for aligned memory through
    /// `posix_memalign`, several times the cost. Where `calloc` fails, the Swift allocator is
    /// asked (with malloc's own alignment, so that `free` releases its block too) and fails as
    /// it does for any object.
    private static func newCounts() -> UnsafeMutablePointer<Int64> {
        let raw =
            calloc(3, MemoryLayout<Int64>.stride)
            ?? UnsafeMutableRawPointer.allocate(byteCount: 3 * MemoryLayout<Int64>.stride, alignment: 16)
        return raw.initializeMemory(as: Int64.self, repeating: 0, count: 3)
    }

    /// How many in-place writes this storage has had.
    var version: Int64 { lucid_counter_load(counts) }

    /// How many in-place writes the buffer has had, through this storage or any alias of it.
    var writes: Int64 { lucid_counter_load((root ?? self).counts + 1) }

    /// Records one in-place write.
    func bumpVersion() {
        _ = lucid_counter_bump(counts)
        _ = lucid_counter_bump((root ?? self).counts + 1)
    }

    /// A storage over the same buffer whose version counts only the writes made through it.
    func alias() -> Storage { Storage(aliasing: self) }

    /// Whether no alias shares this storage's buffer (nor is this storage one).
    var hasNoAlias: Bool { root == nil && lucid_counter_load(counts + 2) == 0 }

    /// Whether `other` is this buffer's memory (this storage or an alias of it).
    func sharesMemory(with other: Storage) -> Bool { buffer === other.buffer }
}
