#if canImport(Metal) && !LUCID_NO_METAL
import Metal

/// Optimizer steps and GradScaler's unscale on the GPU (Kernels/Optimizers.metal), with the
/// host kernels' float32 formulas. Integer parameters do not occur (the op layer refuses
/// them); an unexpected dtype or layout runs on the host (counted).
extension MetalBackend: OptimizerKernels {
    var optimizerKernels: (any OptimizerKernels)? { self }

    private static func fits(_ tensors: [TensorImpl?]) -> Bool {
        guard let first = tensors.compactMap({ $0 }).first, first.dtype.isFloatingPoint else { return false }
        return tensors.allSatisfy { $0.map { $0.isContiguous && $0.dtype == first.dtype } ?? true }
    }

    func sgdStep(param: TensorImpl, grad: TensorImpl, momentum: TensorImpl?, hyper h: SGDHyper,
                 newParam: TensorImpl, newMomentum: TensorImpl?) {
        guard param.numel > 0 else { return }
        guard Self.fits([param, grad, momentum, newParam, newMomentum]) else {
            return onHost("sgd_step").sgdStep(param: param, grad: grad, momentum: momentum, hyper: h, newParam: newParam,
                                              newMomentum: newMomentum)
        }
        // SGDParams: 4 floats, 6 uints, 1 ulong = 48 bytes.
        var words = [UInt32](repeating: 0, count: 12)
        words[0] = h.lr.bitPattern; words[1] = h.momentum.bitPattern
        words[2] = h.dampening.bitPattern; words[3] = h.weightDecay.bitPattern
        words[4] = h.nesterov ? 1 : 0; words[5] = h.maximize ? 1 : 0; words[6] = h.firstStep ? 1 : 0
        words[7] = newMomentum != nil ? 1 : 0; words[8] = momentum != nil ? 1 : 0
        words[10] = UInt32(truncatingIfNeeded: param.numel); words[11] = UInt32(truncatingIfNeeded: param.numel >> 32)
        encode("sgd_step_\(param.dtype.name)", count: param.numel) { e in
            bind(param, 0, e)
            bind(grad, 1, e)
            bind(momentum ?? param, 2, e)  // read only when there is a buffer
            bind(newParam, 3, e)
            bind(newMomentum ?? newParam, 4, e)  // written only with momentum
            setBytes(words, 5, e)
        }
    }

    func adamStep(param: TensorImpl, grad: TensorImpl, m: TensorImpl, v: TensorImpl, hyper h: AdamHyper,
                  newParam: TensorImpl, newM: TensorImpl, newV: TensorImpl) {
        guard param.numel > 0 else { return }
        guard Self.fits([param, grad, m, v, newParam, newM, newV]) else {
            return onHost("adam_step").adamStep(param: param, grad: grad, m: m, v: v, hyper: h, newParam: newParam,
                                                newM: newM, newV: newV)
        }
        let c = h.constants
        // AdamParams: 8 floats and 1 ulong = 40 bytes.
        var words = [c.stepSize, c.bc2Root, h.beta1, h.beta2, h.eps, c.coupled, c.shrink, c.sign].map(\.bitPattern)
        words += [UInt32(truncatingIfNeeded: param.numel), UInt32(truncatingIfNeeded: param.numel >> 32)]
        encode("adam_step_\(param.dtype.name)", count: param.numel) { e in
            for (i, t) in [param, grad, m, v, newParam, newM, newV].enumerated() { bind(t, i, e) }
            setBytes(words, 7, e)
        }
    }

    func unscale(_ grads: [TensorImpl], invScale: Float, into outs: [TensorImpl]) -> Bool {
        let pairs = zip(grads, outs).filter { $0.0.numel > 0 }
        guard !pairs.isEmpty else { return false }
        guard pairs.allSatisfy({ Self.fits([$0.0, $0.1]) }), let found = makeFlag() else {
            return onHost("unscale").unscale(grads, invScale: invScale, into: outs)
        }
        for (grad, out) in pairs {
            encode("unscale_\(grad.dtype.name)", count: grad.numel) { e in
                bind(grad, 0, e)
                bind(out, 1, e)
                bind(found, 2, e)
                setBytes(invScale, 3, e)
                setBytes(UInt64(grad.numel), 4, e)
            }
        }
        return isSet(found)  // one synchronisation point for all the gradients
    }
}
#endif
