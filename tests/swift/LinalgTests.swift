import Testing
@testable import LucidEngine

/// The engine's LAPACK ops called from Swift: values on small matrices worked by hand, the
/// info they report, and the errors of wrong inputs.
@Suite struct LinalgTests {
    private static func matrix(_ v: [Double], _ shape: [Int]) throws -> TensorImpl {
        try Creation.fromDoubles(v, shape: shape, dtype: .float64, device: .cpu)
    }

    private static func doubles(_ t: TensorImpl) throws -> [Double] {
        var v = [Double](repeating: 0, count: t.numel)
        try v.withUnsafeMutableBytes { try Conversion.toHost(try Ops.cast(t, to: .float64), $0) }
        return v
    }

    private static func int32s(_ t: TensorImpl) throws -> [Int32] {
        var v = [Int32](repeating: 0, count: t.numel)
        try v.withUnsafeMutableBytes { try Conversion.toHost(t, $0) }
        return v
    }

    private static func expectClose(_ a: [Double], _ b: [Double], _ tol: Double = 1e-12) {
        #expect(a.count == b.count)
        for (x, y) in zip(a, b) { #expect(abs(x - y) <= tol, "\(a) vs \(b)") }
    }

    @Test func luFactorPivotsOnTheLargestEntry() throws {
        // [[1, 2], [3, 4]]: rows swap, L = [[1, 0], [1/3, 1]], U = [[3, 4], [0, 2/3]].
        let (lu, pivots, info) = try Linalg.luFactor(try Self.matrix([1, 2, 3, 4], [2, 2]), check: true)
        Self.expectClose(try Self.doubles(lu), [3, 4, 1.0 / 3, 2.0 / 3])
        #expect(try Self.int32s(pivots) == [2, 2])
        #expect(try Self.int32s(info) == [0])
    }

    @Test func aZeroPivotIsReportedOrThrown() throws {
        let singular = try Self.matrix([1, 2, 2, 4], [2, 2])
        let (_, _, info) = try Linalg.luFactor(singular, check: false)
        #expect(try Self.int32s(info) == [2])
        #expect(lucidErrorKind { _ = try Linalg.luFactor(singular, check: true) } == .runtime)
        #expect(lucidErrorKind { _ = try Linalg.cholesky(singular, upper: false, check: true) } == .runtime)
    }

    @Test func triangularSolvesOnEitherSide() throws {
        let u = try Self.matrix([2, 1, 0, 4], [2, 2])  // upper
        let b = try Self.matrix([4, 8], [2, 1])
        // 2x + y = 4, 4y = 8: y = 2, x = 1.
        Self.expectClose(
            try Self.doubles(try Linalg.solveTriangular(u, b, upper: true, left: true, unitriangular: false)),
            [1, 2])
        // [x y]·U = [4 8]: 2x = 4, x + 4y = 8: x = 2, y = 1.5.
        let row = try Self.matrix([4, 8], [1, 2])
        Self.expectClose(
            try Self.doubles(try Linalg.solveTriangular(u, row, upper: true, left: false, unitriangular: false)),
            [2, 1.5])
    }

    @Test func choleskyEighSvdAndQrOfSmallMatrices() throws {
        let a = try Self.matrix([4, 2, 2, 5], [2, 2])
        Self.expectClose(try Self.doubles(try Linalg.cholesky(a, upper: false, check: true).0), [2, 0, 1, 2])
        let (w, _) = try Linalg.eigh(a, upper: false, vectors: true)
        Self.expectClose(try Self.doubles(w), [(9 - 17.0.squareRoot()) / 2, (9 + 17.0.squareRoot()) / 2])
        let (_, s, _) = try Linalg.svd(try Self.matrix([3, 0, 0, -2], [2, 2]), full: false, vectors: false)
        Self.expectClose(try Self.doubles(s), [3, 2])
        let (q, r) = try Linalg.qr(try Self.matrix([3, 4], [2, 1]), mode: .reduced)
        let qValues = try q.map { try Self.doubles($0) } ?? []
        Self.expectClose(qValues.map(abs), [0.6, 0.8])
        Self.expectClose(try Self.doubles(r).map(abs), [5])
    }

    @Test func wrongInputsThrowTheirKinds() throws {
        let ints = try Creation.fromDoubles([1, 0, 0, 1], shape: [2, 2], dtype: .int64, device: .cpu)
        #expect(lucidErrorKind { _ = try Linalg.svd(ints, full: false, vectors: true) } == .type)
        let wide = try Self.matrix([1, 2, 3, 4, 5, 6], [2, 3])
        #expect(lucidErrorKind { _ = try Linalg.cholesky(wide, upper: false, check: false) } == .value)
        let vector = try Self.matrix([1, 2], [2])
        #expect(lucidErrorKind { _ = try Linalg.luFactor(vector, check: false) } == .value)
    }
}
