/// Shape arithmetic shared by every op: element counts, contiguous strides, broadcasting and
/// dimension wrapping. Every function checks its input and throws instead of trapping.
enum Shape {
    /// The largest element count a tensor may have: its byte size must fit in `Int`.
    static let maxElements = Int(Int32.max) * 64

    /// Number of elements, rejecting negative sizes and overflow. The nonzero dimensions are
    /// bounded together even when another is 0, so that the strides of every tensor (empty
    /// ones included) and every offset into it fit in `Int`.
    static func numel(_ shape: [Int]) throws -> Int {
        var nonzero = 1, empty = false
        for s in shape {
            guard s >= 0 else { throw LucidError.value("negative dimension \(s) in shape \(shape)") }
            if s == 0 { empty = true; continue }
            let (m, overflow) = nonzero.multipliedReportingOverflow(by: s)
            guard !overflow, m <= maxElements else {
                throw LucidError.value("shape \(shape) has too many elements")
            }
            nonzero = m
        }
        return empty ? 0 : nonzero
    }

    /// Row-major strides, in elements.
    static func contiguousStrides(_ shape: [Int]) -> [Int] {
        var strides = [Int](repeating: 1, count: shape.count)
        var acc = 1
        for i in stride(from: shape.count - 1, through: 0, by: -1) {
            strides[i] = acc
            acc = acc &* max(shape[i], 1)
        }
        return strides
    }

    /// The broadcast of two shapes, NumPy/PyTorch style (align right, size 1 stretches).
    static func broadcast(_ a: [Int], _ b: [Int], op: String) throws -> [Int] {
        if a == b { return a }  // the commonest case, and no new array
        let n = max(a.count, b.count)
        var out = [Int](repeating: 1, count: n)
        for i in 0..<n {
            let da = i < n - a.count ? 1 : a[i - (n - a.count)]
            let db = i < n - b.count ? 1 : b[i - (n - b.count)]
            if da == db || db == 1 {
                out[i] = da
            } else if da == 1 {
                out[i] = db
            } else {
                throw LucidError.value(
                    "\(op): shapes \(a) and \(b) cannot be broadcast together (dimension \(i): \(da) vs \(db))")
            }
        }
        return out
    }

    /// Wraps a possibly negative dimension into `0..<ndim`.
    static func wrapDim(_ d: Int, ndim: Int, op: String) throws -> Int {
        let n = max(ndim, 1)  // a 0-d tensor accepts dim 0 and -1, like PyTorch
        guard d >= -n, d < n else {
            throw LucidError.index("\(op): dimension \(d) is out of range for a tensor with \(ndim) dimension\(ndim == 1 ? "" : "s") (expected -\(n)...\(n - 1))")
        }
        return d < 0 ? d + n : d
    }
}
