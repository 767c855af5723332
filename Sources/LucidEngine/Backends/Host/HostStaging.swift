/// Host copies of buffers the host cannot address (`DeviceBuffer.hostContents` nil), for the
/// host kernels that run a call routed to the host: each such buffer among the call's operands
/// is copied into host memory before the call, the host kernels find the copy through
/// `HostBackend.address`, and the buffers the call writes are copied back after it. A backend
/// whose memory the host can address never stages anything.
enum HostStaging {
    private final class Copy {
        let memory: UnsafeMutableRawPointer
        /// Calls under way that use this copy (two threads may stage one buffer).
        var users = 1

        init(of buffer: any DeviceBuffer) {
            memory = .allocate(byteCount: max(buffer.byteCount, 1), alignment: 64)
            buffer.copy(to: memory)
        }

        deinit { memory.deallocate() }
    }

    private static let lock = Lock()
    nonisolated(unsafe) private static var copies: [ObjectIdentifier: Copy] = [:]

    /// Runs `body` with the buffers of `call`'s operands that the host cannot address staged;
    /// the written ones go back into their buffers when it returns (or throws).
    static func run<R>(_ call: KernelCall, _ body: () throws -> R) rethrows -> R {
        var staged: [any DeviceBuffer] = [], written: [any DeviceBuffer] = []
        for (t, writes) in call.reads.map({ ($0, false) }) + call.writes.map({ ($0, true) }) {
            let buffer = t.storage.buffer
            guard !buffer.isHostVisible else { continue }
            if !staged.contains(where: { $0 === buffer }) { staged.append(buffer) }
            if writes, !written.contains(where: { $0 === buffer }) { written.append(buffer) }
        }
        guard !staged.isEmpty else { return try body() }
        for buffer in staged {
            let key = ObjectIdentifier(buffer)
            let existing = lock.withLock { () -> Bool in
                guard let copy = copies[key] else { return false }
                copy.users += 1
                return true
            }
            if !existing {
                let copy = Copy(of: buffer)
                lock.withLock {
                    if let other = copies[key] { other.users += 1 } else { copies[key] = copy }
                }
            }
        }
        defer {
            for buffer in written { buffer.copy(from: contents(of: buffer)) }
            lock.withLock {
                for buffer in staged {
                    let key = ObjectIdentifier(buffer)
                    if let copy = copies[key] {
                        copy.users -= 1
                        if copy.users == 0 { copies[key] = nil }
                    }
                }
            }
        }
        return try body()
    }

    /// The staged copy of `buffer`, which the host cannot address; only during a call that
    /// stages it.
    static func contents(of buffer: any DeviceBuffer) -> UnsafeMutableRawPointer {
        guard let copy = lock.withLock({ copies[ObjectIdentifier(buffer)] }) else {
            preconditionFailure("the host kernels reached a buffer the host cannot address outside a staged call")
        }
        return copy.memory
    }
}
