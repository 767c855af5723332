import CHostKernels

/// Memory owned by a backend. A Metal backend keeps an `MTLBuffer` behind this protocol; the
/// host backends keep aligned host memory.
protocol DeviceBuffer: AnyObject, Sendable {
    var byteCount: Int { get }
    /// The buffer's memory as the host sees it. Every backend's memory is host-visible (on
    /// Apple Silicon a Metal buffer in shared storage is host memory); read or write it only
    /// after the backend's `synchronize()`.
    var contents: UnsafeMutableRawPointer { get }
}

/// A buffer shared by a tensor and every view of it, tied to the backend that made it. Its
/// values change only through in-place writes, each of which bumps `version`: a tensor saved
/// for backward remembers the version it saw, and backward refuses to use it once it changed.
final class Storage: @unchecked Sendable {
    let buffer: any DeviceBuffer
    let backend: any Backend
    private let counter: UnsafeMutablePointer<Int64>

    init(buffer: any DeviceBuffer, backend: any Backend) {
        self.buffer = buffer
        self.backend = backend
        counter = .allocate(capacity: 1)
        counter.initialize(to: 0)
    }

    deinit { counter.deallocate() }

    var device: Device { backend.device }

    /// How many in-place writes the storage has had.
    var version: Int64 { lucid_counter_load(counter) }

    /// Records one in-place write.
    func bumpVersion() { _ = lucid_counter_bump(counter) }
}
