import Testing
@testable import LucidEngine

/// Gradient hooks from Swift: `registerHook`, `registerPostAccumulateGradHook`, `retainGrad`
/// and `Tensor.gradients(of:withRespectTo:)`.
@Suite struct SwiftHookTests {
    struct Boom: Error {}

    @Test func aLeafHookSeesTheWholeGradientAndMayReplaceIt() throws {
        let x = try Tensor([1, 2, 3], shape: [3]).requiringGrad()
        var seen: [[Float]] = []
        let handle = try x.registerHook { g in
            seen.append(try g.toArray())
            return try g * 2
        }
        try x.registerHook { g in
            seen.append(try g.toArray())  // the previous hook's result
            return nil
        }
        // x reaches the loss by two paths: the hooks see the sum, once.
        let loss = try ((x * x).sum() + (x * 3).sum())
        try loss.backward()
        #expect(seen == [[5, 7, 9], [10, 14, 18]])
        #expect(try x.grad?.toArray() == [10, 14, 18])
        #expect(handle.remove())
        #expect(!handle.remove())
        try x.zeroGrad()
        try (x * x).sum().backward()
        #expect(try x.grad?.toArray() == [2, 4, 6])
    }

    @Test func hooksOnIntermediatesRetainGradAndPostAccumulateHooks() throws {
        let x = try Tensor([1, 2], shape: [2]).requiringGrad()
        let y = try x * x
        try y.retainGrad()
        #expect(y.retainsGrad)
        try y.registerHook { g in try g * 10 }
        var accumulated: [[Float]] = []
        try x.registerPostAccumulateGradHook { t in accumulated.append(try #require(t.grad).toArray()) }
        try (y * 3).sum().backward()
        #expect(try y.grad?.toArray() == [30, 30])  // after the hook
        #expect(try x.grad?.toArray() == [60, 120])  // 30 * 2x
        #expect(accumulated == [[60, 120]])
        #expect(throws: LucidError.self) { try y.registerPostAccumulateGradHook { _ in } }
        #expect(throws: LucidError.self) { try Tensor([1], shape: [1]).registerHook { $0 } }
    }

    @Test func anErrorThrownByAHookFailsBackward() throws {
        let x = try Tensor([1, 2], shape: [2]).requiringGrad()
        try x.registerHook { _ in throw Boom() }
        #expect(throws: Boom.self) { try (x * 2).sum().backward() }
        #expect(x.grad == nil)
        let z = try Tensor([1, 2], shape: [2]).requiringGrad()
        try z.registerHook { _ in try Tensor([1, 2, 3], shape: [3]) }  // the wrong shape
        #expect(throws: LucidError.self) { try (z * 2).sum().backward() }
    }

    @Test func gradientsWithRespectToInputsLeaveGradAlone() throws {
        let x = try Tensor([1, 2], shape: [2]).requiringGrad()
        let u = try Tensor([1, 2], shape: [2]).requiringGrad()
        try x.registerHook { g in try g + 1 }
        let loss = try (x * x).sum()
        let grads = try Tensor.gradients(of: [loss], withRespectTo: [x, u], retainGraph: true, allowUnused: true)
        #expect(try grads[0]?.toArray() == [3, 5])
        #expect(grads[1] == nil)
        #expect(x.grad == nil)
        #expect(throws: LucidError.self) { _ = try Tensor.gradients(of: [loss], withRespectTo: [x, u]) }
    }
}
