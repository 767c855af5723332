#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What autocast does on one device: whether it is on and the dtype it targets.
public struct AutocastSetting: Equatable, Sendable {
    public var enabled: Bool
    public var dtype: DType

    public init(enabled: Bool, dtype: DType) {
        self.enabled = enabled
        self.dtype = dtype
    }

    /// A thread's setting before any scope: off, float16 by default.
    public static let off = AutocastSetting(enabled: false, dtype: .float16)
}

/// One live autocast scope on its thread: its id, what it set on which device, and the ops
/// whose policy it changes while it is live.
struct ScopeRecord {
    let id: UInt64
    let device: Device
    let setting: AutocastSetting
    var overrides: [String: CastPolicy] = [:]
}

/// A thread's autocast state: the scopes it has entered and not yet left, innermost last,
/// and the setting they produce on each device. Only its own thread reads or writes it.
final class ThreadAMPState {
    let serial: UInt64
    var scopes: [ScopeRecord] = []
    /// Each device's setting, indexed by its code: the innermost live scope's that names it.
    private(set) var settings = [AutocastSetting](repeating: .off, count: Device.allCases.count)
    /// Each device's policy overrides, indexed by its code: its live scopes' together, an
    /// inner scope's winning.
    private(set) var deviceOverrides = [[String: CastPolicy]](repeating: [:], count: Device.allCases.count)
    /// Whether any device has overrides in `deviceOverrides`.
    private var overridden = false
    /// Depth of engine regions that run with autocast off whatever the scopes say: the
    /// bodies of composite ops and backward passes.
    var suppressed = 0
    /// float32 leaves that require gradients (parameters), cast to a lower precision while
    /// any scope is open: each is cast once and reused by every op that reads it, until the
    /// outermost scope exits. The source is held so that its identity cannot be reused, with
    /// its storage's version when it was cast.
    var castCache: [CastKey: (source: TensorImpl, version: Int64, cast: TensorImpl)] = [:]
    /// Whether lower-precision casts of parameters go through `castCache` (autocast's
    /// `cache_enabled`; PyTorch's `set_autocast_cache_enabled`). On for a new thread.
    var cacheEnabled = true
    /// The live inspections (`AutocastInspection`), the module path their ops are recorded
    /// under, and the op call they have seen start, until its result is made.
    var inspections: [Inspection] = []
    var inspectedModule = ""
    var pendingInspection: PendingInspection?
    /// The Swift API's module calls in progress while an inspection is live, outermost first,
    /// each with the path its ops are recorded under (`Module.call`).
    var moduleCalls: [(module: AnyObject, path: String)] = []

    struct CastKey: Hashable {
        let source: ObjectIdentifier
        let dtype: DType
    }

    init(serial: UInt64) { self.serial = serial }

    @inline(__always)
    func setting(_ device: Device) -> AutocastSetting {
        suppressed > 0 ? .off : settings[Int(device.rawValue)]
    }

    /// The policy overrides in force for ops on `device` (none inside the engine's own
    /// autocast-off regions).
    @inline(__always)
    func overrides(_ device: Device) -> [String: CastPolicy] {
        suppressed > 0 ? [:] : deviceOverrides[Int(device.rawValue)]
    }

    /// Sets `op`'s policy in the live scope `id` of this thread.
    func override(_ id: UInt64, op: String, policy: CastPolicy) {
        guard let i = scopes.lastIndex(where: { $0.id == id }) else { return }
        scopes[i].overrides[op] = policy
        recompute()
    }

    /// A new innermost scope: its device follows it.
    func push(_ scope: ScopeRecord) {
        scopes.append(scope)
        settings[Int(scope.device.rawValue)] = scope.setting
    }

    /// Removes the scope `id` (the innermost, unless scopes are left out of order) and puts
    /// back the state the remaining scopes produce.
    func remove(_ id: UInt64) {
        if scopes.last?.id == id {
            scopes.removeLast()
        } else if let i = scopes.lastIndex(where: { $0.id == id }) {
            scopes.remove(at: i)
        }
        recompute()
        if scopes.isEmpty && !castCache.isEmpty { castCache.removeAll() }
    }

    /// Each device follows the innermost live scope that names it, or is off when none does.
    /// After a LIFO exit this is exactly the state that scope replaced; after an out-of-order
    /// exit it is still the innermost live scope's.
    ///
    /// Written in place, and the overrides rebuilt only when a scope has or had some: leaving a
    /// scope is as hot as entering one.
    func recompute() {
        for d in settings.indices { settings[d] = .off }
        for s in scopes { settings[Int(s.device.rawValue)] = s.setting }
        guard overridden || scopes.contains(where: { !$0.overrides.isEmpty }) else { return }
        for d in deviceOverrides.indices { deviceOverrides[d].removeAll() }
        for s in scopes where !s.overrides.isEmpty {
            deviceOverrides[Int(s.device.rawValue)].merge(s.overrides) { _, inner in inner }
        }
        overridden = deviceOverrides.contains { !$0.isEmpty }
    }
}

/// The process's autocast bookkeeping: each thread's `ThreadAMPState` (in thread-local
/// storage, made on the first scope a thread enters) and the table of live scopes that lets
/// the C ABI reject bad, stale, foreign-thread and already-released handles.
///
/// A scope id is a slot of that table and the slot's generation: `generation << 32 | slot + 1`.
/// Leaving a scope frees its slot and bumps the generation, so an old id never names a later
/// scope in the same slot (until the 32-bit generation wraps).
package enum AMPRegistry {
    private struct Slot {
        var generation: UInt32 = 1
        /// The owning thread's serial; 0 when the slot is free.
        var owner: UInt64 = 0
    }

    private static let lock = Lock()
    nonisolated(unsafe) private static var slots: [Slot] = []
    nonisolated(unsafe) private static var freeSlots: [Int] = []
    nonisolated(unsafe) private static var liveScopes = 0
    nonisolated(unsafe) private static var nextSerial: UInt64 = 1

    /// The thread-local slot. Its destructor runs when a thread ends and retires the scopes
    /// that thread left open, so a guard that outlives its thread is merely a stale handle.
    private static let key: pthread_key_t = {
        var k = pthread_key_t()
        pthread_key_create(&k) { value in
            // Darwin passes the value as non-optional, Glibc as optional: bind it either way.
            let raw: UnsafeMutableRawPointer? = value
            guard let raw else { return }
            AMPRegistry.threadDidEnd(Unmanaged<ThreadAMPState>.fromOpaque(raw).takeRetainedValue())
        }
        return k
    }()

    /// The calling thread's state, or nil when it has never entered a scope.
    @inline(__always)
    static func currentIfPresent() -> ThreadAMPState? {
        guard let raw = pthread_getspecific(key) else { return nil }
        return Unmanaged<ThreadAMPState>.fromOpaque(raw).takeUnretainedValue()
    }

    static func current() -> ThreadAMPState {
        if let s = currentIfPresent() { return s }
        let serial = lock.withLock { () -> UInt64 in
            defer { nextSerial += 1 }
            return nextSerial
        }
        let s = ThreadAMPState(serial: serial)
        pthread_setspecific(key, Unmanaged.passRetained(s).toOpaque())
        return s
    }

    /// The setting autocast has on `device` for the calling thread. Costs one TLS read.
    @inline(__always)
    static func setting(_ device: Device) -> AutocastSetting {
        currentIfPresent()?.setting(device) ?? .off
    }

    /// Enters a scope on the calling thread and returns its id.
    package static func enter(device: Device, setting: AutocastSetting) -> UInt64 {
        let state = current()
        let id = lock.withLock { () -> UInt64 in
            let index: Int
            if let free = freeSlots.popLast() {
                index = free
            } else {
                index = slots.count
                slots.append(Slot())
            }
            slots[index].owner = state.serial
            liveScopes += 1
            return UInt64(slots[index].generation) << 32 | UInt64(index + 1)
        }
        state.push(ScopeRecord(id: id, device: device, setting: setting))
        return id
    }

    /// Frees the table slot of the live scope `id`. The caller holds `lock`.
    private static func release(_ index: Int) {
        slots[index].owner = 0
        slots[index].generation = slots[index].generation == .max ? 1 : slots[index].generation + 1
        freeSlots.append(index)
        liveScopes -= 1
    }

    /// Leaves the scope `id`. Throws, changing nothing, when `id` is not a live scope or
    /// belongs to another thread.
    package static func exit(_ id: UInt64) throws {
        let state = currentIfPresent()
        try lock.withLock { release(try ownedSlot(id, state, "destroyed")) }
        state?.remove(id)
    }

    /// The table slot of the live scope `id` when it belongs to the calling thread (`state`);
    /// throws, for a null, dead or foreign handle, saying it can only be `done` on its own
    /// thread. The caller holds `lock`.
    private static func ownedSlot(_ id: UInt64, _ state: ThreadAMPState?, _ done: String) throws -> Int {
        if id == 0 { throw LucidError(.handle, "guard handle is null") }
        let index = Int(id & 0xFFFF_FFFF) - 1
        guard index >= 0, index < slots.count, UInt64(slots[index].generation) == id >> 32, slots[index].owner != 0 else {
            throw LucidError(
                .handle, "guard 0x\(String(id, radix: 16)) is not a live autocast guard (never created, already destroyed, or its thread has ended)")
        }
        guard let state, slots[index].owner == state.serial else {
            let here = state.map { "thread #\($0.serial)" } ?? "a thread with no autocast scope"
            throw LucidError(
                .thread,
                "guard "
                    + "0x\(String(id, radix: 16)) belongs to thread #\(slots[index].owner) and can only be \(done) there (called from "
                    + "\(here)); nothing was changed"
            )
        }
        return index
    }

    /// Overrides `op`'s policy inside the live scope `id` (the calling thread's). Throws,
    /// changing nothing, for a scope that is not live or not this thread's, an unknown op, or a
    /// policy the op cannot follow (`OpInfo.check(override:)`).
    package static func override(_ id: UInt64, op: String, policy: CastPolicy) throws {
        let state = currentIfPresent()
        _ = try lock.withLock { try ownedSlot(id, state, "given overrides") }
        guard let info = OpTable.info(op) else {
            throw LucidError(.value, "autocast override: unknown op '\(op)'; the ops are \(OpTable.all.map(\.name).sorted().joined(separator: ", "))")
        }
        try info.check(override: policy)
        state?.override(id, op: op, policy: policy)
    }

    /// Number of live scopes in the process.
    package static var liveCount: Int { lock.withLock { liveScopes } }

    private static func threadDidEnd(_ state: ThreadAMPState) {
        lock.withLock {
            for s in state.scopes { release(Int(s.id & 0xFFFF_FFFF) - 1) }
        }
        state.scopes.removeAll()
        state.castCache.removeAll()
        state.inspections.removeAll()
        state.pendingInspection = nil
        state.moduleCalls.removeAll()
    }

    /// The device of the innermost live scope that still switches autocast on, or nil.
    static func innermostEnabledDevice() -> Device? {
        guard let state = currentIfPresent(), state.suppressed == 0 else { return nil }
        var seen: Set<Int32> = []
        for s in state.scopes.reversed() where !seen.contains(s.device.rawValue) {
            seen.insert(s.device.rawValue)
            if s.setting.enabled { return s.device }
        }
        return nil
    }

    /// The dtype of the innermost live scope that still switches autocast on, or nil.
    static func innermostEnabledDType() -> DType? {
        guard let state = currentIfPresent(), state.suppressed == 0 else { return nil }
        var seen: Set<Int32> = []
        for s in state.scopes.reversed() where !seen.contains(s.device.rawValue) {
            seen.insert(s.device.rawValue)
            if s.setting.enabled { return s.setting.dtype }
        }
        return nil
    }
}
