/// Dynamic loss scaling for float16 training, with PyTorch's `torch.amp.GradScaler` rules and
/// Python's `lucid.amp.GradScaler` behaviour: the loss is multiplied by the scale so that
/// float16 gradients do not underflow; `unscale(_:)` divides the optimizer's gradients by it
/// and notes whether any is infinite or NaN; `step(_:)` skips the optimizer's step when one
/// was; `update()` backs the scale off after a skipped step (`backoffFactor`) and grows it
/// after `growthInterval` clean ones (`growthFactor`).
///
/// The scale, the growth tracker and each step's found-inf flag are tensors of the scaler's
/// device, and unscaling, skipping and updating run there as engine kernels: a training step
/// never waits for the host to read them. `currentScale()` and `stateDict()` read them.
///
/// ```swift
/// let scaler = try GradScaler(device: .metal)
/// let loss = try withAutocast(.metal) { try mseLoss(try x.linear(w), y) }
/// try scaler.scale(loss).backward()
/// try scaler.step(opt)       // skipped when a gradient is infinite or NaN
/// try scaler.update()
/// ```
public final class GradScaler {
    public let device: Device
    public let isEnabled: Bool
    public private(set) var growthFactor: Double
    public private(set) var backoffFactor: Double
    public private(set) var growthInterval: Int

    private var initScale: Double
    private var initGrowthTracker: Int32 = 0
    /// Made on the device at first use.
    private var scaleTensor: TensorImpl?
    private var growthTracker: TensorImpl?

    private enum Stage { case ready, unscaled, stepped }
    private var perOptimizer: [ObjectIdentifier: (stage: Stage, found: TensorImpl?)] = [:]

    /// A scaler for the gradients of tensors on `device` (PyTorch's defaults). `enabled`
    /// false makes every method a pass-through.
    public init(
        device: Device = .metal, initScale: Double = 65536, growthFactor: Double = 2, backoffFactor: Double = 0.5,
        growthInterval: Int = 2000, enabled: Bool = true
    ) throws {
        for (name, v) in [("initScale", initScale), ("growthFactor", growthFactor), ("backoffFactor", backoffFactor)]
        where !(v > 0 && v.isFinite) {
            throw LucidError.value("GradScaler: \(name) must be a finite positive number, got \(v)")
        }
        guard growthFactor > 1 else { throw LucidError.value("GradScaler: growthFactor must be > 1, got \(growthFactor)") }
        guard backoffFactor < 1 else { throw LucidError.value("GradScaler: backoffFactor must be < 1, got \(backoffFactor)") }
        guard growthInterval > 0, growthInterval <= Int(Int32.max) else {
            throw LucidError.value("GradScaler: growthInterval must be a positive 32-bit count, got \(growthInterval)")
        }
        self.device = device
        self.isEnabled = enabled
        self.initScale = initScale
        self.growthFactor = growthFactor
        self.backoffFactor = backoffFactor
        self.growthInterval = growthInterval
    }

    private func lazyScale() throws -> TensorImpl {
        if let s = scaleTensor { return s }
        let s = try Creation.full([], value: ScalarOperand(float: initScale), dtype: .float32, device: device)
        growthTracker = try Creation.full([], value: ScalarOperand(int: Int64(initGrowthTracker)), dtype: .int32, device: device)
        scaleTensor = s
        return s
    }

    /// The current scale (1 when disabled), read from the device.
    public func currentScale() throws -> Double {
        guard isEnabled else { return 1 }
        guard let s = scaleTensor else { return initScale }
        return Double(try Tensor(s).item())
    }

    /// The clean steps since the scale last changed, read from the device.
    public func currentGrowthTracker() throws -> Int {
        guard let t = growthTracker else { return Int(initGrowthTracker) }
        return Int(try Tensor(t).item())
    }

    /// `loss` times the scale (a tensor on the scaler's device).
    public func scale(_ loss: Tensor) throws -> Tensor {
        guard isEnabled else { return loss }
        guard loss.device == device else {
            throw LucidError.value("GradScaler(device: .\(device)) cannot scale a tensor on .\(loss.device)")
        }
        return Tensor(try Elementwise.binary(.mul, loss.impl, try lazyScale()))
    }

    /// Divides `optimizer`'s gradients by the scale, in place (in float32, on the device), and
    /// notes on the device whether any is infinite or NaN. At most once per optimizer between
    /// `update()`s; `step(_:)` calls it when it was not called (call it first to clip the
    /// unscaled gradients, with `clipGradNorm`).
    public func unscale(_ optimizer: Optimizer) throws {
        guard isEnabled else { return }
        let key = ObjectIdentifier(optimizer)
        switch perOptimizer[key]?.stage ?? .ready {
        case .unscaled: throw LucidError.runtime("GradScaler.unscale(_:) has already been called on this optimizer since the last update()")
        case .stepped: throw LucidError.runtime("GradScaler.unscale(_:) is being called after step(_:)")
        case .ready: break
        }
        let scale = try lazyScale()
        let grads = optimizer.parameters.compactMap { Autograd.grad(of: $0.impl) }
        let inv = try Elementwise.binary(.div, scale, scalar: ScalarOperand(float: 1), scalarFirst: true)
        let found = try Creation.full([], value: ScalarOperand(float: 0), dtype: .float32, device: device)
        try GradMode.with(false) { try Optimizers.unscale(grads, invScale: inv, foundInf: found) }
        perOptimizer[key] = (.unscaled, found)
    }

    /// Unscales (when `unscale(_:)` was not called) and runs `optimizer.step()`, skipped on the
    /// device when a gradient is infinite or NaN. Once per optimizer between `update()`s.
    public func step(_ optimizer: Optimizer) throws {
        guard isEnabled else { return try optimizer.step() }
        let key = ObjectIdentifier(optimizer)
        switch perOptimizer[key]?.stage ?? .ready {
        case .stepped: throw LucidError.runtime("GradScaler.step(_:) has already been called since the last update()")
        case .ready: try unscale(optimizer)
        case .unscaled: break
        }
        let found = perOptimizer[key]!.found
        perOptimizer[key] = (.stepped, found)
        try GradMode.with(false) { try optimizer.step(skipIf: found) }
    }

    /// Adjusts the scale on the device for the next iteration: `backoffFactor` times it when
    /// any optimizer's step since the last update was skipped, `growthFactor` times it after
    /// `growthInterval` clean steps in a row (unless that leaves the float32 range).
    public func update() throws {
        guard isEnabled else { return }
        let scale = try lazyScale()
        let found = perOptimizer.values.compactMap(\.found)
        guard var combined = found.first else {
            throw LucidError.runtime("GradScaler.update(): no inf checks were recorded; call step(_:) or unscale(_:) first")
        }
        for f in found.dropFirst() { combined = try Elementwise.binary(.add, combined, f) }
        try Optimizers.updateScale(
            scale, growthTracker: growthTracker!, foundInf: combined, growthFactor: growthFactor,
            backoffFactor: backoffFactor, growthInterval: growthInterval)
        perOptimizer = [:]
    }

    /// Sets the scale to `newScale` (a finite positive number) for the next iteration.
    public func update(newScale: Double) throws {
        guard isEnabled else { return }
        guard newScale > 0, newScale.isFinite else {
            throw LucidError.value("GradScaler.update(newScale:): newScale must be a finite positive number, got \(newScale)")
        }
        _ = try InPlace.fill(try lazyScale(), ScalarOperand(float: newScale), base: nil, op: "GradScaler.update(newScale:)")
        perOptimizer = [:]
    }

    /// The scaler's state, read from the device, under the names of PyTorch's state dict:
    /// `scale`, `growth_factor`, `backoff_factor`, `growth_interval` and `_growth_tracker`
    /// (empty when disabled).
    public func stateDict() throws -> [String: Double] {
        guard isEnabled else { return [:] }
        return [
            "scale": try currentScale(), "growth_factor": growthFactor, "backoff_factor": backoffFactor,
            "growth_interval": Double(growthInterval), "_growth_tracker": Double(try currentGrowthTracker()),
        ]
    }

    /// Restores what `stateDict()` returned (checked as `init` checks its arguments).
    public func loadStateDict(_ state: [String: Double]) throws {
        guard isEnabled else { return }
        guard !state.isEmpty else {
            throw LucidError.runtime("GradScaler.loadStateDict(_:): the state is empty: it was saved from a disabled GradScaler")
        }
        let names = ["scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"]
        for name in names where state[name] == nil {
            throw LucidError.value("GradScaler.loadStateDict(_:): the state lacks '\(name)'")
        }
        let tracker = state["_growth_tracker"]!, interval = state["growth_interval"]!
        guard tracker >= 0, tracker < Double(Int32.max), tracker == tracker.rounded(), interval == interval.rounded(), interval >= 1,
            interval <= Double(Int32.max)
        else {
            throw LucidError.value("GradScaler.loadStateDict(_:): growth_interval and _growth_tracker must be counts, got \(interval) and \(tracker)")
        }
        let checked = try GradScaler(
            device: device, initScale: state["scale"]!, growthFactor: state["growth_factor"]!,
            backoffFactor: state["backoff_factor"]!, growthInterval: Int(interval))
        initScale = checked.initScale
        growthFactor = checked.growthFactor
        backoffFactor = checked.backoffFactor
        growthInterval = checked.growthInterval
        initGrowthTracker = Int32(tracker)
        if let s = scaleTensor, let t = growthTracker {
            _ = try InPlace.fill(s, ScalarOperand(float: initScale), base: nil, op: "GradScaler.loadStateDict(_:)")
            _ = try InPlace.fill(t, ScalarOperand(int: Int64(initGrowthTracker)), base: nil, op: "GradScaler.loadStateDict(_:)")
        }
    }
}
