import LucidEngine

/// Opaque 32-bit handles for objects lent across the C ABI. A handle packs a slot index (the
/// low 22 bits, so up to 4,194,303 live objects) and the slot's generation (the high 10 bits),
/// so a released, forged or stale handle is recognised and reported instead of being
/// dereferenced, until its slot has been reused 1,023 times. 0 is never a valid handle.
final class HandleTable<Object>: @unchecked Sendable {
    static var indexBits: UInt32 { 22 }
    static var capacity: Int { (1 << indexBits) - 1 }
    static var generations: UInt32 { 1 << (32 - indexBits) }

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

    func insert(_ object: Object) throws -> UInt32 {
        try lock.withLock {
            let index: Int
            if let i = free.popLast() {
                index = i
            } else {
                guard slots.count < Self.capacity else {
                    throw LucidError(.runtime, "more than \(Self.capacity) \(kind)s are live; release some first")
                }
                slots.append(Slot())
                index = slots.count - 1
            }
            slots[index].object = object
            liveCount += 1
            return (slots[index].generation << Self.indexBits) | UInt32(index + 1)
        }
    }

    private func locate(_ handle: UInt32) -> Int? {
        let index = Int(handle & ((1 << Self.indexBits) - 1)) - 1
        let generation = handle >> Self.indexBits
        guard index >= 0, index < slots.count, slots[index].generation == generation,
            slots[index].object != nil
        else { return nil }
        return index
    }

    private func invalid(_ handle: UInt32) -> LucidError {
        LucidError(
            .handle,
            handle == 0
                ? "\(kind) handle is null"
                : "\(kind) handle 0x\(String(handle, radix: 16)) is not live (never issued, or already released)")
    }

    func get(_ handle: UInt32) throws -> Object {
        try with(handle) { $0 }
    }

    /// `body` applied to the object behind `handle`, under the table's lock.
    @inline(__always)
    func with<R>(_ handle: UInt32, _ body: (Object) throws -> R) throws -> R {
        try lock.withLock {
            guard let i = locate(handle), let o = slots[i].object else { throw invalid(handle) }
            return try body(o)
        }
    }

    /// `body` applied to the objects behind handles `a` and `b` (the first invalid one is
    /// reported), under one acquisition of the table's lock.
    @inline(__always)
    func with<R>(_ a: UInt32, _ b: UInt32, _ body: (Object, Object) throws -> R) throws -> R {
        try lock.withLock {
            guard let i = locate(a), let x = slots[i].object else { throw invalid(a) }
            guard let j = locate(b), let y = slots[j].object else { throw invalid(b) }
            return try body(x, y)
        }
    }

    /// `body` applied to the object behind `handle`, which it may replace, under the table's
    /// lock. The object it replaces is released after the lock, as in `remove(_:)`.
    func update<R>(_ handle: UInt32, _ body: (inout Object) throws -> R) throws -> R {
        var old: Object?
        let result: R = try lock.withLock {
            guard let i = locate(handle), var o = slots[i].object else { throw invalid(handle) }
            old = o
            defer { slots[i].object = o }
            return try body(&o)
        }
        withExtendedLifetime(old) {}
        return result
    }

    /// Puts `object` behind the live `handle` in place of the object there.
    func replace(_ handle: UInt32, with object: Object) throws {
        let dropped: Object? = try lock.withLock {
            guard let i = locate(handle) else { throw invalid(handle) }
            defer { slots[i].object = object }
            return slots[i].object
        }
        withExtendedLifetime(dropped) {}  // released outside the lock, as in remove(_:)
    }

    /// Frees one slot (the lock is held) and hands back its object.
    private func vacate(_ i: Int) -> Object? {
        let object = slots[i].object
        slots[i].object = nil
        slots[i].generation = slots[i].generation + 1 == Self.generations ? 1 : slots[i].generation + 1
        free.append(i)
        liveCount -= 1
        return object
    }

    func remove(_ handle: UInt32) throws {
        let dropped: Object? = try lock.withLock {
            guard let i = locate(handle) else { throw invalid(handle) }
            return vacate(i)
        }
        // Released here, outside the lock: its deinit may reach code that uses the table (a
        // custom function's context going back to its caller).
        withExtendedLifetime(dropped) {}
    }

    /// Removes every live handle of `handles` under one acquisition of the lock. The others
    /// are skipped, and the first of them is reported after the rest are gone.
    func remove(_ handles: UnsafeBufferPointer<UInt32>) throws {
        var dropped: [Object] = []
        dropped.reserveCapacity(handles.count)
        let firstInvalid: UInt32? = lock.withLock {
            var bad: UInt32?
            for h in handles {
                if let i = locate(h), let o = vacate(i) {
                    dropped.append(o)
                } else if bad == nil {
                    bad = h
                }
            }
            return bad
        }
        dropped.removeAll()  // deinits outside the lock, as in remove(_:)
        if let h = firstInvalid { throw invalid(h) }
    }

    var count: Int { lock.withLock { liveCount } }
}
