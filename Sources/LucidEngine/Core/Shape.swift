/// Shape arithmetic shared by every op: element counts, contiguous strides, broadcasting and
/// dimension wrapping. Every function checks its input and throws instead of trapping.
package enum Shape {
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

    /// `offset + Σ i·strides` for every index i of `shape`, row-major.
    static func offsets(_ shape: [Int], _ strides: [Int], from offset: Int = 0) -> [Int] {
        var n = 1
        for s in shape { n &*= s }
        var out = [Int](repeating: offset, count: max(n, 0)), index = [Int](repeating: 0, count: shape.count)
        var at = offset
        for j in out.indices {
            out[j] = at
            var d = shape.count - 1
            while d >= 0 {  // the next index, as an odometer turns
                index[d] += 1
                at &+= strides[d]
                if index[d] < shape[d] { break }
                at &-= index[d] &* strides[d]
                index[d] = 0
                d -= 1
            }
        }
        return out
    }

    /// The lowest and the highest of those offsets (`offset` itself for a shape without elements).
    static func span(_ shape: [Int], _ strides: [Int], from offset: Int) -> (low: Int, high: Int) {
        var (low, high) = (offset, offset)
        if shape.contains(0) { return (low, high) }
        for (n, s) in zip(shape, strides) where n > 1 {
            if s < 0 { low &+= (n - 1) &* s } else { high &+= (n - 1) &* s }
        }
        return (low, high)
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
    package static func wrapDim(_ d: Int, ndim: Int, op: String) throws -> Int {
        let n = max(ndim, 1)  // a 0-d tensor accepts dim 0 and -1, like PyTorch
        guard d >= -n, d < n else {
            throw LucidError.index(
                "\(op): dimension \(d) is out of range for a tensor with \(ndim) dimension\(ndim == 1 ? "" : "s") (expected -\(n)...\(n - 1))")
        }
        return d < 0 ? d + n : d
    }
}
