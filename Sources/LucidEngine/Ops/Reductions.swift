/// sum and mean over all or some dimensions. Float inputs accumulate in float64 on the host
/// (at least float32 anywhere); under autocast, low-precision input is reduced in float32.
package enum Reductions {
    static let sum = OpInfo("sum", .float32)
    static let mean = OpInfo("mean", .float32)

    /// Normalises `dims` (nil or empty: all), rejecting out-of-range and repeated ones.
    static func axes(_ dims: [Int]?, ndim: Int, op: String) throws -> [Int] {
        guard let dims, !dims.isEmpty else { return Array(0..<ndim) }
        var seen = Set<Int>()
        var out: [Int] = []
        for d in dims {
            let w = try Shape.wrapDim(d, ndim: ndim, op: op)
            guard seen.insert(w).inserted else {
                throw LucidError.value("\(op): dimension \(d) appears more than once in dim \(dims)")
            }
            if ndim > 0 { out.append(w) }
        }
        return out.sorted()
    }

    package static func reduce(_ k: ReduceKernel, _ a: TensorImpl, dims: [Int]?, keepdim: Bool) throws -> TensorImpl {
        let op = k == .sum ? sum : mean
        let axes = try Self.axes(dims, ndim: a.ndim, op: op.name)
        return try op.run(a) { x in try reduce(k, op, x, axes: axes, keepdim: keepdim) }
    }

    private static func reduce(_ k: ReduceKernel, _ op: OpInfo, _ x: TensorImpl, axes: [Int], keepdim: Bool) throws -> TensorImpl {
        let outType: DType
        if x.dtype.isFloatingPoint {
            outType = x.dtype
        } else if k == .sum {
            outType = .int64
        } else {
            throw LucidError.type("mean: input dtype must be floating point, got \(x.dtype); convert with .float() first")
        }
        var kept = x.shape
        for ax in axes { kept[ax] = 1 }
        let out = try TensorImpl.empty(kept, dtype: outType, on: x.backend)
        out.run(ReductionKernels.self, KernelCall(.reduce(k, axes: axes), reads: [x], writes: [out]), "\(k)") {
            $0.reduce(k, x, axes: axes, into: out)
        }
        let squeezed = x.shape.enumerated().filter { !axes.contains($0.offset) }.map(\.element)
        let result = keepdim ? out : out.view(shape: squeezed, strides: Shape.contiguousStrides(squeezed))
        var count = 1
        for ax in axes { count &*= x.shape[ax] }
        let shape = x.shape
        return Autograd.record(result, Autograd.name(op), [x]) { g in
            // Every input element receives the gradient of the output it was reduced into (the
            // mean's divided by the count first, on the reduced shape).
            let share = k == .sum ? g : try Elementwise.binary(.div, g, scalar: ScalarOperand(int: Int64(count)), scalarFirst: false)
            let spread = try ShapeOps.reshape(share, kept).expanded(to: shape)
            // A full reduction's gradient is one value: it stays a view of it (all strides 0,
            // as PyTorch's), which the elementwise backward kernels read without a full copy.
            return [share.numel == 1 ? spread : try Ops.contiguous(spread)]
        }
    }
}

/// max/min (with indices), argmax/argmin, amax/amin, var/std and logsumexp.
extension Reductions {
    static let max = OpInfo("max", .none)
    static let min = OpInfo("min", .none)
    static let argmax = OpInfo("argmax", .none)
    static let argmin = OpInfo("argmin", .none)
    static let amax = OpInfo("amax", .none)
    static let amin = OpInfo("amin", .none)
    static let variance = OpInfo("var", .float32)
    static let std = OpInfo("std", .float32)
    static let logsumexp = OpInfo("logsumexp", .float32)
    static let extraInfos = [max, min, argmax, argmin, amax, amin, variance, std, logsumexp]

    private static func checkNonEmpty(_ a: TensorImpl, axis: Int?, op: String) throws {
        let empty = axis.map { a.ndim > 0 && a.shape[$0] == 0 } ?? (a.numel == 0)
        if empty {
            throw LucidError.index("\(op): cannot reduce over a zero-size dimension of a tensor of shape \(a.shape) (no identity)")
        }
        if a.dtype == .bool { throw LucidError.type("\(op): not supported for bool tensors") }
    }

    /// `a` with `axes` moved last and merged into one: [kept..., reduced].
    private static func mergedLast(_ a: TensorImpl, axes: [Int]) throws -> TensorImpl {
        let kept = (0..<a.ndim).filter { !axes.contains($0) }
        let moved = try ShapeOps.permute(a, kept + axes)
        var n = 1
        for ax in axes { n *= a.shape[ax] }
        return try ShapeOps.reshape(moved, kept.map { a.shape[$0] } + [n])
    }

    /// (values, int64 indices) of the max (or min) along `dim`, like `torch.max(x, dim)`.
    /// The gradient goes to the chosen element.
    package static func extremeWithIndices(_ a: TensorImpl, dim: Int, keepdim: Bool, largest: Bool) throws -> (TensorImpl, TensorImpl) {
        let op = largest ? max : min
        let axis = try Shape.wrapDim(dim, ndim: a.ndim, op: op.name)
        try checkNonEmpty(a, axis: a.ndim == 0 ? nil : axis, op: op.name)
        return try op.run(a) { a in try extremeWithIndices(op, a, axis: axis, keepdim: keepdim, largest: largest) }
    }

    private static func extremeWithIndices(
        _ op: OpInfo, _ a: TensorImpl, axis: Int, keepdim: Bool,
        largest: Bool
    ) throws -> (TensorImpl, TensorImpl) {
        let x = a.ndim == 0 ? a.view(shape: [1], strides: [1]) : a
        var outShape = x.shape
        outShape.remove(at: axis)
        let values = try TensorImpl.empty(outShape, dtype: x.dtype, on: x.backend)
        let indices = try TensorImpl.empty(outShape, dtype: .int64, on: x.backend)
        x.run(
            ReductionKernels.self, KernelCall(.argReduce(axis: axis), reads: [x], writes: [indices, values]),
            largest ? "argmax" : "argmin"
        ) { $0.argReduce(max: largest, x, axis: axis, values: values, indices: indices) }
        var kept = x.shape
        kept[axis] = 1
        let shape = a.ndim == 0 ? [] : (keepdim ? kept : outShape)
        let v = values.view(shape: shape, strides: Shape.contiguousStrides(shape))
        let i = indices.view(shape: shape, strides: Shape.contiguousStrides(shape))
        let xShape = x.shape, aShape = a.shape
        let tracked = Autograd.record(v, Autograd.name(op), [a], saved: [indices]) { g in
            let gk = try ShapeOps.reshape(g, kept), ik = indices.view(shape: kept, strides: Shape.contiguousStrides(kept))
            return [try ShapeOps.reshape(try Indexing.scatterAdd(gk, dim: axis, index: ik, shape: xShape), aShape)]
        }
        return (tracked, i)
    }

    /// Index of the max (or min) along `dim`, or into the flattened tensor when `dim` is nil.
    package static func argExtreme(_ a: TensorImpl, dim: Int?, keepdim: Bool, largest: Bool) throws -> TensorImpl {
        let op = largest ? argmax : argmin
        if dim == nil { try checkNonEmpty(a, axis: nil, op: op.name) }
        return try op.run(a.withRequiresGrad(false)) { detached in
            guard let dim else {
                let flat = try ShapeOps.reshape(detached, [-1])
                let (_, i) = try extremeWithIndices(flat, dim: 0, keepdim: false, largest: largest)
                return keepdim ? try ShapeOps.reshape(i, [Int](repeating: 1, count: a.ndim)) : i
            }
            return try extremeWithIndices(detached, dim: dim, keepdim: keepdim, largest: largest).1
        }
    }

    /// The max (or min) over `dims` (all when nil or empty), like `torch.amax`; `torch.max(x)`
    /// is this over every dimension. The gradient is shared evenly between tied elements.
    package static func extreme(_ a: TensorImpl, dims: [Int]?, keepdim: Bool, largest: Bool) throws -> TensorImpl {
        let op = largest ? amax : amin
        let axes = try Self.axes(dims, ndim: a.ndim, op: op.name)
        for ax in axes { try checkNonEmpty(a, axis: ax, op: op.name) }
        if a.numel == 0 && axes.isEmpty { try checkNonEmpty(a, axis: nil, op: op.name) }
        return try op.run(a) { a in try extreme(op, a, axes: axes, keepdim: keepdim, largest: largest) }
    }

    private static func extreme(_ op: OpInfo, _ a: TensorImpl, axes: [Int], keepdim: Bool, largest: Bool) throws -> TensorImpl {
        let merged = try GradMode.with(false) { try mergedLast(a.withRequiresGrad(false), axes: axes) }
        let values = try GradMode.with(false) {
            try extremeWithIndices(merged, dim: -1, keepdim: false, largest: largest).0
        }
        var kept = a.shape
        for ax in axes { kept[ax] = 1 }
        let squeezed = a.shape.enumerated().filter { !axes.contains($0.offset) }.map(\.element)
        let shape = keepdim ? kept : squeezed
        let out = values.view(shape: shape, strides: Shape.contiguousStrides(shape))
        return Autograd.record(out, Autograd.name(op), [a], saved: [a, out]) { g in
            let hit = try Ops.cast(try Comparison.compare(.eq, a, try ShapeOps.reshape(out, kept)), to: g.dtype)
            let count = try reduce(.sum, hit, dims: axes, keepdim: true)
            return [try Elementwise.binary(.mul, hit, try Elementwise.binary(.div, try ShapeOps.reshape(g, kept), count))]
        }
    }

    /// Variance over `dims` with Bessel's `correction` (PyTorch's default 1), in float32 under
    /// autocast; `std` is its square root.
    package static func variance(_ a: TensorImpl, dims: [Int]?, correction: Double, keepdim: Bool, root: Bool) throws -> TensorImpl {
        let op = root ? std : variance
        let axes = try Self.axes(dims, ndim: a.ndim, op: op.name)
        guard a.dtype.isFloatingPoint else {
            throw LucidError.type("\(op.name): input dtype must be floating point, got \(a.dtype)")
        }
        return try op.run(a) { x in
            var n = 1
            for ax in axes { n *= x.shape[ax] }
            let centered = try Elementwise.binary(.sub, x, try reduce(.mean, x, dims: axes, keepdim: true))
            let squares = try reduce(.sum, try Elementwise.binary(.mul, centered, centered), dims: axes, keepdim: keepdim)
            let v = try Elementwise.binary(.div, squares, scalar: ScalarOperand(float: Swift.max(Double(n) - correction, 0)), scalarFirst: false)
            return root ? try Elementwise.unary(.sqrt, v) : v
        }
    }

    /// log(sum(exp(a))) over `dims`, computed stably (the max is subtracted first) in float32
    /// under autocast.
    package static func logsumexp(_ a: TensorImpl, dims: [Int]?, keepdim: Bool) throws -> TensorImpl {
        let axes = try Self.axes(dims, ndim: a.ndim, op: logsumexp.name)
        return try logsumexp.run(a) { x in try logsumexp(x, axes: axes, keepdim: keepdim) }
    }

    private static func logsumexp(_ x0: TensorImpl, axes: [Int], keepdim: Bool) throws -> TensorImpl {
        var x = x0
        if !x.dtype.isFloatingPoint { x = try Ops.cast(x, to: .float32) }
        if x.numel == 0 {  // log(0) = -inf over empty sets
            return try Elementwise.unary(.log, try reduce(.sum, try Elementwise.unary(.exp, x), dims: axes, keepdim: keepdim))
        }
        // The shift is a constant for autograd; infinite maxima shift by 0 so that all -inf
        // rows give -inf and +inf rows give +inf instead of NaN.
        let shift = try GradMode.with(false) { () -> TensorImpl in
            let m = try extreme(x.withRequiresGrad(false), dims: axes, keepdim: true, largest: true)
            let finite = try Comparison.compare(.lt, try Elementwise.unary(.abs, m), scalar: ScalarOperand(float: .infinity))
            return try Comparison.where(finite, m, try Ops.scalarTensor(ScalarOperand(int: 0), dtype: m.dtype, device: m.device))
        }
        let sum = try reduce(.sum, try Elementwise.unary(.exp, try Elementwise.binary(.sub, x, shift)), dims: axes, keepdim: true)
        let out = try Elementwise.binary(.add, try Elementwise.unary(.log, sum), shift)
        if keepdim { return out }
        return try ShapeOps.reshape(out, x.shape.enumerated().filter { !axes.contains($0.offset) }.map(\.element))
    }
}
