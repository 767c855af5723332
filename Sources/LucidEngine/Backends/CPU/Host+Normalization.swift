/// Host row normalisation (layer_norm, group_norm): the statistics summed in double (float32
/// SIMD lanes within blocks on the float32 path), the normalisation in float32, one rounding
/// on store; rows run in parallel. The backward is fused on float32.
extension HostBackend: NormalizationKernels {
    func normalizeRows(_ x: TensorImpl, rows: Int, eps: Float, weight: TensorImpl?, bias: TensorImpl?,
                       into out: TensorImpl, mean: TensorImpl, rstd: TensorImpl) {
        if x.dtype == .float32 && out.dtype == .float32 && rows > 0 {
            return normalizeFloatRows(x, rows: rows, eps: eps, weight: weight, bias: bias, into: out, mean: mean, rstd: rstd)
        }
        dispatch(x.dtype, NormalizeRowsKernel(x: x, rows: rows, eps: eps, weight: weight, bias: bias, out: out,
                                              mean: mean, rstd: rstd))
    }

    private static func floats(_ t: TensorImpl) -> UnsafeMutablePointer<Float> { hostPointer(t, F32Element.self) }

    private static func rowGrain(_ n: Int) -> Int { max(1, HostThreads.grain / max(n, 1)) }

    private func normalizeFloatRows(_ x: TensorImpl, rows: Int, eps: Float, weight: TensorImpl?, bias: TensorImpl?,
                                    into out: TensorImpl, mean: TensorImpl, rstd: TensorImpl) {
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

    func normalizeRowsBackward(_ grad: TensorImpl, _ x: TensorImpl, rows: Int, mean: TensorImpl, rstd: TensorImpl,
                               weight: TensorImpl?, dx: TensorImpl, dweight: TensorImpl?, dbias: TensorImpl?) -> Bool {
        guard rows > 0, grad.dtype == .float32, x.dtype == .float32, dx.dtype == .float32,
              grad.isContiguous, x.isContiguous, dx.isContiguous else { return false }
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
                        FloatRows.backwardRow(pg + r * n, px + r * n, n, pm[r], pr[r], pw, pdx + r * n,
                                              pdw == nil ? nil : lw.baseAddress, pdb == nil ? nil : lb.baseAddress)
                    }
                }
            }
            merge.withLock {
                if let pdw { for k in 0..<n { pdw[k] += localW[k] } }
                if let pdb { for k in 0..<n { pdb[k] += localB[k] } }
            }
        }
        return true
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
                    let d = Double(E.float(px, base + k) - m)
                    squares += d * d
                }
                let rs = 1 / (Float(squares / Double(n)) + eps).squareRoot()
                for k in 0..<n {
                    var y = (E.float(px, base + k) - m) * rs
                    if let pw { y *= pw[k] }
                    if let pb { y += pb[k] }
                    if wide { po32[base + k] = y } else { E.setFloat(po, base + k, y) }
                }
                pm[r] = m
                pr[r] = rs
            }
        }
    }
}
