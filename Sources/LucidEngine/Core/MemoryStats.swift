/// Bytes held by tensor buffers, per device: what is allocated now and the peak since the last
/// reset. Backends report every allocation and release here.
package enum MemoryStats {
    private static let lock = Lock()
    nonisolated(unsafe) private static var current = [Int](repeating: 0, count: Device.allCases.count)
    nonisolated(unsafe) private static var peak = [Int](repeating: 0, count: Device.allCases.count)

    static func allocated(_ bytes: Int, on device: Device) {
        lock.withLock {
            let i = Int(device.rawValue)
            current[i] &+= bytes
            if current[i] > peak[i] { peak[i] = current[i] }
        }
    }

    static func released(_ bytes: Int, on device: Device) {
        lock.withLock { current[Int(device.rawValue)] &-= bytes }
    }

    /// Bytes allocated now on `device` (all devices when nil).
    package static func allocatedBytes(_ device: Device?) -> Int {
        lock.withLock { device.map { current[Int($0.rawValue)] } ?? current.reduce(0, +) }
    }

    /// The most bytes allocated at once on `device` since the last reset (for nil, the
    /// largest per-device peak sum).
    package static func peakBytes(_ device: Device?) -> Int {
        lock.withLock { device.map { peak[Int($0.rawValue)] } ?? peak.reduce(0, +) }
    }

    /// Returns the caching allocators' free blocks (host memory and Metal buffers) to the
    /// system; the bytes freed.
    package static func emptyCache() -> Int {
        var cached = HostAllocator.shared.cachedBytes
        HostAllocator.shared.emptyCache()
        #if canImport(Metal) && !LUCID_NO_METAL
        cached += Backends.metalBackend?.emptyCache() ?? 0
        #endif
        return cached
    }

    /// Restarts peak tracking from what is allocated now.
    package static func resetPeak(_ device: Device?) {
        lock.withLock {
            for d in Device.allCases where device == nil || device == d {
                peak[Int(d.rawValue)] = current[Int(d.rawValue)]
            }
        }
    }
}
