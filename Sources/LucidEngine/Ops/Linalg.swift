/// Linear algebra over LAPACK: the LU, Cholesky, symmetric-eigen, SVD and QR factorizations
/// and triangular solves of float32 and float64 matrices, batched over leading dimensions,
/// with their gradients written from ops. `lucid.linalg` composes the rest (solve, inv, det,
/// norms, pinv, lstsq …) from these in Python. Under autocast they run in float32 (PyTorch's
/// float32 list holds its linalg ops); 16-bit inputs are refused outside it, as PyTorch's CPU
/// kernels refuse them.
package enum Linalg {
    static let luFactor = OpInfo("linalg_lu_factor", .float32, lowPrecision: false)
    static let solveTriangular = OpInfo("linalg_solve_triangular", .float32, lowPrecision: false)
    static let cholesky = OpInfo("linalg_cholesky", .float32, lowPrecision: false)
    static let eigh = OpInfo("linalg_eigh", .float32, lowPrecision: false)
    static let svd = OpInfo("linalg_svd", .float32, lowPrecision: false)
    static let qr = OpInfo("linalg_qr", .float32, lowPrecision: false)
    static let geqrf = OpInfo("geqrf", .float32, lowPrecision: false)
    static let ldlFactor = OpInfo("linalg_ldl_factor", .float32, lowPrecision: false)
    static let ldlSolve = OpInfo("linalg_ldl_solve", .float32, lowPrecision: false)
    static let infos = [luFactor, solveTriangular, cholesky, eigh, svd, qr, geqrf, ldlFactor, ldlSolve]

    // ---- operands ---------------------------------------------------------------------------

    /// Throws unless `t` is a float32 or float64 tensor of at least two dimensions (square when
    /// asked) whose sizes LAPACK's 32-bit integers can hold.
    private static func check(_ op: String, _ t: TensorImpl, square: Bool = false, name: String = "A") throws {
        guard t.dtype == .float32 || t.dtype == .float64 else {
            throw LucidError.type("\(op): expected \(name) of dtype float32 or float64, got \(t.dtype.name)")
        }
        guard t.ndim >= 2 else {
            throw LucidError.value("\(op): \(name) must have at least 2 dimensions, got shape \(t.shape)")
        }
        let m = t.shape[t.ndim - 2], n = t.shape[t.ndim - 1]
        if square && m != n {
            throw LucidError.value("\(op): \(name) must be batches of square matrices, got shape \(t.shape)")
        }
        if m > Int(Int32.max) / max(1, n) {
            throw LucidError.value("\(op): a \(m) x \(n) matrix is larger than LAPACK's 32-bit sizes allow")
        }
    }

    /// `t` ([..., r, c]) as a dense [B, r, c] tensor outside the graph, for a kernel to read.
    private static func dense3(_ t: TensorImpl) throws -> TensorImpl {
        let d = try Ops.dense(t)
        let r = t.shape[t.ndim - 2], c = t.shape[t.ndim - 1]
        let b = r * c == 0 ? t.shape.dropLast(2).reduce(1, *) : t.numel / (r * c)
        return d.view(shape: [b, r, c], strides: [r * c, c, 1])
    }

    private static func batchShape(_ t: TensorImpl) -> [Int] { Array(t.shape.dropLast(2)) }

    /// A new contiguous [B, r, c] tensor beside `like` and its view as batch + [r, c].
    private static func output(_ batch: [Int], _ rows: Int, _ cols: Int, dtype: DType, like: TensorImpl) throws
        -> (TensorImpl, TensorImpl)
    {
        let b = batch.reduce(1, *)
        let t = try TensorImpl.empty([b, rows, cols], dtype: dtype, on: like.backend)
        let shape = batch + [rows, cols]
        return (t, t.view(shape: shape, strides: Shape.contiguousStrides(shape)))
    }

    /// LAPACK's `info` per matrix as an int32 tensor of the batch's shape.
    private static func infoTensor(_ info: [Int32], _ batch: [Int], device: Device) throws -> TensorImpl {
        try Creation.fromDoubles(info.map(Double.init), shape: batch, dtype: .int32, device: device)
    }

    private static func int32s(_ t: TensorImpl) throws -> [Int32] {
        var v = [Int32](repeating: 0, count: t.numel)
        try v.withUnsafeMutableBytes { try Conversion.toHost(t, $0) }
        return v
    }

    /// The batch index of the first matrix whose `info` is positive, and that info.
    private static func firstFailure(_ info: [Int32]) -> (Int, Int32)? {
        info.firstIndex { $0 > 0 }.map { ($0, info[$0]) }
    }

    /// "" for a single matrix, " (batch element i)" otherwise.
    private static func which(_ i: Int, _ batch: [Int]) -> String { batch.isEmpty ? "" : " (batch element \(i))" }

    // ---- small ops for the gradients ----------------------------------------------------------

    static func mT(_ t: TensorImpl) throws -> TensorImpl { try ShapeOps.transpose(t, -1, -2) }
    static func mm(_ a: TensorImpl, _ b: TensorImpl) throws -> TensorImpl { try LinearAlgebra.matmul(a, b) }

    /// The 0/1 matrix [rows, cols] (t's dtype and device) that is 1 where j - i <= k (lower) or
    /// j - i >= k (upper).
    private static func band(_ rows: Int, _ cols: Int, lower: Bool, _ k: Int, like t: TensorImpl) throws -> TensorImpl {
        var v = [Double](repeating: 0, count: rows * cols)
        for i in 0..<rows { for j in 0..<cols where lower ? j - i <= k : j - i >= k { v[i * cols + j] = 1 } }
        return try Creation.fromDoubles(v, shape: [rows, cols], dtype: t.dtype, device: t.device)
    }

    static func tril(_ t: TensorImpl, _ k: Int = 0) throws -> TensorImpl {
        try Composite.mul(t, try band(t.shape[t.ndim - 2], t.shape[t.ndim - 1], lower: true, k, like: t))
    }

    static func triu(_ t: TensorImpl, _ k: Int = 0) throws -> TensorImpl {
        try Composite.mul(t, try band(t.shape[t.ndim - 2], t.shape[t.ndim - 1], lower: false, k, like: t))
    }

    /// The identity [rows, cols] (ones on the main diagonal) in t's dtype and device.
    private static func identity(_ rows: Int, _ cols: Int, like t: TensorImpl) throws -> TensorImpl {
        var v = [Double](repeating: 0, count: rows * cols)
        for i in 0..<min(rows, cols) { v[i * cols + i] = 1 }
        return try Creation.fromDoubles(v, shape: [rows, cols], dtype: t.dtype, device: t.device)
    }

    private static func eye(_ n: Int, like t: TensorImpl) throws -> TensorImpl { try identity(n, n, like: t) }

    /// diag(v) for v [..., n]: [..., n, n].
    private static func diagEmbed(_ v: TensorImpl) throws -> TensorImpl {
        let n = v.shape[v.ndim - 1]
        return try Composite.mul(try ShapeOps.unsqueeze(v, -1), try eye(n, like: v))
    }

    private static func narrow(_ t: TensorImpl, _ dim: Int, _ start: Int, _ length: Int) throws -> TensorImpl {
        try ShapeOps.narrow(t, dim: dim, start: start, length: length)
    }

    /// Several results of one op as one tensor [..., total] (each flattened over its matrix
    /// dimensions), so that one graph node carries the gradients of all of them.
    private static func pack(_ parts: [TensorImpl], batch: [Int]) throws -> TensorImpl {
        let flat = try parts.map { p -> TensorImpl in
            let inner = p.shape.dropFirst(batch.count).reduce(1, *)
            return try ShapeOps.reshape(p, batch + [inner])
        }
        return try ShapeOps.cat(flat, dim: batch.count)
    }

    /// The parts of a packed tensor (see `pack`), of the given shapes (each batch + inner).
    private static func unpack(_ packed: TensorImpl, _ shapes: [[Int]], batch: [Int]) throws -> [TensorImpl] {
        var start = 0
        return try shapes.map { s in
            let inner = s.dropFirst(batch.count).reduce(1, *)
            defer { start += inner }
            return try ShapeOps.reshape(try narrow(packed, batch.count, start, inner), s)
        }
    }

    // ---- LU -----------------------------------------------------------------------------------

    /// torch.linalg.lu_factor_ex: the packed LU factorization with partial pivoting of A
    /// ([..., m, n]), its 1-based pivots (int32 [..., min(m, n)]) and LAPACK's info (int32
    /// [...]: k > 0 when U[k-1, k-1] is exactly zero). With `check`, a zero pivot throws, as
    /// torch.linalg.lu_factor does. Differentiable in A.
    package static func luFactor(_ a0: TensorImpl, check: Bool) throws -> (TensorImpl, TensorImpl, TensorImpl) {
        let op = check ? "linalg.lu_factor" : "linalg.lu_factor_ex"
        return try luFactor.run(a0) { a -> (TensorImpl, TensorImpl, TensorImpl) in
            try Linalg.check(op, a)
            let batch = batchShape(a), m = a.shape[a.ndim - 2], n = a.shape[a.ndim - 1], k = min(m, n)
            let a3 = try dense3(a)
            let (lu3, lu) = try output(batch, m, n, dtype: a.dtype, like: a)
            let piv3 = try TensorImpl.empty([a3.shape[0], k], dtype: .int32, on: a.backend)
            let info = lu3.run(LinalgKernels.self, KernelCall(.lapack, reads: [a3], writes: [lu3, piv3]), op) {
                $0.luFactor(a3, lu: lu3, pivots: piv3)
            }
            if check, let (i, k) = firstFailure(info) {
                throw LucidError.runtime(
                    "\(op): U[\(k - 1), \(k - 1)] is zero\(which(i, batch)), so the matrix is singular; linalg.lu_factor_ex returns the "
                        + "factorization with its info instead"
                )
            }
            let pivots = piv3.view(shape: batch + [k], strides: Shape.contiguousStrides(batch + [k]))
            let infoT = try infoTensor(info, batch, device: a.device)
            guard Autograd.tracks(a) else { return (lu, pivots, infoT) }
            let piv = try int32s(piv3)
            let tracked = Autograd.record(lu, Autograd.name(luFactor), [a], saved: [a]) { g in
                [try luBackward(g, lu: lu, pivots: piv, m: m, n: n, batch: batch)]
            }
            return (tracked, pivots, infoT)
        }
    }

    /// The permutation matrices P ([..., m, m], like's dtype) with A = P·L·U, from getrf's
    /// 1-based row swaps (`pivots`, k per matrix).
    private static func permutation(_ pivots: [Int32], m: Int, k: Int, batch: [Int], like t: TensorImpl) throws -> TensorImpl {
        let count = batch.reduce(1, *)
        var v = [Double](repeating: 0, count: count * m * m)
        for b in 0..<count {
            var rows = Array(0..<m)
            for i in 0..<k {
                let j = Int(pivots[b * k + i]) - 1
                if j >= 0 && j < m { rows.swapAt(i, j) }
            }
            // Row i of Pᵀ·A is row rows[i] of A, so P has a one at (rows[i], i).
            for i in 0..<m { v[b * m * m + rows[i] * m + i] = 1 }
        }
        return try Creation.fromDoubles(v, shape: batch + [m, m], dtype: t.dtype, device: t.device)
    }

    /// The gradient of A from that of its packed LU factors (A = P·L·U), for square, wide and
    /// tall A: with gL and gU the parts of g on L's and U's entries,
    /// wide (m <= n, U = [U1 U2]): gA = P·L⁻ᵀ·[tril(Lᵀ·gL - gU·Uᵀ, -1)·U1⁻ᵀ + gU1, gU2];
    /// tall (m > n, L = [L1; L2]): gA = P·[L1⁻ᵀ·triu(gU·Uᵀ - Lᵀ·gL) + gL1; gL2]·U⁻ᵀ.
    private static func luBackward(_ g: TensorImpl, lu: TensorImpl, pivots: [Int32], m: Int, n: Int, batch: [Int]) throws
        -> TensorImpl
    {
        let k = min(m, n)
        let p = try permutation(pivots, m: m, k: k, batch: batch, like: lu)
        var x: TensorImpl
        if m <= n {
            let l = try Composite.add(try tril(try narrow(lu, -1, 0, k), -1), try eye(m, like: lu))
            let u = try triu(lu)
            let gl = try tril(try narrow(g, -1, 0, k), -1), gu = try triu(g)
            let inner = try Composite.sub(try mm(try mT(l), gl), try mm(gu, try mT(u)))
            x = try solveTriangular(
                try mT(try narrow(u, -1, 0, k)), try tril(inner, -1), upper: false, left: false,
                unitriangular: false)
            x = try Composite.add(x, try narrow(gu, -1, 0, k))
            if n > k { x = try ShapeOps.cat([x, try narrow(gu, -1, k, n - k)], dim: -1) }
            x = try solveTriangular(try mT(l), x, upper: true, left: true, unitriangular: true)
        } else {
            let l = try Composite.add(try tril(lu, -1), try identity(m, n, like: lu))
            let u = try triu(try narrow(lu, -2, 0, k))
            let gl = try tril(g, -1), gu = try triu(try narrow(g, -2, 0, k))
            let inner = try Composite.sub(try mm(gu, try mT(u)), try mm(try mT(l), gl))
            x = try solveTriangular(
                try mT(try narrow(l, -2, 0, k)), try triu(inner), upper: true, left: true,
                unitriangular: true)
            x = try Composite.add(x, try narrow(gl, -2, 0, k))
            x = try ShapeOps.cat([x, try narrow(gl, -2, k, m - k)], dim: -2)
            x = try solveTriangular(try mT(u), x, upper: false, left: false, unitriangular: false)
        }
        return try mm(p, x)
    }

    // ---- triangular solve ---------------------------------------------------------------------

    /// torch.linalg.solve_triangular: X with A·X = B (`left`) or X·A = B, for A ([..., n, n])
    /// upper or lower triangular (the other triangle is not read; a unit diagonal assumed when
    /// `unitriangular`), batch dimensions broadcast. Differentiable in A and B.
    package static func solveTriangular(
        _ a0: TensorImpl, _ b0: TensorImpl, upper: Bool, left: Bool,
        unitriangular: Bool
    ) throws -> TensorImpl {
        let op = "linalg.solve_triangular"
        try Ops.checkSameDevice(op, a0, b0)
        return try solveTriangular.run(a0, b0) { a, b -> TensorImpl in
            try check(op, a, square: true)
            try check(op, b, name: "B")
            guard a.dtype == b.dtype else {
                throw LucidError.type("\(op): expected A and B of one dtype, got \(a.dtype.name) and \(b.dtype.name)")
            }
            let n = a.shape[a.ndim - 1]
            let bn = left ? b.shape[b.ndim - 2] : b.shape[b.ndim - 1]
            guard bn == n else {
                throw LucidError.value("\(op): incompatible shapes of A \(a.shape) and B \(b.shape) for \(left ? "A @ X = B" : "X @ A = B")")
            }
            let k = left ? b.shape[b.ndim - 1] : b.shape[b.ndim - 2]
            let batch: [Int]
            do { batch = try Shape.broadcast(batchShape(a), batchShape(b), op: op) } catch {
                throw LucidError.value("\(op): the batch dimensions of A \(a.shape) and B \(b.shape) cannot be broadcast together")
            }
            let a3 = try dense3(a.expanded(to: batch + [n, n]))
            // X·A = B is Aᵀ·Xᵀ = Bᵀ: the kernel solves with A transposed.
            let bl = left ? b : try mT(b)
            let b3 = try dense3(bl.expanded(to: batch + [n, k]))
            let (x3, xl) = try output(batch, n, k, dtype: a.dtype, like: a)
            _ = x3.run(LinalgKernels.self, KernelCall(.lapack, reads: [a3, b3], writes: [x3]), op) {
                $0.triangularSolve(a3, b3, upper: upper, transpose: !left, unit: unitriangular, into: x3)
            }
            let x = left ? xl : try Ops.dense(try mT(xl))
            guard Autograd.tracks(a, b) else { return x }
            let aShape = a.shape, bShape = b.shape, needA = a.requiresGrad, needB = b.requiresGrad
            return Autograd.record(x, Autograd.name(solveTriangular), [a, b], saved: [a]) { g in
                // left: X = A⁻¹·B, so gB = A⁻ᵀ·g and gA = -gB·Xᵀ; right: X = B·A⁻¹, so gB = g·A⁻ᵀ and
                // gA = -Xᵀ·gB; gA lives on A's triangle only.
                let gb = try solveTriangular(try mT(a), g, upper: !upper, left: left, unitriangular: unitriangular)
                var ga: TensorImpl? = nil
                if needA {
                    let full = left ? try mm(gb, try mT(x)) : try mm(try mT(x), gb)
                    let d = unitriangular ? 1 : 0
                    let masked = upper ? try triu(full, d) : try tril(full, -d)
                    ga = try Autograd.reduce(try Composite.mul(masked, -1), to: aShape)
                }
                return [ga, needB ? try Autograd.reduce(gb, to: bShape) : nil]
            }
        }
    }

    // ---- Cholesky -----------------------------------------------------------------------------

    /// torch.linalg.cholesky_ex: L with A = L·Lᵀ (or U with A = Uᵀ·U when `upper`) for
    /// symmetric positive-definite A ([..., n, n], one triangle read), and LAPACK's info (int32
    /// [...]: k > 0 when the leading minor of order k is not positive-definite). With `check`,
    /// that throws, as torch.linalg.cholesky does. Differentiable in A.
    package static func cholesky(_ a0: TensorImpl, upper: Bool, check: Bool) throws -> (TensorImpl, TensorImpl) {
        let op = check ? "linalg.cholesky" : "linalg.cholesky_ex"
        return try cholesky.run(a0) { a -> (TensorImpl, TensorImpl) in
            try Linalg.check(op, a, square: true)
            let batch = batchShape(a), n = a.shape[a.ndim - 1]
            let a3 = try dense3(a)
            let (l3, l) = try output(batch, n, n, dtype: a.dtype, like: a)
            let info = l3.run(LinalgKernels.self, KernelCall(.lapack, reads: [a3], writes: [l3]), op) {
                $0.cholesky(a3, upper: upper, into: l3)
            }
            if check, let (i, k) = firstFailure(info) {
                throw LucidError.runtime(
                    "\(op): the factorization could not be completed because the input is not positive-definite (the leading minor of "
                        + "order \(k) is not positive-definite)\(which(i, batch))"
                )
            }
            let infoT = try infoTensor(info, batch, device: a.device)
            guard Autograd.tracks(a) else { return (l, infoT) }
            let tracked = Autograd.record(l, Autograd.name(cholesky), [a], saved: [a]) { g in
                // With P = tril(Lᵀ·gL) and M its symmetric part with the diagonal once,
                // M = (P + tril(P, -1)ᵀ) / 2: gA = L⁻ᵀ·M·L⁻¹, symmetric as A.
                let lower = upper ? try mT(l) : l, gl = upper ? try mT(g) : g
                let p = try tril(try mm(try mT(lower), gl))
                let sym = try Composite.mul(try Composite.add(p, try mT(try tril(p, -1))), 0.5)
                let x = try solveTriangular(try mT(lower), sym, upper: true, left: true, unitriangular: false)
                return [try solveTriangular(lower, x, upper: false, left: false, unitriangular: false)]
            }
            return (tracked, infoT)
        }
    }

    // ---- symmetric eigendecomposition ---------------------------------------------------------

    /// torch.linalg.eigh: the eigenvalues (ascending, [..., n]) and orthonormal eigenvectors
    /// (columns of [..., n, n]; nil unless `vectors`) of symmetric A, read from its lower (or
    /// upper, `upper`) triangle. Differentiable in A (eigenvalues alone too: their gradient
    /// needs the vectors, which are then computed).
    package static func eigh(_ a0: TensorImpl, upper: Bool, vectors: Bool) throws -> (TensorImpl, TensorImpl?) {
        let op = vectors ? "linalg.eigh" : "linalg.eigvalsh"
        return try eigh.run(a0) { a -> (TensorImpl, TensorImpl?) in
            try check(op, a, square: true)
            let batch = batchShape(a), n = a.shape[a.ndim - 1]
            let a3 = try dense3(a)
            let needVectors = vectors || Autograd.tracks(a)
            let w3 = try TensorImpl.empty([a3.shape[0], n], dtype: a.dtype, on: a.backend)
            let v = needVectors ? try output(batch, n, n, dtype: a.dtype, like: a) : nil
            let info = w3.run(LinalgKernels.self, KernelCall(.lapack, reads: [a3], writes: Operands([w3] + (v.map { [$0.0] } ?? []))), op) {
                $0.eigh(a3, upper: upper, values: w3, vectors: v?.0)
            }
            if let (i, k) = firstFailure(info) {
                throw LucidError.runtime(
                    "\(op): the algorithm failed to converge because the input matrix is ill-conditioned or has too many repeated "
                        + "eigenvalues (error code: \(k))\(which(i, batch))"
                )
            }
            let w = w3.view(shape: batch + [n], strides: Shape.contiguousStrides(batch + [n]))
            guard Autograd.tracks(a), let vecs = v?.1 else { return (w, v?.1) }
            let rule: (TensorImpl, TensorImpl?) throws -> TensorImpl = { gw, gv in
                // gA = V·(diag(gw) + skew(Vᵀ·gV) / E)·Vᵀ with E[i, j] = w[j] - w[i] off the diagonal and
                // skew(X) = (X - Xᵀ) / 2: symmetric, as A is (PyTorch's choice among the gradients
                // that agree on symmetric directions).
                var inner = try diagEmbed(gw)
                if let gv {
                    let e = try Composite.sub(try ShapeOps.unsqueeze(w, -2), try ShapeOps.unsqueeze(w, -1))
                    let eye = try eye(n, like: w)
                    let off = try Composite.sub(try band(n, n, lower: true, n, like: w), eye)
                    let vg = try mm(try mT(vecs), gv)
                    let skew = try Composite.mul(try Composite.sub(vg, try mT(vg)), 0.5)
                    let q = try Composite.div(skew, try Composite.add(e, eye))
                    inner = try Composite.add(inner, try Composite.mul(q, off))
                }
                return try mm(vecs, try mm(inner, try mT(vecs)))
            }
            if !vectors {
                return (Autograd.record(w, Autograd.name(eigh), [a], saved: [a]) { g in [try rule(g, nil)] }, nil)
            }
            let shapes = [batch + [n], batch + [n, n]]
            let packed = Autograd.record(try pack([w, vecs], batch: batch), Autograd.name(eigh), [a], saved: [a]) { g in
                let parts = try unpack(g, shapes, batch: batch)
                return [try rule(parts[0], parts[1])]
            }
            let parts = try unpack(packed, shapes, batch: batch)
            return (parts[0], parts[1])
        }
    }

    // ---- SVD ----------------------------------------------------------------------------------

    /// torch.linalg.svd: A = U·diag(S)·Vh with the singular values S descending ([..., k],
    /// k = min(m, n)), U [..., m, k] and Vh [..., k, n] ([..., m, m] and [..., n, n] when
    /// `full`), or S alone without `vectors`. Differentiable in A (the singular values alone
    /// too; the extra columns of full factors take no part in the gradient, as in PyTorch).
    package static func svd(_ a0: TensorImpl, full: Bool, vectors: Bool) throws -> (TensorImpl?, TensorImpl, TensorImpl?) {
        let op = vectors ? "linalg.svd" : "linalg.svdvals"
        return try svd.run(a0) { a -> (TensorImpl?, TensorImpl, TensorImpl?) in
            try check(op, a)
            let batch = batchShape(a), m = a.shape[a.ndim - 2], n = a.shape[a.ndim - 1], k = min(m, n)
            let a3 = try dense3(a)
            let needVectors = vectors || Autograd.tracks(a)
            let fullU = vectors && full
            let s3 = try TensorImpl.empty([a3.shape[0], k], dtype: a.dtype, on: a.backend)
            let u = needVectors ? try output(batch, m, fullU ? m : k, dtype: a.dtype, like: a) : nil
            let vh = needVectors ? try output(batch, fullU ? n : k, n, dtype: a.dtype, like: a) : nil
            let writes = [s3] + (u.map { [$0.0] } ?? []) + (vh.map { [$0.0] } ?? [])
            let info = s3.run(LinalgKernels.self, KernelCall(.lapack, reads: [a3], writes: Operands(writes)), op) {
                $0.svd(a3, full: fullU, s: s3, u: u?.0, vh: vh?.0)
            }
            if let (i, _) = firstFailure(info) {
                throw LucidError.runtime(
                    "\(op): the algorithm failed to converge because the input matrix is ill-conditioned or has too many repeated singular "
                        + "values\(which(i, batch))"
                )
            }
            let s = s3.view(shape: batch + [k], strides: Shape.contiguousStrides(batch + [k]))
            guard Autograd.tracks(a), let uAll = u?.1, let vhAll = vh?.1 else { return (u?.1, s, vh?.1) }
            let u0 = fullU ? try narrow(uAll, -1, 0, k) : uAll, vh0 = fullU ? try narrow(vhAll, -2, 0, k) : vhAll
            let rule: (TensorImpl?, TensorImpl, TensorImpl?) throws -> TensorImpl = { gu0, gs, gvh0 in
                try svdBackward(
                    gu0.map { fullU ? try narrow($0, -1, 0, k) : $0 }, gs,
                    gvh0.map { fullU ? try narrow($0, -2, 0, k) : $0 }, u: u0, s: s, vh: vh0, m: m, n: n)
            }
            if !vectors {
                return (nil, Autograd.record(s, Autograd.name(svd), [a], saved: [a]) { g in [try rule(nil, g, nil)] }, nil)
            }
            let shapes = [uAll.shape, s.shape, vhAll.shape]
            let packed = Autograd.record(try pack([uAll, s, vhAll], batch: batch), Autograd.name(svd), [a], saved: [a]) { g in
                let parts = try unpack(g, shapes, batch: batch)
                return [try rule(parts[0], parts[1], parts[2])]
            }
            let parts = try unpack(packed, shapes, batch: batch)
            return (parts[0], parts[1], parts[2])
        }
    }

    /// The gradient of A = U·diag(s)·Vh (thin) from those of U, s and Vh: with V = Vhᵀ,
    /// J = Uᵀ·gU, K = Vᵀ·gV and F[i, j] = 1 / (s[j]² - s[i]²) off the diagonal,
    /// gA = U·(diag(gs) + (F∘(J - Jᵀ))·S + S·(F∘(K - Kᵀ)))·Vh
    ///      + (I - U·Uᵀ)·gU·S⁻¹·Vh + U·S⁻¹·gVᵀ·(I - V·Vᵀ)  (the last two when m > k, n > k).
    private static func svdBackward(
        _ gu: TensorImpl?, _ gs: TensorImpl, _ gvh: TensorImpl?, u: TensorImpl, s: TensorImpl,
        vh: TensorImpl, m: Int, n: Int
    ) throws -> TensorImpl {
        let k = min(m, n)
        var inner = try diagEmbed(gs)
        guard let gu, let gvh else { return try mm(u, try mm(inner, vh)) }
        let v = try mT(vh), gv = try mT(gvh)
        let j = try mm(try mT(u), gu), kk = try mm(try mT(v), gv)
        let s2 = try Composite.mul(s, s)
        let eye = try eye(k, like: s)
        let e = try Composite.add(try Composite.sub(try ShapeOps.unsqueeze(s2, -2), try ShapeOps.unsqueeze(s2, -1)), eye)
        let off = try Composite.sub(try band(k, k, lower: true, k, like: s), eye)
        let f = try Composite.div(off, e)
        let sRow = try ShapeOps.unsqueeze(s, -2), sCol = try ShapeOps.unsqueeze(s, -1)
        let fj = try Composite.mul(try Composite.mul(f, try Composite.sub(j, try mT(j))), sRow)
        let fk = try Composite.mul(sCol, try Composite.mul(f, try Composite.sub(kk, try mT(kk))))
        inner = try Composite.add(inner, try Composite.add(fj, fk))
        var ga = try mm(u, try mm(inner, vh))
        let sInvRow = try Composite.div(try Creation.full([], value: ScalarOperand(float: 1), dtype: s.dtype, device: s.device), sRow)
        if m > k {
            let proj = try Composite.sub(gu, try mm(u, j))
            ga = try Composite.add(ga, try mm(try Composite.mul(proj, sInvRow), vh))
        }
        if n > k {
            let proj = try Composite.sub(gv, try mm(v, kk))
            ga = try Composite.add(ga, try mm(u, try mT(try Composite.mul(proj, sInvRow))))
        }
        return ga
    }

    // ---- QR -----------------------------------------------------------------------------------

    /// torch.geqrf: LAPACK's packed QR of A ([..., m, n]): R on and above the diagonal, the
    /// Householder reflectors below it, and their scales tau ([..., min(m, n)]). Not
    /// differentiable (as in PyTorch).
    package static func geqrf(_ a0: TensorImpl) throws -> (TensorImpl, TensorImpl) {
        let op = "geqrf"
        return try geqrf.run(a0) { a -> (TensorImpl, TensorImpl) in
            try check(op, a)
            let batch = batchShape(a), m = a.shape[a.ndim - 2], n = a.shape[a.ndim - 1], k = min(m, n)
            let a3 = try dense3(a)
            let (qr3, qr) = try output(batch, m, n, dtype: a.dtype, like: a)
            let tau3 = try TensorImpl.empty([a3.shape[0], k], dtype: a.dtype, on: a.backend)
            _ = qr3.run(LinalgKernels.self, KernelCall(.lapack, reads: [a3], writes: [qr3, tau3]), op) {
                $0.geqrf(a3, into: qr3, tau: tau3)
            }
            return (qr, tau3.view(shape: batch + [k], strides: Shape.contiguousStrides(batch + [k])))
        }
    }

    /// What torch.linalg.qr computes. Raw values are the C ABI's codes (`enum lucid_qr_mode`).
    package enum QRMode: Int32, Sendable, CaseIterable {
        /// Q [..., m, k], R [..., k, n].
        case reduced = 0
        /// Q [..., m, m], R [..., m, n].
        case complete = 1
        /// R alone (Q nil), as for "reduced".
        case r = 2
    }

    /// torch.linalg.qr: A = Q·R with Q orthonormal columns and R upper triangular, as `mode`
    /// says. Differentiable in A for "reduced", and for "complete" when m <= n.
    package static func qr(_ a0: TensorImpl, mode: QRMode) throws -> (TensorImpl?, TensorImpl) {
        let op = "linalg.qr"
        return try qr.run(a0) { a -> (TensorImpl?, TensorImpl) in
            try check(op, a)
            let batch = batchShape(a), m = a.shape[a.ndim - 2], n = a.shape[a.ndim - 1], k = min(m, n)
            let (packed, tau) = try geqrf(a)
            let rRows = mode == .complete ? m : k
            let r = try Ops.dense(try triu(try narrow(packed, -2, 0, rRows)))
            var q: TensorImpl? = nil
            if mode != .r {
                let qCols = mode == .complete ? m : k
                let a3 = try dense3(packed), tau3 = try dense3(try ShapeOps.unsqueeze(tau, -1))
                let tau2 = tau3.view(shape: [tau3.shape[0], k], strides: [k, 1])
                let (q3, qv) = try output(batch, m, qCols, dtype: a.dtype, like: a)
                _ = q3.run(LinalgKernels.self, KernelCall(.lapack, reads: [a3, tau2], writes: [q3]), op) {
                    $0.householderProduct(a3, tau: tau2, into: q3)
                }
                q = qv
            }
            guard Autograd.tracks(a) else { return (q, r) }
            guard let q, mode == .reduced || m <= n else {
                throw LucidError.runtime(
                    "\(op): the QR decomposition is not differentiable when "
                        + "mode='\(mode)'\(mode == .r ? "" : " and A has more rows than columns"); use mode='reduced'"
                )
            }
            let shapes = [q.shape, r.shape]
            let out = Autograd.record(try pack([q, r], batch: batch), Autograd.name(qr), [a], saved: [a]) { g in
                let parts = try unpack(g, shapes, batch: batch)
                return [try qrBackward(parts[0], parts[1], q: q, r: r, a: a, m: m, n: n)]
            }
            let parts = try unpack(out, shapes, batch: batch)
            return (parts[0], parts[1])
        }
    }

    /// The gradient of A = Q·R (m >= n, or the square part X of a wide A = [X Y] with
    /// R = [R1 R2], Y = Q·R2): with M = R1·gR1ᵀ - gQᵀ·Q and copyltu(M) its lower triangle
    /// mirrored, gX = (gQ + Q·copyltu(M))·R1⁻ᵀ; a wide A adds gQ += Y·gR2ᵀ first and gY = Q·gR2.
    private static func qrBackward(
        _ gq0: TensorImpl, _ gr: TensorImpl, q: TensorImpl, r: TensorImpl, a: TensorImpl,
        m: Int, n: Int
    ) throws -> TensorImpl {
        let k = min(m, n)
        var gq = gq0
        let r1 = try narrow(r, -1, 0, k), gr1 = try narrow(gr, -1, 0, k)
        var gy: TensorImpl? = nil
        if n > k {
            let y = try narrow(a, -1, k, n - k), gr2 = try narrow(gr, -1, k, n - k)
            gq = try Composite.add(gq, try mm(y, try mT(gr2)))
            gy = try mm(q, gr2)
        }
        let mMat = try Composite.sub(try mm(r1, try mT(gr1)), try mm(try mT(gq), q))
        let copyltu = try Composite.add(try tril(mMat), try mT(try tril(mMat, -1)))
        let b = try Composite.add(gq, try mm(q, copyltu))
        let gx = try solveTriangular(try mT(r1), b, upper: false, left: false, unitriangular: false)
        guard let gy else { return gx }
        return try ShapeOps.cat([gx, gy], dim: -1)
    }

    // ---- LDL ----------------------------------------------------------------------------------

    /// torch.linalg.ldl_factor_ex: the Bunch-Kaufman factorization A = P·L·D·Lᵀ·Pᵀ of symmetric
    /// A ([..., n, n], its lower triangle read) packed as LAPACK's sytrf leaves it (the lower
    /// triangle; zeros above), its pivots (int32 [..., n]; negative for 2 x 2 blocks of D) and
    /// info (int32 [...]: k > 0 when D[k-1, k-1] is exactly zero). With `check` that throws.
    /// Not differentiable (as in PyTorch).
    package static func ldlFactor(_ a0: TensorImpl, check: Bool) throws -> (TensorImpl, TensorImpl, TensorImpl) {
        let op = check ? "linalg.ldl_factor" : "linalg.ldl_factor_ex"
        return try ldlFactor.run(a0) { a -> (TensorImpl, TensorImpl, TensorImpl) in
            try Linalg.check(op, a, square: true)
            let batch = batchShape(a), n = a.shape[a.ndim - 1]
            let a3 = try dense3(a)
            let (ld3, ld) = try output(batch, n, n, dtype: a.dtype, like: a)
            let piv3 = try TensorImpl.empty([a3.shape[0], n], dtype: .int32, on: a.backend)
            let info = ld3.run(LinalgKernels.self, KernelCall(.lapack, reads: [a3], writes: [ld3, piv3]), op) {
                $0.ldlFactor(a3, into: ld3, pivots: piv3)
            }
            if check, let (i, k) = firstFailure(info) {
                throw LucidError.runtime(
                    "\(op): D[\(k - 1), \(k - 1)] is zero\(which(i, batch)), so the matrix is singular; linalg.ldl_factor_ex returns the "
                        + "factorization with its info instead"
                )
            }
            return (
                ld, piv3.view(shape: batch + [n], strides: Shape.contiguousStrides(batch + [n])),
                try infoTensor(info, batch, device: a.device)
            )
        }
    }

    /// torch.linalg.ldl_solve: X with A·X = B for A given by `ldlFactor`'s LD and pivots (batch
    /// dimensions of LD and B broadcast). Not differentiable (as in PyTorch).
    package static func ldlSolve(_ ld0: TensorImpl, _ pivots: TensorImpl, _ b0: TensorImpl) throws -> TensorImpl {
        let op = "linalg.ldl_solve"
        try Ops.checkSameDevice(op, [ld0, pivots, b0])
        return try ldlSolve.run(ld0, b0) { ld, b -> TensorImpl in
            try check(op, ld, square: true, name: "LD")
            try check(op, b, name: "B")
            guard ld.dtype == b.dtype else {
                throw LucidError.type("\(op): expected LD and B of one dtype, got \(ld.dtype.name) and \(b.dtype.name)")
            }
            let n = ld.shape[ld.ndim - 1], k = b.shape[b.ndim - 1]
            guard pivots.dtype == .int32 else {
                throw LucidError.type("\(op): expected pivots of dtype int32 (as linalg.ldl_factor returns them), got \(pivots.dtype.name)")
            }
            guard pivots.shape == batchShape(ld) + [n] else {
                throw LucidError.value("\(op): expected pivots of shape \(batchShape(ld) + [n]) for LD of shape \(ld.shape), got \(pivots.shape)")
            }
            guard b.shape[b.ndim - 2] == n else {
                throw LucidError.value("\(op): incompatible shapes of LD \(ld.shape) and B \(b.shape)")
            }
            let batch: [Int]
            do { batch = try Shape.broadcast(batchShape(ld), batchShape(b), op: op) } catch {
                throw LucidError.value("\(op): the batch dimensions of LD \(ld.shape) and B \(b.shape) cannot be broadcast together")
            }
            // Every pivot must name a row of the matrix (sytrs reads them as indices).
            let piv = try int32s(pivots)
            if let bad = piv.first(where: { $0 == 0 || abs(Int($0)) > n }) {
                throw LucidError.value(
                    "\(op): pivot \(bad) is out of range for matrices of order \(n) (pivots are as linalg.ldl_factor returns them)")
            }
            let ld3 = try dense3(ld.expanded(to: batch + [n, n]))
            let p3 = try dense3(try ShapeOps.unsqueeze(pivots, -1).expanded(to: batch + [n, 1]))
            let piv2 = p3.view(shape: [p3.shape[0], n], strides: [n, 1])
            let b3 = try dense3(b.expanded(to: batch + [n, k]))
            let (x3, x) = try output(batch, n, k, dtype: ld.dtype, like: ld)
            _ = x3.run(LinalgKernels.self, KernelCall(.lapack, reads: [ld3, piv2, b3], writes: [x3]), op) {
                $0.ldlSolve(ld3, pivots: piv2, b3, into: x3)
            }
            return x
        }
    }
}
