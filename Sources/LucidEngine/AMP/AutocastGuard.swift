/// An autocast scope held by a Swift value: creating it sets `(enabled, dtype)` for one device
/// on the calling thread and records the setting it replaced; releasing it (or calling
/// `close()`) restores the thread's state.
///
/// Scopes closed out of order still leave the thread coherent: each device follows the
/// innermost scope still alive, and once every scope is gone autocast is off again. A guard
/// belongs to the thread that made it; closing it elsewhere throws and changes nothing.
///
/// ```swift
/// let scope = try AutocastGuard(.metal, dtype: .float16)
/// let y = try model(x)          // matmul and linear run in float16
/// try scope.close()
/// ```
public final class AutocastGuard: @unchecked Sendable {
    /// The device this scope governs.
    public let device: Device
    /// What the scope set.
    public let setting: AutocastSetting
    /// What the scope replaced when it was entered.
    public let replaced: AutocastSetting
    /// The engine's id for the scope; the C ABI hands it out as the guard handle.
    public let id: UInt64
    private var open = true

    /// Enters a scope on the calling thread.
    ///
    /// - Parameters:
    ///   - device: the device whose autocast state changes.
    ///   - dtype: the lower-precision dtype; nil means float16. float32 is accepted too.
    ///   - enabled: false switches autocast off on `device` for the scope.
    /// - Throws: `LucidError` (`.value`) for a dtype autocast cannot target.
    public init(_ device: Device, dtype: DType? = nil, enabled: Bool = true) throws {
        self.device = device
        self.setting = AutocastSetting(enabled: enabled, dtype: try Autocast.validatedDType(dtype))
        self.replaced = AMPRegistry.setting(device)
        self.id = try Autocast.enterScope(device, dtype: dtype, enabled: enabled)
    }

    /// Gives the op called `op` the policy `policy` while this scope is live (for ops on its
    /// device; an inner scope's override wins): `override("softmax", .lowerPrecision)`.
    public func override(_ op: String, _ policy: CastPolicy) throws {
        try Autocast.override(id, op: op, policy: policy)
    }

    /// Leaves the scope now. Throws when called from another thread (nothing changes) or when
    /// the scope's thread has ended.
    public func close() throws {
        guard open else { return }
        try AMPRegistry.exit(id)
        open = false
    }

    deinit {
        // A guard released on a foreign thread cannot touch its owner's state; its scope
        // stays until its own thread ends, as `close()` from that thread would have reported.
        if open { try? AMPRegistry.exit(id) }
    }
}

/// Runs `body` inside an autocast scope and leaves the scope when it returns or throws.
///
/// ```swift
/// let y = try withAutocast(.metal, dtype: .float16) { try x.matmul(w) }   // y.dtype == .float16
/// ```
public func withAutocast<R>(
    _ device: Device, dtype: DType? = nil, enabled: Bool = true,
    _ body: () throws -> R
) throws -> R {
    let scope = try AutocastGuard(device, dtype: dtype, enabled: enabled)
    defer { try? scope.close() }
    return try body()
}

/// Queries of the calling thread's autocast state.
public enum Autocast {
    /// The dtypes a scope can target.
    public static let targetDTypes: [DType] = [.float16, .bfloat16, .float32]

    /// The dtype a scope targets when none is given, on every device: float16, what the GPU
    /// runs fastest (float16 runs in float32 arithmetic on the CPU).
    public static func defaultDType(for device: Device) -> DType { .float16 }

    /// Enters a scope on the calling thread and returns its id — the handle-level form of
    /// `AutocastGuard`, which the C ABI's `guard_create` uses.
    /// - Throws: `LucidError` (`.value`) for a dtype autocast cannot target (nil is float16).
    public static func enterScope(_ device: Device, dtype: DType? = nil, enabled: Bool = true) throws -> UInt64 {
        AMPRegistry.enter(
            device: device,
            setting: AutocastSetting(enabled: enabled, dtype: try validatedDType(dtype, device: device)))
    }

    /// Leaves the scope `id` entered by `enterScope` on this thread. Throws, changing nothing,
    /// for an id that is not live or that belongs to another thread.
    public static func exitScope(_ id: UInt64) throws { try AMPRegistry.exit(id) }

    /// Gives the op called `op` the policy `policy` while the scope `id` (this thread's) is
    /// live, for ops on its device; an inner scope's override of the same op wins. Throws,
    /// changing nothing, for an unknown op or a scope that is not live or not this thread's.
    public static func override(_ id: UInt64, op: String, policy: CastPolicy) throws {
        try AMPRegistry.override(id, op: op, policy: policy)
    }

    /// The policy the op called `op` has on `device` for the calling thread now: a live
    /// scope's override, or its declared one. With no device, the device of the innermost
    /// scope that still switches autocast on (the device table's default when none does).
    public static func effectivePolicy(_ op: String, device: Device? = nil) throws -> CastPolicy {
        guard let info = OpTable.info(op) else {
            throw LucidError(.value, "unknown op '\(op)'; the ops are \(OpTable.all.map(\.name).sorted().joined(separator: ", "))")
        }
        return info.effectivePolicy(device ?? AMPRegistry.innermostEnabledDevice() ?? .autocastDefault)
    }

    /// How many scopes are live in the process (every thread).
    public static var liveScopes: Int { AMPRegistry.liveCount }

    /// Throws unless `dtype` (nil: the default) is one autocast can target.
    public static func validatedDType(_ dtype: DType?, device: Device = .autocastDefault) throws -> DType {
        let d = dtype ?? defaultDType(for: device)
        switch d {
        case .float16, .bfloat16, .float32:  // targetDTypes, matched without reading the array
            return d
        default:
            let names = targetDTypes.map { "lucid.\($0.name)" }
            throw LucidError.value("autocast dtype must be \(names.dropLast().joined(separator: ", ")) or \(names.last!), got lucid.\(d.name)")
        }
    }

    /// Whether autocast is on for `device`, or for any device when nil.
    public static func isEnabled(_ device: Device? = nil) -> Bool {
        if let device { return AMPRegistry.setting(device).enabled }
        return Device.allCases.contains { AMPRegistry.setting($0).enabled }
    }

    /// The dtype autocast targets on `device` (nil when off there). With no device: the dtype
    /// of the innermost scope that still switches autocast on, or nil when both are off.
    public static func dtype(_ device: Device? = nil) -> DType? {
        if let device {
            let s = AMPRegistry.setting(device)
            return s.enabled ? s.dtype : nil
        }
        return AMPRegistry.innermostEnabledDType()
    }

    /// Runs `body` with autocast off on both devices of the calling thread, restoring the
    /// state after (backward passes, and the ops a composite op is built from).
    static func disabled<R>(_ body: () throws -> R) rethrows -> R {
        guard let state = AMPRegistry.currentIfPresent(), !state.scopes.isEmpty else { return try body() }
        state.suppressed += 1
        defer { state.suppressed -= 1 }
        return try body()
    }

    /// `t` cast to `dtype` for an op under autocast. A float32 leaf that requires gradients
    /// (a parameter) is cast to a lower precision once per outermost scope and the cast
    /// reused, as PyTorch's autocast weight cache does; gradients still reach the leaf
    /// through every op that read it. Casts made with grad mode off are not kept, so a cached
    /// cast always carries its backward edge; a cast of values an in-place write has changed
    /// since (its buffer's count of writes, through any alias) is made again.
    static func cast(_ t: TensorImpl, to dtype: DType) throws -> TensorImpl {
        guard t.dtype == .float32, dtype.isLowPrecision, t.requiresGrad, t.gradFn == nil,
            let state = AMPRegistry.currentIfPresent(), !state.scopes.isEmpty, state.cacheEnabled
        else {
            return try Ops.cast(t, to: dtype)
        }
        let key = ThreadAMPState.CastKey(source: ObjectIdentifier(t), dtype: dtype)
        if let hit = state.castCache[key], hit.version == t.storage.writes { return hit.cast }
        let cast = try Ops.cast(t, to: dtype)
        if GradMode.isEnabled { state.castCache[key] = (t, t.storage.writes, cast) }
        return cast
    }

    /// Drops the calling thread's cached casts of `t` (a parameter an optimizer has replaced).
    static func evictCasts(of t: TensorImpl) {
        guard let state = AMPRegistry.currentIfPresent(), !state.castCache.isEmpty else { return }
        for d in [DType.float16, .bfloat16] {
            state.castCache[ThreadAMPState.CastKey(source: ObjectIdentifier(t), dtype: d)] = nil
        }
    }

    /// Number of casts the calling thread's weight cache holds.
    package static var cachedCasts: Int { AMPRegistry.currentIfPresent()?.castCache.count ?? 0 }

    /// Whether the calling thread's weight cache is used (on for a new thread).
    package static var cacheEnabled: Bool { AMPRegistry.currentIfPresent()?.cacheEnabled ?? true }

    /// Turns the calling thread's weight cache on or off; returns the previous setting. Casts
    /// already cached stay until the outermost scope exits.
    @discardableResult
    package static func setCacheEnabled(_ enabled: Bool) -> Bool {
        let state = AMPRegistry.current()
        defer { state.cacheEnabled = enabled }
        return state.cacheEnabled
    }

    /// The dtype lower-precision ops on `device` cast to, or nil when autocast leaves them
    /// alone. The CPU stream has no float16 kernels, so a CPU float16 scope casts nothing.
    @inline(__always)
    static func castTarget(_ device: Device) -> DType? {
        let s = AMPRegistry.setting(device)
        guard s.enabled else { return nil }
        if s.dtype == .float16 && !device.entry.autocastsFloat16 { return nil }
        return s.dtype
    }
}
