import Foundation
import Testing
@testable import LucidEngine

/// Graphs far deeper than the stack: built, differentiated and freed without recursion
/// proportional to their depth.
@Suite struct DeepGraphTests {
    /// `x` and `x * 1 * 1 …` (`depth` recorded ops).
    static func chain(_ depth: Int) throws -> (leaf: Tensor, end: Tensor) {
        let x = try Tensor([2], shape: [1]).requiringGrad()
        var y = x
        for _ in 0..<depth { y = try y * 1.0 }
        return (x, y)
    }

    @Test func aChainOf200000OpsIsDifferentiatedAndFreed() throws {
        var (x, y): (Tensor, Tensor?) = try Self.chain(200_000)
        try y!.backward()
        #expect(try x.grad?.toArray() == [1])
        y = nil  // the whole chain goes here
        x = try Tensor([0], shape: [1])
    }

    @Test func aChainNeverDifferentiatedIsFreedOnAnotherThreadWithASmallStack() throws {
        final class Box: @unchecked Sendable { var tensor: Tensor? }
        let box = Box()
        box.tensor = try Self.chain(200_000).end
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            box.tensor = nil  // every rule, with what it captured, freed on this thread
            done.signal()
        }
        thread.stackSize = 256 << 10
        thread.start()
        done.wait()
        #expect(box.tensor == nil)
    }

    @Test func aLossSummedOver50000StepsWithoutDetachIsFreed() throws {
        let w = try Tensor([0.5], shape: [1]).requiringGrad()
        var total: Tensor? = try Tensor([0], shape: [1])
        for _ in 0..<50_000 { total = try total! + (w * w).sum(dims: [0], keepdim: true) }
        try total!.backward()
        #expect(try w.grad?.toArray() == [50_000])  // 50,000 steps of d(w²)/dw = 2w = 1
        total = nil
    }
}
