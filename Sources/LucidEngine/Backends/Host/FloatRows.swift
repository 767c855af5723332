import CHostKernels

/// Vectorised float32 loops over contiguous runs for the normalisation kernels: sums in SIMD8
/// lanes, widened to double every block so that long runs stay accurate.
enum FloatRows {
    private static let block = 512

    @inline(__always)
    fileprivate static func load(_ p: UnsafePointer<Float>, _ i: Int) -> SIMD8<Float> {
        UnsafeRawPointer(p + i).loadUnaligned(as: SIMD8<Float>.self)
    }

    @inline(__always)
    fileprivate static func store(_ v: SIMD8<Float>, _ p: UnsafeMutablePointer<Float>, _ i: Int) {
        UnsafeMutableRawPointer(p + i).storeBytes(of: v, as: SIMD8<Float>.self)
    }

    /// Σ f(i) over `0..<n`, f returning eight lanes at i (a multiple of 8) or one value at i
    /// for the tail; float lanes per block of 512, double across blocks.
    @inline(__always)
    fileprivate static func total(_ n: Int, _ lanes: (Int) -> SIMD8<Float>, _ one: (Int) -> Float) -> Double {
        var sum = 0.0
        var start = 0
        let whole = n & ~7
        while start < whole {
            let end = Swift.min(start + block, whole)
            var acc = SIMD8<Float>(repeating: 0)
            var i = start
            while i < end {
                acc += lanes(i)
                i += 8
            }
            sum += Double(acc.sum())
            start = end
        }
        var tail: Float = 0
        for i in whole..<n { tail += one(i) }
        return sum + Double(tail)
    }

    /// Σ x[i].
    @inline(__always)
    static func sum(_ x: UnsafePointer<Float>, _ n: Int) -> Double {
        total(n, { load(x, $0) }, { x[$0] })
    }

    /// Σ (x[i] - m)².
    @inline(__always)
    static func squaredDeviations(_ x: UnsafePointer<Float>, _ n: Int, _ m: Float) -> Double {
        let mv = SIMD8<Float>(repeating: m)
        return total(
            n,
            { i in
                let d = load(x, i) - mv; return d * d
            },
            { i in
                let d = x[i] - m; return d * d
            })
    }

    /// Σ a[i]·b[i].
    @inline(__always)
    static func dot(_ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>, _ n: Int) -> Double {
        total(n, { load(a, $0) * load(b, $0) }, { a[$0] * b[$0] })
    }

    /// out[i] = (x[i] - m)·r·w[i] + b[i], w and b optional (per element).
    @inline(__always)
    static func normalize(
        _ x: UnsafePointer<Float>, _ n: Int, _ m: Float, _ r: Float, _ w: UnsafePointer<Float>?,
        _ b: UnsafePointer<Float>?, _ out: UnsafeMutablePointer<Float>
    ) {
        let mv = SIMD8<Float>(repeating: m), rv = SIMD8<Float>(repeating: r)
        let whole = n & ~7
        var i = 0
        switch (w, b) {
        case let (w?, b?):
            while i < whole { store((load(x, i) - mv) * rv * load(w, i) + load(b, i), out, i); i += 8 }
            for k in whole..<n { out[k] = (x[k] - m) * r * w[k] + b[k] }
        case let (w?, nil):
            while i < whole { store((load(x, i) - mv) * rv * load(w, i), out, i); i += 8 }
            for k in whole..<n { out[k] = (x[k] - m) * r * w[k] }
        case let (nil, b?):
            while i < whole { store((load(x, i) - mv) * rv + load(b, i), out, i); i += 8 }
            for k in whole..<n { out[k] = (x[k] - m) * r + b[k] }
        case (nil, nil):
            while i < whole { store((load(x, i) - mv) * rv, out, i); i += 8 }
            for k in whole..<n { out[k] = (x[k] - m) * r }
        }
    }

    /// One row of the normalisation backward: with x̂ = (x - m)·r and gy = g·w (w optional),
    /// dx = r·(gy - Σgy/n - x̂·Σ(gy·x̂)/n). Also adds g·x̂ into dw and g into db when given
    /// (column sums over rows, per thread).
    @inline(__always)
    static func backwardRow(
        _ g: UnsafePointer<Float>, _ x: UnsafePointer<Float>, _ n: Int, _ m: Float, _ r: Float,
        _ w: UnsafePointer<Float>?, _ dx: UnsafeMutablePointer<Float>,
        _ dw: UnsafeMutablePointer<Float>?, _ db: UnsafeMutablePointer<Float>?
    ) {
        let mv = SIMD8<Float>(repeating: m), rv = SIMD8<Float>(repeating: r)
        let whole = n & ~7
        // Σgy and Σgy·x̂ in one pass.
        var s1 = 0.0, s2 = 0.0
        var start = 0
        while start < whole {
            let end = Swift.min(start + block, whole)
            var a1 = SIMD8<Float>(repeating: 0), a2 = SIMD8<Float>(repeating: 0)
            var i = start
            while i < end {
                let gy = w.map { load(g, i) * load($0, i) } ?? load(g, i)
                a1 += gy
                a2 += gy * ((load(x, i) - mv) * rv)
                i += 8
            }
            s1 += Double(a1.sum())
            s2 += Double(a2.sum())
            start = end
        }
        for k in whole..<n {
            let gy = w.map { g[k] * $0[k] } ?? g[k]
            s1 += Double(gy)
            s2 += Double(gy * ((x[k] - m) * r))
        }
        let c1 = Float(s1 / Double(n)), c2 = Float(s2 / Double(n))
        let c1v = SIMD8<Float>(repeating: c1), c2v = SIMD8<Float>(repeating: c2)
        var i = 0
        while i < whole {
            let xhat = (load(x, i) - mv) * rv
            let gi = load(g, i)
            let gy = w.map { gi * load($0, i) } ?? gi
            store(rv * (gy - c1v - xhat * c2v), dx, i)
            if let dw { store(load(UnsafePointer(dw), i) + gi * xhat, dw, i) }
            if let db { store(load(UnsafePointer(db), i) + gi, db, i) }
            i += 8
        }
        for k in whole..<n {
            let xhat = (x[k] - m) * r
            let gy = w.map { g[k] * $0[k] } ?? g[k]
            dx[k] = r * (gy - c1 - xhat * c2)
            dw?[k] += g[k] * xhat
            db?[k] += g[k]
        }
    }
}

extension FloatRows {
    /// out[i] = (x[i] - m)·r·w + b for one channel's run (w and b scalars).
    @inline(__always)
    static func normalize(
        _ x: UnsafePointer<Float>, _ n: Int, _ m: Float, _ r: Float, scale w: Float, shift b: Float,
        _ out: UnsafeMutablePointer<Float>
    ) {
        let mv = SIMD8<Float>(repeating: m), rv = SIMD8<Float>(repeating: r)
        let wv = SIMD8<Float>(repeating: w), bv = SIMD8<Float>(repeating: b)
        let whole = n & ~7
        var i = 0
        while i < whole { store((load(x, i) - mv) * rv * wv + bv, out, i); i += 8 }
        for k in whole..<n { out[k] = (x[k] - m) * r * w + b }
    }

    /// (Σg, Σg·x̂) over one run, x̂ = (x - m)·r.
    @inline(__always)
    static func gradientSums(
        _ g: UnsafePointer<Float>, _ x: UnsafePointer<Float>, _ n: Int, _ m: Float,
        _ r: Float
    ) -> (Double, Double) {
        let mv = SIMD8<Float>(repeating: m), rv = SIMD8<Float>(repeating: r)
        let sg = total(n, { load(g, $0) }, { g[$0] })
        let sgx = total(n, { i in load(g, i) * ((load(x, i) - mv) * rv) }, { i in g[i] * ((x[i] - m) * r) })
        return (sg, sgx)
    }

    /// dx[i] = r·(g[i]·w - c1 - x̂[i]·c2) for one run.
    @inline(__always)
    static func channelInputGradient(
        _ g: UnsafePointer<Float>, _ x: UnsafePointer<Float>, _ n: Int, _ m: Float,
        _ r: Float, _ w: Float, _ c1: Float, _ c2: Float, _ dx: UnsafeMutablePointer<Float>
    ) {
        let mv = SIMD8<Float>(repeating: m), rv = SIMD8<Float>(repeating: r), wv = SIMD8<Float>(repeating: w)
        let c1v = SIMD8<Float>(repeating: c1), c2v = SIMD8<Float>(repeating: c2)
        let whole = n & ~7
        var i = 0
        while i < whole {
            store(rv * (load(g, i) * wv - c1v - (load(x, i) - mv) * rv * c2v), dx, i)
            i += 8
        }
        for k in whole..<n { dx[k] = r * (g[k] * w - c1 - (x[k] - m) * r * c2) }
    }
}

extension FloatRows {
    /// One row of the softmax backward: dx = y·(g - Σg·y), or for log-softmax dx = g - exp(y)·Σg.
    @inline(__always)
    static func softmaxBackwardRow(
        _ g: UnsafePointer<Float>, _ y: UnsafePointer<Float>, _ n: Int, log: Bool,
        _ dx: UnsafeMutablePointer<Float>
    ) {
        let whole = n & ~7
        if log {
            // y is a log-probability (≤ 0), where FastMath's exp serves: the C loop computes
            // it bit for bit, built for the widest vector unit the CPU has.
            lucid_host_log_softmax_backward(g, y, n, Float(sum(g, n)), dx)
            return
        }
        let dotv = SIMD8<Float>(repeating: Float(dot(g, y, n)))
        var i = 0
        while i < whole {
            let yv = load(y, i)
            store(yv * (load(g, i) - dotv), dx, i)
            i += 8
        }
        let d = dotv[0]
        for k in whole..<n { dx[k] = y[k] * (g[k] - d) }
    }
}
