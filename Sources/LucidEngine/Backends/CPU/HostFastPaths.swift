/// Tight loops for the common case of contiguous float32 operands of one shape: one switch
/// outside the loop and plain pointer loops inside, which the compiler vectorises. The
/// generic strided kernels handle everything else.
enum FloatFastPath {
    /// Whether every tensor is a contiguous float32 tensor of `out`'s shape.
    @inline(__always)
    static func applies(_ out: TensorImpl, _ operands: TensorImpl...) -> Bool {
        guard out.dtype == .float32, out.isContiguous else { return false }
        return operands.allSatisfy { $0.dtype == .float32 && $0.shape == out.shape && $0.isContiguous }
    }

    @inline(__always)
    static func pointer(_ t: TensorImpl) -> UnsafeMutablePointer<Float> {
        HostBackend.address(t).assumingMemoryBound(to: Float.self)
    }

    static func binary(_ op: BinaryKernel, _ a: TensorImpl, _ b: TensorImpl, _ out: TensorImpl) {
        let x = UnsafePointer(pointer(a)), y = UnsafePointer(pointer(b)), o = pointer(out), n = out.numel
        switch op {
        case .add: for i in 0..<n { o[i] = x[i] + y[i] }
        case .sub: for i in 0..<n { o[i] = x[i] - y[i] }
        case .mul: for i in 0..<n { o[i] = x[i] * y[i] }
        case .div: for i in 0..<n { o[i] = x[i] / y[i] }
        case .pow, .maximum, .minimum: for i in 0..<n { o[i] = applyBinary(op, x[i], y[i]) }
        }
    }

    static func binary(_ op: BinaryKernel, _ a: TensorImpl, scalar: Float, scalarFirst: Bool, _ out: TensorImpl) {
        let x = UnsafePointer(pointer(a)), o = pointer(out), n = out.numel, s = scalar
        switch (op, scalarFirst) {
        case (.add, _): for i in 0..<n { o[i] = x[i] + s }
        case (.mul, _): for i in 0..<n { o[i] = x[i] * s }
        case (.sub, false): for i in 0..<n { o[i] = x[i] - s }
        case (.sub, true): for i in 0..<n { o[i] = s - x[i] }
        case (.div, false): for i in 0..<n { o[i] = x[i] / s }
        case (.div, true): for i in 0..<n { o[i] = s / x[i] }
        case (_, false): for i in 0..<n { o[i] = applyBinary(op, x[i], s) }
        case (_, true): for i in 0..<n { o[i] = applyBinary(op, s, x[i]) }
        }
    }

    static func unary(_ op: UnaryKernel, _ a: TensorImpl, _ out: TensorImpl) {
        let x = UnsafePointer(pointer(a)), o = pointer(out), n = out.numel
        switch op {
        case .neg: for i in 0..<n { o[i] = -x[i] }
        case .relu: for i in 0..<n { o[i] = x[i] < 0 ? 0 : x[i] }
        case .abs: for i in 0..<n { o[i] = Swift.abs(x[i]) }
        case .exp: for i in 0..<n { o[i] = LibM.exp(x[i]) }
        default: for i in 0..<n { o[i] = op.apply(x[i]) }
        }
    }
}
