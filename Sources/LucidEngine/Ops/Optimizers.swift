/// Optimizer updates: one call per parameter, returning the updated parameter (a new leaf
/// with the same `requiresGrad`) and its updated state. Nothing is recorded in the graph; an
/// updated parameter's casts leave autocast's weight cache.
package enum Optimizers {
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

    /// torch.optim.SGD's update. `momentum` is the buffer from the previous step (nil on the
    /// first); the new buffer is returned when momentum is non-zero.
    package static func sgd(param: TensorImpl, grad: TensorImpl, momentumBuffer: TensorImpl?, lr: Double, momentum: Double,
                            dampening: Double, weightDecay: Double, nesterov: Bool, maximize: Bool)
        throws -> (TensorImpl, TensorImpl?) {
        try check("sgd", param, [("grad", grad), ("momentum buffer", momentumBuffer)])
        try checkHyper("sgd", [("lr", lr), ("momentum", momentum), ("dampening", dampening), ("weight_decay", weightDecay)])
        if nesterov && (momentum == 0 || dampening != 0) {
            throw LucidError.value("sgd: nesterov momentum requires a momentum and zero dampening")
        }
        let p = try Ops.contiguous(param), g = try Ops.contiguous(grad)
        let buf = try momentumBuffer.map(Ops.contiguous)
        let newP = try TensorImpl.empty(p.shape, dtype: p.dtype, on: p.backend)
        let newBuf = momentum != 0 ? try TensorImpl.empty(p.shape, dtype: p.dtype, on: p.backend) : nil
        let hyper = SGDHyper(lr: Float(lr), momentum: Float(momentum), dampening: Float(dampening),
                             weightDecay: Float(weightDecay), nesterov: nesterov, maximize: maximize, firstStep: buf == nil)
        p.optimizers("sgd_step").sgdStep(param: p, grad: g, momentum: buf, hyper: hyper, newParam: newP, newMomentum: newBuf)
        Autocast.evictCasts(of: param)
        return (newP.withRequiresGrad(param.requiresGrad), newBuf)
    }

    /// Gradient unscaling for loss scaling (GradScaler.unscale_): every gradient times
    /// `invScale`, in float32, and whether any of them holds an infinity or NaN.
    package static func unscale(_ grads: [TensorImpl], invScale: Double) throws -> ([TensorImpl], Bool) {
        guard invScale.isFinite, invScale > 0 else {
            throw LucidError.value("unscale: the inverse scale must be finite and positive, got \(invScale)")
        }
        let dense = try grads.map { g -> TensorImpl in
            guard g.dtype.isFloatingPoint else { throw LucidError.type("unscale: gradients must be floating point, got \(g.dtype)") }
            return try Ops.contiguous(g)
        }
        let out = try dense.map { try TensorImpl.empty($0.shape, dtype: $0.dtype, on: $0.backend) }
        // One call per device, so that a GPU reports its infinities once.
        var found = false
        var devices: [Device] = []
        for g in dense where !devices.contains(g.device) { devices.append(g.device) }
        for device in devices {
            let mine = dense.indices.filter { dense[$0].device == device }
            guard let first = mine.first else { continue }
            if dense[first].optimizers("unscale").unscale(mine.map { dense[$0] }, invScale: Float(invScale),
                                                          into: mine.map { out[$0] }) {
                found = true
            }
        }
        return (out, found)
    }

    /// torch.optim.Adam's update (AdamW's when `decoupled`) at 1-based `step`, with first and
    /// second moments `m` and `v` (nil before the first step: zeros).
    package static func adam(param: TensorImpl, grad: TensorImpl, m: TensorImpl?, v: TensorImpl?, step: Int, lr: Double,
                             beta1: Double, beta2: Double, eps: Double, weightDecay: Double, decoupled: Bool, maximize: Bool)
        throws -> (TensorImpl, TensorImpl, TensorImpl) {
        try check("adam", param, [("grad", grad), ("exp_avg", m), ("exp_avg_sq", v)])
        try checkHyper("adam", [("lr", lr), ("eps", eps), ("weight_decay", weightDecay)])
        guard (0..<1).contains(beta1), (0..<1).contains(beta2) else {
            throw LucidError.value("adam: betas must be in [0, 1), got (\(beta1), \(beta2))")
        }
        guard step >= 1 else { throw LucidError.value("adam: step must be at least 1, got \(step)") }
        let p = try Ops.contiguous(param), g = try Ops.contiguous(grad)
        let zeros = { try Creation.full(p.shape, value: ScalarOperand(float: 0), dtype: p.dtype, device: p.device) }
        let m0 = try m.map(Ops.contiguous) ?? zeros(), v0 = try v.map(Ops.contiguous) ?? zeros()
        let newP = try TensorImpl.empty(p.shape, dtype: p.dtype, on: p.backend)
        let newM = try TensorImpl.empty(p.shape, dtype: p.dtype, on: p.backend)
        let newV = try TensorImpl.empty(p.shape, dtype: p.dtype, on: p.backend)
        let hyper = AdamHyper(lr: Float(lr), beta1: Float(beta1), beta2: Float(beta2), eps: Float(eps),
                              weightDecay: Float(weightDecay), decoupled: decoupled, maximize: maximize, step: step)
        p.optimizers("adam_step").adamStep(param: p, grad: g, m: m0, v: v0, hyper: hyper, newParam: newP, newM: newM, newV: newV)
        Autocast.evictCasts(of: param)
        return (newP.withRequiresGrad(param.requiresGrad), newM, newV)
    }
}
