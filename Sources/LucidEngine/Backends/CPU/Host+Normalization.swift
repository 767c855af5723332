/// Host row normalisation (layer_norm, group_norm): the statistics summed in double, the
/// normalisation in float32, one rounding on store; rows run in parallel.
extension HostBackend: NormalizationKernels {
    func normalizeRows(_ x: TensorImpl, rows: Int, eps: Float, weight: TensorImpl?, bias: TensorImpl?,
                       into out: TensorImpl, mean: TensorImpl, rstd: TensorImpl) {
        dispatch(x.dtype, NormalizeRowsKernel(x: x, rows: rows, eps: eps, weight: weight, bias: bias, out: out,
                                              mean: mean, rstd: rstd))
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
