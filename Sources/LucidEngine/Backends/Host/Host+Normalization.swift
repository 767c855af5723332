/// Host row normalisation (layer_norm, group_norm): the statistics summed in double (float32
/// SIMD lanes within blocks on the float32 path), the normalisation in float32, one rounding
/// on store; rows run in parallel. The backward is fused on float32.
extension HostBackend: NormalizationKernels, FusedNormalizationKernels {
    func normalizeRows(
        _ x: TensorImpl, rows: Int, eps: Float, weight: TensorImpl?, bias: TensorImpl?, affine: RowAffine,
        into out: TensorImpl, mean: TensorImpl, rstd: TensorImpl
    ) {
        if x.dtype == .float32 && out.dtype == .float32 && rows > 0 {
            return normalizeFloatRows(
                x, rows: rows, eps: eps, weight: weight, bias: bias, affine: affine, into: out, mean: mean, rstd: rstd)
        }
        dispatch(
            x.dtype,
            NormalizeRowsKernel(
                x: x, rows: rows, eps: eps, weight: weight, bias: bias, affine: affine, out: out,
                mean: mean, rstd: rstd))
    }

    private static func floats(_ t: TensorImpl) -> UnsafeMutablePointer<Float> { hostPointer(t, F32Element.self) }

    /// Runs `body` with where to read a backward's gradient: at `pointer + i` for a
    /// contiguous one; for one value everywhere (`FloatFastPath.splats`), at a run of `length`
    /// copies of it, whatever `i` (every run a kernel reads is at most `length` long).
    private static func withGradient(
        _ g: TensorImpl, runs length: Int, _ body: (_ at: (Int) -> UnsafePointer<Float>) -> Void
    ) {
        let p = UnsafePointer(floats(g))
        guard !g.isContiguous, g.numel > 0 else { return body { p + $0 } }
        let copies = UnsafeMutablePointer<Float>.allocate(capacity: max(length, 1))
        defer { copies.deallocate() }
        copies.initialize(repeating: p[0], count: max(length, 1))
        body { _ in UnsafePointer(copies) }
    }

    private static func rowGrain(_ n: Int) -> Int { max(1, HostThreads.grain / max(n, 1)) }

    private func normalizeFloatRows(
        _ x: TensorImpl, rows: Int, eps: Float, weight: TensorImpl?, bias: TensorImpl?, affine: RowAffine,
        into out: TensorImpl, mean: TensorImpl, rstd: TensorImpl
    ) {
        let n = x.numel / rows, span = affine.span
        let px = UnsafePointer(Self.floats(x)), po = Self.floats(out)
        let pw = weight.map { UnsafePointer(Self.floats($0)) }, pb = bias.map { UnsafePointer(Self.floats($0)) }
        let pm = Self.floats(mean), pr = Self.floats(rstd)
        let perColumn = span == 1 || (pw == nil && pb == nil)
        HostThreads.forEachRange(rows, grain: Self.rowGrain(n), align: 1) { range in
            for r in range {
                let row = px + r * n, out = po + r * n, at = affine.offset(row: r, n)
                let m = Float(FloatRows.sum(row, n) / Double(n))
                let rs = 1 / (Float(FloatRows.squaredDeviations(row, n, m) / Double(n)) + eps).squareRoot()
                if perColumn {
                    FloatRows.normalize(row, n, m, rs, pw.map { $0 + at }, pb.map { $0 + at }, out)
                } else {
                    for j in 0..<(n / span) {
                        let w = pw?[at + j] ?? 1, b = pb?[at + j] ?? 0
                        FloatRows.normalize(row + j * span, span, m, rs, scale: w, shift: b, out + j * span)
                    }
                }
                pm[r] = m
                pr[r] = rs
            }
        }
    }

    func normalizeChannels(
        _ x: TensorImpl, batch: Int, channels: Int, eps: Float, weight: TensorImpl?,
        bias: TensorImpl?, into out: TensorImpl, mean: TensorImpl, variance: TensorImpl
    ) {
        let s = x.numel / (batch * channels), count = Double(batch * s)
        let px = UnsafePointer(Self.floats(x)), po = Self.floats(out)
        let pw = weight.map { UnsafePointer(Self.floats($0)) }, pb = bias.map { UnsafePointer(Self.floats($0)) }
        let pm = Self.floats(mean), pv = Self.floats(variance)
        if s == 1 {
            return normalizeColumns(px, batch: batch, channels: channels, eps: eps, pw, pb, po, pm, pv)
        }
        HostThreads.forEachRange(channels, grain: Self.rowGrain(batch * s), align: 1) { range in
            for c in range {
                var sum = 0.0
                for n in 0..<batch { sum += FloatRows.sum(px + (n * channels + c) * s, s) }
                let m = Float(sum / count)
                var squares = 0.0
                for n in 0..<batch { squares += FloatRows.squaredDeviations(px + (n * channels + c) * s, s, m) }
                let v = Float(squares / count)
                let r = 1 / (v + eps).squareRoot()
                let w = pw?[c] ?? 1, b = pb?[c] ?? 0
                for n in 0..<batch {
                    let at = (n * channels + c) * s
                    FloatRows.normalize(px + at, s, m, r, scale: w, shift: b, po + at)
                }
                pm[c] = m
                pv[c] = v
            }
        }
    }

    func normalizeChannelsBackward(
        _ grad: TensorImpl, _ x: TensorImpl, batch: Int, channels: Int, eps: Float,
        mean: TensorImpl, variance: TensorImpl, weight: TensorImpl?, dx: TensorImpl,
        dweight: TensorImpl?, dbias: TensorImpl?
    ) {
        let s = x.numel / (batch * channels)
        Self.withGradient(grad, runs: s == 1 ? channels : s) { pg in
            normalizeChannelsBackward(pg, x, batch: batch, channels: channels, eps: eps, mean, variance, weight, dx, dweight, dbias)
        }
    }

    private func normalizeChannelsBackward(
        _ pg: (Int) -> UnsafePointer<Float>, _ x: TensorImpl, batch: Int, channels: Int, eps: Float,
        _ mean: TensorImpl, _ variance: TensorImpl, _ weight: TensorImpl?, _ dx: TensorImpl,
        _ dweight: TensorImpl?, _ dbias: TensorImpl?
    ) {
        let s = x.numel / (batch * channels), count = Double(batch * s)
        let px = UnsafePointer(Self.floats(x)), pdx = Self.floats(dx)
        let pm = UnsafePointer(Self.floats(mean)), pv = UnsafePointer(Self.floats(variance))
        let pw = weight.map { UnsafePointer(Self.floats($0)) }
        let pdw = dweight.map { Self.floats($0) }, pdb = dbias.map { Self.floats($0) }
        if s == 1 {
            return normalizeColumnsBackward(pg, px, batch: batch, channels: channels, eps: eps, pm, pv, pw, pdx, pdw, pdb)
        }
        HostThreads.forEachRange(channels, grain: Self.rowGrain(batch * s), align: 1) { range in
            for c in range {
                let m = pm[c], r = 1 / (pv[c] + eps).squareRoot(), w = pw?[c] ?? 1
                var sg = 0.0, sgx = 0.0
                for n in 0..<batch {
                    let at = (n * channels + c) * s
                    let (a, b) = FloatRows.gradientSums(pg(at), px + at, s, m, r)
                    sg += a
                    sgx += b
                }
                let c1 = Float(Double(w) * sg / count), c2 = Float(Double(w) * sgx / count)
                for n in 0..<batch {
                    let at = (n * channels + c) * s
                    FloatRows.channelInputGradient(pg(at), px + at, s, m, r, w, c1, c2, pdx + at)
                }
                pdw?[c] = Float(sgx)
                pdb?[c] = Float(sg)
            }
        }
    }

    // [N, C] input (BatchNorm1d): each channel a column. The per-channel sums run down the
    // rows with the channels as the vector's lanes, in the order and precision of the general
    // path's runs of one element (each value widened to double, rows in order), so the results
    // are the same bits.

    private func normalizeColumns(
        _ px: UnsafePointer<Float>, batch: Int, channels: Int, eps: Float, _ pw: UnsafePointer<Float>?,
        _ pb: UnsafePointer<Float>?, _ po: UnsafeMutablePointer<Float>, _ pm: UnsafeMutablePointer<Float>,
        _ pv: UnsafeMutablePointer<Float>
    ) {
        let count = Double(batch)
        HostThreads.forEachRange(channels, grain: Self.rowGrain(batch), align: 8) { range in
            let lo = range.lowerBound, k = range.count
            withUnsafeTemporaryAllocation(of: Double.self, capacity: k) { acc in
                withUnsafeTemporaryAllocation(of: Float.self, capacity: 2 * k) { stats in
                    let m = stats.baseAddress!, r = m + k
                    acc.initialize(repeating: 0)
                    for n in 0..<batch {
                        let row = px + n * channels + lo
                        for j in 0..<k { acc[j] += Double(row[j]) }
                    }
                    for j in 0..<k { m[j] = Float(acc[j] / count) }
                    acc.initialize(repeating: 0)
                    for n in 0..<batch {
                        let row = px + n * channels + lo
                        for j in 0..<k {
                            let d = row[j] - m[j]
                            acc[j] += Double(d * d)
                        }
                    }
                    for j in 0..<k {
                        let v = Float(acc[j] / count)
                        pm[lo + j] = m[j]
                        pv[lo + j] = v
                        r[j] = 1 / (v + eps).squareRoot()
                    }
                    for n in 0..<batch {
                        let row = px + n * channels + lo, out = po + n * channels + lo
                        for j in 0..<k { out[j] = (row[j] - m[j]) * r[j] * (pw?[lo + j] ?? 1) + (pb?[lo + j] ?? 0) }
                    }
                }
            }
        }
    }

    private func normalizeColumnsBackward(
        _ pg: (Int) -> UnsafePointer<Float>, _ px: UnsafePointer<Float>, batch: Int, channels: Int, eps: Float,
        _ pm: UnsafePointer<Float>, _ pv: UnsafePointer<Float>, _ pw: UnsafePointer<Float>?,
        _ pdx: UnsafeMutablePointer<Float>, _ pdw: UnsafeMutablePointer<Float>?, _ pdb: UnsafeMutablePointer<Float>?
    ) {
        let count = Double(batch)
        HostThreads.forEachRange(channels, grain: Self.rowGrain(batch), align: 8) { range in
            let lo = range.lowerBound, k = range.count
            withUnsafeTemporaryAllocation(of: Double.self, capacity: 2 * k) { sums in
                withUnsafeTemporaryAllocation(of: Float.self, capacity: 4 * k) { stats in
                    let sg = sums.baseAddress!, sgx = sg + k
                    let r = stats.baseAddress!, w = r + k, c1 = w + k, c2 = c1 + k
                    sums.initialize(repeating: 0)
                    for j in 0..<k {
                        r[j] = 1 / (pv[lo + j] + eps).squareRoot()
                        w[j] = pw?[lo + j] ?? 1
                    }
                    let m = pm + lo
                    for n in 0..<batch {
                        let g = pg(n * channels + lo), x = px + n * channels + lo
                        for j in 0..<k {
                            sg[j] += Double(g[j])
                            sgx[j] += Double(g[j] * ((x[j] - m[j]) * r[j]))
                        }
                    }
                    for j in 0..<k {
                        c1[j] = Float(Double(w[j]) * sg[j] / count)
                        c2[j] = Float(Double(w[j]) * sgx[j] / count)
                        pdw?[lo + j] = Float(sgx[j])
                        pdb?[lo + j] = Float(sg[j])
                    }
                    for n in 0..<batch {
                        let g = pg(n * channels + lo), x = px + n * channels + lo, dx = pdx + n * channels + lo
                        for j in 0..<k { dx[j] = r[j] * (g[j] * w[j] - c1[j] - (x[j] - m[j]) * r[j] * c2[j]) }
                    }
                }
            }
        }
    }

    func normalizeRowsBackward(
        _ grad: TensorImpl, _ x: TensorImpl, rows: Int, mean: TensorImpl, rstd: TensorImpl,
        weight: TensorImpl?, affine: RowAffine, dx: TensorImpl, dweight: TensorImpl?, dbias: TensorImpl?
    ) {
        let n = x.numel / rows
        Self.withGradient(grad, runs: n) { pg in
            normalizeRowsBackward(pg, x, rows: rows, mean, rstd, weight, affine, dx, dweight, dbias)
        }
    }

    private func normalizeRowsBackward(
        _ pg: (Int) -> UnsafePointer<Float>, _ x: TensorImpl, rows: Int, _ mean: TensorImpl, _ rstd: TensorImpl,
        _ weight: TensorImpl?, _ affine: RowAffine, _ dx: TensorImpl, _ dweight: TensorImpl?, _ dbias: TensorImpl?
    ) {
        let n = x.numel / rows, count = affine.parameters(n)
        let px = UnsafePointer(Self.floats(x)), pdx = Self.floats(dx)
        let pm = UnsafePointer(Self.floats(mean)), pr = UnsafePointer(Self.floats(rstd))
        let pw = weight.map { UnsafePointer(Self.floats($0)) }
        let pdw = dweight.map { Self.floats($0) }, pdb = dbias.map { Self.floats($0) }
        pdw?.initialize(repeating: 0, count: count)
        pdb?.initialize(repeating: 0, count: count)
        let merge = Lock()
        HostThreads.forEachRange(rows, grain: Self.rowGrain(n), align: 1) { range in
            // The parameters' sums per thread, added into the results once.
            var localW = [Float](repeating: 0, count: pdw == nil ? 0 : count)
            var localB = [Float](repeating: 0, count: pdb == nil ? 0 : count)
            localW.withUnsafeMutableBufferPointer { lw in
                localB.withUnsafeMutableBufferPointer { lb in
                    for r in range {
                        let at = affine.offset(row: r, n)
                        let sw = pdw == nil ? nil : lw.baseAddress! + at, sb = pdb == nil ? nil : lb.baseAddress! + at
                        if affine.span == 1 {
                            FloatRows.backwardRow(pg(r * n), px + r * n, n, pm[r], pr[r], pw.map { $0 + at }, pdx + r * n, sw, sb)
                        } else {
                            Self.channelsBackwardRow(
                                pg(r * n), px + r * n, n, span: affine.span, pm[r], pr[r], pw.map { $0 + at }, pdx + r * n, sw, sb)
                        }
                    }
                }
            }
            merge.withLock {
                if let pdw { for k in 0..<count { pdw[k] += localW[k] } }
                if let pdb { for k in 0..<count { pdb[k] += localB[k] } }
            }
        }
    }

    /// One row of the normalisation backward whose affine is per channel, each channel a run of
    /// `span` elements: with a = Σg and b = Σg·x̂ over channel j's run, Σgy = Σj w[j]·a and
    /// Σgy·x̂ = Σj w[j]·b, then dx = r·(g·w[j] - Σgy/n - x̂·Σ(gy·x̂)/n). Adds b into dw[j] and
    /// a into db[j] when given.
    private static func channelsBackwardRow(
        _ g: UnsafePointer<Float>, _ x: UnsafePointer<Float>, _ n: Int, span: Int, _ m: Float, _ r: Float,
        _ w: UnsafePointer<Float>?, _ dx: UnsafeMutablePointer<Float>,
        _ dw: UnsafeMutablePointer<Float>?, _ db: UnsafeMutablePointer<Float>?
    ) {
        var s1 = 0.0, s2 = 0.0
        for j in 0..<(n / span) {
            let (a, b) = FloatRows.gradientSums(g + j * span, x + j * span, span, m, r)
            let wj = Double(w?[j] ?? 1)
            s1 += wj * a
            s2 += wj * b
            dw?[j] += Float(b)
            db?[j] += Float(a)
        }
        let c1 = Float(s1 / Double(n)), c2 = Float(s2 / Double(n))
        for j in 0..<(n / span) {
            FloatRows.channelInputGradient(g + j * span, x + j * span, span, m, r, w?[j] ?? 1, c1, c2, dx + j * span)
        }
    }
}

private struct NormalizeRowsKernel: ElementVisitor {
    let x: TensorImpl, rows: Int, eps: Float, weight: TensorImpl?, bias: TensorImpl?, affine: RowAffine
    let out: TensorImpl, mean: TensorImpl, rstd: TensorImpl

    func visit<E: HostElement>(_: E.Type) {
        guard rows > 0 else { return }
        let n = x.numel / rows
        let px = UnsafePointer(hostPointer(x, E.self))
        let pw = weight.map { UnsafePointer(hostPointer($0, F32Element.self)) }
        let pb = bias.map { UnsafePointer(hostPointer($0, F32Element.self)) }
        let pm = hostPointer(mean, F32Element.self), pr = hostPointer(rstd, F32Element.self)
        let wide = out.dtype == .float32 && x.dtype != .float32
        let po = hostPointer(out, E.self), po32 = hostPointer(out, F32Element.self)
        HostThreads.forEachRange(rows, grain: max(1, HostThreads.grain / max(n, 1)), align: 1) { range in
            for r in range {
                let base = r * n
                var sum = 0.0
                for k in 0..<n { sum += Double(E.float(px, base + k)) }
                let m = Float(sum / Double(n))
                var squares = 0.0
                for k in 0..<n {
                    let d = Double(Float(E.float(px, base + k)) - m)
                    squares += d * d
                }
                let rs = 1 / (Float(squares / Double(n)) + eps).squareRoot()
                let at = affine.offset(row: r, n), span = affine.span
                for k in 0..<n {
                    var y = (Float(E.float(px, base + k)) - m) * rs
                    if let pw { y *= pw[at + k / span] }
                    if let pb { y += pb[at + k / span] }
                    if wide { po32[base + k] = y } else { E.setFloat(po, base + k, E.Real(y)) }
                }
                pm[r] = m
                pr[r] = rs
            }
        }
    }
}
