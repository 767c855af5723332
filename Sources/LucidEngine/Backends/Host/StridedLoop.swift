/// Walks up to three strided operands of one shape, innermost dimension in `body` calls of
/// (offsets, count, innerStrides). Dimensions that are contiguous for every operand are
/// merged first, so a contiguous tensor is one run however many dimensions it has.
struct StridedLoop {
    var shape: [Int] = []
    var strides: [[Int]] = []
    /// Set when every operand is contiguous: the whole walk is one run of this many elements,
    /// and nothing is allocated for it.
    private var contiguousRun: Int? = nil
    private var operands = 0

    init(shape: [Int], strides: [[Int]]) {
        operands = strides.count
        if Self.allContiguous(shape, strides) {
            var n = 1
            for s in shape { n &*= s }
            contiguousRun = n
            return
        }
        // Drop size-1 dimensions, then merge neighbours that are contiguous in every operand.
        var dims: [(Int, [Int])] = []
        for d in 0..<shape.count where shape[d] != 1 {
            dims.append((shape[d], strides.map { $0[d] }))
        }
        var merged: [(Int, [Int])] = []
        for dim in dims {
            if let last = merged.last,
                zip(last.1, dim.1).allSatisfy({ $0 == $1 &* dim.0 })
            {
                merged[merged.count - 1] = (last.0 &* dim.0, dim.1)
            } else {
                merged.append(dim)
            }
        }
        if merged.isEmpty { merged = [(1, strides.map { _ in 0 })] }
        self.shape = merged.map { $0.0 }
        self.strides = (0..<strides.count).map { k in merged.map { $0.1[k] } }
    }

    /// Whether every operand is row-major contiguous for `shape`.
    @inline(__always)
    static func allContiguous(_ shape: [Int], _ strides: [[Int]]) -> Bool {
        for st in strides {
            var expected = 1
            for d in stride(from: shape.count - 1, through: 0, by: -1) where shape[d] != 1 {
                if st[d] != expected { return false }
                expected &*= shape[d]
            }
        }
        return true
    }

    /// `forEachRun`, its runs split among up to `HostThreads.current` threads when the walk
    /// covers `2 * HostThreads.streamingGrain` elements or more: parts of the outermost
    /// dimension, or of the one run. `body` runs concurrently on disjoint parts, so it may
    /// write only what its own runs address (a copy into a tensor that does not overlap its
    /// source).
    func forEachRunInParallel(bases: [Int], _ body: (UnsafeBufferPointer<Int>, Int, UnsafeBufferPointer<Int>) -> Void) {
        var total = contiguousRun ?? 1
        if contiguousRun == nil { for n in shape { total &*= n } }
        guard total >= 2 * HostThreads.streamingGrain else { return forEachRun(bases: bases, body) }
        let k = operands
        if contiguousRun != nil || shape.count == 1 {
            // One run (of stride 1, or of each operand's stride): parts of it.
            let steps = contiguousRun != nil ? [Int](repeating: 1, count: k) : strides.map { $0[0] }
            steps.withUnsafeBufferPointer { inner in
                HostThreads.forEachRange(total, grain: HostThreads.streamingGrain) { range in
                    var offsets = bases
                    for j in 0..<k { offsets[j] &+= range.lowerBound &* inner[j] }
                    offsets.withUnsafeBufferPointer { body($0, range.count, inner) }
                }
            }
            return
        }
        // Rows of the outermost dimension: each part one walk over its rows.
        let rows = shape[0], perRow = total / rows
        HostThreads.forEachRange(rows, grain: Swift.max(1, HostThreads.streamingGrain / perRow), align: 1) { range in
            var offsets = bases, part = shape
            for j in 0..<k { offsets[j] &+= range.lowerBound &* strides[j][0] }
            part[0] = range.count
            StridedLoop(shape: part, strides: strides).forEachRun(bases: offsets, body)
        }
    }

    /// `body(base offsets per operand, run length, inner stride per operand)`.
    @inline(__always)  // so that the kernel's body (and the closures it calls) inline into the loop
    func forEachRun(bases: [Int], _ body: (UnsafeBufferPointer<Int>, Int, UnsafeBufferPointer<Int>) -> Void) {
        if let n = contiguousRun {
            if n == 0 { return }
            let k = operands
            withUnsafeTemporaryAllocation(of: Int.self, capacity: 2 * k) { buf in
                for j in 0..<k {
                    buf[j] = bases[j]
                    buf[k + j] = 1
                }
                let p = UnsafeBufferPointer(buf)
                body(UnsafeBufferPointer(rebasing: p[0..<k]), n, UnsafeBufferPointer(rebasing: p[k..<2 * k]))
            }
            return
        }
        let nd = shape.count
        let k = strides.count
        if shape.contains(0) { return }
        let inner = shape[nd - 1]
        var innerStrides = [Int](repeating: 0, count: k)
        for j in 0..<k { innerStrides[j] = strides[j][nd - 1] }
        var offsets = bases
        var index = [Int](repeating: 0, count: nd)
        innerStrides.withUnsafeBufferPointer { inS in
            while true {
                offsets.withUnsafeBufferPointer { body($0, inner, inS) }
                // Advance the outer index (dimensions 0..<nd-1), odometer style.
                var d = nd - 2
                while d >= 0 {
                    index[d] += 1
                    for j in 0..<k { offsets[j] &+= strides[j][d] }
                    if index[d] < shape[d] { break }
                    for j in 0..<k { offsets[j] &-= strides[j][d] &* shape[d] }
                    index[d] = 0
                    d -= 1
                }
                if d < 0 { return }
            }
        }
    }
}
