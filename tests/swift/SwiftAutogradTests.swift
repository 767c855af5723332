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
        #expect(throws: LucidError.self) { try y.backward() }  // graph freed
        #expect(throws: LucidError.self) { _ = try Tensor(integers: [1], shape: [1]).requiringGrad() }
    }
}

@Suite struct SwiftTrainingTests {
    /// A two-layer MLP learns XOR-like quadrant labels with Adam under autocast.
    @Test func aTwoLayerMLPTrainsUnderAutocastWithAdam() throws {
        Tensor.manualSeed(0)
        var points: [Float] = [], labels: [Int64] = []
        for i in 0..<64 {
            let x = Float(i % 8) / 3.5 - 1, y = Float(i / 8) / 3.5 - 1
            points += [x, y]
            labels.append((x > 0) != (y > 0) ? 1 : 0)
        }
        let x = try Tensor(points, shape: [64, 2], device: .metal)
        let target = try Tensor(integers: labels, shape: [64], device: .metal)
        let opt = try Adam(
            [
                try (Tensor.randn([16, 2], device: .metal) * 0.5).requiringGrad(), try Tensor.zeros([16], device: .metal).requiringGrad(),
                try (Tensor.randn([2, 16], device: .metal) * 0.25).requiringGrad(), try Tensor.zeros([2], device: .metal).requiringGrad(),
            ], lr: 0.05)
        func logits() throws -> Tensor {
            let p = opt.parameters
            return try withAutocast(.metal) { try x.linear(p[0], bias: p[1]).gelu().linear(p[2], bias: p[3]) }
        }
        var losses: [Float] = []
        for _ in 0..<150 {
            let out = try logits()
            #expect(out.dtype == .float16)
            let loss = try withAutocast(.metal) { try crossEntropy(out, target) }
            #expect(loss.dtype == .float32)
            losses.append(try loss.item())
            try opt.zeroGrad()
            try loss.backward()
            #expect(opt.parameters[0].grad?.dtype == .float32)
            try opt.step()
        }
        #expect(losses.last! < 0.2 * losses.first!)
        let correct = try GradMode.with(false) { try logits().argmax(dim: 1).equals(target).to(.float32).mean().item() }
        #expect(correct > 0.95)
        #expect(throws: LucidError.self) { _ = try Adam([try Tensor.zeros([2])]) }
    }

    @Test func sgdWithMomentumMatchesTheHandComputedUpdate() throws {
        let p = try Tensor([1, -2], shape: [2]).requiringGrad()
        let opt = try SGD([p], lr: 0.1, momentum: 0.9)
        for _ in 0..<2 {
            try opt.zeroGrad()
            try (opt.parameters[0] * opt.parameters[0]).sum().backward()
            try opt.step()
        }
        // g1 = 2p0, b1 = g1, p1 = p0 - 0.1 b1; g2 = 2p1, b2 = 0.9 b1 + g2, p2 = p1 - 0.1 b2.
        let p0: [Float] = [1, -2]
        let p1 = p0.map { $0 - 0.1 * 2 * $0 }
        let p2 = zip(p0, p1).map { a, b in b - 0.1 * (0.9 * 2 * a + 2 * b) }
        let got = try opt.parameters[0].toArray()
        #expect(zip(got, p2).allSatisfy { abs($0 - $1) < 1e-6 })
    }

    @Test func inPlaceFormsWriteTheStorageThatViewsShare() throws {
        let buffer = try Tensor.zeros([2, 3])
        let flat = try buffer.view([6])
        try buffer.copy(from: try Tensor([1, 2, 3], shape: [3]))  // broadcast over the rows
        #expect(try flat.toArray() == [1, 2, 3, 1, 2, 3])
        try flat.fill(7)
        #expect(try buffer.toArray() == [Float](repeating: 7, count: 6))
        // What autograd would record is refused, and allowed with grad mode off.
        let w = try Tensor([1, 2], shape: [2]).requiringGrad()
        #expect(throws: LucidError.self) { try w.fill(0) }
        try GradMode.with(false) { try w.fill(0) }
        #expect(try w.toArray() == [0, 0])
    }

    @Test func aSavedTensorWrittenInPlaceIsRefusedInBackward() throws {
        let x = try Tensor([0.5, 1], shape: [2]).requiringGrad()
        let y = try x.exp()
        try GradMode.with(false) { try y.fill(1) }  // exp saved its output
        let error = lucidErrorKind { try y.sum().backward() }
        #expect(error == .runtime)
    }

    @Test func anOptimizerStepUpdatesTheParametersGiven() throws {
        let w = try Tensor([1, -1], shape: [2]).requiringGrad()
        let view = try w.view([2, 1])
        let opt = try SGD([w], lr: 0.5)
        try (w * w).sum().backward()
        try opt.step()
        #expect(try w.toArray() == [0, 0])  // w - 0.5 · 2w
        #expect(try view.toArray() == [0, 0])
    }
}
