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
        let x = try op.autocast([a])[0]
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
        out.backend.reduce(k, x, axes: axes, into: out)
        let squeezed = x.shape.enumerated().filter { !axes.contains($0.offset) }.map(\.element)
        let result = keepdim ? out : out.view(shape: squeezed, strides: Shape.contiguousStrides(squeezed))
        var count = 1
        for ax in axes { count &*= x.shape[ax] }
        return Autograd.record(result, Autograd.name(op), [x]) { g in
            // Every input element receives the gradient of the output it was reduced into.
            let spread = try Ops.contiguous(try ShapeOps.reshape(g, kept).expanded(to: x.shape))
            if k == .sum { return [spread] }
            return [try Elementwise.binary(.div, spread, scalar: ScalarOperand(int: Int64(count)), scalarFirst: false)]
        }
    }
}
