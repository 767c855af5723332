import Testing
@testable import LucidEngine

/// A kernel call's operands: the first three held inline, the rest in an array, in order.
@Suite struct KernelCallTests {
    private static func tensors(_ n: Int) throws -> [TensorImpl] {
        try (0..<n).map { _ in try TensorImpl.empty([2], dtype: .float32, on: Backends.host) }
    }

    @Test(arguments: 0...6)
    func operandsKeepEveryTensorInOrder(count: Int) throws {
        let ts = try Self.tensors(count)
        let operands = Operands(ts)
        #expect(operands.count == count)
        #expect(operands.isEmpty == (count == 0))
        #expect(operands.indices == 0..<count)
        for (i, t) in ts.enumerated() { #expect(operands[i] === t) }
        #expect(zip(operands, ts).allSatisfy { $0 === $1 })
        #expect((operands + ts).count == 2 * count)
        #expect(zip(operands + ts, ts + ts).allSatisfy { $0 === $1 })
    }

    @Test func aLiteralIsTheSameAsAnArray() throws {
        let ts = try Self.tensors(5)
        let literal: Operands = [ts[0], ts[1], ts[2], ts[3], ts[4]]
        #expect(literal.count == 5)
        #expect(zip(literal, ts).allSatisfy { $0 === $1 })
        let call = KernelCall(.binary(.add), reads: [ts[0], ts[1]], writes: [ts[2]])
        #expect(call.reads.count == 2 && call.writes.count == 1)
        #expect(call.reads[1] === ts[1] && call.writes[0] === ts[2])
        #expect(call.reads.last === ts[1])
    }
}
