/// Scales the gradients of `parameters` in place so that their joint `normType`-norm is at
/// most `maxNorm`, as `torch.nn.utils.clip_grad_norm_` does: the norm of the per-gradient
/// norms, computed in float32; when `maxNorm / (norm + 1e-6)` is below 1, every gradient is
/// multiplied by it. Returns the total norm before clipping (a float32 scalar on the
/// gradients' device; 0 when no parameter has a gradient). `normType` is a positive number
/// or `.infinity` (the largest magnitude). Reads the norm on the host once. Under loss
/// scaling, call `GradScaler.unscale(_:)` first.
@discardableResult
public func clipGradNorm(_ parameters: [Tensor], maxNorm: Double, normType: Double = 2) throws -> Tensor {
    guard normType > 0, !normType.isNaN else {
        throw LucidError.value("clipGradNorm: normType must be a positive number or .infinity, got \(normType)")
    }
    guard maxNorm >= 0, !maxNorm.isNaN else { throw LucidError.value("clipGradNorm: maxNorm must be >= 0, got \(maxNorm)") }
    let grads = parameters.compactMap { Autograd.grad(of: $0.impl) }
    guard let first = grads.first else { return try Tensor.zeros([]) }
    return try GradMode.with(false) {
        for g in grads where g.device != first.device {
            throw LucidError.runtime("clipGradNorm: the gradients are on \(first.device) and \(g.device); they must share a device")
        }
        var total: TensorImpl? = nil
        for g in grads {
            let a = try Elementwise.unary(.abs, try Ops.cast(g, to: .float32))
            let part: TensorImpl
            if normType.isInfinite {
                part =
                    a.numel == 0
                    ? try Creation.full([], value: ScalarOperand(float: 0), dtype: .float32, device: a.device)
                    : try Reductions.extreme(a, dims: nil, keepdim: false, largest: true)
            } else {
                let powered = normType == 1 ? a : try Elementwise.binary(.pow, a, scalar: ScalarOperand(float: normType), scalarFirst: false)
                part = try Reductions.reduce(.sum, powered, dims: nil, keepdim: false)
            }
            total = try total.map { try Elementwise.binary(normType.isInfinite ? .maximum : .add, $0, part) } ?? part
        }
        var norm = total!
        if !normType.isInfinite && normType != 1 {
            norm = try Elementwise.binary(.pow, norm, scalar: ScalarOperand(float: 1 / normType), scalarFirst: false)
        }
        let value = Double(try Tensor(norm).item())
        let coef = maxNorm / (value + 1e-6)
        if coef < 1 {
            for g in grads {
                let scaled = try Elementwise.binary(.mul, g, scalar: ScalarOperand(float: coef), scalarFirst: false)
                _ = try InPlace.assign(g, scaled, base: nil, op: "clipGradNorm")
            }
        }
        return Tensor(norm)
    }
}
