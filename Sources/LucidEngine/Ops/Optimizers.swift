/// Optimizer updates: one call per parameter, which writes the parameter and its state in
/// place (one kernel; a non-contiguous tensor goes through a contiguous copy and back). State
/// made on the first step is returned. Nothing is recorded in the graph; the storages' versions
/// go up, and an updated parameter's casts leave autocast's weight cache.
///
/// GradScaler's part is here too: unscaling, the found-inf flag and the scale are tensors of
/// the gradients' device, and an optimizer given the flag skips its step on the device, so
/// that a step under loss scaling never makes the host wait for a value.
package enum Optimizers {
    /// Writes `updated` back into `t` when it is a copy, and records the write.
    private static func finish(_ t: TensorImpl, _ updated: TensorImpl) {
        if updated !== t { t.backend.copy(updated, into: t) }
        t.storage.bumpVersion()
    }

    private static func check(_ op: String, _ param: TensorImpl, _ others: [(String, TensorImpl?)]) throws {
        guard param.dtype.isFloatingPoint else {
            throw LucidError.type("\(op): parameters must be floating point, got \(param.dtype)")
        }
        for (name, t) in others {
            guard let t else { continue }
            guard t.shape == param.shape else {
                throw LucidError.value("\(op): \(name) has shape \(t.shape), the parameter has \(param.shape)")
            }
            guard t.dtype == param.dtype else {
                throw LucidError.type("\(op): \(name) is \(t.dtype), the parameter is \(param.dtype)")
            }
            guard t.device == param.device else {
                throw LucidError.runtime("\(op): \(name) is on \(t.device), the parameter on \(param.device)")
            }
        }
    }

    private static func checkHyper(_ op: String, _ values: [(String, Double)]) throws {
        for (name, v) in values where !(v.isFinite && v >= 0) {
            throw LucidError.value("\(op): \(name) must be a finite non-negative number, got \(v)")
        }
    }

    /// Checks a one-element tensor of `dtype` on `device` (a flag, a count, a scale).
    private static func checkElement(
        _ op: String, _ name: String, _ t: TensorImpl, _ dtype: DType,
        on device: Device
    ) throws {
        guard t.numel == 1 else { throw LucidError.value("\(op): \(name) must have one element, got shape \(t.shape)") }
        guard t.dtype == dtype else { throw LucidError.type("\(op): \(name) must be \(dtype), got \(t.dtype)") }
        guard t.device == device else {
            throw LucidError.runtime("\(op): \(name) is on \(t.device), expected \(device)")
        }
    }

    /// Whether the found-inf flag is set, read now (the host waits for it).
    private static func isSetNow(_ found: TensorImpl) -> Bool {
        var value: Float = 0
        withUnsafeMutableBytes(of: &value) { found.backend.read(found, into: $0) }
        return value != 0
    }

    /// torch.optim.SGD's update of `param`, in place. `momentumBuffer` is the buffer from the
    /// previous step (nil on the first), updated in place; when momentum is non-zero the first
    /// step makes it and returns it. With `foundInf` (GradScaler's flag), nothing is updated when
    /// the flag is set.
    package static func sgd(
        param: TensorImpl, grad: TensorImpl, momentumBuffer: TensorImpl?, foundInf: TensorImpl? = nil,
        lr: Double, momentum: Double, dampening: Double, weightDecay: Double, nesterov: Bool,
        maximize: Bool
    ) throws -> TensorImpl? {
        try check("sgd", param, [("grad", grad), ("momentum buffer", momentumBuffer)])
        try checkHyper("sgd", [("lr", lr), ("momentum", momentum), ("dampening", dampening), ("weight_decay", weightDecay)])
        if nesterov && (momentum == 0 || dampening != 0) {
            throw LucidError.value("sgd: nesterov momentum requires a momentum and zero dampening")
        }
        if let foundInf { try checkElement("sgd", "found_inf", foundInf, .float32, on: param.device) }
        let p = try Ops.dense(param), g = try Ops.contiguous(grad)
        let buf = try momentumBuffer.map(Ops.dense)
        var found = foundInf, firstStep = buf == nil, made: TensorImpl?
        if momentum != 0 && buf == nil {
            if found != nil && dampening == 0 {
                // A zero buffer updated as on a later step holds the gradient, as a first step's
                // does, and stays zero (still "first") when the step is skipped.
                made = try Creation.full(p.shape, value: ScalarOperand(float: 0), dtype: p.dtype, device: p.device)
                firstStep = false
            } else {
                // With dampening, the first step must know whether it happens.
                if let f = found {
                    if isSetNow(f) { return nil }
                    found = nil
                }
                made = try TensorImpl.empty(p.shape, dtype: p.dtype, on: p.backend)
            }
        }
        let hyper = SGDHyper(
            lr: lr, momentum: momentum, dampening: dampening,
            weightDecay: weightDecay, nesterov: nesterov, maximize: maximize, firstStep: firstStep)
        let newMomentum = momentum != 0 ? (buf ?? made) : nil
        let state = [buf, newMomentum].compactMap { $0 }
        p.run(
            OptimizerKernels.self, KernelCall(.sgdStep, reads: Operands([p, g] + state + [found].compactMap { $0 }), writes: Operands([p] + state)),
            "sgd_step"
        ) {
            $0.sgdStep(param: p, grad: g, momentum: buf, hyper: hyper, newParam: p, newMomentum: newMomentum, skipIf: found)
        }
        finish(param, p)
        if let momentumBuffer, let buf, momentum != 0 { finish(momentumBuffer, buf) }
        Autocast.evictCasts(of: param)
        return made
    }

    /// torch.optim.Adam's update (AdamW's when `decoupled`) of `param`, in place, with first and
    /// second moments `m` and `v` updated in place (nil before the first step: made as zeros,
    /// updated and returned). `step` (a float32 element on the parameter's device) counts the
    /// steps taken and goes up by one. With `foundInf` (GradScaler's flag), nothing is updated,
    /// the count included, when the flag is set.
    package static func adam(
        param: TensorImpl, grad: TensorImpl, m: TensorImpl?, v: TensorImpl?, step: TensorImpl,
        foundInf: TensorImpl? = nil, lr: Double, beta1: Double, beta2: Double, eps: Double,
        weightDecay: Double, decoupled: Bool, maximize: Bool
    ) throws -> (m: TensorImpl, v: TensorImpl) {
        try check("adam", param, [("grad", grad), ("exp_avg", m), ("exp_avg_sq", v)])
        try checkHyper("adam", [("lr", lr), ("eps", eps), ("weight_decay", weightDecay)])
        guard (0..<1).contains(beta1), (0..<1).contains(beta2) else {
            throw LucidError.value("adam: betas must be in [0, 1), got (\(beta1), \(beta2))")
        }
        try checkElement("adam", "step", step, .float32, on: param.device)
        if let foundInf { try checkElement("adam", "found_inf", foundInf, .float32, on: param.device) }
        let p = try Ops.dense(param), g = try Ops.contiguous(grad)
        let zeros = { try Creation.full(p.shape, value: ScalarOperand(float: 0), dtype: p.dtype, device: p.device) }
        let m0 = try m.map(Ops.dense) ?? zeros(), v0 = try v.map(Ops.dense) ?? zeros()
        let hyper = AdamHyper(
            lr: lr, beta1: beta1, beta2: beta2, eps: eps,
            weightDecay: weightDecay, decoupled: decoupled, maximize: maximize)
        let call = KernelCall(.adamStep, reads: Operands([p, g, m0, v0, step] + [foundInf].compactMap { $0 }), writes: [p, m0, v0, step])
        p.run(OptimizerKernels.self, call, "adam_step") {
            $0.adamStep(
                param: p, grad: g, m: m0, v: v0, step: step, hyper: hyper, newParam: p, newM: m0, newV: v0,
                skipIf: foundInf)
        }
        finish(param, p)
        if let m { finish(m, m0) }
        if let v { finish(v, v0) }
        step.storage.bumpVersion()
        Autocast.evictCasts(of: param)
        return (m ?? m0, v ?? v0)
    }

    /// GradScaler's unscale: every gradient times `invScale` (a float32 element), in float32, in
    /// place; `foundInf` (a float32 element) is set to 1 when any of them holds an infinity or
    /// NaN, and left as it is otherwise. All on one device; nothing waits.
    package static func unscale(_ grads: [TensorImpl], invScale: TensorImpl, foundInf: TensorImpl) throws {
        let device = foundInf.device
        try checkElement("unscale", "found_inf", foundInf, .float32, on: device)
        try checkElement("unscale", "inv_scale", invScale, .float32, on: device)
        let work = try grads.map { g -> TensorImpl in
            guard g.dtype.isFloatingPoint else { throw LucidError.type("unscale: gradients must be floating point, got \(g.dtype)") }
            guard g.device == device else {
                throw LucidError.runtime("unscale: a gradient is on \(g.device), found_inf on \(device)")
            }
            return try Ops.dense(g)
        }
        guard !work.isEmpty else { return }
        let call = KernelCall(.unscale(count: work.count), reads: Operands(work + [invScale]), writes: Operands(work + [foundInf]))
        foundInf.run(AMPKernels.self, call, "unscale") { $0.unscale(work, invScale: invScale, found: foundInf, into: work) }
        for (g, w) in zip(grads, work) { finish(g, w) }
        foundInf.storage.bumpVersion()
    }

    /// GradScaler's update of `scale` (float32) and `growthTracker` (int32, the clean steps since
    /// the last change), one-element tensors of `foundInf`'s device, in place: after a skipped
    /// step the scale is multiplied by `backoffFactor`; after `growthInterval` clean steps by
    /// `growthFactor`, unless that leaves the float32 range.
    package static func updateScale(
        _ scale: TensorImpl, growthTracker: TensorImpl, foundInf: TensorImpl,
        growthFactor: Double, backoffFactor: Double, growthInterval: Int
    ) throws {
        let device = foundInf.device
        try checkElement("update_scale", "found_inf", foundInf, .float32, on: device)
        try checkElement("update_scale", "scale", scale, .float32, on: device)
        try checkElement("update_scale", "growth_tracker", growthTracker, .int32, on: device)
        guard growthFactor.isFinite, growthFactor > 1 else {
            throw LucidError.value("update_scale: growth_factor must be a finite number > 1, got \(growthFactor)")
        }
        guard backoffFactor > 0, backoffFactor < 1 else {
            throw LucidError.value("update_scale: backoff_factor must be in (0, 1), got \(backoffFactor)")
        }
        guard growthInterval > 0, let interval = Int32(exactly: growthInterval) else {
            throw LucidError.value("update_scale: growth_interval must be a positive int32, got \(growthInterval)")
        }
        let update = ScaleUpdate(
            growthFactor: Float(growthFactor), backoffFactor: Float(backoffFactor),
            growthInterval: interval)
        let call = KernelCall(.updateScale, reads: [scale, growthTracker, foundInf], writes: [scale, growthTracker])
        foundInf.run(AMPKernels.self, call, "update_scale") {
            $0.updateScale(scale, growthTracker: growthTracker, found: foundInf, update)
        }
        scale.storage.bumpVersion()
        growthTracker.storage.bumpVersion()
    }
}
