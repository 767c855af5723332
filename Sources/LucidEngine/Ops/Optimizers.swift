/// Optimizer updates: one call per parameter, which writes the parameter and its state in
/// place (one kernel; a non-contiguous tensor goes through a contiguous copy and back). State
/// made on the first step is returned. Nothing is recorded in the graph; the storages' versions
/// go up, and an updated parameter's casts leave autocast's weight cache.
package enum Optimizers {
    /// `t` itself when contiguous, else a contiguous copy to update and write back.
    private static func dense(_ t: TensorImpl) throws -> TensorImpl {
        t.isContiguous ? t : try GradMode.with(false) { try Ops.clone(t.withRequiresGrad(false)) }
    }

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

    /// torch.optim.SGD's update of `param`, in place. `momentumBuffer` is the buffer from the
    /// previous step (nil on the first), updated in place; when momentum is non-zero the first
    /// step makes it and returns it.
    package static func sgd(param: TensorImpl, grad: TensorImpl, momentumBuffer: TensorImpl?, lr: Double, momentum: Double,
                            dampening: Double, weightDecay: Double, nesterov: Bool, maximize: Bool) throws -> TensorImpl? {
        try check("sgd", param, [("grad", grad), ("momentum buffer", momentumBuffer)])
        try checkHyper("sgd", [("lr", lr), ("momentum", momentum), ("dampening", dampening), ("weight_decay", weightDecay)])
        if nesterov && (momentum == 0 || dampening != 0) {
            throw LucidError.value("sgd: nesterov momentum requires a momentum and zero dampening")
        }
        let p = try dense(param), g = try Ops.contiguous(grad)
        let buf = try momentumBuffer.map(dense)
        let made = momentum != 0 && buf == nil ? try TensorImpl.empty(p.shape, dtype: p.dtype, on: p.backend) : nil
        let hyper = SGDHyper(lr: Float(lr), momentum: Float(momentum), dampening: Float(dampening),
                             weightDecay: Float(weightDecay), nesterov: nesterov, maximize: maximize, firstStep: buf == nil)
        p.optimizers("sgd_step").sgdStep(param: p, grad: g, momentum: buf, hyper: hyper, newParam: p,
                                         newMomentum: momentum != 0 ? (buf ?? made) : nil)
        finish(param, p)
        if let momentumBuffer, let buf, momentum != 0 { finish(momentumBuffer, buf) }
        Autocast.evictCasts(of: param)
        return made
    }

    /// Gradient unscaling for loss scaling (GradScaler.unscale_): every gradient times
    /// `invScale`, in float32, in place; whether any of them holds an infinity or NaN.
    package static func unscale(_ grads: [TensorImpl], invScale: Double) throws -> Bool {
        guard invScale.isFinite, invScale > 0 else {
            throw LucidError.value("unscale: the inverse scale must be finite and positive, got \(invScale)")
        }
        let work = try grads.map { g -> TensorImpl in
            guard g.dtype.isFloatingPoint else { throw LucidError.type("unscale: gradients must be floating point, got \(g.dtype)") }
            return try dense(g)
        }
        // One call per device, so that a GPU reports its infinities once.
        var found = false
        var devices: [Device] = []
        for g in work where !devices.contains(g.device) { devices.append(g.device) }
        for device in devices {
            let mine = work.indices.filter { work[$0].device == device }.map { work[$0] }
            guard let first = mine.first else { continue }
            if first.optimizers("unscale").unscale(mine, invScale: Float(invScale), into: mine) { found = true }
        }
        for (g, w) in zip(grads, work) { finish(g, w) }
        return found
    }

    /// torch.optim.Adam's update (AdamW's when `decoupled`) of `param`, in place, at 1-based
    /// `step`, with first and second moments `m` and `v` updated in place (nil before the first
    /// step: made as zeros, updated and returned).
    package static func adam(param: TensorImpl, grad: TensorImpl, m: TensorImpl?, v: TensorImpl?, step: Int, lr: Double,
                             beta1: Double, beta2: Double, eps: Double, weightDecay: Double, decoupled: Bool, maximize: Bool)
        throws -> (m: TensorImpl, v: TensorImpl) {
        try check("adam", param, [("grad", grad), ("exp_avg", m), ("exp_avg_sq", v)])
        try checkHyper("adam", [("lr", lr), ("eps", eps), ("weight_decay", weightDecay)])
        guard (0..<1).contains(beta1), (0..<1).contains(beta2) else {
            throw LucidError.value("adam: betas must be in [0, 1), got (\(beta1), \(beta2))")
        }
        guard step >= 1 else { throw LucidError.value("adam: step must be at least 1, got \(step)") }
        let p = try dense(param), g = try Ops.contiguous(grad)
        let zeros = { try Creation.full(p.shape, value: ScalarOperand(float: 0), dtype: p.dtype, device: p.device) }
        let m0 = try m.map(dense) ?? zeros(), v0 = try v.map(dense) ?? zeros()
        let hyper = AdamHyper(lr: Float(lr), beta1: Float(beta1), beta2: Float(beta2), eps: Float(eps),
                              weightDecay: Float(weightDecay), decoupled: decoupled, maximize: maximize, step: step)
        p.optimizers("adam_step").adamStep(param: p, grad: g, m: m0, v: v0, hyper: hyper, newParam: p, newM: m0, newV: v0)
        finish(param, p)
        if let m { finish(m, m0) }
        if let v { finish(v, v0) }
        Autocast.evictCasts(of: param)
        return (m ?? m0, v ?? v0)
    }
}
