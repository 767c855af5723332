#if canImport(Metal) && !LUCID_NO_METAL
import Metal

/// Optimizer steps on the GPU (Kernels/Optimizers.metal), with the host kernels' float32
/// formulas. The step count and the found-inf flag stay on the device: nothing here waits.
/// Integer parameters do not occur (the op layer refuses them); an unexpected dtype or layout
/// is routed to the host (counted).
extension MetalBackend: OptimizerKernels {
    func optimizerRoute(_ call: KernelCall) -> KernelRoute {
        switch call.op {
        case .sgdStep:
            // reads [param, grad, momentum state..., found?]: all but the flag.
            let p = call.reads[0]
            guard p.numel > 0 else { return .native }
            return Self.floatingContiguous(call.writes + [call.reads[1]]) ? .native : .host
        case .adamStep:
            return Self.floatingContiguous(Array(call.writes.prefix(3)) + [call.reads[1]]) ? .native : .host
        default:
            return .native
        }
    }

    func sgdStep(
        param: TensorImpl, grad: TensorImpl, momentum: TensorImpl?, hyper h: SGDHyper,
        newParam: TensorImpl, newMomentum: TensorImpl?, skipIf found: TensorImpl?
    ) {
        guard param.numel > 0 else { return }
        // SGDParams: 4 floats, 6 uints, 1 ulong = 48 bytes.
        var words = [UInt32](repeating: 0, count: 12)
        words[0] = Float(h.lr).bitPattern; words[1] = Float(h.momentum).bitPattern
        words[2] = Float(h.dampening).bitPattern; words[3] = Float(h.weightDecay).bitPattern
        words[4] = h.nesterov ? 1 : 0; words[5] = h.maximize ? 1 : 0; words[6] = h.firstStep ? 1 : 0
        words[7] = newMomentum != nil ? 1 : 0; words[8] = momentum != nil ? 1 : 0; words[9] = found != nil ? 1 : 0
        words[10] = UInt32(truncatingIfNeeded: param.numel); words[11] = UInt32(truncatingIfNeeded: param.numel >> 32)
        encode("sgd_step_\(param.dtype.name)", count: param.numel) { e in
            bind(param, 0, e)
            bind(grad, 1, e)
            bind(momentum ?? param, 2, e)  // read only when there is a buffer
            bind(newParam, 3, e)
            bind(newMomentum ?? newParam, 4, e)  // written only with momentum
            setBytes(words, 5, e)
            bind(found ?? param, 6, e)  // read only when there is a flag
        }
    }

    func adamStep(
        param: TensorImpl, grad: TensorImpl, m: TensorImpl, v: TensorImpl, step: TensorImpl, hyper h: AdamHyper,
        newParam: TensorImpl, newM: TensorImpl, newV: TensorImpl, skipIf found: TensorImpl?
    ) {
        let hasFound: UInt32 = found != nil ? 1 : 0
        if param.numel > 0 {
            // AdamParams: 7 floats, 1 uint and 1 ulong = 40 bytes.
            var words = [Float(h.lr), Float(h.beta1), Float(h.beta2), Float(h.eps), h.coupled, h.shrink, h.sign].map(\.bitPattern)
            words += [hasFound, UInt32(truncatingIfNeeded: param.numel), UInt32(truncatingIfNeeded: param.numel >> 32)]
            encode("adam_step_\(param.dtype.name)", count: param.numel) { e in
                for (i, t) in [param, grad, m, v, newParam, newM, newV].enumerated() { bind(t, i, e) }
                setBytes(words, 7, e)
                bind(step, 8, e)
                bind(found ?? step, 9, e)  // read only when there is a flag
            }
        }
        // A dispatch of its own, after every thread of the step has read the old count.
        encode("adam_count_step", count: 1) { e in
            bind(step, 0, e)
            bind(found ?? step, 1, e)
            setBytes(hasFound, 2, e)
        }
    }
}
#endif
