/// Views and layout: reshape, view, transpose, permute, contiguous. Views share storage.
package enum ShapeOps {
    static let reshape = OpInfo("reshape", .none)
    static let view = OpInfo("view", .none)
    static let transpose = OpInfo("transpose", .none)
    static let permute = OpInfo("permute", .none)
    static let contiguous = OpInfo("contiguous", .none)

    /// Resolves one -1 and checks the element count.
    static func inferShape(_ shape: [Int], numel: Int, op: String) throws -> [Int] {
        var out = shape
        var inferred: Int? = nil
        var known = 1
        for (i, s) in shape.enumerated() {
            if s == -1 {
                guard inferred == nil else { throw LucidError.value("\(op): only one dimension can be -1, got \(shape)") }
                inferred = i
            } else if s < 0 {
                throw LucidError.value("\(op): invalid dimension \(s) in shape \(shape)")
            } else {
                let (m, o) = known.multipliedReportingOverflow(by: s)
                guard !o else { throw LucidError.value("\(op): shape \(shape) has too many elements") }
                known = m
            }
        }
        if let i = inferred {
            guard known != 0, numel % known == 0 else {
                throw LucidError.value("\(op): shape \(shape) is invalid for input of size \(numel)")
            }
            out[i] = numel / known
        } else if known != numel {
            throw LucidError.value("\(op): shape \(shape) is invalid for input of size \(numel)")
        }
        return out
    }

    /// Strides that let `newShape` view memory laid out as (oldShape, oldStrides), or nil when
    /// only a copy can produce it (the rule of PyTorch's `view`).
    static func viewStrides(oldShape: [Int], oldStrides: [Int], newShape: [Int]) -> [Int]? {
        var numel = 1
        for s in oldShape { numel &*= s }
        if numel == 0 || oldShape.isEmpty { return Shape.contiguousStrides(newShape) }
        var newStrides = [Int](repeating: 0, count: newShape.count)
        var viewD = newShape.count - 1
        var chunkBase = oldStrides[oldShape.count - 1]
        var tensorNumel = 1, viewNumel = 1
        for d in stride(from: oldShape.count - 1, through: 0, by: -1) {
            tensorNumel &*= oldShape[d]
            if d == 0 || (oldShape[d - 1] != 1 && oldStrides[d - 1] != tensorNumel &* chunkBase) {
                while viewD >= 0 && (viewNumel < tensorNumel || newShape[viewD] == 1) {
                    newStrides[viewD] = viewNumel &* chunkBase
                    viewNumel &*= newShape[viewD]
                    viewD -= 1
                }
                if viewNumel != tensorNumel { return nil }
                if d > 0 {
                    chunkBase = oldStrides[d - 1]
                    tensorNumel = 1
                    viewNumel = 1
                }
            }
        }
        return viewD == -1 ? newStrides : nil
    }

    /// A view when the strides allow it, a contiguous copy otherwise.
    package static func reshape(_ a: TensorImpl, _ shape: [Int]) throws -> TensorImpl {
        let target = try inferShape(shape, numel: a.numel, op: reshape.name)
        let out: TensorImpl
        if let s = viewStrides(oldShape: a.shape, oldStrides: a.strides, newShape: target) {
            out = a.view(shape: target, strides: s)
        } else {
            let dense = try GradMode.with(false) { try Ops.contiguous(a) }
            out = dense.view(shape: target, strides: Shape.contiguousStrides(target))
        }
        return Autograd.record(out, Autograd.name(reshape), [a]) { g in [try reshape(g, a.shape)] }
    }

    /// Always a view; throws when the layout does not allow one.
    package static func view(_ a: TensorImpl, _ shape: [Int]) throws -> TensorImpl {
        let target = try inferShape(shape, numel: a.numel, op: view.name)
        guard let s = viewStrides(oldShape: a.shape, oldStrides: a.strides, newShape: target) else {
            throw LucidError.runtime("view: shape \(target) is not compatible with the input's shape \(a.shape) and strides \(a.strides); use reshape, or call contiguous() first")
        }
        return Autograd.record(a.view(shape: target, strides: s), Autograd.name(view), [a]) { g in [try reshape(g, a.shape)] }
    }

    package static func transpose(_ a: TensorImpl, _ d0: Int, _ d1: Int) throws -> TensorImpl {
        let i = try Shape.wrapDim(d0, ndim: a.ndim, op: transpose.name)
        let j = try Shape.wrapDim(d1, ndim: a.ndim, op: transpose.name)
        var shape = a.shape, strides = a.strides
        if a.ndim > 0 {
            shape.swapAt(i, j)
            strides.swapAt(i, j)
        }
        return Autograd.record(a.view(shape: shape, strides: strides), Autograd.name(transpose), [a]) { g in
            [try transpose(g, d0, d1)]
        }
    }

    package static func permute(_ a: TensorImpl, _ dims: [Int]) throws -> TensorImpl {
        guard dims.count == a.ndim else {
            throw LucidError.value("permute: expected \(a.ndim) dimensions for a tensor of shape \(a.shape), got \(dims)")
        }
        var seen = Set<Int>()
        var wrapped: [Int] = []
        for d in dims {
            let w = try Shape.wrapDim(d, ndim: a.ndim, op: permute.name)
            guard seen.insert(w).inserted else {
                throw LucidError.value("permute: dimension \(d) appears more than once in \(dims)")
            }
            wrapped.append(w)
        }
        let out = a.view(shape: wrapped.map { a.shape[$0] }, strides: wrapped.map { a.strides[$0] })
        var inverse = [Int](repeating: 0, count: wrapped.count)
        for (i, d) in wrapped.enumerated() { inverse[d] = i }
        return Autograd.record(out, Autograd.name(permute), [a]) { g in [try permute(g, inverse)] }
    }
}
