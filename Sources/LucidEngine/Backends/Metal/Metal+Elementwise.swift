#if canImport(Metal) && !LUCID_NO_METAL
import Metal

/// Elementwise kernels on the GPU (Kernels/Elementwise.metal): one thread per output element
/// over strided operands (with 32-bit indices when every count and offset fits, else 64-bit:
/// `encode(strided:)`); four consecutive elements per thread, as 4-wide vectors with 32-bit
/// indices, when every operand is contiguous, aligned and of the output's shape; and for binary
/// ops whose operands merge into three dimensions or fewer (a broadcast), a 3-D grid of threads
/// with no division. Floating dtypes compute in float32; integer arithmetic wraps. A
/// dtype or rank the kernels do not cover is routed to the host kernels (counted); the fused
/// add-scaled and leaky ReLU are composed.
extension MetalBackend: ElementwiseKernels {
    private static let floating: Set<DType> = [.float32, .float16, .bfloat16]
    private static let arithmetic: Set<DType> = [.float32, .float16, .bfloat16, .int32, .int64, .bool]

    /// Where an elementwise call runs: here when its dtype has a kernel and its operands'
    /// layout fits one (`MetalLayout`); an empty output needs no kernel.
    func elementwiseRoute(_ call: KernelCall) -> KernelRoute {
        let r = call.reads, out = call.writes[0]
        guard out.numel > 0 else { return .native }
        let fits: Bool
        switch call.op {
        case .binary(let op):
            fits =
                op.hasMetalKernel && Self.arithmetic.contains(out.dtype)
                && MetalLayout(shape: out.shape, operands: [r[0].strides, r[1].strides, out.strides]) != nil
        case .binaryScalar(let op):
            fits =
                op.hasMetalKernel && Self.arithmetic.contains(out.dtype)
                && MetalLayout(shape: out.shape, operands: [r[0].strides, out.strides]) != nil
        case .unary(let op):
            let integral = (out.dtype == .int32 || out.dtype == .int64) && op.keepsIntegers
            fits =
                op.hasMetalKernel && (Self.floating.contains(out.dtype) || integral)
                && MetalLayout(shape: out.shape, operands: [r[0].strides, out.strides]) != nil
        case .unaryBackward(let op):
            fits =
                op.hasMetalKernel && Self.floating.contains(out.dtype)
                && MetalLayout.layouts(shape: out.shape, operands: r.map(\.strides) + [out.strides]) != nil
        case .compare:
            fits = MetalLayout(shape: out.shape, operands: [r[0].strides, r[1].strides, out.strides]) != nil
        case .select:
            fits = MetalLayout.layouts(shape: out.shape, operands: r.map(\.strides) + [out.strides]) != nil
        case .addScaled, .leakyRelu, .leakyReluBackward:
            return .compose
        default:
            fits = true
        }
        return fits ? .native : .host
    }

    private static func code(_ op: BinaryKernel) -> UInt32 { UInt32(op.rawValue) }

    /// The element count of operands that are all contiguous and of `out`'s shape (no
    /// broadcast), each starting at a multiple of four elements (so that the kernels' 4-wide
    /// vectors are aligned), below 2^31: the `_contig` kernels' case; nil otherwise.
    private static func contiguousCount(_ operands: [TensorImpl], _ out: TensorImpl) -> UInt32? {
        guard out.numel < 1 << 31, (operands + [out]).allSatisfy({ $0.shape == out.shape && $0.isContiguous && $0.offset % 4 == 0 })
        else { return nil }
        return UInt32(out.numel)
    }

    /// The `_grid` kernels' problem (`GridShape`: the sizes along x, y, z, then each operand's
    /// strides along them) and grid, for operands whose layout merges into three dimensions or
    /// fewer with every offset within 32 bits; nil otherwise.
    private static func grid(_ shape: [Int], _ operands: [TensorImpl]) -> (words: [Int32], size: MTLSize)? {
        guard let layout = MetalLayout(shape: shape, operands: operands.map(\.strides)) else { return nil }
        let w = layout.words, rank = Int(w[0])
        guard rank <= 3 else { return nil }
        // Merged dimensions run outermost first; the grid's x is the innermost.
        let sizes = (0..<3).map { axis in axis < rank ? Int(w[2 + rank - 1 - axis]) : 1 }
        let strides = operands.indices.map { o in (0..<3).map { axis in axis < rank ? Int(w[10 + o * 8 + rank - 1 - axis]) : 0 } }
        let limit = Int(Int32.max)
        guard sizes.allSatisfy({ $0 <= limit }),
            strides.allSatisfy({ s in s.allSatisfy { $0 >= 0 } && zip(sizes, s).reduce(0) { $0 + ($1.0 - 1) * $1.1 } <= limit })
        else { return nil }
        return ((sizes + strides.flatMap { $0 }).map { Int32($0) }, MTLSize(width: sizes[0], height: sizes[1], depth: sizes[2]))
    }

    /// Threads for `count` elements, four each.
    private static func threads(_ count: UInt32) -> Int { (Int(count) + 3) / 4 }

    func binary(_ op: BinaryKernel, _ a: TensorImpl, _ b: TensorImpl, into out: TensorImpl) {
        guard out.numel > 0 else { return }
        if let count = Self.contiguousCount([a, b], out) {
            return encode("binary_contig_\(out.dtype.name)", count: Self.threads(count)) { e in
                bind(a, 0, e)
                bind(b, 1, e)
                bind(out, 2, e)
                setBytes(count, 3, e)
                setBytes(Self.code(op), 4, e)
            }
        }
        if let grid = Self.grid(out.shape, [a, b, out]) {
            return encode("binary_grid_\(out.dtype.name)", grid: grid.size) { e in
                bind(a, 0, e)
                bind(b, 1, e)
                bind(out, 2, e)
                setBytes(grid.words, 3, e)
                setBytes(Self.code(op), 4, e)
            }
        }
        let layout = MetalLayout(routed: out.shape, operands: [a.strides, b.strides, out.strides])
        encode(strided: "binary_\(out.dtype.name)", count: layout.count, layouts: [(layout, 3)]) { e in
            bind(a, 0, e)
            bind(b, 1, e)
            bind(out, 2, e)
            setBytes(Self.code(op), 4, e)
        }
    }

    func binary(_ op: BinaryKernel, _ a: TensorImpl, scalar: Scalar, scalarFirst: Bool, into out: TensorImpl) {
        guard out.numel > 0 else { return }
        if out.dtype.isFloatingPoint, let count = Self.contiguousCount([a], out) {
            return encode("binary_scalar_contig_\(out.dtype.name)", count: Self.threads(count)) { e in
                bind(a, 0, e)
                bind(out, 1, e)
                setBytes(count, 2, e)
                setBytes(Self.code(op), 3, e)
                setBytes(Float(scalar.double), 4, e)
                setBytes(UInt32(scalarFirst ? 1 : 0), 5, e)
            }
        }
        let layout = MetalLayout(routed: out.shape, operands: [a.strides, out.strides])
        encode(strided: "binary_scalar_\(out.dtype.name)", count: layout.count, layouts: [(layout, 2)]) { e in
            bind(a, 0, e)
            bind(out, 1, e)
            setBytes(Self.code(op), 3, e)
            // The host kernels take the scalar as float32 for floating types, int64 otherwise.
            if out.dtype.isFloatingPoint { setBytes(Float(scalar.double), 4, e) } else { setBytes(scalar.int, 4, e) }
            setBytes(UInt32(scalarFirst ? 1 : 0), 5, e)
        }
    }

    func unary(_ op: UnaryKernel, _ a: TensorImpl, into out: TensorImpl) {
        guard out.numel > 0 else { return }
        if out.dtype.isFloatingPoint, let count = Self.contiguousCount([a], out) {
            return encode("unary_contig_\(out.dtype.name)", count: Self.threads(count)) { e in
                bind(a, 0, e)
                bind(out, 1, e)
                setBytes(count, 2, e)
                setBytes(UInt32(op.rawValue), 3, e)
            }
        }
        let layout = MetalLayout(routed: out.shape, operands: [a.strides, out.strides])
        encode(strided: "unary_\(out.dtype.name)", count: layout.count, layouts: [(layout, 2)]) { e in
            bind(a, 0, e)
            bind(out, 1, e)
            setBytes(UInt32(op.rawValue), 3, e)
        }
    }

    func unaryBackward(_ op: UnaryKernel, x: TensorImpl, y: TensorImpl, grad: TensorImpl, into gradIn: TensorImpl) {
        guard gradIn.numel > 0 else { return }
        let layouts = MetalLayout.layouts(routed: gradIn.shape, operands: [x.strides, y.strides, grad.strides, gradIn.strides])
        let (inputs, output) = (layouts[0], layouts[1])
        encode(strided: "unary_backward_\(gradIn.dtype.name)", count: inputs.count, layouts: [(inputs, 4), (output, 5)]) {
            e in
            bind(x, 0, e)
            bind(y, 1, e)
            bind(grad, 2, e)
            bind(gradIn, 3, e)
            setBytes(UInt32(op.rawValue), 6, e)
        }
    }

    func compare(_ op: CompareKernel, _ a: TensorImpl, _ b: TensorImpl, into out: TensorImpl) {
        guard out.numel > 0 else { return }
        let layout = MetalLayout(routed: out.shape, operands: [a.strides, b.strides, out.strides])
        encode(strided: "compare_\(a.dtype.name)", count: layout.count, layouts: [(layout, 3)]) { e in
            bind(a, 0, e)
            bind(b, 1, e)
            bind(out, 2, e)
            setBytes(UInt32(op.rawValue), 4, e)
        }
    }

    func select(_ cond: TensorImpl, _ a: TensorImpl, _ b: TensorImpl, into out: TensorImpl) {
        guard out.numel > 0 else { return }
        let layouts = MetalLayout.layouts(routed: out.shape, operands: [cond.strides, a.strides, b.strides, out.strides])
        let (layout, output) = (layouts[0], layouts[1])
        encode(strided: "select_\(out.dtype.name)", count: layout.count, layouts: [(layout, 4), (output, 5)]) { e in
            bind(cond, 0, e)
            bind(a, 1, e)
            bind(b, 2, e)
            bind(out, 3, e)
        }
    }
}
#endif
