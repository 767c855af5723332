/// Host row normalisation (layer_norm, group_norm): the statistics summed in double (float32
/// SIMD lanes within blocks on the float32 path), the normalisation in float32, one rounding
/// on store; rows run in parallel. The backward is fused on float32.
extension HostBackend: NormalizationKernels, FusedNormalizationKernels {
    func normalizeRows(
        _ x: TensorImpl, rows: Int, eps: Float, weight: TensorImpl?, bias: TensorImpl?,
        into out: TensorImpl, mean: TensorImpl, rstd: TensorImpl
    ) {
        if x.dtype == .float32 && out.dtype == .float32 && rows > 0 {
            return normalizeFloatRows(x, rows: rows, eps: eps, weight: weight, bias: bias, into: out, mean: mean, rstd: rstd)
        }
        dispatch(
            x.dtype,
            NormalizeRowsKernel(
                x: x, rows: rows, eps: eps, weight: weight, bias: bias, out: out,
                mean: mean, rstd: rstd))
    }

    private static func floats(_ t: TensorImpl) -> UnsafeMutablePointer<Float> { hostPointer(t, F32Element.self) }

    private static func rowGrain(_ n: Int) -> Int { max(1, HostThreads.grain / max(n, 1)) }

    private func normalizeFloatRows(
        _ x: TensorImpl, rows: Int, eps: Float, weight: TensorImpl?, bias: TensorImpl?,
        into out: TensorImpl, mean: TensorImpl, rstd: TensorImpl
    ) {
        let n = x.numel / rows
        let px = UnsafePointer(Self.floats(x)), po = Self.floats(out)
        let pw = weight.map { UnsafePointer(Self.floats($0)) }, pb = bias.map { UnsafePointer(Self.floats($0)) }
        let pm = Self.floats(mean), pr = Self.floats(rstd)
        HostThreads.forEachRange(rows, grain: Self.rowGrain(n), align: 1) { range in
            for r in range {
                let row = px + r * n
                let m = Float(FloatRows.sum(row, n) / Double(n))
                let rs = 1 / (Float(FloatRows.squaredDeviations(row, n, m) / Double(n)) + eps).squareRoot()
                FloatRows.normalize(row, n, m, rs, pw, pb, po + r * n)
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
        let s = x.numel / (batch * channels), count = Double(batch * s)
        let pg = UnsafePointer(Self.floats(grad)), px = UnsafePointer(Self.floats(x)), pdx = Self.floats(dx)
        let pm = UnsafePointer(Self.floats(mean)), pv = UnsafePointer(Self.floats(variance))
        let pw = weight.map { UnsafePointer(Self.floats($0)) }
        let pdw = dweight.map { Self.floats($0) }, pdb = dbias.map { Self.floats($0) }
        HostThreads.forEachRange(channels, grain: Self.rowGrain(batch * s), align: 1) { range in
            for c in range {
                let m = pm[c], r = 1 / (pv[c] + eps).squareRoot(), w = pw?[c] ?? 1
                var sg = 0.0, sgx = 0.0
                for n in 0..<batch {
                    let at = (n * channels + c) * s
                    let (a, b) = FloatRows.gradientSums(pg + at, px + at, s, m, r)
                    sg += a
                    sgx += b
                }
                let c1 = Float(Double(w) * sg / count), c2 = Float(Double(w) * sgx / count)
                for n in 0..<batch {
                    let at = (n * channels + c) * s
                    FloatRows.channelInputGradient(pg + at, px + at, s, m, r, w, c1, c2, pdx + at)
                }
                pdw?[c] = Float(sgx)
                pdb?[c] = Float(sg)
            }
        }
    }

    func scaleChannels(
        _ y: TensorImpl, batch: Int, channels: Int, weight: TensorImpl?, bias: TensorImpl?,
        into out: TensorImpl
    ) {
        let s = y.numel / (batch * channels)
        let py = UnsafePointer(Self.floats(y)), po = Self.floats(out)
        let pw = weight.map { UnsafePointer(Self.floats($0)) }, pb = bias.map { UnsafePointer(Self.floats($0)) }
        HostThreads.forEachRange(batch * channels, grain: Self.rowGrain(s), align: 1) { range in
            for row in range {
                let c = row % channels
                FloatRows.normalize(py + row * s, s, 0, 1, scale: pw?[c] ?? 1, shift: pb?[c] ?? 0, po + row * s)
            }
        }
    }

    func scaleChannelsBackward(
        _ grad: TensorImpl, _ y: TensorImpl, batch: Int, channels: Int, weight: TensorImpl?,
        dy: TensorImpl?, dweight: TensorImpl?, dbias: TensorImpl?
    ) {
        let s = y.numel / (batch * channels)
        let pg = UnsafePointer(Self.floats(grad)), py = UnsafePointer(Self.floats(y))
        let pw = weight.map { UnsafePointer(Self.floats($0)) }
        let pdy = dy.map { Self.floats($0) }, pdw = dweight.map { Self.floats($0) }, pdb = dbias.map { Self.floats($0) }
        // By channel, so that each channel's sums have one writer.
        HostThreads.forEachRange(channels, grain: Self.rowGrain(batch * s), align: 1) { range in
            for c in range {
                var sgy = 0.0, sg = 0.0
                let w = pw?[c] ?? 1
                for n in 0..<batch {
                    let at = (n * channels + c) * s
                    if pdw != nil { sgy += FloatRows.dot(pg + at, py + at, s) }
                    if pdb != nil { sg += FloatRows.sum(pg + at, s) }
                    if let pdy { FloatRows.normalize(pg + at, s, 0, 1, scale: w, shift: 0, pdy + at) }
                }
                pdw?[c] = Float(sgy)
                pdb?[c] = Float(sg)
            }
        }
    }

    func normalizeRowsBackward(
        _ grad: TensorImpl, _ x: TensorImpl, rows: Int, mean: TensorImpl, rstd: TensorImpl,
        weight: TensorImpl?, dx: TensorImpl, dweight: TensorImpl?, dbias: TensorImpl?
    ) {
        let n = x.numel / rows
        let pg = UnsafePointer(Self.floats(grad)), px = UnsafePointer(Self.floats(x)), pdx = Self.floats(dx)
        let pm = UnsafePointer(Self.floats(mean)), pr = UnsafePointer(Self.floats(rstd))
        let pw = weight.map { UnsafePointer(Self.floats($0)) }
        let pdw = dweight.map { Self.floats($0) }, pdb = dbias.map { Self.floats($0) }
        pdw?.initialize(repeating: 0, count: n)
        pdb?.initialize(repeating: 0, count: n)
        let merge = Lock()
        HostThreads.forEachRange(rows, grain: Self.rowGrain(n), align: 1) { range in
            // Column sums per thread, added into the results once.
            var localW = [Float](repeating: 0, count: pdw == nil ? 0 : n)
            var localB = [Float](repeating: 0, count: pdb == nil ? 0 : n)
            localW.withUnsafeMutableBufferPointer { lw in
                localB.withUnsafeMutableBufferPointer { lb in
                    for r in range {
                        FloatRows.backwardRow(
                            pg + r * n, px + r * n, n, pm[r], pr[r], pw, pdx + r * n,
                            pdw == nil ? nil : lw.baseAddress, pdb == nil ? nil : lb.baseAddress)
                    }
                }
            }
            merge.withLock {
                if let pdw { for k in 0..<n { pdw[k] += localW[k] } }
                if let pdb { for k in 0..<n { pdb[k] += localB[k] } }
            }
        }
    }
}

private struct NormalizeRowsKernel: ElementVisitor {
    let x: TensorImpl, rows: Int, eps: Float, weight: TensorImpl?, bias: TensorImpl?
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
                for k in 0..<n {
                    var y = (Float(E.float(px, base + k)) - m) * rs
                    if let pw { y *= pw[k] }
                    if let pb { y += pb[k] }
                    if wide { po32[base + k] = y } else { E.setFloat(po, base + k, E.Real(y)) }
                }
                pm[r] = m
                pr[r] = rs
            }
        }
    }
}
