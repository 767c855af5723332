import CHostKernels

/// Bytes held by tensor buffers, per device: what is allocated now and the peak since the last
/// reset. Backends report every allocation and release here.
package enum MemoryStats {
    private static let devices = Device.allCases.count
    /// Per device, the bytes allocated now, then (at `devices` on) the peak: atomic counters
    /// (CHostKernels), since every tensor's buffer is counted as it is made and freed.
    nonisolated(unsafe) private static let counts: UnsafeMutablePointer<Int64> = {
        let p = UnsafeMutablePointer<Int64>.allocate(capacity: 2 * devices)
        p.initialize(repeating: 0, count: 2 * devices)
        return p
    }()

    private static func current(_ i: Int) -> UnsafeMutablePointer<Int64> { counts + i }
    private static func peak(_ i: Int) -> UnsafeMutablePointer<Int64> { counts + devices + i }

    static func allocated(_ bytes: Int, on device: Device) {
        let i = Int(device.rawValue)
        lucid_counter_raise(peak(i), lucid_counter_add_fetch(current(i), Int64(bytes)))
    }

    static func released(_ bytes: Int, on device: Device) {
        lucid_counter_add(current(Int(device.rawValue)), -Int64(bytes))
    }

    /// Bytes allocated now on `device` (all devices when nil).
    package static func allocatedBytes(_ device: Device?) -> Int {
        sum(device) { lucid_counter_load(current($0)) }
    }

    /// The most bytes allocated at once on `device` since the last reset (for nil, the
    /// largest per-device peak sum).
    package static func peakBytes(_ device: Device?) -> Int {
        sum(device) { lucid_counter_load(peak($0)) }
    }

    private static func sum(_ device: Device?, _ value: (Int) -> Int64) -> Int {
        Int(device.map { value(Int($0.rawValue)) } ?? (0..<devices).reduce(0) { $0 + value($1) })
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
        for d in Device.allCases where device == nil || device == d {
            let i = Int(d.rawValue)
            lucid_counter_store(peak(i), lucid_counter_load(current(i)))
        }
    }
}
