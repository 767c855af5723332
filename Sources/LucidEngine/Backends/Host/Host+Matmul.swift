/// Host matrix products: BLAS for floats (oneDNN for bfloat16 and large float32 products where
/// it is linked), a plain loop for integers.
extension HostBackend: MatmulKernels {
    func gemm(_ a: TensorImpl, _ b: TensorImpl, bias: TensorImpl?, into out: TensorImpl) {
        #if canImport(CDNNL)
        if Self.oneDNNTakes(out.dtype, work: out.shape[0] &* out.shape[1] &* out.shape[2] &* a.shape[2]),
            DNNL.gemm(a, b, bias: bias, into: out)
        {
            return
        }
        #endif
        if out.dtype == .float64 {
            HostGEMM.product(Double.self, a, b, bias: bias, into: out)
        } else if out.dtype.isFloatingPoint {
            HostGEMM.product(Float.self, a, b, bias: bias, into: out)
        } else {
            dispatch(out.dtype, IntegerGEMM(a: a, b: b, bias: bias, out: out))
        }
    }

    /// oneDNN's packed layout, for the products `gemm` gives oneDNN.
    func prepare(_ b: TensorImpl, rows: Int, bias: Bool, outType: DType) -> AnyObject? {
        #if canImport(CDNNL)
        if Self.oneDNNTakes(outType, work: rows &* b.shape[1] &* b.shape[2]) {
            return DNNL.pack(b, rows: rows, bias: bias, outType: outType)
        }
        #endif
        return nil
    }

    #if canImport(CDNNL)
    /// Whether a product of `work` multiply-adds into `dtype` goes to oneDNN: bfloat16 always
    /// (AVX-512 BF16 / AMX kernels); float32 once the product is large enough for oneDNN's
    /// kernels to repay its per-call set-up over BLAS.
    private static func oneDNNTakes(_ dtype: DType, work: Int) -> Bool {
        dtype == .bfloat16 || (dtype == .float32 && work >= 1 << 18)
    }
    #endif

    func gemm(_ a: TensorImpl, prepared: AnyObject, bias: TensorImpl?, into out: TensorImpl) -> Bool {
        #if canImport(CDNNL)
        if let packed = prepared as? DNNL.PackedWeights { return DNNL.gemm(a, packed: packed, bias: bias, into: out) }
        #endif
        return false
    }
}

/// Reads any host tensor into a contiguous buffer of `R`.
private struct PackFloat<R: HostReal>: ElementVisitor {
    let t: TensorImpl, into: UnsafeMutablePointer<R>
    func visit<E: HostElement>(_: E.Type) {
        let p = UnsafePointer(HostBackend.address(t).assumingMemoryBound(to: E.Stored.self))
        let loop = StridedLoop(shape: t.shape, strides: [t.strides, Shape.contiguousStrides(t.shape)])
        let dst = into
        loop.forEachRun(bases: [0, 0]) { o, n, s in
            var i = o[0], k = o[1]
            for _ in 0..<n { dst[k] = R(E.float(p, i)); i &+= s[0]; k &+= s[1] }
        }
    }
}

/// Writes elements `range` of a contiguous buffer of `R` into a contiguous tensor, rounding
/// once.
private struct UnpackFloat<R: HostReal>: ElementVisitor {
    let from: UnsafePointer<R>, t: TensorImpl, range: Range<Int>
    func visit<E: HostElement>(_: E.Type) {
        let p = HostBackend.address(t).assumingMemoryBound(to: E.Stored.self)
        for j in range { E.setFloat(p, j, E.Real(from[j])) }
    }
}

/// The real types BLAS multiplies: float32 (`sgemm`, also for the 16-bit floats, which
/// multiply in float32 and round once) and float64 (`dgemm`).
protocol BLASReal: HostReal {
    /// The dtype BLAS reads and writes in place.
    static var dtype: DType { get }
    static func gemm(
        transA: Bool, transB: Bool, m: Int, n: Int, k: Int, a: UnsafePointer<Self>, lda: Int,
        b: UnsafePointer<Self>, ldb: Int, c: UnsafeMutablePointer<Self>, ldc: Int)
}

extension Float: BLASReal {
    static var dtype: DType { .float32 }
    @inline(__always)
    static func gemm(
        transA: Bool, transB: Bool, m: Int, n: Int, k: Int, a: UnsafePointer<Float>, lda: Int,
        b: UnsafePointer<Float>, ldb: Int, c: UnsafeMutablePointer<Float>, ldc: Int
    ) {
        BLAS.sgemm(transA: transA, transB: transB, m: m, n: n, k: k, a: a, lda: lda, b: b, ldb: ldb, c: c, ldc: ldc)
    }
}

extension Double: BLASReal {
    static var dtype: DType { .float64 }
    @inline(__always)
    static func gemm(
        transA: Bool, transB: Bool, m: Int, n: Int, k: Int, a: UnsafePointer<Double>, lda: Int,
        b: UnsafePointer<Double>, ldb: Int, c: UnsafeMutablePointer<Double>, ldc: Int
    ) {
        BLAS.dgemm(transA: transA, transB: transB, m: m, n: n, k: k, a: a, lda: lda, b: b, ldb: ldb, c: c, ldc: ldc)
    }
}

enum HostGEMM {
    /// One operand as BLAS sees it: a pointer, its leading dimension, whether it is
    /// transposed, and the batch stride. Operands BLAS cannot read in place are packed into
    /// `owned`, which the caller frees.
    private struct Operand<R: BLASReal> {
        var base: UnsafePointer<R>
        var ld: Int
        var transposed: Bool
        var batchStride: Int
        var owned: UnsafeMutablePointer<R>?
    }

    private static func packed<R: BLASReal>(_ t: TensorImpl, _: R.Type) -> UnsafeMutablePointer<R> {
        let p = UnsafeMutablePointer<R>.allocate(capacity: max(t.numel, 1))
        dispatch(t.dtype, PackFloat(t: t, into: p))
        return p
    }

    private static func operand<R: BLASReal>(_ t: TensorImpl, _: R.Type) -> Operand<R> {
        let rows = t.shape[1], cols = t.shape[2]
        if t.dtype == R.dtype {
            let base = UnsafePointer(HostBackend.address(t).assumingMemoryBound(to: R.self))
            if t.strides[2] == 1 && t.strides[1] >= max(cols, 1) {
                return Operand(base: base, ld: t.strides[1], transposed: false, batchStride: t.strides[0])
            }
            if t.strides[1] == 1 && t.strides[2] >= max(rows, 1) {
                return Operand(base: base, ld: t.strides[2], transposed: true, batchStride: t.strides[0])
            }
        }
        let p = packed(t, R.self)
        return Operand(base: UnsafePointer(p), ld: max(cols, 1), transposed: false, batchStride: rows * cols, owned: p)
    }

    /// Products small enough that BLAS's call and the batched views cost more than the
    /// arithmetic: [m, k] @ [k, n] float32 host tensors of any strides into a contiguous
    /// [m, n] `out`, summed over k in order in float32.
    static let smallLimit = 4096  // m·n·k

    static func smallFloat(_ a: TensorImpl, _ b: TensorImpl, into out: TensorImpl) {
        let m = out.shape[0], n = out.shape[1], k = a.shape[1]
        let pa = UnsafePointer(HostBackend.address(a).assumingMemoryBound(to: Float.self))
        let pb = UnsafePointer(HostBackend.address(b).assumingMemoryBound(to: Float.self))
        let po = HostBackend.address(out).assumingMemoryBound(to: Float.self)
        let (ar, ac, br, bc) = (a.strides[0], a.strides[1], b.strides[0], b.strides[1])
        for i in 0..<m {
            for j in 0..<n {
                var sum: Float = 0
                for p in 0..<k { sum += pa[i &* ar &+ p &* ac] * pb[p &* br &+ j &* bc] }
                po[i &* n &+ j] = sum
            }
        }
    }

    /// The batched product through BLAS in `R`: in place for operands of R's dtype that BLAS
    /// can read, packed otherwise; an output of another dtype accumulates in a buffer of `R`
    /// and rounds once at the end. Where BLAS runs on the calling thread
    /// (`BLAS.splitsProducts`), a large product is split over the engine's threads: by batch,
    /// else by the rows or the columns of its output, whichever are more.
    static func product<R: BLASReal>(
        _: R.Type, _ a: TensorImpl, _ b: TensorImpl, bias: TensorImpl?,
        into out: TensorImpl
    ) {
        let batch = out.shape[0], m = out.shape[1], n = out.shape[2], k = a.shape[2]
        if out.numel == 0 { return }
        let opA = operand(a, R.self), opB = operand(b, R.self)
        let biasValues = bias.map { packed($0, R.self) }
        let buffered = out.dtype != R.dtype
        let c =
            buffered
            ? UnsafeMutablePointer<R>.allocate(capacity: out.numel)
            : HostBackend.address(out).assumingMemoryBound(to: R.self)
        defer {
            opA.owned?.deallocate()
            opB.owned?.deallocate()
            biasValues?.deallocate()
            if buffered { c.deallocate() }
        }
        // One block of one product: rows `rows` and columns `cols` of product `i`.
        let block = { (i: Int, rows: Range<Int>, cols: Range<Int>) in
            let ci = c + i * m * n + rows.lowerBound * n + cols.lowerBound
            if k == 0 {
                for r in 0..<rows.count { (ci + r * n).update(repeating: 0, count: cols.count) }
            } else {
                // Row r of op(A) starts at r·lda, or at r when A is read transposed; column j
                // of op(B) at j, or at j·ldb.
                let a0 = opA.base + i * opA.batchStride + rows.lowerBound * (opA.transposed ? 1 : opA.ld)
                let b0 = opB.base + i * opB.batchStride + cols.lowerBound * (opB.transposed ? opB.ld : 1)
                R.gemm(
                    transA: opA.transposed, transB: opB.transposed, m: rows.count, n: cols.count, k: k,
                    a: a0, lda: opA.ld, b: b0, ldb: opB.ld, c: ci, ldc: n)
            }
            if let bv = biasValues {
                for r in 0..<rows.count { for j in cols { ci[r * n + j - cols.lowerBound] += bv[j] } }
            }
        }
        // A part of at least this many multiply-adds repays a thread's wake-up and its own
        // packing of the shared operand.
        let partWork = 1 << 17
        let work = m * n * max(k, 1)
        if !BLAS.splitsProducts || batch * work < 2 * partWork {
            for i in 0..<batch { block(i, 0..<m, 0..<n) }
        } else if batch >= HostThreads.current || work < 2 * partWork {
            HostThreads.forEachRange(batch, grain: max(1, partWork / work), align: 1) { range in
                for i in range { block(i, 0..<m, 0..<n) }
            }
        } else {
            let byRows = m >= n
            let lines = byRows ? m : n, lineWork = work / lines
            for i in 0..<batch {
                HostThreads.forEachRange(lines, grain: max(1, partWork / lineWork), align: 8) { range in
                    if byRows { block(i, range, 0..<n) } else { block(i, 0..<m, range) }
                }
            }
        }
        if buffered {
            HostThreads.forEachRange(out.numel) { range in
                dispatch(out.dtype, UnpackFloat(from: UnsafePointer(c), t: out, range: range))
            }
        }
    }
}

/// Integer matmul: there is no integer BLAS, and integer matmul is rare enough that a plain
/// wrapping loop serves.
private struct IntegerGEMM: ElementVisitor {
    let a: TensorImpl, b: TensorImpl, bias: TensorImpl?, out: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let pa = UnsafePointer(HostBackend.address(a).assumingMemoryBound(to: E.Stored.self))
        let pb = UnsafePointer(HostBackend.address(b).assumingMemoryBound(to: E.Stored.self))
        let po = HostBackend.address(out).assumingMemoryBound(to: E.Stored.self)
        let pbias = bias.map { UnsafePointer(HostBackend.address($0).assumingMemoryBound(to: E.Stored.self)) }
        let biasStride = bias?.strides[0] ?? 0
        let batch = out.shape[0], m = out.shape[1], n = out.shape[2], k = a.shape[2]
        for bi in 0..<batch {
            for i in 0..<m {
                for j in 0..<n {
                    var acc: Int64 = pbias.map { E.int($0, j * biasStride) } ?? 0
                    for l in 0..<k {
                        acc &+=
                            E.int(pa, bi * a.strides[0] + i * a.strides[1] + l * a.strides[2])
                            &* E.int(pb, bi * b.strides[0] + l * b.strides[1] + j * b.strides[2])
                    }
                    E.setInt(po, (bi * m + i) * n + j, acc)
                }
            }
        }
    }
}
