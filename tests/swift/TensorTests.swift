import Testing
@testable import LucidEngine

/// The Swift `Tensor` API without autocast: creation, reading back, arithmetic, matmul,
/// linear, reductions, layout and the errors ops report.
@Suite struct TensorTests {
    /// `0, 1, 2, …` as Floats.
    static func iota(_ n: Int) -> [Float] { (0..<n).map(Float.init) }

    // MARK: Creation and reading back

    @Test func creationFromFloatsWithAShape() throws {
        let t = try Tensor([1, 2, 3, 4, 5, 6], shape: [2, 3])
        #expect(t.shape == [2, 3])
        #expect(t.strides == [3, 1])
        #expect(t.ndim == 2 && t.numel == 6)
        #expect(t.dtype == .float32 && t.device == .cpu)
        #expect(t.isContiguous)
        #expect(try t.toArray() == [1, 2, 3, 4, 5, 6])

        let scalar = try Tensor([5], shape: [])
        #expect(scalar.ndim == 0 && scalar.numel == 1 && scalar.shape == [])
        #expect(try scalar.item() == 5)
        #expect(lucidErrorKind { _ = try t.item() } == .value)

        let empty = try Tensor([], shape: [0, 3])
        #expect(empty.numel == 0 && empty.shape == [0, 3])
        #expect(try empty.toArray() == [])

        let onMetal = try Tensor([1.5, -2.5], shape: [2], dtype: .bfloat16, device: .metal)
        #expect(onMetal.dtype == .bfloat16 && onMetal.device == .metal)
        #expect(try onMetal.toArray() == [1.5, -2.5])

        let ints = try Tensor(integers: [7, -3, 0], shape: [3])
        #expect(ints.dtype == .int64)
        #expect(try ints.toArray() == [7, -3, 0])
    }

    @Test(arguments: [Device.cpu, .metal])
    func indexPutWritesOrAddsRowsWithGradients(device: Device) throws {
        let base = try Tensor(Self.iota(6), shape: [3, 2], device: device).requiringGrad()
        let rows = try Tensor(integers: [2, 0, 2], shape: [3], device: device)
        let values = try Tensor([10, 11, 20, 21, 30, 31], shape: [3, 2], device: device).requiringGrad()
        #expect(try base.indexPut(rows, values).toArray() == [20, 21, 2, 3, 30, 31])  // the last write wins
        let added = try base.indexPut(rows, values, accumulate: true)
        #expect(try added.toArray() == [20, 22, 2, 3, 44, 47])
        try (try base.indexPut(rows, values)).sum().backward()
        #expect(try base.grad?.toArray() == [0, 0, 1, 1, 0, 0])
        #expect(try values.grad?.toArray() == [0, 0, 1, 1, 1, 1])
        let wrongShape = try Tensor([1, 2, 3], shape: [3], device: device)
        #expect(lucidErrorKind { _ = try base.indexPut(rows, wrongShape) } == .value)
        let outOfRange = try Tensor(integers: [3], shape: [1], device: device)
        #expect(lucidErrorKind { _ = try base.indexPut(outOfRange, values) } == .index)
    }

    @Test func creationRejectsMismatchedShapes() {
        #expect(lucidErrorKind { _ = try Tensor([1, 2], shape: [3]) } == .value)
        #expect(lucidErrorKind { _ = try Tensor([1, 2, 3, 4], shape: [2, 3]) } == .value)
        #expect(lucidErrorKind { _ = try Tensor([], shape: [-1]) } == .value)
        #expect(lucidErrorKind { _ = try Tensor.zeros([2, -3]) } == .value)
    }

    @Test func zerosOnesAndFull() throws {
        let z = try Tensor.zeros([2, 3])
        #expect(z.shape == [2, 3] && z.dtype == .float32)
        #expect(try z.toArray() == [Float](repeating: 0, count: 6))
        let o = try Tensor.ones([4], dtype: .float16, device: .metal)
        #expect(o.dtype == .float16 && o.device == .metal)
        #expect(try o.toArray() == [1, 1, 1, 1])
        #expect(try Tensor.full([2, 2], -2.5).toArray() == [-2.5, -2.5, -2.5, -2.5])
        #expect(try Tensor.full([3], 0.1).toArray() == [Float](repeating: Float(0.1), count: 3))
        let i = try Tensor.full([2], 3.7, dtype: .int32)
        #expect(i.dtype == .int32)
        #expect(try i.toArray() == [3, 3])  // truncated toward zero
        #expect(try Tensor.full([], 4).shape == [])
        #expect(try Tensor.zeros([0]).numel == 0)
    }

    @Test func fullRoundsOnceToFloat16() throws {
        // 1 + 2^-11 is exactly halfway between two float16 values; anything above it rounds
        // up to 1 + 2^-10. Going through float32 first would land on the tie and round down.
        let v = 1.0 + 0x1p-11 + 0x1p-40
        #expect(try Tensor.full([1], v, dtype: .float16).toArray() == [1 + 0x1p-10])
        #expect(try Tensor.arange(v, v + 0.5, dtype: .float16).toArray() == [1 + 0x1p-10])
    }

    @Test func arangeValues() throws {
        #expect(try Tensor.arange(0, 5).toArray() == [0, 1, 2, 3, 4])
        #expect(try Tensor.arange(0, 5, step: 2).toArray() == [0, 2, 4])
        #expect(try Tensor.arange(1, 2, step: 0.25).toArray() == [1, 1.25, 1.5, 1.75])
        #expect(try Tensor.arange(5, 0, step: -2).toArray() == [5, 3, 1])
        #expect(try Tensor.arange(3, 3).shape == [0])
        let ints = try Tensor.arange(0, 4, dtype: .int64)
        #expect(ints.dtype == .int64 && ints.shape == [4])
        #expect(try ints.toArray() == [0, 1, 2, 3])
        #expect(lucidErrorKind { _ = try Tensor.arange(0, 5, step: 0) } == .value)
        #expect(lucidErrorKind { _ = try Tensor.arange(5, 0) } == .value)
        #expect(lucidErrorKind { _ = try Tensor.arange(0, .infinity) } == .value)
    }

    @Test func devicesMoveValues() throws {
        let t = try Tensor([1, 2, 3], shape: [3])
        let m = try t.to(.metal)
        #expect(m.device == .metal && m.dtype == .float32)
        #expect(try m.toArray() == [1, 2, 3])
        let back = try m.to(.cpu)
        #expect(back.device == .cpu)
        #expect(try back.toArray() == [1, 2, 3])
    }

    // MARK: 16-bit conversion

    @Test func oneThirdRoundsToTheNearestFloat16() throws {
        let h = try Tensor([1.0 / 3.0], shape: [1]).to(.float16)
        #expect(h.dtype == .float16)
        #expect(try h.toArray() == [0.33325195])
        #expect(try h.to(.float32).toArray() == [0.33325195])
        #expect(try h.to(.float32).dtype == .float32)
        #expect(try Tensor([1.0 / 3.0], shape: [1], dtype: .float16).toArray() == [0.33325195])
    }

    @Test func conversionsMatchAReferenceRounding() throws {
        var values = Reference.values(64, seed: 3).map { $0 * 1000 }
        values += [65504, 65519, 65520, -65520, 0x1p-24, 0x1p-25, 0x1.8p-25, 1 + 0x1p-11, 1 + 0x1.8p-11]
        let t = try Tensor(values, shape: [values.count])
        #expect(try t.to(.float16).toArray() == values.map(Reference.roundToHalf))
        #expect(try t.to(.bfloat16).toArray() == values.map(Reference.roundToBFloat16))
        #expect(try Tensor([65520], shape: [1]).to(.float16).toArray() == [.infinity])
        #expect(try Tensor([1 + 0x1p-8], shape: [1]).to(.bfloat16).toArray() == [1])  // tie to even
    }

    // MARK: Arithmetic

    @Test func broadcastingAddOfAColumnAndARow() throws {
        let colValues: [Float] = [1, 2, 3], rowValues: [Float] = [10, 20, 30, 40]
        let col = try Tensor(colValues, shape: [3, 1]), row = try Tensor(rowValues, shape: [1, 4])
        var ref: [Float] = []
        for i in 0..<3 { for j in 0..<4 { ref.append(Float(Double(colValues[i]) + Double(rowValues[j]))) } }
        let s = try col + row
        #expect(s.shape == [3, 4])
        #expect(try s.toArray() == ref)
        let s2 = try row + col
        #expect(s2.shape == [3, 4])
        #expect(try s2.toArray() == ref)
    }

    @Test func broadcastingAgainstALowerRankOperand() throws {
        let a = try Tensor(Self.iota(6), shape: [2, 3]), b = try Tensor([1, 2, 4], shape: [3])
        #expect(try (a - b).toArray() == [-1, -1, -2, 2, 2, 1])
        #expect(try (a * b).toArray() == [0, 2, 8, 3, 8, 20])
        #expect(try (a / b).toArray() == [0, 0.5, 0.5, 3, 2, 1.25])
        #expect(lucidErrorKind { _ = try a + (try Tensor.ones([2])) } == .value)
        #expect(lucidErrorKind { _ = try a + (try Tensor.ones([3, 3])) } == .value)
    }

    @Test func scalarOpsOnBothSides() throws {
        let values: [Float] = [1, -2, 4, 0.5]
        let t = try Tensor(values, shape: [2, 2])
        func ref(_ f: (Double) -> Double) -> [Float] { values.map { Float(f(Double($0))) } }
        #expect(try (t + 3).toArray() == ref { $0 + 3 })
        #expect(try (3 + t).toArray() == ref { 3 + $0 })
        #expect(try (t - 3).toArray() == ref { $0 - 3 })
        #expect(try (3 - t).toArray() == ref { 3 - $0 })
        #expect(try (t * 3).toArray() == ref { $0 * 3 })
        #expect(try (3 * t).toArray() == ref { 3 * $0 })
        #expect(try (t / 4).toArray() == ref { $0 / 4 })
        #expect(try (4 / t).toArray() == ref { 4 / $0 })
        #expect(try (-t).toArray() == ref { -$0 })
        #expect(try (t - 1).relu().toArray() == ref { max($0 - 1, 0) })
        #expect(try (t * 2).shape == [2, 2])
    }

    @Test func scalarOpsFollowTypePromotion() throws {
        let i = try Tensor(integers: [1, 2, 3], shape: [3])
        let f = try i * 1.5
        #expect(f.dtype == .float32)
        #expect(try f.toArray() == [1.5, 3, 4.5])
        #expect(try (i / 2).dtype == .float32)
        #expect(try (i / 2).toArray() == [0.5, 1, 1.5])
        let h = try Tensor([1, 2], shape: [2], dtype: .float16)
        #expect(try (h * 2).dtype == .float16)
        #expect(try (2 - h).toArray() == [1, 0])
        #expect(try (h + (try Tensor([1, 1], shape: [2]))).dtype == .float32)
    }

    // MARK: matmul

    @Test func matmulOfSmallIntegerMatricesMatchesADoubleReference() throws {
        let m = 3, k = 4, n = 5
        let a: [Float] = (0..<(m * k)).map { Float($0 % 5) - 2 }
        let b: [Float] = (0..<(k * n)).map { Float($0 % 7) - 3 }
        let ref = Reference.matmul(a.map(Double.init), b.map(Double.init), m: m, k: k, n: n).map { Float($0) }
        for device in Device.allCases {
            let y = try Tensor(a, shape: [m, k], device: device).matmul(try Tensor(b, shape: [k, n], device: device))
            #expect(y.shape == [m, n] && y.dtype == .float32 && y.device == device)
            #expect(try y.toArray() == ref)
        }
        // A hand-checked 2×2 case.
        let p = try Tensor([1, 2, 3, 4], shape: [2, 2])
        #expect(try p.matmul(p).toArray() == [7, 10, 15, 22])
    }

    @Test func matmulOfTransposedOperands() throws {
        let m = 3, k = 4, n = 2
        let at = Reference.values(k * m, seed: 5), bt = Reference.values(n * k, seed: 6)
        // aᵀ and bᵀ stored row-major; the engine sees them through transposed views.
        var a = [Double](repeating: 0, count: m * k), b = [Double](repeating: 0, count: k * n)
        for i in 0..<m { for l in 0..<k { a[i * k + l] = Double(at[l * m + i]) } }
        for l in 0..<k { for j in 0..<n { b[l * n + j] = Double(bt[j * k + l]) } }
        let ref = Reference.matmul(a, b, m: m, k: k, n: n)
        let x = try Tensor(at, shape: [k, m]).transpose(0, 1)
        let w = try Tensor(bt, shape: [n, k]).transpose(0, 1)
        #expect(!x.isContiguous && !w.isContiguous)
        let got = try x.matmul(w).toArray()
        #expect(got.count == ref.count)
        for (g, r) in zip(got, ref) { #expect(abs(Double(g) - r) <= 1e-5, "got \(g), reference \(r)") }
    }

    @Test func matmulWithVectors() throws {
        let v = try Tensor([1, 2, 3], shape: [3])
        let dot = try v.matmul(v)
        #expect(dot.shape == [])
        #expect(try dot.item() == 14)
        let mat = try Tensor(Self.iota(6), shape: [2, 3])
        let mv = try mat.matmul(v)
        #expect(mv.shape == [2])
        #expect(try mv.toArray() == [8, 26])
        let vm = try (try Tensor([1, -1], shape: [2])).matmul(mat)
        #expect(vm.shape == [3])
        #expect(try vm.toArray() == [-3, -3, -3])
    }

    @Test func batchedMatmulBroadcastsBatchDimensions() throws {
        // [2, 1, 3, 4] · [3, 4, 5] → [2, 3, 3, 5]; batch (i, j) uses a[i, 0] and b[j].
        let aShape = [2, 1, 3, 4], bShape = [3, 4, 5]
        let a: [Float] = (0..<24).map { Float($0 % 7) - 3 }
        let b: [Float] = (0..<60).map { Float($0 % 5) - 2 }
        let y = try Tensor(a, shape: aShape).matmul(try Tensor(b, shape: bShape))
        #expect(y.shape == [2, 3, 3, 5])
        var ref: [Float] = []
        for i in 0..<2 {
            for j in 0..<3 {
                let ai = a[(i * 12)..<(i * 12 + 12)].map(Double.init)
                let bj = b[(j * 20)..<(j * 20 + 20)].map(Double.init)
                ref += Reference.matmul(ai, bj, m: 3, k: 4, n: 5).map { Float($0) }
            }
        }
        #expect(try y.toArray() == ref)

        // Batched times a plain matrix, and a vector against a batch.
        let batch = try Tensor(a, shape: [2, 3, 4])
        let v = try Tensor([1, 0, -1, 2], shape: [4])
        let bv = try batch.matmul(v)
        #expect(bv.shape == [2, 3])
        var refBV: [Float] = []
        for r in 0..<6 {
            var acc = 0.0
            for l in 0..<4 { acc += Double(a[r * 4 + l]) * [1.0, 0, -1, 2][l] }
            refBV.append(Float(acc))
        }
        #expect(try bv.toArray() == refBV)
        #expect(lucidErrorKind { _ = try batch.matmul(try Tensor.ones([3, 4, 5])) } == .value)
    }

    @Test func linearWithBias() throws {
        let rows = 6, inF = 4, outF = 3
        let x: [Float] = (0..<(rows * inF)).map { Float($0 % 5) - 2 }
        let w: [Float] = (0..<(outF * inF)).map { Float($0 % 3) - 1 }
        let b: [Float] = [0.5, -1, 2]
        var ref: [Float] = []
        for r in 0..<rows {
            for o in 0..<outF {
                var acc = Double(b[o])
                for i in 0..<inF { acc += Double(x[r * inF + i]) * Double(w[o * inF + i]) }
                ref.append(Float(acc))
            }
        }
        let weight = try Tensor(w, shape: [outF, inF]), bias = try Tensor(b, shape: [outF])
        let y = try Tensor(x, shape: [2, 3, inF]).linear(weight, bias: bias)
        #expect(y.shape == [2, 3, outF])
        #expect(try y.toArray() == ref)
        let noBias = try Tensor(x, shape: [rows, inF]).linear(weight)
        #expect(try noBias.toArray() == zip(ref, (0..<(rows * outF)).map { b[$0 % outF] }).map { $0 - $1 })
        let single = try Tensor(Array(x[0..<inF]), shape: [inF]).linear(weight, bias: bias)
        #expect(single.shape == [outF])
        #expect(try single.toArray() == Array(ref[0..<outF]))
        #expect(lucidErrorKind { _ = try Tensor(x, shape: [rows, inF]).linear(try Tensor.ones([outF, 5])) } == .value)
        #expect(lucidErrorKind { _ = try Tensor(x, shape: [rows, inF]).linear(weight, bias: try Tensor.ones([2])) } == .value)
    }

    // MARK: Reductions

    @Test func sumAndMeanWithDimsAndKeepdim() throws {
        let shape = [2, 3, 4]
        let v: [Float] = (0..<24).map { Float(($0 * 7) % 11) - 5 }
        let t = try Tensor(v, shape: shape)
        /// Reference sum (or mean) over `dims`, result row-major over the kept dimensions.
        func reduce(_ dims: Set<Int>, mean: Bool) -> [Float] {
            let kept = (0..<3).filter { !dims.contains($0) }
            let outShape = kept.map { shape[$0] }
            var acc = [Double](repeating: 0, count: outShape.reduce(1, *))
            var count = [Int](repeating: 0, count: acc.count)
            for flat in 0..<24 {
                let idx = Reference.index(flat, shape)
                var o = 0
                for d in kept { o = o * shape[d] + idx[d] }
                acc[o] += Double(v[flat])
                count[o] += 1
            }
            return zip(acc, count).map { Float(mean ? $0 / Double($1) : $0) }
        }
        let s1 = try t.sum(dims: [1])
        #expect(s1.shape == [2, 4])
        #expect(try s1.toArray() == reduce([1], mean: false))
        let s1k = try t.sum(dims: [1], keepdim: true)
        #expect(s1k.shape == [2, 1, 4])
        #expect(try s1k.toArray() == reduce([1], mean: false))
        let s02 = try t.sum(dims: [0, -1])
        #expect(s02.shape == [3])
        #expect(try s02.toArray() == reduce([0, 2], mean: false))
        #expect(try t.sum(dims: [2, 0], keepdim: true).shape == [1, 3, 1])
        let all = try t.sum()
        #expect(all.shape == [])
        #expect(try all.item() == reduce([0, 1, 2], mean: false)[0])
        #expect(try t.sum(keepdim: true).shape == [1, 1, 1])

        let m2 = try t.mean(dims: [-1])
        #expect(m2.shape == [2, 3])
        #expect(try m2.toArray() == reduce([2], mean: true))
        #expect(try t.mean(dims: [0, 1], keepdim: true).shape == [1, 1, 4])
        #expect(try t.mean(dims: [0, 1], keepdim: true).toArray() == reduce([0, 1], mean: true))
        #expect(try t.mean().item() == reduce([0, 1, 2], mean: true)[0])
    }

    @Test func reductionsOfAPermutedView() throws {
        let t = try Tensor(Self.iota(6), shape: [2, 3])
        let tt = try t.transpose(0, 1)  // [[0, 3], [1, 4], [2, 5]]
        #expect(try tt.sum(dims: [1]).toArray() == [3, 5, 7])
        #expect(try tt.sum(dims: [0]).toArray() == [3, 12])
        #expect(try tt.mean(dims: [1], keepdim: true).toArray() == [1.5, 2.5, 3.5])
    }

    @Test func reductionDTypesAndErrors() throws {
        let i = try Tensor(integers: [1, 2, 3, 4], shape: [2, 2])
        let s = try i.sum(dims: [0])
        #expect(s.dtype == .int64)
        #expect(try s.toArray() == [4, 6])
        #expect(lucidErrorKind { _ = try i.mean() } == .type)
        let h = try Tensor([1, 2, 3, 4], shape: [4], dtype: .bfloat16)
        #expect(try h.sum().dtype == .bfloat16)
        #expect(try h.sum().item() == 10)
        let t = try Tensor.ones([2, 3])
        #expect(lucidErrorKind { _ = try t.sum(dims: [2]) } == .index)
        #expect(lucidErrorKind { _ = try t.mean(dims: [-3]) } == .index)
        #expect(lucidErrorKind { _ = try t.sum(dims: [1, -1]) } == .value)
    }

    // MARK: Layout

    @Test func reshapeAndView() throws {
        let t = try Tensor(Self.iota(12), shape: [3, 4])
        let r = try t.reshape([2, -1, 2])
        #expect(r.shape == [2, 3, 2])
        #expect(r.isContiguous)
        #expect(try r.toArray() == Self.iota(12))
        #expect(try t.view([12]).shape == [12])
        #expect(try t.reshape([-1]).shape == [12])
        #expect(lucidErrorKind { _ = try t.reshape([5, -1]) } == .value)
        #expect(lucidErrorKind { _ = try t.reshape([-1, -1]) } == .value)
        #expect(lucidErrorKind { _ = try t.reshape([13]) } == .value)
    }

    @Test func transposeIsAStridedView() throws {
        let t = try Tensor(Self.iota(6), shape: [2, 3])
        let tt = try t.transpose(0, 1)
        #expect(tt.shape == [3, 2])
        #expect(tt.strides == [1, 3])
        #expect(!tt.isContiguous)
        #expect(try tt.toArray() == [0, 3, 1, 4, 2, 5])
        #expect(try t.transpose(-1, -2).toArray() == [0, 3, 1, 4, 2, 5])
        #expect(try tt.transpose(0, 1).toArray() == Self.iota(6))
        let c = try tt.contiguous()
        #expect(c.isContiguous && c.strides == [2, 1])
        #expect(try c.toArray() == [0, 3, 1, 4, 2, 5])
        #expect(try t.contiguous().isContiguous)
        // A transposed view cannot be viewed flat; reshape copies instead.
        #expect(lucidErrorKind { _ = try tt.view([6]) } == .runtime)
        #expect(try tt.reshape([6]).toArray() == [0, 3, 1, 4, 2, 5])
        #expect(try tt.reshape([2, 3]).toArray() == [0, 3, 1, 4, 2, 5])
        #expect(try c.view([6]).toArray() == [0, 3, 1, 4, 2, 5])
    }

    @Test func permuteMatchesIndexArithmetic() throws {
        let shape = [2, 3, 4], perm = [2, 0, 1]
        let t = try Tensor(Self.iota(24), shape: shape)
        let p = try t.permute(perm)
        let outShape = perm.map { shape[$0] }
        #expect(p.shape == outShape)
        let s = Reference.strides(shape)
        #expect(p.strides == perm.map { s[$0] })
        var ref: [Float] = []
        for flat in 0..<24 {
            let outIdx = Reference.index(flat, outShape)
            var src = 0
            for (axis, d) in perm.enumerated() { src += outIdx[axis] * s[d] }
            ref.append(Float(src))
        }
        #expect(try p.toArray() == ref)
        #expect(try p.contiguous().toArray() == ref)
        #expect(try p.contiguous().strides == Reference.strides(outShape))
        #expect(try p.permute([1, 2, 0]).toArray() == Self.iota(24))  // the inverse permutation
        #expect(try p.reshape([4, 6]).toArray() == ref)
        #expect(lucidErrorKind { _ = try t.permute([0, 1]) } == .value)
        #expect(lucidErrorKind { _ = try t.permute([0, 0, 1]) } == .value)
        #expect(lucidErrorKind { _ = try t.permute([0, 1, 3]) } == .index)
    }

    // MARK: Errors

    @Test func misalignedMatmulIsAValueError() throws {
        let a = try Tensor.ones([2, 3])
        let e = try #require(lucidError { _ = try a.matmul(try Tensor.ones([4, 2])) })
        #expect(e.kind == .value)
        #expect(e.message.contains("[2, 3]") && e.message.contains("[4, 2]"))
        #expect(lucidErrorKind { _ = try a.matmul(try Tensor.ones([2])) } == .value)
        #expect(lucidErrorKind { _ = try a.matmul(try Tensor([1], shape: [])) } == .value)
    }

    @Test func badDimensionsAreIndexErrors() throws {
        let a = try Tensor.ones([2, 3])
        #expect(lucidErrorKind { _ = try a.transpose(0, 2) } == .index)
        #expect(lucidErrorKind { _ = try a.transpose(-3, 0) } == .index)
        #expect(lucidErrorKind { _ = try a.sum(dims: [5]) } == .index)
        #expect(lucidErrorKind { _ = try a.permute([0, 2]) } == .index)
    }

    @Test func mixingDevicesIsARuntimeError() throws {
        let c = try Tensor.ones([2, 2]), m = try Tensor.ones([2, 2], device: .metal)
        #expect(lucidErrorKind { _ = try c + m } == .runtime)
        #expect(lucidErrorKind { _ = try m * c } == .runtime)
        #expect(lucidErrorKind { _ = try c.matmul(m) } == .runtime)
        #expect(lucidErrorKind { _ = try c.linear(m) } == .runtime)
        #expect(lucidErrorKind { _ = try c.linear(c, bias: try Tensor.ones([2], device: .metal)) } == .runtime)
    }

    @Test func matmulOfMixedDTypesIsATypeError() throws {
        let a = try Tensor.ones([2, 2])
        #expect(lucidErrorKind { _ = try a.matmul(try Tensor.ones([2, 2], dtype: .float16)) } == .type)
        #expect(lucidErrorKind { _ = try Tensor.ones([2, 2], dtype: .bool).matmul(try Tensor.ones([2, 2], dtype: .bool)) } == .type)
    }
}
