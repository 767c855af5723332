import LucidEngine

// One optimizer update per call; inputs borrowed, results new handles.

@_cdecl("lucid_sgd_step")
public func lucid_sgd_step(
    _ param: UInt32, _ grad: UInt32, _ buffer: UInt32, _ foundInf: UInt32, _ lr: Double,
    _ momentum: Double, _ dampening: Double, _ weightDecay: Double, _ nesterov: Int32,
    _ maximize: Int32, _ newBuffer: UnsafeMutablePointer<UInt32>?
) -> Int32 {
    abiCall {
        guard newBuffer != nil else { throw LucidError(.value, "out pointer is null") }
        let made = try Optimizers.sgd(
            param: try tensors.get(param), grad: try tensors.get(grad),
            momentumBuffer: buffer == 0 ? nil : try tensors.get(buffer),
            foundInf: foundInf == 0 ? nil : try tensors.get(foundInf), lr: lr,
            momentum: momentum, dampening: dampening, weightDecay: weightDecay,
            nesterov: nesterov != 0, maximize: maximize != 0)
        try emit([(made, newBuffer)])
    }
}

@_cdecl("lucid_adam_step")
public func lucid_adam_step(
    _ param: UInt32, _ grad: UInt32, _ m: UInt32, _ v: UInt32, _ step: UInt32, _ foundInf: UInt32,
    _ lr: Double, _ beta1: Double, _ beta2: Double, _ eps: Double, _ weightDecay: Double,
    _ decoupled: Int32, _ maximize: Int32, _ newM: UnsafeMutablePointer<UInt32>?,
    _ newV: UnsafeMutablePointer<UInt32>?
) -> Int32 {
    abiCall {
        guard newM != nil, newV != nil else { throw LucidError(.value, "out pointer is null") }
        let (m1, v1) = try Optimizers.adam(
            param: try tensors.get(param), grad: try tensors.get(grad),
            m: m == 0 ? nil : try tensors.get(m), v: v == 0 ? nil : try tensors.get(v),
            step: try tensors.get(step),
            foundInf: foundInf == 0 ? nil : try tensors.get(foundInf), lr: lr,
            beta1: beta1, beta2: beta2, eps: eps, weightDecay: weightDecay,
            decoupled: decoupled != 0, maximize: maximize != 0)
        try emit([(m == 0 ? m1 : nil, newM), (v == 0 ? v1 : nil, newV)])
    }
}

@_cdecl("lucid_unscale_grads")
public func lucid_unscale_grads(
    _ grads: UnsafePointer<UInt32>?, _ count: Int32, _ invScale: UInt32,
    _ foundInf: UInt32
) -> Int32 {
    abiCall {
        guard count >= 0 else { throw LucidError(.value, "count is negative (\(count))") }
        guard count == 0 || grads != nil else { throw LucidError(.value, "grads pointer is null") }
        let inputs = try (0..<Int(count)).map { try tensors.get(grads![$0]) }
        try Optimizers.unscale(inputs, invScale: try tensors.get(invScale), foundInf: try tensors.get(foundInf))
    }
}

@_cdecl("lucid_update_scale")
public func lucid_update_scale(
    _ scale: UInt32, _ growthTracker: UInt32, _ foundInf: UInt32, _ growthFactor: Double,
    _ backoffFactor: Double, _ growthInterval: Int64
) -> Int32 {
    abiCall {
        try Optimizers.updateScale(
            try tensors.get(scale), growthTracker: try tensors.get(growthTracker),
            foundInf: try tensors.get(foundInf), growthFactor: growthFactor,
            backoffFactor: backoffFactor, growthInterval: Int(clamping: growthInterval))
    }
}
