/// Memory owned by a backend. A Metal backend keeps an `MTLBuffer` behind this protocol; the
/// host backends keep aligned host memory.
protocol DeviceBuffer: AnyObject, Sendable {
    var byteCount: Int { get }
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
