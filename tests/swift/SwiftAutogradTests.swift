import Testing
@testable import LucidEngine

@Suite struct SwiftAutogradTests {
    @Test func aSwiftCallerTrainsALinearModelUnderAutocast() throws {
        // Fit y = 2x₀ - x₁ + 0.5 with plain gradient descent; the matmul runs in float16.
        var w = try Tensor([0, 0], shape: [1, 2], device: .metal).requiringGrad()
        var b = try Tensor([0], shape: [1], device: .metal).requiringGrad()
        let x = try Tensor([1, 0, 0, 1, 1, 1, -1, 2], shape: [4, 2], device: .metal)
        let y = try Tensor([2.5, -0.5, 1.5, -3.5], shape: [4, 1], device: .metal)
        var losses: [Float] = []
        for _ in 0..<200 {
            let pred = try withAutocast(.metal) { try x.linear(w, bias: b) }
            #expect(pred.dtype == .float16)
            let err = try pred.to(.float32) - y
            let loss = try (err * err).mean()
            losses.append(try loss.item())
            try loss.backward()
            let gw = try #require(w.grad), gb = try #require(b.grad)
            #expect(gw.dtype == .float32)
            try GradMode.with(false) {
                w = try (w - gw * 0.1).requiringGrad()
                b = try (b - gb * 0.1).requiringGrad()
            }
        }
        #expect(losses.last! < 1e-3 * losses.first!)
        let fitted = try w.toArray()
        #expect(abs(fitted[0] - 2) < 0.02 && abs(fitted[1] + 1) < 0.02)
    }

    @Test func gradientsOfAProduct() throws {
        let a = try Tensor([1, 2, 3], shape: [3]).requiringGrad()
        let c = try Tensor([4, 5, 6], shape: [3])
        let y = try (a * c).sum()
        #expect(y.gradFn == "SumBackward")
        try y.backward()
        #expect(try a.grad?.toArray() == [4, 5, 6])
        #expect(c.grad == nil)
        #expect(throws: LucidError.self) { try y.backward() }   // graph freed
        #expect(throws: LucidError.self) { _ = try Tensor(integers: [1], shape: [1]).requiringGrad() }
    }
}
