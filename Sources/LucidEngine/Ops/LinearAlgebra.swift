/// matmul and linear: the lower-precision ops. Under autocast their floating inputs are cast
/// to the autocast dtype; low-precision products accumulate in float32 and round once.
package enum LinearAlgebra {
    static let matmul = OpInfo("matmul", .lowerPrecision)
    static let linear = OpInfo("linear", .lowerPrecision)

    private static func checkOperands(_ op: String, _ ts: [TensorImpl]) throws {
        for t in ts where t.dtype == .bool {
            throw LucidError.type("\(op): not supported for bool tensors")
        }
        if let f = ts.first, let other = ts.first(where: { $0.dtype != f.dtype }) {
            throw LucidError.type(
                "\(op): expected operands of one dtype, got \(f.dtype) and \(other.dtype) (convert one with .to(), or run under autocast)")
        }
    }

    private static func checkOperands(_ op: String, _ a: TensorImpl, _ b: TensorImpl) throws {
        if a.dtype == .bool || b.dtype == .bool { throw LucidError.type("\(op): not supported for bool tensors") }
        if a.dtype != b.dtype {
            throw LucidError.type(
                "\(op): expected operands of one dtype, got \(a.dtype) and \(b.dtype) (convert one with .to(), or run under autocast)")
        }
    }

    private static func checkBLASSize(_ op: String, _ m: Int, _ n: Int, _ k: Int) throws {
        let d = max(m, max(n, k))
        if d > Int(Int32.max) {
            throw LucidError.value("\(op): dimension \(d) is larger than the BLAS limit \(Int32.max)")
        }
    }

    /// `t` ([..., r, c]) as a 3-D [batch, r, c] tensor, as a view where the batch dimensions
    /// merge and as a copy otherwise.
    static func batched(_ t: TensorImpl) throws -> TensorImpl {
        let nd = t.ndim
        let r = t.shape[nd - 2], c = t.shape[nd - 1]
        let batchShape = Array(t.shape[0..<(nd - 2)])
        var batch = 1
        for s in batchShape { batch &*= s }
        if let strides = ShapeOps.viewStrides(oldShape: batchShape, oldStrides: Array(t.strides[0..<(nd - 2)]), newShape: [batch]) {
            return t.view(shape: [batch, r, c], strides: [strides[0], t.strides[nd - 2], t.strides[nd - 1]])
        }
        let dense = try Ops.contiguous(t)
        return dense.view(shape: [batch, r, c], strides: [r * c, c, 1])
    }

    /// torch.matmul: 1-D·1-D dot, 2-D products, 1-D operands promoted and squeezed, and
    /// batched products with broadcast batch dimensions.
    package static func matmul(_ a: TensorImpl, _ b: TensorImpl) throws -> TensorImpl {
        let op = matmul.name
        try Ops.checkSameDevice(op, a, b)
        guard a.ndim >= 1, b.ndim >= 1 else {
            throw LucidError.value("matmul: both arguments need at least 1 dimension, got shapes \(a.shape) and \(b.shape)")
        }
        return try matmul.run(a, b) { a0, b0 in try matmulBody(a0, b0) }
    }

    private static func matmulBody(_ a0: TensorImpl, _ b0: TensorImpl) throws -> TensorImpl {
        let op = matmul.name, a = a0, b = b0  // the shapes in messages are the caller's, which a cast keeps
        try checkOperands(op, a0, b0)
        var x = a0, y = b0
        let xVector = x.ndim == 1, yVector = y.ndim == 1
        if xVector { x = x.view(shape: [1, x.shape[0]], strides: [max(x.shape[0], 1), x.strides[0]]) }
        if yVector { y = y.view(shape: [y.shape[0], 1], strides: [y.strides[0], 1]) }
        let m = x.shape[x.ndim - 2], k = x.shape[x.ndim - 1]
        let k2 = y.shape[y.ndim - 2], n = y.shape[y.ndim - 1]
        guard k == k2 else {
            throw LucidError.value(
                "matmul: shapes "
                    + "\(a.shape) and \(b.shape) are not aligned: \(k) (last dimension of the first) != \(k2) "
                    + "(\(yVector ? "only" : "second-to-last") dimension of the second)"
            )
        }
        try checkBLASSize(op, m, n, k)
        let batchShape: [Int]
        let result: TensorImpl
        if !xVector && !yVector && x.ndim == 2 && y.ndim == 2 {
            // Two matrices, the commonest case: one batch, without the broadcasting's arrays.
            batchShape = []
            // A result of an operand's shape (k == n, or m == k) shares its shape and strides
            // arrays, as an elementwise result does: no arrays made for a square product.
            if k == n {
                result = try TensorImpl.empty(x.shape, dtype: x.dtype, like: x)
            } else if m == k {
                result = try TensorImpl.empty(y.shape, dtype: x.dtype, like: y)
            } else {
                result = try TensorImpl.empty([m, n], dtype: x.dtype, on: x.backend)
            }
            if x.dtype == .float32, x.backend is HostBackend, m &* n &* k <= HostGEMM.smallLimit {
                HostGEMM.smallFloat(x, y, into: result)
            } else {
                let x3 = x.view(shape: [1, m, k], strides: [m &* k, x.strides[0], x.strides[1]])
                let y3 = y.view(shape: [1, k, n], strides: [k &* n, y.strides[0], y.strides[1]])
                let out = result.view(shape: [1, m, n], strides: [m &* n, n, 1])
                result.run(MatmulKernels.self, KernelCall(.gemm, reads: [x3, y3], writes: [out]), "matmul") {
                    $0.gemm(x3, y3, bias: nil, into: out)
                }
            }
        } else {
            do {
                batchShape = try Shape.broadcast(Array(x.shape.dropLast(2)), Array(y.shape.dropLast(2)), op: op)
            } catch {
                throw LucidError.value("matmul: the batch dimensions of shapes \(a.shape) and \(b.shape) cannot be broadcast together")
            }
            let x3 = try batched(x.expanded(to: batchShape + [m, k]))
            let y3 = try batched(y.expanded(to: batchShape + [k, n]))
            let out = try TensorImpl.empty([x3.shape[0], m, n], dtype: x.dtype, on: x.backend)
            out.run(MatmulKernels.self, KernelCall(.gemm, reads: [x3, y3], writes: [out]), "matmul") {
                $0.gemm(x3, y3, bias: nil, into: out)
            }
            var shape = batchShape
            if !xVector { shape.append(m) }
            if !yVector { shape.append(n) }
            result = out.view(shape: shape, strides: Shape.contiguousStrides(shape))
        }
        guard Autograd.tracks(a0, b0) else { return result }
        return Autograd.record(
            result, Autograd.name(matmul), [a0, b0],
            saved: [a0.requiresGrad ? b0 : nil, b0.requiresGrad ? a0 : nil]
        ) { g in
            // In matrix form: dA = G·Bᵀ and dB = Aᵀ·G, summed over broadcast batch dimensions.
            let a2 = a0.ndim == 1 ? try ShapeOps.reshape(a0, [1, k]) : a0
            let b2 = b0.ndim == 1 ? try ShapeOps.reshape(b0, [k, 1]) : b0
            let g2 = try ShapeOps.reshape(g, batchShape + [m, n])
            // Only the wanted gradients: data multiplied by a weight needs none of its own.
            let ga = a0.requiresGrad ? try matmul(g2, try ShapeOps.transpose(b2, -1, -2)) : nil
            let gb = b0.requiresGrad ? try matmul(try ShapeOps.transpose(a2, -1, -2), g2) : nil
            return [
                try ga.map { try ShapeOps.reshape(try Autograd.reduce($0, to: a2.shape), a0.shape) },
                try gb.map { try ShapeOps.reshape(try Autograd.reduce($0, to: b2.shape), b0.shape) },
            ]
        }
    }

    /// torch.nn.functional.linear: `x @ weight.T + bias`, the bias added in the float32
    /// accumulator before the single rounding.
    package static func linear(_ x: TensorImpl, _ weight: TensorImpl, _ bias: TensorImpl?) throws -> TensorImpl {
        let op = linear.name
        try Ops.checkSameDevice(op, [x, weight] + (bias.map { [$0] } ?? []))
        guard weight.ndim == 2 else {
            throw LucidError.value("linear: weight must be 2-D [out_features, in_features], got shape \(weight.shape)")
        }
        let outF = weight.shape[0], inF = weight.shape[1]
        guard x.ndim >= 1, x.shape[x.ndim - 1] == inF else {
            throw LucidError.value("linear: input shape \(x.shape) does not end in in_features = \(inF) (weight shape \(weight.shape))")
        }
        if let bias, bias.shape != [outF] {
            throw LucidError.value("linear: bias must have shape [\(outF)], got \(bias.shape)")
        }
        return try linear.run([x, weight] + (bias.map { [$0] } ?? [])) { inputs in
            try linearBody(inputs, weight: weight, outF: outF, inF: inF)
        }
    }

    private static func linearBody(_ inputs: [TensorImpl], weight: TensorImpl, outF: Int, inF: Int) throws -> TensorImpl {
        let op = linear.name
        try checkOperands(op, inputs)
        let xi = inputs[0], w = inputs[1], b = inputs.count > 2 ? inputs[2] : nil
        let lead = Array(xi.shape.dropLast())
        var rows = 1
        for s in lead { rows &*= s }
        try checkBLASSize(op, rows, outF, inF)
        let flat = try ShapeOps.reshape(xi, lead.isEmpty ? [1, inF] : [rows, inF])
        let x3 = flat.view(shape: [1, rows, inF], strides: [0, flat.strides[0], flat.strides[1]])
        let wT = w.view(shape: [1, inF, outF], strides: [0, w.strides[1], w.strides[0]])
        let out = try TensorImpl.empty([1, rows, outF], dtype: xi.dtype, on: xi.backend)
        out.run(MatmulKernels.self, KernelCall(.gemm, reads: Operands([x3, wT] + (b.map { [$0] } ?? [])), writes: [out]), "linear") {
            $0.gemm(x3, wT, bias: b, into: out)
        }
        let shape = lead + [outF]
        let result = out.view(shape: shape, strides: Shape.contiguousStrides(shape))
        guard inputs.contains(where: \.requiresGrad) && GradMode.isEnabled else { return result }
        // The node keeps only what the wanted gradients read: the input for dW, the weight for
        // dX. A weight autocast made from a parameter is cast again in backward rather than
        // kept, since the parameter is alive anyway: the graph then holds no weight copies.
        let needX = xi.requiresGrad, needW = w.requiresGrad, inputShape = xi.shape
        let savedX = needW ? xi : nil
        let recast = needX && w.dtype != weight.dtype && weight.gradFn == nil
        let savedW = needX && !recast ? w : nil, source = recast ? weight : nil, castType = w.dtype
        return Autograd.record(result, Autograd.name(linear), inputs, saved: [savedX, savedW, source]) { g in
            let g2 = try ShapeOps.reshape(g, [rows, outF])
            var gx: TensorImpl? = nil, gw: TensorImpl? = nil
            if let weight = try savedW ?? source.map({ try Ops.cast($0, to: castType) }) {
                gx = try ShapeOps.reshape(try matmul(g2, weight), inputShape)
            }
            if let savedX {
                gw = try matmul(try ShapeOps.transpose(g2, 0, 1), try ShapeOps.reshape(savedX, [rows, inF]))
            }
            return [gx, gw] + (b == nil ? [] : [try Reductions.reduce(.sum, g2, dims: [0], keepdim: false)])
        }
    }
}
