/// Tight loops for the common case of contiguous float32 operands of one shape: one switch
/// outside the loop and plain pointer loops inside, which the compiler vectorises. The
/// generic strided kernels handle everything else.
enum FloatFastPath {
    /// Whether `out` and the operands are contiguous float32 tensors of one shape. (Two
    /// overloads rather than a variadic parameter, which would allocate an array per op.)
    @inline(__always)
    static func applies(_ out: TensorImpl, _ a: TensorImpl) -> Bool {
        out.dtype == .float32 && a.dtype == .float32 && a.shape == out.shape && out.isContiguous && a.isContiguous
    }

    @inline(__always)
    static func applies(_ out: TensorImpl, _ a: TensorImpl, _ b: TensorImpl) -> Bool {
        applies(out, a) && b.dtype == .float32 && b.shape == out.shape && b.isContiguous
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

/// Contiguous conversions between float32 and bfloat16, written branch-free so they
/// vectorise (autocast casts every operand of a lower-precision op). Bit-exact with
/// `bfloat16Bits(fromFloat32Bits:)`.
enum BFloat16FastPath {
    static func applies(_ src: TensorImpl, _ dst: TensorImpl) -> Bool {
        src.isContiguous && dst.isContiguous
            && ((src.dtype == .float32 && dst.dtype == .bfloat16) || (src.dtype == .bfloat16 && dst.dtype == .float32))
    }

    static func copy(_ src: TensorImpl, into dst: TensorImpl) {
        let n = src.numel
        if src.dtype == .float32 {
            let x = UnsafePointer(HostBackend.address(src).assumingMemoryBound(to: UInt32.self))
            let o = HostBackend.address(dst).assumingMemoryBound(to: UInt16.self)
            for i in 0..<n {
                let f = x[i]
                let rounded = UInt16(truncatingIfNeeded: (f &+ 0x7fff &+ ((f >> 16) & 1)) >> 16)
                // NaN: the canonical quiet NaN with its sign (ml_dtypes' rule).
                let nan: UInt16 = (f & 0x8000_0000) != 0 ? 0xffc0 : 0x7fc0
                o[i] = (f & 0x7fff_ffff) > 0x7f80_0000 ? nan : rounded
            }
        } else {
            let x = UnsafePointer(HostBackend.address(src).assumingMemoryBound(to: UInt16.self))
            let o = HostBackend.address(dst).assumingMemoryBound(to: UInt32.self)
            for i in 0..<n { o[i] = UInt32(x[i]) << 16 }
        }
    }
}
