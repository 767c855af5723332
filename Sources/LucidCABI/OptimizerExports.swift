import LucidEngine

// One optimizer update per call; inputs borrowed, results new handles.

@_cdecl("lucid_sgd_step")
public func lucid_sgd_step(_ param: UInt32, _ grad: UInt32, _ buffer: UInt32, _ lr: Double, _ momentum: Double,
                           _ dampening: Double, _ weightDecay: Double, _ nesterov: Int32, _ maximize: Int32,
                           _ newBuffer: UnsafeMutablePointer<UInt32>?) -> Int32 {
    abiCall {
        guard newBuffer != nil else { throw LucidError(.value, "out pointer is null") }
        let made = try Optimizers.sgd(param: try tensors.get(param), grad: try tensors.get(grad),
                                      momentumBuffer: buffer == 0 ? nil : try tensors.get(buffer), lr: lr,
                                      momentum: momentum, dampening: dampening, weightDecay: weightDecay,
                                      nesterov: nesterov != 0, maximize: maximize != 0)
        try emit([(made, newBuffer)])
    }
}

@_cdecl("lucid_adam_step")
public func lucid_adam_step(_ param: UInt32, _ grad: UInt32, _ m: UInt32, _ v: UInt32, _ step: Int64, _ lr: Double,
                            _ beta1: Double, _ beta2: Double, _ eps: Double, _ weightDecay: Double, _ decoupled: Int32,
                            _ maximize: Int32, _ newM: UnsafeMutablePointer<UInt32>?, _ newV: UnsafeMutablePointer<UInt32>?) -> Int32 {
    abiCall {
        guard newM != nil, newV != nil else { throw LucidError(.value, "out pointer is null") }
        let (m1, v1) = try Optimizers.adam(param: try tensors.get(param), grad: try tensors.get(grad),
                                           m: m == 0 ? nil : try tensors.get(m), v: v == 0 ? nil : try tensors.get(v),
                                           step: Int(clamping: step), lr: lr, beta1: beta1, beta2: beta2, eps: eps,
                                           weightDecay: weightDecay, decoupled: decoupled != 0, maximize: maximize != 0)
        try emit([(m == 0 ? m1 : nil, newM), (v == 0 ? v1 : nil, newV)])
    }
}

@_cdecl("lucid_unscale_grads")
public func lucid_unscale_grads(_ grads: UnsafePointer<UInt32>?, _ count: Int32, _ invScale: Double,
                                _ foundInf: UnsafeMutablePointer<Int32>?) -> Int32 {
    abiCall {
        guard count >= 0 else { throw LucidError(.value, "count is negative (\(count))") }
        guard let foundInf else { throw LucidError(.value, "found_inf pointer is null") }
        if count == 0 {
            foundInf.pointee = 0
            return
        }
        guard let grads else { throw LucidError(.value, "grads pointer is null") }
        let inputs = try (0..<Int(count)).map { try tensors.get(grads[$0]) }
        foundInf.pointee = try Optimizers.unscale(inputs, invScale: invScale) ? 1 : 0
    }
}
