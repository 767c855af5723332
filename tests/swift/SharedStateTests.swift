import Testing
@testable import LucidEngine
@testable import LucidCABI

/// The Swift API and the C ABI share one thread-local autocast state.
@Suite(.serialized) struct SharedStateTests {
    @Test func aGuardFromTheCABIIsVisibleToSwift() throws {
        var handle: UInt64 = 0
        #expect(guard_create(1, 1, 2, &handle) == 0)  // metal, enabled, bfloat16
        #expect(Autocast.dtype(.metal) == .bfloat16)
        let m = try Tensor([1, 2, 3, 4], shape: [2, 2], device: .metal)
        #expect(try m.matmul(m).dtype == .bfloat16)
        #expect(guard_destroy(handle) == 0)
        #expect(!Autocast.isEnabled())
    }

    @Test func aSwiftScopeIsVisibleToTheCABI() throws {
        var code: Int32 = -7
        try withAutocast(.cpu, dtype: .bfloat16) {
            #expect(lucid_autocast_get_dtype(0, &code) == 0)
            #expect(code == 2)
        }
        #expect(lucid_autocast_get_dtype(0, &code) == 0)
        #expect(code == -1)
    }

    @Test func badGuardHandlesAreErrorsWithMessages() throws {
        var handle: UInt64 = 0
        #expect(guard_create(1, 1, -1, &handle) == 0)
        #expect(guard_destroy(handle) == 0)
        #expect(guard_destroy(handle) == 5)
        let message = String(cString: lucid_last_error()!)
        #expect(message.contains(String(handle, radix: 16)))
        #expect(guard_destroy(0xdead_beef) == 5)
        #expect(guard_create(1, 1, 3, &handle) == 1)   // int32 is no autocast target
        #expect(guard_create(9, 1, 1, &handle) == 1)   // no such device
        #expect(guard_create(1, 1, 1, nil) == 1)
        #expect(!Autocast.isEnabled())
    }

    @Test func tensorHandlesAreChecked() throws {
        var values: [Float] = [1, 2, 3]
        var shape: [Int64] = [3]
        var t: UInt64 = 0
        #expect(lucid_tensor_from_host(&values, 12, &shape, 1, 0, 0, &t) == 0)
        var out: UInt64 = 0
        #expect(lucid_binary(0, t, t, &out) == 0)
        var sum = [Float](repeating: 0, count: 3)
        #expect(lucid_tensor_to_host(out, &sum, 12) == 0)
        #expect(sum == [2, 4, 6])
        #expect(lucid_tensor_release(out) == 0)
        #expect(lucid_tensor_release(t) == 0)
        #expect(lucid_tensor_release(t) == 5)
        #expect(lucid_binary(0, t, t, &out) == 5)
    }
}
