import LucidEngine

// Linear algebra over LAPACK (include/lucid.h, "linear algebra"). Inputs are borrowed;
// results are new handles (0 for a result not computed).

@_cdecl("lucid_linalg_lu_factor")
public func lucid_linalg_lu_factor(
    _ a: UInt32, _ check: Int32, _ lu: UnsafeMutablePointer<UInt32>?,
    _ pivots: UnsafeMutablePointer<UInt32>?, _ info: UnsafeMutablePointer<UInt32>?
) -> Int32 {
    abiCall {
        let (l, p, i) = try Linalg.luFactor(try tensors.get(a), check: check != 0)
        try emit([(l, lu), (p, pivots), (i, info)])
    }
}

@_cdecl("lucid_linalg_solve_triangular")
public func lucid_linalg_solve_triangular(
    _ a: UInt32, _ b: UInt32, _ upper: Int32, _ left: Int32, _ unitriangular: Int32,
    _ out: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        try emit(
            try Linalg.solveTriangular(
                try tensors.get(a), try tensors.get(b), upper: upper != 0, left: left != 0,
                unitriangular: unitriangular != 0), out)
    }
}

@_cdecl("lucid_linalg_cholesky")
public func lucid_linalg_cholesky(
    _ a: UInt32, _ upper: Int32, _ check: Int32, _ l: UnsafeMutablePointer<UInt32>?,
    _ info: UnsafeMutablePointer<UInt32>?
) -> Int32 {
    abiCall {
        let (f, i) = try Linalg.cholesky(try tensors.get(a), upper: upper != 0, check: check != 0)
        try emit([(f, l), (i, info)])
    }
}

@_cdecl("lucid_linalg_eigh")
public func lucid_linalg_eigh(
    _ a: UInt32, _ upper: Int32, _ vectors: Int32, _ values: UnsafeMutablePointer<UInt32>?,
    _ vecs: UnsafeMutablePointer<UInt32>?
) -> Int32 {
    abiCall {
        let (w, v) = try Linalg.eigh(try tensors.get(a), upper: upper != 0, vectors: vectors != 0)
        try emit([(w, values), (v, vecs)])
    }
}

@_cdecl("lucid_linalg_svd")
public func lucid_linalg_svd(
    _ a: UInt32, _ full: Int32, _ vectors: Int32, _ u: UnsafeMutablePointer<UInt32>?,
    _ s: UnsafeMutablePointer<UInt32>?, _ vh: UnsafeMutablePointer<UInt32>?
) -> Int32 {
    abiCall {
        let (uu, ss, vv) = try Linalg.svd(try tensors.get(a), full: full != 0, vectors: vectors != 0)
        try emit([(uu, u), (ss, s), (vv, vh)])
    }
}

@_cdecl("lucid_linalg_qr")
public func lucid_linalg_qr(
    _ a: UInt32, _ mode: Int32, _ q: UnsafeMutablePointer<UInt32>?,
    _ r: UnsafeMutablePointer<UInt32>?
) -> Int32 {
    abiCall {
        let (qq, rr) = try Linalg.qr(try tensors.get(a), mode: try decode(mode, as: Linalg.QRMode.self, "qr mode"))
        try emit([(qq, q), (rr, r)])
    }
}

@_cdecl("lucid_linalg_geqrf")
public func lucid_linalg_geqrf(_ a: UInt32, _ qr: UnsafeMutablePointer<UInt32>?, _ tau: UnsafeMutablePointer<UInt32>?) -> Int32 {
    abiCall {
        let (p, t) = try Linalg.geqrf(try tensors.get(a))
        try emit([(p, qr), (t, tau)])
    }
}

@_cdecl("lucid_linalg_ldl_factor")
public func lucid_linalg_ldl_factor(
    _ a: UInt32, _ check: Int32, _ ld: UnsafeMutablePointer<UInt32>?,
    _ pivots: UnsafeMutablePointer<UInt32>?, _ info: UnsafeMutablePointer<UInt32>?
) -> Int32 {
    abiCall {
        let (l, p, i) = try Linalg.ldlFactor(try tensors.get(a), check: check != 0)
        try emit([(l, ld), (p, pivots), (i, info)])
    }
}

@_cdecl("lucid_linalg_ldl_solve")
public func lucid_linalg_ldl_solve(_ ld: UInt32, _ pivots: UInt32, _ b: UInt32, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall {
        try emit(try Linalg.ldlSolve(try tensors.get(ld), try tensors.get(pivots), try tensors.get(b)), out)
    }
}
