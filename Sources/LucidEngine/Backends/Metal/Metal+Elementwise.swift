#if canImport(Metal) && !LUCID_NO_METAL
import Metal

/// Elementwise kernels on the GPU (Kernels/Elementwise.metal): one thread per output element
/// over strided operands. Floating dtypes compute in float32; integer arithmetic wraps. A
/// dtype or rank the kernels do not cover runs on the host kernels (counted).
extension MetalBackend: ElementwiseKernels {
    var elementwiseKernels: (any ElementwiseKernels)? { self }

    private static let floating: Set<DType> = [.float32, .float16, .bfloat16]
    private static let arithmetic: Set<DType> = [.float32, .float16, .bfloat16, .int32, .int64, .bool]

    private static func code(_ op: BinaryKernel) -> UInt32 { UInt32(op.rawValue) }

    func binary(_ op: BinaryKernel, _ a: TensorImpl, _ b: TensorImpl, into out: TensorImpl) {
        guard out.numel > 0 else { return }
        guard Self.arithmetic.contains(out.dtype),
              let layout = MetalLayout(shape: out.shape, operands: [a.strides, b.strides, out.strides]) else {
            return onHost("\(op)").binary(op, a, b, into: out)
        }
        encode("binary_\(out.dtype.name)", count: layout.count) { e in
            bind(a, 0, e)
            bind(b, 1, e)
            bind(out, 2, e)
            setBytes(layout.words, 3, e)
            setBytes(Self.code(op), 4, e)
        }
    }

    func binary(_ op: BinaryKernel, _ a: TensorImpl, scalar: Scalar, scalarFirst: Bool, into out: TensorImpl) {
        guard out.numel > 0 else { return }
        guard Self.arithmetic.contains(out.dtype),
              let layout = MetalLayout(shape: out.shape, operands: [a.strides, out.strides]) else {
            return onHost("\(op)").binary(op, a, scalar: scalar, scalarFirst: scalarFirst, into: out)
        }
        encode("binary_scalar_\(out.dtype.name)", count: layout.count) { e in
            bind(a, 0, e)
            bind(out, 1, e)
            setBytes(layout.words, 2, e)
            setBytes(Self.code(op), 3, e)
            // The host kernels take the scalar as float32 for floating types, int64 otherwise.
            if out.dtype.isFloatingPoint { setBytes(Float(scalar.double), 4, e) } else { setBytes(scalar.int, 4, e) }
            setBytes(UInt32(scalarFirst ? 1 : 0), 5, e)
        }
    }

    func unary(_ op: UnaryKernel, _ a: TensorImpl, into out: TensorImpl) {
        guard out.numel > 0 else { return }
        let integral = (out.dtype == .int32 || out.dtype == .int64) && op.keepsIntegers
        guard Self.floating.contains(out.dtype) || integral,
              let layout = MetalLayout(shape: out.shape, operands: [a.strides, out.strides])
        else { return onHost(op.name).unary(op, a, into: out) }
        encode("unary_\(out.dtype.name)", count: layout.count) { e in
            bind(a, 0, e)
            bind(out, 1, e)
            setBytes(layout.words, 2, e)
            setBytes(UInt32(op.rawValue), 3, e)
        }
    }

    func unaryBackward(_ op: UnaryKernel, x: TensorImpl, y: TensorImpl, grad: TensorImpl, into gradIn: TensorImpl) {
        guard gradIn.numel > 0 else { return }
        guard Self.floating.contains(gradIn.dtype),
              let layouts = MetalLayout.layouts(shape: gradIn.shape, operands: [x.strides, y.strides, grad.strides, gradIn.strides])
        else { return onHost("\(op.name)_backward").unaryBackward(op, x: x, y: y, grad: grad, into: gradIn) }
        let (inputs, output) = (layouts[0], layouts[1])
        encode("unary_backward_\(gradIn.dtype.name)", count: inputs.count) { e in
            bind(x, 0, e)
            bind(y, 1, e)
            bind(grad, 2, e)
            bind(gradIn, 3, e)
            setBytes(inputs.words, 4, e)
            setBytes(output.words, 5, e)
            setBytes(UInt32(op.rawValue), 6, e)
        }
    }

    func compare(_ op: CompareKernel, _ a: TensorImpl, _ b: TensorImpl, into out: TensorImpl) {
        guard out.numel > 0 else { return }
        guard let layout = MetalLayout(shape: out.shape, operands: [a.strides, b.strides, out.strides]) else {
            return onHost("\(op)").compare(op, a, b, into: out)
        }
        encode("compare_\(a.dtype.name)", count: layout.count) { e in
            bind(a, 0, e)
            bind(b, 1, e)
            bind(out, 2, e)
            setBytes(layout.words, 3, e)
            setBytes(UInt32(op.rawValue), 4, e)
        }
    }

    func select(_ cond: TensorImpl, _ a: TensorImpl, _ b: TensorImpl, into out: TensorImpl) {
        guard out.numel > 0 else { return }
        guard let layouts = MetalLayout.layouts(shape: out.shape, operands: [cond.strides, a.strides, b.strides, out.strides])
        else { return onHost("where").select(cond, a, b, into: out) }
        let (layout, output) = (layouts[0], layouts[1])
        encode("select_\(out.dtype.name)", count: layout.count) { e in
            bind(cond, 0, e)
            bind(a, 1, e)
            bind(b, 2, e)
            bind(out, 3, e)
            setBytes(layout.words, 4, e)
            setBytes(output.words, 5, e)
        }
    }
}
#endif
