import Testing
@testable import LucidEngine

/// The 8- and 16-bit integer dtypes in the engine: their codes, promotion and the wrapping a
/// store into them does.
@Suite struct SmallIntegerDTypeTests {
    @Test func codesSizesAndNames() throws {
        #expect(DType.uint8.rawValue == 7 && DType.int8.rawValue == 8 && DType.int16.rawValue == 9)
        #expect(DType.uint8.itemSize == 1 && DType.int8.itemSize == 1 && DType.int16.itemSize == 2)
        #expect([DType.uint8, .int8, .int16].map(\.name) == ["uint8", "int8", "int16"])
        #expect(DType(rawValue: 9) == .int16)
        #expect(DType(rawValue: 10) == nil)
    }

    /// torch.promote_types among bool and the integers: the narrowest integer dtype holding
    /// both ranges.
    @Test(arguments: [
        (DType.uint8, DType.int8, DType.int16), (.int16, .uint8, .int16), (.int8, .int16, .int16),
        (.int8, .int32, .int32), (.uint8, .int64, .int64), (.bool, .uint8, .uint8), (.bool, .int8, .int8),
        (.int16, .float16, .float16), (.uint8, .bfloat16, .bfloat16), (.uint8, .uint8, .uint8),
    ])
    func promotion(_ a: DType, _ b: DType, _ want: DType) {
        #expect(DType.promote(a, b) == want)
        #expect(DType.promote(b, a) == want)
    }

    @Test func arithmeticWrapsInTheResultDType() throws {
        let x = try Ops.cast(try Creation.arange(start: Int64(250), end: Int64(256), step: Int64(1), dtype: .int64, device: .cpu), to: .uint8)
        let sum = try Elementwise.binary(.add, x, scalar: ScalarOperand(int: 10), scalarFirst: false)
        #expect(sum.dtype == .uint8)
        var bytes = [UInt8](repeating: 0, count: 6)
        bytes.withUnsafeMutableBytes { sum.backend.read(sum, into: $0) }
        #expect(bytes == [4, 5, 6, 7, 8, 9])
    }

    @Test func fillsOutOfRangeAreRefused() throws {
        #expect(throws: LucidError.self) {
            try Creation.full([2], value: ScalarOperand(int: 300), dtype: .uint8, device: .cpu)
        }
        #expect(throws: LucidError.self) {
            try Creation.full([2], value: ScalarOperand(float: -128.5), dtype: .int8, device: .cpu)
        }
        let t = try Creation.full([1], value: ScalarOperand(int: -1), dtype: .uint8, device: .cpu)
        var byte: [UInt8] = [0]
        byte.withUnsafeMutableBytes { t.backend.read(t, into: $0) }
        #expect(byte == [255])
    }
}
