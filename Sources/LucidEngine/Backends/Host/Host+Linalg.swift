/// The real types LAPACK factors: float32 and float64, column-major (see `LAPACK+OpenBLAS` and
/// `LAPACK+Accelerate`). Each routine returns LAPACK's `info`.
protocol LAPACKReal: HostReal {
    static func getrf(
        _ m: Int32, _ n: Int32, _ a: UnsafeMutablePointer<Self>, _ lda: Int32,
        _ ipiv: UnsafeMutablePointer<Int32>
    ) -> Int32
    static func trtrs(
        upper: Bool, transpose: Bool, unit: Bool, _ n: Int32, _ nrhs: Int32, _ a: UnsafeMutablePointer<Self>,
        _ lda: Int32, _ b: UnsafeMutablePointer<Self>, _ ldb: Int32
    ) -> Int32
    static func potrf(upper: Bool, _ n: Int32, _ a: UnsafeMutablePointer<Self>, _ lda: Int32) -> Int32
    static func syevd(
        vectors: Bool, upper: Bool, _ n: Int32, _ a: UnsafeMutablePointer<Self>, _ lda: Int32,
        _ w: UnsafeMutablePointer<Self>
    ) -> Int32
    static func gesdd(
        job: Character, _ m: Int32, _ n: Int32, _ a: UnsafeMutablePointer<Self>, _ lda: Int32,
        _ s: UnsafeMutablePointer<Self>, _ u: UnsafeMutablePointer<Self>, _ ldu: Int32,
        _ vt: UnsafeMutablePointer<Self>, _ ldvt: Int32
    ) -> Int32
    static func geqrf(
        _ m: Int32, _ n: Int32, _ a: UnsafeMutablePointer<Self>, _ lda: Int32,
        _ tau: UnsafeMutablePointer<Self>
    ) -> Int32
    static func orgqr(
        _ m: Int32, _ n: Int32, _ k: Int32, _ a: UnsafeMutablePointer<Self>, _ lda: Int32,
        _ tau: UnsafeMutablePointer<Self>
    ) -> Int32
    static func sytrf(_ n: Int32, _ a: UnsafeMutablePointer<Self>, _ lda: Int32, _ ipiv: UnsafeMutablePointer<Int32>) -> Int32
    static func sytrs(
        _ n: Int32, _ nrhs: Int32, _ a: UnsafeMutablePointer<Self>, _ lda: Int32,
        _ ipiv: UnsafeMutablePointer<Int32>, _ b: UnsafeMutablePointer<Self>, _ ldb: Int32
    ) -> Int32
}

/// A batch of row-major matrices in host memory, element `R`: matrix `b` of a contiguous
/// [B, rows, cols] tensor.
private struct Matrices<R: LAPACKReal> {
    let base: UnsafeMutablePointer<R>, rows: Int, cols: Int
    init(_ t: TensorImpl) {
        base = HostBackend.address(t).assumingMemoryBound(to: R.self)
        rows = t.shape[1]
        cols = t.shape[2]
    }
    func matrix(_ b: Int) -> UnsafeMutablePointer<R> { base + b &* rows &* cols }

    /// Matrix `b` into column-major `dst` (leading dimension `ld` >= rows).
    func columns(_ b: Int, into dst: UnsafeMutablePointer<R>, ld: Int) {
        let src = matrix(b)
        for i in 0..<rows { for j in 0..<cols { dst[i &+ j &* ld] = src[i &* cols &+ j] } }
    }

    /// Column-major `src` (leading dimension `ld`) into matrix `b`.
    func set(_ b: Int, from src: UnsafePointer<R>, ld: Int) {
        let dst = matrix(b)
        for i in 0..<rows { for j in 0..<cols { dst[i &* cols &+ j] = src[i &+ j &* ld] } }
    }
}

/// Column-major scratch of `count` elements (at least one, so that LAPACK gets an address).
private func columnScratch<R: LAPACKReal, T>(_: R.Type, _ count: Int, _ body: (UnsafeMutablePointer<R>) -> T) -> T {
    let p = UnsafeMutablePointer<R>.allocate(capacity: max(1, count))
    p.initialize(repeating: 0, count: max(1, count))
    defer { p.deallocate() }
    return body(p)
}

/// Calls `body` with the real type of a float32 or float64 tensor.
private func real<T>(_ dtype: DType, _ body: (any LAPACKReal.Type) -> T) -> T {
    dtype == .float64 ? body(Double.self) : body(Float.self)
}

/// Host linear algebra over LAPACK. Operands are contiguous [B, m, n] batches of float32 or
/// float64 (the op layer sees to it); each call returns LAPACK's `info` per matrix.
extension HostBackend: LinalgKernels {
    func luFactor(_ a: TensorImpl, lu: TensorImpl, pivots: TensorImpl) -> [Int32] {
        real(a.dtype) { luFactor($0, a, lu, pivots) }
    }

    private func luFactor<R: LAPACKReal>(_: R.Type, _ a: TensorImpl, _ lu: TensorImpl, _ pivots: TensorImpl) -> [Int32] {
        let src = Matrices<R>(a), dst = Matrices<R>(lu)
        let m = src.rows, n = src.cols, k = min(m, n), ld = max(1, m)
        let piv = HostBackend.address(pivots).assumingMemoryBound(to: Int32.self)
        return columnScratch(R.self, ld * n) { buf in
            (0..<a.shape[0]).map { b in
                src.columns(b, into: buf, ld: ld)
                let info = R.getrf(Int32(m), Int32(n), buf, Int32(ld), piv + b * k)
                dst.set(b, from: buf, ld: ld)
                return info
            }
        }
    }

    func triangularSolve(
        _ a: TensorImpl, _ b: TensorImpl, upper: Bool, transpose: Bool, unit: Bool,
        into x: TensorImpl
    ) -> [Int32] {
        real(a.dtype) { triangularSolve($0, a, b, upper, transpose, unit, x) }
    }

    private func triangularSolve<R: LAPACKReal>(
        _: R.Type, _ a: TensorImpl, _ b: TensorImpl, _ upper: Bool,
        _ transpose: Bool, _ unit: Bool, _ x: TensorImpl
    ) -> [Int32] {
        let am = Matrices<R>(a), bm = Matrices<R>(b), xm = Matrices<R>(x)
        let n = am.rows, k = bm.cols, ld = max(1, n)
        return columnScratch(R.self, ld * n) { abuf in
            columnScratch(R.self, ld * k) { bbuf in
                (0..<a.shape[0]).map { i in
                    am.columns(i, into: abuf, ld: ld)
                    bm.columns(i, into: bbuf, ld: ld)
                    let info =
                        n == 0 || k == 0
                        ? 0
                        : R.trtrs(
                            upper: upper, transpose: transpose, unit: unit, Int32(n), Int32(k), abuf, Int32(ld),
                            bbuf, Int32(ld))
                    if info > 0 {
                        // trtrs leaves b as it was for a zero on the diagonal.
                        bm.columns(i, into: bbuf, ld: ld)
                        Self.substitute(abuf, bbuf, n: n, k: k, ld: ld, upper: upper, transpose: transpose, unit: unit)
                    }
                    xm.set(i, from: bbuf, ld: ld)
                    return info
                }
            }
        }
    }

    /// Triangular substitution over column-major `a` and `b` (leading dimension `ld`), in place
    /// in `b`: what trtrs declines for a zero on the diagonal, carried out with IEEE arithmetic
    /// (infinities and NaN), as a BLAS triangular solve gives them.
    private static func substitute<R: LAPACKReal>(
        _ a: UnsafeMutablePointer<R>, _ b: UnsafeMutablePointer<R>, n: Int, k: Int,
        ld: Int, upper: Bool, transpose: Bool, unit: Bool
    ) {
        // op(A) is upper triangular when A is upper and not transposed, or lower and transposed.
        let backward = upper != transpose
        let order = backward ? Array((0..<n).reversed()) : Array(0..<n)
        for c in 0..<k {
            let x = b + c * ld
            for i in order {
                var s = x[i]
                let others = backward ? Array((i + 1)..<n) : Array(0..<i)
                for j in others { s -= (transpose ? a[j + i * ld] : a[i + j * ld]) * x[j] }
                x[i] = unit ? s : s / a[i + i * ld]
            }
        }
    }

    func cholesky(_ a: TensorImpl, upper: Bool, into out: TensorImpl) -> [Int32] {
        real(a.dtype) { cholesky($0, a, upper, out) }
    }

    private func cholesky<R: LAPACKReal>(_: R.Type, _ a: TensorImpl, _ upper: Bool, _ out: TensorImpl) -> [Int32] {
        let src = Matrices<R>(a), dst = Matrices<R>(out)
        let n = src.rows, ld = max(1, n)
        return columnScratch(R.self, ld * n) { buf in
            (0..<a.shape[0]).map { b in
                src.columns(b, into: buf, ld: ld)
                let info = n == 0 ? 0 : R.potrf(upper: upper, Int32(n), buf, Int32(ld))
                // LAPACK leaves the other triangle as it was: zeros there, as PyTorch returns.
                for j in 0..<n { for i in 0..<n where upper ? i > j : i < j { buf[i + j * ld] = 0 } }
                dst.set(b, from: buf, ld: ld)
                return info
            }
        }
    }

    func eigh(_ a: TensorImpl, upper: Bool, values: TensorImpl, vectors: TensorImpl?) -> [Int32] {
        real(a.dtype) { eigh($0, a, upper, values, vectors) }
    }

    private func eigh<R: LAPACKReal>(
        _: R.Type, _ a: TensorImpl, _ upper: Bool, _ values: TensorImpl,
        _ vectors: TensorImpl?
    ) -> [Int32] {
        let src = Matrices<R>(a), dst = vectors.map { Matrices<R>($0) }
        let n = src.rows, ld = max(1, n)
        let w = HostBackend.address(values).assumingMemoryBound(to: R.self)
        return columnScratch(R.self, ld * n) { buf in
            (0..<a.shape[0]).map { b in
                src.columns(b, into: buf, ld: ld)
                let info = n == 0 ? 0 : R.syevd(vectors: vectors != nil, upper: upper, Int32(n), buf, Int32(ld), w + b * n)
                dst?.set(b, from: buf, ld: ld)
                return info
            }
        }
    }

    func svd(_ a: TensorImpl, full: Bool, s: TensorImpl, u: TensorImpl?, vh: TensorImpl?) -> [Int32] {
        real(a.dtype) { svd($0, a, full, s, u, vh) }
    }

    private func svd<R: LAPACKReal>(
        _: R.Type, _ a: TensorImpl, _ full: Bool, _ s: TensorImpl, _ u: TensorImpl?,
        _ vh: TensorImpl?
    ) -> [Int32] {
        let src = Matrices<R>(a)
        let m = src.rows, n = src.cols, k = min(m, n), ld = max(1, m)
        let job: Character = u == nil ? "N" : (full ? "A" : "S")
        let uCols = full ? m : k, vtRows = full ? n : k
        let sp = HostBackend.address(s).assumingMemoryBound(to: R.self)
        let um = u.map { Matrices<R>($0) }, vm = vh.map { Matrices<R>($0) }
        return columnScratch(R.self, ld * n) { buf in
            columnScratch(R.self, ld * uCols) { ubuf in
                columnScratch(R.self, max(1, vtRows) * n) { vbuf in
                    (0..<a.shape[0]).map { b in
                        src.columns(b, into: buf, ld: ld)
                        let info =
                            k == 0
                            ? 0
                            : R.gesdd(
                                job: job, Int32(m), Int32(n), buf, Int32(ld), sp + b * k, ubuf, Int32(ld), vbuf,
                                Int32(max(1, vtRows)))
                        if k == 0 {
                            // No singular values: the full factors of an empty matrix are identities.
                            for i in 0..<ld * uCols { ubuf[i] = 0 }
                            for i in 0..<max(1, vtRows) * n { vbuf[i] = 0 }
                            for i in 0..<min(m, uCols) { ubuf[i + i * ld] = 1 }
                            for i in 0..<min(vtRows, n) { vbuf[i + i * max(1, vtRows)] = 1 }
                        }
                        um?.set(b, from: ubuf, ld: ld)
                        vm?.set(b, from: vbuf, ld: max(1, vtRows))
                        return info
                    }
                }
            }
        }
    }

    func geqrf(_ a: TensorImpl, into qr: TensorImpl, tau: TensorImpl) -> [Int32] {
        real(a.dtype) { geqrf($0, a, qr, tau) }
    }

    private func geqrf<R: LAPACKReal>(_: R.Type, _ a: TensorImpl, _ qr: TensorImpl, _ tau: TensorImpl) -> [Int32] {
        let src = Matrices<R>(a), dst = Matrices<R>(qr)
        let m = src.rows, n = src.cols, k = min(m, n), ld = max(1, m)
        let t = HostBackend.address(tau).assumingMemoryBound(to: R.self)
        return columnScratch(R.self, ld * n) { buf in
            (0..<a.shape[0]).map { b in
                src.columns(b, into: buf, ld: ld)
                let info = k == 0 ? 0 : R.geqrf(Int32(m), Int32(n), buf, Int32(ld), t + b * k)
                dst.set(b, from: buf, ld: ld)
                return info
            }
        }
    }

    func householderProduct(_ a: TensorImpl, tau: TensorImpl, into q: TensorImpl) -> [Int32] {
        real(a.dtype) { householderProduct($0, a, tau, q) }
    }

    private func householderProduct<R: LAPACKReal>(_: R.Type, _ a: TensorImpl, _ tau: TensorImpl, _ q: TensorImpl) -> [Int32] {
        let src = Matrices<R>(a), dst = Matrices<R>(q)
        let m = src.rows, n = src.cols, cols = dst.cols, k = tau.shape[1], ld = max(1, m)
        let t = HostBackend.address(tau).assumingMemoryBound(to: R.self)
        return columnScratch(R.self, ld * max(cols, n)) { buf in
            columnScratch(R.self, max(1, k)) { tbuf in
                (0..<a.shape[0]).map { b in
                    for i in 0..<ld * max(cols, n) { buf[i] = 0 }
                    src.columns(b, into: buf, ld: ld)
                    for i in 0..<k { tbuf[i] = t[b * k + i] }
                    let info = cols == 0 ? 0 : R.orgqr(Int32(m), Int32(cols), Int32(k), buf, Int32(ld), tbuf)
                    dst.set(b, from: buf, ld: ld)
                    return info
                }
            }
        }
    }

    func ldlFactor(_ a: TensorImpl, into ld: TensorImpl, pivots: TensorImpl) -> [Int32] {
        real(a.dtype) { ldlFactor($0, a, ld, pivots) }
    }

    private func ldlFactor<R: LAPACKReal>(_: R.Type, _ a: TensorImpl, _ ld: TensorImpl, _ pivots: TensorImpl) -> [Int32] {
        let src = Matrices<R>(a), dst = Matrices<R>(ld)
        let n = src.rows, lda = max(1, n)
        let piv = HostBackend.address(pivots).assumingMemoryBound(to: Int32.self)
        return columnScratch(R.self, lda * n) { buf in
            (0..<a.shape[0]).map { b in
                src.columns(b, into: buf, ld: lda)
                let info = n == 0 ? 0 : R.sytrf(Int32(n), buf, Int32(lda), piv + b * n)
                // sytrf leaves the upper triangle as it was: zeros there, as PyTorch returns.
                for j in 0..<n { for i in 0..<j { buf[i + j * lda] = 0 } }
                dst.set(b, from: buf, ld: lda)
                return info
            }
        }
    }

    func ldlSolve(_ ld: TensorImpl, pivots: TensorImpl, _ b: TensorImpl, into x: TensorImpl) -> [Int32] {
        real(ld.dtype) { ldlSolve($0, ld, pivots, b, x) }
    }

    private func ldlSolve<R: LAPACKReal>(
        _: R.Type, _ ld: TensorImpl, _ pivots: TensorImpl, _ b: TensorImpl,
        _ x: TensorImpl
    ) -> [Int32] {
        let lm = Matrices<R>(ld), bm = Matrices<R>(b), xm = Matrices<R>(x)
        let n = lm.rows, k = bm.cols, lda = max(1, n)
        let piv = HostBackend.address(pivots).assumingMemoryBound(to: Int32.self)
        return columnScratch(R.self, lda * n) { abuf in
            columnScratch(R.self, lda * k) { bbuf in
                (0..<ld.shape[0]).map { i in
                    lm.columns(i, into: abuf, ld: lda)
                    bm.columns(i, into: bbuf, ld: lda)
                    let info =
                        n == 0 || k == 0
                        ? 0
                        : R.sytrs(Int32(n), Int32(k), abuf, Int32(lda), piv + i * n, bbuf, Int32(lda))
                    xm.set(i, from: bbuf, ld: lda)
                    return info
                }
            }
        }
    }
}
