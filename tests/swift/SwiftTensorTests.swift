import Testing
@testable import LucidEngine

/// A Double reference matmul of row-major matrices.
func referenceMatmul(_ a: [Float], _ b: [Float], m: Int, k: Int, n: Int) -> [Float] {
    var out = [Float](repeating: 0, count: m * n)
    for i in 0..<m {
        for j in 0..<n {
            var acc = 0.0
            for l in 0..<k { acc += Double(a[i * k + l]) * Double(b[l * n + j]) }
            out[i * n + j] = Float(acc)
        }
    }
    return out
}

func kind(of body: () throws -> Void) -> LucidError.Kind? {
    do {
        try body()
        return nil
    } catch let e as LucidError {
        return e.kind
    } catch {
        return nil
    }
}

@Suite struct SwiftTensorTests {
    @Test func creationAndReadBack() throws {
        let t = try Tensor([1, 2, 3, 4, 5, 6], shape: [2, 3])
        #expect(t.shape == [2, 3] && t.dtype == .float32 && t.device == .cpu)
        #expect(try t.toArray() == [1, 2, 3, 4, 5, 6])
        #expect(try Tensor.zeros([2]).toArray() == [0, 0])
        #expect(try Tensor.ones([3], dtype: .float16).toArray() == [1, 1, 1])
        #expect(try Tensor.full([2], 2.5).toArray() == [2.5, 2.5])
        #expect(try Tensor.arange(0, 5, step: 2).toArray() == [0, 2, 4])
        #expect(kind { _ = try Tensor([1, 2], shape: [3]) } == .value)
        #expect(kind { _ = try Tensor.zeros([-1]) } == .value)
    }

    @Test func seededRandomnessRepeats() throws {
        Tensor.manualSeed(7)
        let a = try Tensor.randn([16]).toArray()
        Tensor.manualSeed(7)
        #expect(try Tensor.randn([16]).toArray() == a)
        let u = try Tensor.rand([1000]).toArray()
        #expect(u.allSatisfy { $0 >= 0 && $0 < 1 })
    }

    @Test func broadcastingAndScalars() throws {
        let col = try Tensor([1, 2, 3], shape: [3, 1])
        let row = try Tensor([10, 20, 30, 40], shape: [1, 4])
        let s = try col + row
        #expect(s.shape == [3, 4])
        #expect(try s.toArray() == [11, 21, 31, 41, 12, 22, 32, 42, 13, 23, 33, 43])
        #expect(try (col * 2).toArray() == [2, 4, 6])
        #expect(try (1 - col).toArray() == [0, -1, -2])
        #expect(try (6 / col).toArray() == [6, 3, 2])
        #expect(try (-col).toArray() == [-1, -2, -3])
        #expect(try (col - 2).relu().toArray() == [0, 0, 1])
        #expect(kind { _ = try col + (try Tensor.ones([2, 2])) } == .value)
    }

    @Test func matmulAgainstADoubleReference() throws {
        let a: [Float] = (0..<12).map { Float($0 % 5) - 2 }
        let b: [Float] = (0..<20).map { Float($0 % 7) - 3 }
        let y = try Tensor(a, shape: [3, 4]).matmul(try Tensor(b, shape: [4, 5]))
        #expect(y.shape == [3, 5])
        #expect(try y.toArray() == referenceMatmul(a, b, m: 3, k: 4, n: 5))
        // batched with a broadcast second operand
        let batched = try Tensor(a + a, shape: [2, 3, 4]).matmul(try Tensor(b, shape: [4, 5]))
        #expect(batched.shape == [2, 3, 5])
        let ref = referenceMatmul(a, b, m: 3, k: 4, n: 5)
        #expect(try batched.toArray() == ref + ref)
        // vectors
        let v = try Tensor([1, 2, 3, 4], shape: [4])
        #expect(try v.matmul(v).shape == [])
        #expect(try v.matmul(v).item() == 30)
    }

    @Test func linearWithBias() throws {
        let x = try Tensor([1, 2, 3, 4, 5, 6], shape: [2, 3])
        let w = try Tensor([1, 0, 0, 0, 1, 1], shape: [2, 3])
        let b = try Tensor([0.5, -1], shape: [2])
        let y = try x.linear(w, bias: b)
        #expect(y.shape == [2, 2])
        #expect(try y.toArray() == [1.5, 4, 4.5, 10])
        #expect(kind { _ = try x.linear(try Tensor.ones([2, 4])) } == .value)
    }

    @Test func reductions() throws {
        let t = try Tensor((1...6).map(Float.init), shape: [2, 3])
        #expect(try t.sum().item() == 21)
        #expect(try t.sum(dims: [0]).toArray() == [5, 7, 9])
        #expect(try t.mean(dims: [1], keepdim: true).shape == [2, 1])
        #expect(try t.mean(dims: [-1]).toArray() == [2, 5])
        #expect(kind { _ = try t.sum(dims: [2]) } == .index)
        #expect(kind { _ = try t.sum(dims: [0, -2]) } == .value)
    }

    @Test func shapeOps() throws {
        let t = try Tensor((0..<6).map(Float.init), shape: [2, 3])
        let tt = try t.transpose(0, 1)
        #expect(tt.shape == [3, 2] && !tt.isContiguous)
        #expect(try tt.toArray() == [0, 3, 1, 4, 2, 5])
        #expect(try tt.contiguous().isContiguous)
        #expect(try t.reshape([3, -1]).shape == [3, 2])
        #expect(try t.permute([1, 0]).toArray() == [0, 3, 1, 4, 2, 5])
        #expect(kind { _ = try tt.view([6]) } == .runtime)
        #expect(try tt.reshape([6]).toArray() == [0, 3, 1, 4, 2, 5])
    }

    @Test func errorsNameTheirKind() throws {
        let a = try Tensor.ones([2, 3])
        #expect(kind { _ = try a.matmul(try Tensor.ones([4, 2])) } == .value)
        #expect(kind { _ = try a.transpose(0, 5) } == .index)
        #expect(kind { _ = try a + (try Tensor.ones([2, 3], device: .metal)) } == .runtime)
        #expect(kind { _ = try a.matmul(try Tensor.ones([3, 2], dtype: .float16)) } == .type)
    }

    @Test func float16RoundsToNearestEven() throws {
        let third = try Tensor([1.0 / 3.0], shape: [1]).to(.float16)
        #expect(try third.toArray() == [0.33325195])
        #expect(try Tensor([65520], shape: [1]).to(.float16).toArray() == [Float.infinity])
        #expect(try Tensor([65519], shape: [1]).to(.float16).toArray() == [65504])
        #expect(try Tensor([1 + 0x1p-8], shape: [1]).to(.bfloat16).toArray() == [1])  // tie to even
        #expect(try Tensor([1 + 0x1p-8 + 0x1p-9], shape: [1]).to(.bfloat16).toArray() == [1 + 0x1p-7])
    }

    @Test func devicesMoveValues() throws {
        let t = try Tensor([1, 2], shape: [2])
        let m = try t.to(.metal)
        #expect(m.device == .metal)
        #expect(try m.to(.cpu).toArray() == [1, 2])
        #expect(!Metal.isAvailable)
    }
}
