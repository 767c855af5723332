import Testing
@testable import LucidEngine
@testable import LucidCABI

/// The C ABI called from Swift: it reads and changes the same per-thread autocast state as
/// the Swift API, and reports bad handles as status codes with a message.
@Suite struct CABITests {
    static let statusOK: Int32 = 0, errValue: Int32 = 1, errIndex: Int32 = 3
    static let errHandle: Int32 = 5, errThread: Int32 = 6
    static let cpu: Int32 = 0, metal: Int32 = 1
    static let float32: Int32 = 0, float16: Int32 = 1, bfloat16: Int32 = 2, int32: Int32 = 3

    static func lastError() -> String? { lucid_last_error().map { String(cString: $0) } }

    static func queriedDType(_ device: Int32) -> Int32? {
        var code: Int32 = -99
        guard lucid_autocast_get_dtype(device, &code) == statusOK else { return nil }
        return code
    }

    static func queriedEnabled(_ device: Int32) -> Int32? {
        var flag: Int32 = -99
        guard lucid_autocast_is_enabled(device, &flag) == statusOK else { return nil }
        return flag
    }

    // MARK: One state for both APIs

    @Test func aGuardCreatedThroughTheABIIsSeenBySwift() throws {
        var handle: UInt64 = 0
        #expect(guard_create(Self.metal, 1, Self.bfloat16, &handle) == Self.statusOK)
        #expect(handle != 0)
        #expect(Autocast.dtype(.metal) == .bfloat16)
        #expect(Autocast.isEnabled(.metal))
        #expect(Autocast.dtype(.cpu) == nil)
        let x = try Tensor([1, 2, 3, 4], shape: [2, 2], device: .metal)
        let y = try x.matmul(x)
        #expect(y.dtype == .bfloat16)
        #expect(try y.toArray() == [7, 10, 15, 22])
        #expect(guard_destroy(handle) == Self.statusOK)
        #expect(Autocast.dtype(.metal) == nil)
        #expect(!Autocast.isEnabled())
    }

    @Test func aSwiftScopeIsSeenThroughTheABI() throws {
        try withAutocast(.cpu, dtype: .bfloat16) {
            var code: Int32 = -99
            #expect(lucid_autocast_get_dtype(Self.cpu, &code) == Self.statusOK)
            #expect(code == 2)
            #expect(Self.queriedDType(Self.metal) == -1)
            #expect(Self.queriedDType(-1) == 2)
            #expect(Self.queriedEnabled(Self.cpu) == 1)
            #expect(Self.queriedEnabled(Self.metal) == 0)
            #expect(Self.queriedEnabled(-1) == 1)
        }
        #expect(Self.queriedDType(Self.cpu) == -1)
        #expect(Self.queriedDType(-1) == -1)
        #expect(Self.queriedEnabled(-1) == 0)
    }

    @Test func defaultDTypeCodeMeansFloat16() throws {
        var handle: UInt64 = 0
        #expect(guard_create(Self.metal, 1, -1, &handle) == Self.statusOK)
        #expect(Autocast.dtype(.metal) == .float16)
        #expect(Self.queriedDType(Self.metal) == Self.float16)
        #expect(guard_destroy(handle) == Self.statusOK)
    }

    @Test func swiftAndABIGuardsInterleaveOutOfOrder() throws {
        let swiftScope = try AutocastGuard(.metal, dtype: .float16)
        var handle: UInt64 = 0
        #expect(guard_create(Self.metal, 1, Self.bfloat16, &handle) == Self.statusOK)
        try swiftScope.close()
        #expect(Autocast.dtype(.metal) == .bfloat16)  // the ABI guard is now the innermost
        #expect(guard_destroy(handle) == Self.statusOK)
        #expect(!Autocast.isEnabled())

        // A disabling ABI guard inside a Swift scope, undone in LIFO order.
        try withAutocast(.metal, dtype: .bfloat16) {
            var off: UInt64 = 0
            #expect(guard_create(Self.metal, 0, -1, &off) == Self.statusOK)
            #expect(Self.queriedDType(Self.metal) == -1)
            #expect(!Autocast.isEnabled(.metal))
            #expect(guard_destroy(off) == Self.statusOK)
            #expect(Autocast.dtype(.metal) == .bfloat16)
        }
    }

    @Test func matmulThroughTheABIFollowsASwiftScope() throws {
        var values: [Float] = [1, 2, 3, 4]
        var shape: [Int64] = [2, 2]
        var record = [Int64](repeating: -1, count: Record.length)
        #expect(lucid_tensor_from_host(&values, 16, &shape, 2, Self.float32, Self.metal, &record) == Self.statusOK)
        let t = UInt32(record[Record.handle])
        defer { _ = lucid_tensor_release(t) }
        try withAutocast(.metal, dtype: .float16) {
            #expect(lucid_matmul(t, t, &record) == Self.statusOK)
        }
        let out = UInt32(record[Record.handle])
        defer { _ = lucid_tensor_release(out) }
        // The op's record says what lucid_tensor_meta says.
        var dtype: Int32 = -1, device: Int32 = -1, ndim: Int32 = -1, grad: Int32 = -1
        #expect(lucid_tensor_meta(out, &dtype, &device, &ndim, &grad) == Self.statusOK)
        #expect(dtype == Self.float16 && device == Self.metal && ndim == 2)
        #expect(record[Record.dtype] == Int64(dtype) && record[Record.device] == Int64(device))
        #expect(Array(record[Record.shape..<Record.shape + 2]) == [2, 2])
        #expect(Array(record[Record.strides..<Record.strides + 2]) == [2, 1])
        #expect(record[Record.storageBytes] == 8)
        var halves = [UInt16](repeating: 0, count: 4)
        #expect(lucid_tensor_to_host(out, &halves, 8) == Self.statusOK)
        #expect(halves.map { Float(Float16(bitPattern: $0)) } == [7, 10, 15, 22])
        // Outside the scope the same call stays in float32.
        #expect(lucid_matmul(t, t, &record) == Self.statusOK)
        #expect(record[Record.dtype] == Int64(Self.float32))
        #expect(lucid_tensor_release(UInt32(record[Record.handle])) == Self.statusOK)
    }

    // MARK: Bad handles

    @Test func destroyingAGuardTwiceIsAHandleError() throws {
        var handle: UInt64 = 0
        #expect(guard_create(Self.metal, 1, Self.float16, &handle) == Self.statusOK)
        #expect(guard_destroy(handle) == Self.statusOK)
        #expect(guard_destroy(handle) == Self.errHandle)
        let message = try #require(Self.lastError())
        #expect(message.contains(String(handle, radix: 16)))
        #expect(!Autocast.isEnabled())
    }

    @Test func aBogusHandleIsAHandleErrorWithAMessage() throws {
        let bogus: UInt64 = 0xdead_beef_0bad_f00d
        #expect(guard_destroy(bogus) == Self.errHandle)
        let message = try #require(Self.lastError())
        #expect(!message.isEmpty)
        #expect(message.contains(String(bogus, radix: 16)))
        #expect(guard_destroy(0) == Self.errHandle)
        #expect(try #require(Self.lastError()).contains("null"))
    }

    @Test func aBadHandleDoesNotDisturbLiveGuards() throws {
        var handle: UInt64 = 0
        #expect(guard_create(Self.cpu, 1, Self.bfloat16, &handle) == Self.statusOK)
        #expect(guard_destroy(handle &+ 1_000_000) == Self.errHandle)
        #expect(Autocast.dtype(.cpu) == .bfloat16)
        #expect(guard_destroy(handle) == Self.statusOK)
        #expect(Autocast.dtype(.cpu) == nil)
    }

    @Test func destroyingOnAnotherThreadIsAThreadErrorAndChangesNothing() throws {
        var handle: UInt64 = 0
        #expect(guard_create(Self.metal, 1, Self.bfloat16, &handle) == Self.statusOK)
        let h = handle
        let seen = runOnJoinedThread { () -> (Int32, String?, Int32?) in
            let status = guard_destroy(h)
            return (status, Self.lastError(), Self.queriedDType(Self.metal))
        }
        #expect(seen.0 == Self.errThread)
        #expect(seen.1?.isEmpty == false)
        #expect(seen.2 == -1)
        #expect(Autocast.dtype(.metal) == .bfloat16)
        #expect(guard_destroy(handle) == Self.statusOK)
        #expect(!Autocast.isEnabled())
    }

    @Test func aGuardWhoseThreadEndedIsStale() throws {
        let made = runOnJoinedThread { () -> (Int32, UInt64) in
            var h: UInt64 = 0
            return (guard_create(Self.metal, 1, Self.float16, &h), h)
        }
        #expect(made.0 == Self.statusOK)
        #expect(Autocast.dtype(.metal) == nil)
        #expect(guard_destroy(made.1) == Self.errHandle)
        #expect(Self.lastError() != nil)
    }

    @Test func lastErrorIsPerThread() throws {
        #expect(guard_destroy(0xabc_def) == Self.errHandle)
        let mine = try #require(Self.lastError())
        let theirs = runOnJoinedThread { () -> String? in
            _ = guard_destroy(0x123_456)
            return Self.lastError()
        }
        #expect(theirs?.contains("123456") == true)
        #expect(Self.lastError() == mine)
    }

    // MARK: Validation

    @Test func invalidArgumentsToGuardCreateChangeNothing() throws {
        try withAutocast(.metal, dtype: .bfloat16) {
            var handle: UInt64 = 42
            #expect(guard_create(Self.metal, 1, Self.int32, &handle) == Self.errValue)
            #expect(handle == 42)  // out-pointers are written only on success
            #expect(guard_create(Self.metal, 1, 4, &handle) == Self.errValue)
            #expect(guard_create(Self.metal, 1, 99, &handle) != Self.statusOK)
            #expect(guard_create(7, 1, Self.float16, &handle) == Self.errValue)
            #expect(guard_create(Self.metal, 1, Self.float16, nil) == Self.errValue)
            #expect(handle == 42)
            #expect(Autocast.dtype(.metal) == .bfloat16)
            #expect(Autocast.dtype(.cpu) == nil)
        }
        #expect(!Autocast.isEnabled())
    }

    @Test func queriesRejectBadDevicesAndNullPointers() {
        var code: Int32 = 0
        #expect(lucid_autocast_get_dtype(5, &code) == Self.errValue)
        #expect(lucid_autocast_is_enabled(5, &code) == Self.errValue)
        #expect(lucid_autocast_get_dtype(Self.cpu, nil) == Self.errValue)
    }

    @Test func aFailedCallWritesNoOutPointer() throws {
        var values: [Float] = [1, 2]
        var shape: [Int64] = [2]
        var record = [Int64](repeating: -1, count: Record.length)
        #expect(lucid_tensor_from_host(&values, 8, &shape, 1, Self.float32, Self.cpu, &record) == Self.statusOK)
        let t = UInt32(record[Record.handle])
        #expect(lucid_matmul(t, 0, &record) == Self.errHandle)
        #expect(record[Record.handle] == Int64(t))
        defer { _ = lucid_tensor_release(t) }
        var dtype: Int32 = -7, ndim: Int32 = -7, grad: Int32 = -7
        // The device out-pointer is null, so the call fails; nothing may have been written.
        #expect(lucid_tensor_meta(t, &dtype, nil, &ndim, &grad) == Self.errValue)
        #expect(dtype == -7)
        var name: UnsafePointer<CChar>? = nil
        var bf16: Int32 = -7
        #expect(lucid_op_info(0, &name, nil, &bf16) == Self.errValue)
        #expect(name == nil)
    }

    // MARK: Op table

    @Test func theOpTableThroughTheABI() throws {
        var count: Int32 = 0
        #expect(lucid_op_count(&count) == Self.statusOK)
        #expect(Int(count) == OpTable.all.count)
        var policies: [String: Int32] = [:]
        for i in 0..<count {
            var name: UnsafePointer<CChar>? = nil
            var policy: Int32 = -1, bf16: Int32 = -1
            #expect(lucid_op_info(i, &name, &policy, &bf16) == Self.statusOK)
            policies[String(cString: try #require(name))] = policy
        }
        #expect(policies["matmul"] == 1)
        #expect(policies["linear"] == 1)
        #expect(policies["sum"] == 2)
        var name: UnsafePointer<CChar>? = nil
        var policy: Int32 = 0, bf16: Int32 = 0
        #expect(lucid_op_info(count, &name, &policy, &bf16) == Self.errIndex)
        #expect(lucid_op_info(-1, &name, &policy, &bf16) == Self.errIndex)
    }

    // MARK: Codes

    /// Every code the ABI takes is read by one helper: a known code is its case, an unknown
    /// one a value error naming the parameter and the valid codes.
    @Test func codesAreDecodedByOneHelper() throws {
        #expect(try decode(1, as: Device.self, "device") == .metal)
        #expect(try decode(9, as: DType.self, "dtype") == .int16)
        #expect(try decode(1, as: HookKind.self, "hook kind") == .postAccumulate)
        for (raw, message) in [
            (Int32(2), "unknown device code 2; expected one of 0 (cpu), 1 (metal)"),
            (-1, "unknown device code -1; expected one of 0 (cpu), 1 (metal)"),
        ] {
            do {
                _ = try decode(raw, as: Device.self, "device")
                Issue.record("decoded \(raw)")
            } catch let e as LucidError {
                #expect(e.kind == .value && e.message == message)
            }
        }
        do {
            _ = try decode(7, as: HookKind.self, "hook kind")
            Issue.record("decoded 7")
        } catch let e as LucidError {
            #expect(e.message == "unknown hook kind code 7; expected one of 0 (grad), 1 (post_accumulate)")
        }
        // A long enum lists its codes as ranges.
        #expect(validCodes(UnaryKernel.self) == "0...\(UnaryKernel.allCases.count - 1)")
        #expect(validCodes(AssignFlag.self) == "1 (fill), 2 (same_kind), 4 (result)")
        #expect(try decodeFlags(5, as: AssignFlag.self, "assign flag") == [.fill, .result])
        #expect(try decodeFlags(0, as: AssignFlag.self, "assign flag") == [])
        #expect(lucidErrorKind { _ = try decodeFlags(8 | 1, as: AssignFlag.self, "assign flag") } == .value)
    }

    @Test func anUnknownCodeIsAValueErrorThroughTheABI() throws {
        var record = [Int64](repeating: -1, count: Record.length)
        #expect(lucid_tensor_full([2], 1, 1.0, 0, 0, Self.float32, 7, &record) == Self.errValue)
        #expect(Self.lastError()?.hasPrefix("unknown device code 7; expected one of 0 (cpu), 1 (metal)") == true)
        #expect(lucid_tensor_full([2], 1, 1.0, 0, 9, Self.float32, Self.cpu, &record) == Self.errValue)
        #expect(Self.lastError()?.hasPrefix("unknown scalar kind code 9;") == true)
        #expect(record[Record.handle] == -1)
        var handle: UInt64 = 0
        #expect(guard_create(Self.cpu, 1, 42, &handle) == Self.errValue)
        #expect(Self.lastError()?.hasPrefix("unknown dtype code 42; expected one of 0 (float32)") == true)
        #expect(handle == 0)
    }
}
