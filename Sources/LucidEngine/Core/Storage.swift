/// Memory owned by a backend. A Metal backend keeps an `MTLBuffer` behind this protocol; the
/// host backends keep aligned host memory.
protocol DeviceBuffer: AnyObject, Sendable {
    var byteCount: Int { get }
    /// The buffer's memory as the host sees it. Every backend's memory is host-visible (on
    /// Apple Silicon a Metal buffer in shared storage is host memory); read or write it only
    /// after the backend's `synchronize()`.
    var contents: UnsafeMutableRawPointer { get }
}

/// A buffer shared by a tensor and every view of it, tied to the backend that made it.
final class Storage: Sendable {
    let buffer: any DeviceBuffer
    let backend: any Backend

    init(buffer: any DeviceBuffer, backend: any Backend) {
        self.buffer = buffer
        self.backend = backend
    }

    var device: Device { backend.device }
}
