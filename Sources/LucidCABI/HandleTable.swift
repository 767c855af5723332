import LucidEngine

/// Opaque handles for objects lent across the C ABI. A handle packs a slot index and the
/// slot's generation, so a released, forged or stale handle is recognised and reported
/// instead of being dereferenced. 0 is never a valid handle.
final class HandleTable<Object>: @unchecked Sendable {
    private struct Slot {
        var generation: UInt32 = 1
        var object: Object?
    }

    private let kind: String
    private let lock = Lock()
    private var slots: [Slot] = []
    private var free: [Int] = []
    private var liveCount = 0

    init(kind: String) { self.kind = kind }

    func insert(_ object: Object) -> UInt64 {
        lock.withLock {
            let index: Int
            if let i = free.popLast() {
                index = i
            } else {
                slots.append(Slot())
                index = slots.count - 1
            }
            slots[index].object = object
            liveCount += 1
            return (UInt64(slots[index].generation) << 32) | UInt64(index + 1)
        }
    }

    private func locate(_ handle: UInt64) -> Int? {
        let index = Int(handle & 0xffff_ffff) - 1
        let generation = UInt32(truncatingIfNeeded: handle >> 32)
        guard index >= 0, index < slots.count, slots[index].generation == generation,
              slots[index].object != nil else { return nil }
        return index
    }

    private func invalid(_ handle: UInt64) -> LucidError {
        LucidError(.handle, handle == 0 ? "\(kind) handle is null"
            : "\(kind) handle 0x\(String(handle, radix: 16)) is not live (never issued, or already released)")
    }

    func get(_ handle: UInt64) throws -> Object {
        try lock.withLock {
            guard let i = locate(handle), let o = slots[i].object else { throw invalid(handle) }
            return o
        }
    }

    func remove(_ handle: UInt64) throws {
        let dropped: Object? = try lock.withLock {
            guard let i = locate(handle) else { throw invalid(handle) }
            let object = slots[i].object
            slots[i].object = nil
            slots[i].generation &+= 1
            if slots[i].generation == 0 { slots[i].generation = 1 }
            free.append(i)
            liveCount -= 1
            return object
        }
        // Released here, outside the lock: its deinit may reach code that uses the table (a
        // custom function's context going back to its caller).
        withExtendedLifetime(dropped) {}
    }

    var count: Int { lock.withLock { liveCount } }
}
