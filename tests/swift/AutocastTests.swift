import Testing
@testable import LucidEngine

/// Autocast as a Swift caller sees it: `withAutocast`, `AutocastGuard` and the `Autocast`
/// queries, all on the calling thread's state.
@Suite struct AutocastTests {
    /// x [2, 3] · w [3, 2] on the metal device, small integers so every dtype is exact.
    static let xValues: [Float] = [1, 2, 3, 4, 5, 6]
    static let wValues: [Float] = [1, 0, -1, 2, 1, 0]
    static let product: [Float] = [2, 4, 5, 10]  // [[1-2+3·1, 0+4+0], [4-5+6, 0+10+0]]

    static func operands(_ device: Device = .metal) throws -> (Tensor, Tensor) {
        (try Tensor(xValues, shape: [2, 3], device: device), try Tensor(wValues, shape: [3, 2], device: device))
    }

    // MARK: withAutocast

    @Test func withAutocastMetalFloat16GivesFloat16Matmul() throws {
        let (x, w) = try Self.operands()
        #expect(Autocast.dtype(.metal) == nil)
        let y = try withAutocast(.metal, dtype: .float16) { try x.matmul(w) }
        #expect(y.dtype == .float16)
        #expect(y.device == .metal)
        #expect(y.shape == [2, 2])
        #expect(try y.toArray() == Self.product)
        // Leaving the scope turns autocast back off.
        #expect(!Autocast.isEnabled(.metal))
        #expect(Autocast.dtype(.metal) == nil)
        #expect(try x.matmul(w).dtype == .float32)
    }

    @Test func aScopesOverridesChangeTheNamedOpsWhileItIsLiveAndNestedScopesCompose() throws {
        let (x, w) = try Self.operands()
        let outer = try AutocastGuard(.metal, dtype: .float16)
        try outer.override("matmul", .float32)
        #expect(try x.matmul(w).dtype == .float32)
        #expect(try Autocast.effectivePolicy("matmul", device: .metal) == .float32)
        #expect(try Autocast.effectivePolicy("matmul", device: .cpu) == .lowerPrecision)  // another device
        let inner = try AutocastGuard(.metal, dtype: .float16)
        try inner.override("matmul", .lowerPrecision)  // the inner scope's wins
        #expect(try x.matmul(w).dtype == .float16)
        try inner.close()
        #expect(try x.matmul(w).dtype == .float32)
        #expect(throws: LucidError.self) { try outer.override("no_such_op", .float32) }
        // A view, `to` and the LAPACK decompositions cannot be given what they cannot follow.
        for (op, policy) in [
            ("reshape", CastPolicy.float32), ("to", .lowerPrecision), ("linalg_qr", .lowerPrecision),
            ("sum", .view),
        ] {
            #expect(throws: LucidError.self) { try outer.override(op, policy) }
        }
        #expect(try Autocast.effectivePolicy("reshape", device: .metal) == .view)
        try outer.close()
        #expect(try Autocast.effectivePolicy("matmul") == .lowerPrecision)
        #expect(try x.matmul(w).dtype == .float32)  // autocast off
    }

    @Test func anInspectionCountsTheValuesOfTheOpsThatRanInALowerPrecision() throws {
        // x holds 1e5 (past float16's range), 1e-6 (below its normals) and 0; w is exact.
        let x = try Tensor([1e5, 1e-6, 0, 1, 2, 3], shape: [2, 3], device: .metal)
        let w = try Tensor(Self.wValues, shape: [3, 2], device: .metal)
        let id = AutocastInspection.begin()
        AutocastInspection.setModule("encoder.proj")
        _ = try withAutocast(.metal, dtype: .float16) { try x.matmul(w) }
        _ = try x.matmul(w)  // outside autocast: not counted
        AutocastInspection.setModule("")
        let report = try AutocastInspection.end(id)
        #expect(report.count == 1)
        let e = try #require(report.first)
        #expect(e.op == "matmul" && e.module == "encoder.proj" && e.dtype == .float16 && e.calls == 1)
        #expect(e.inputElements == 12 && e.resultElements == 4)
        #expect(e.inputs.maxAbs == 1e5)
        #expect(e.inputs[.overflowFloat16] == 1 && e.inputs[.underflowFloat16] == 1)
        #expect(e.inputs[.overflowBFloat16] == 0 && e.inputs[.underflowBFloat16] == 0)
        #expect(e.inputs[.nonzero] == 9 && e.inputs[.nonfinite] == 0)
        // 1e5 became inf in the cast, and the product row that read it is inf or NaN.
        #expect(e.results[.nonfinite] == 2)
        #expect(throws: LucidError.self) { _ = try AutocastInspection.end(id) }  // ended already
    }

    @Test func withAutocastDefaultsToFloat16AndCoversLinear() throws {
        let (x, _) = try Self.operands()
        let weight = try Tensor([1, 1, 1, 0, 1, 0], shape: [2, 3], device: .metal)
        let bias = try Tensor([0.5, -0.5], shape: [2], device: .metal)
        let y = try withAutocast(.metal) { try x.linear(weight, bias: bias) }
        #expect(y.dtype == .float16)
        #expect(try y.toArray() == [6.5, 1.5, 15.5, 4.5])
        #expect(try x.linear(weight, bias: bias).dtype == .float32)
    }

    @Test func withAutocastFloat16MatchesARoundedReference() throws {
        // Inputs that are not exact in float16: the result must be the float16 rounding of
        // the product of the float16-rounded inputs (float32 accumulation, one rounding).
        let m = 3, k = 8, n = 4
        let a = Reference.values(m * k, seed: 11), b = Reference.values(k * n, seed: 12)
        let x = try Tensor(a, shape: [m, k], device: .metal), w = try Tensor(b, shape: [k, n], device: .metal)
        let y = try withAutocast(.metal, dtype: .float16) { try x.matmul(w) }
        #expect(y.dtype == .float16)
        let ah = a.map { Double(Reference.roundToHalf($0)) }, bh = b.map { Double(Reference.roundToHalf($0)) }
        let ref = Reference.matmul(ah, bh, m: m, k: k, n: n).map { Reference.roundToHalf(Float($0)) }
        let got = try y.toArray()
        for (g, r) in zip(got, ref) {
            #expect(abs(g - r) <= Float(Float16(r).ulp), "got \(g), reference \(r)")
        }
    }

    @Test func withAutocastFloat32TargetRunsLowPrecisionInputsInFloat32() throws {
        let x = try Tensor(Self.xValues, shape: [2, 3], dtype: .float16, device: .metal)
        let w = try Tensor(Self.wValues, shape: [3, 2], dtype: .float16, device: .metal)
        let y = try withAutocast(.metal, dtype: .float32) { try x.matmul(w) }
        #expect(y.dtype == .float32)
        #expect(try y.toArray() == Self.product)
    }

    @Test func withAutocastRestoresTheStateWhenTheBodyThrows() throws {
        struct Boom: Error {}
        let outer = try AutocastGuard(.metal, dtype: .bfloat16)
        defer { try? outer.close() }
        #expect(throws: Boom.self) {
            try withAutocast(.metal, dtype: .float16) {
                #expect(Autocast.dtype(.metal) == .float16)
                throw Boom()
            }
        }
        #expect(Autocast.dtype(.metal) == .bfloat16)
        try outer.close()
        #expect(!Autocast.isEnabled())
    }

    // MARK: AutocastGuard

    @Test func nestedGuardsFloat16ThenBFloat16RestoreFloat16() throws {
        let (x, w) = try Self.operands()
        let outer = try AutocastGuard(.metal, dtype: .float16)
        #expect(outer.replaced == .off)
        #expect(outer.setting == AutocastSetting(enabled: true, dtype: .float16))
        #expect(Autocast.dtype(.metal) == .float16)
        #expect(try x.matmul(w).dtype == .float16)

        let inner = try AutocastGuard(.metal, dtype: .bfloat16)
        #expect(inner.replaced == AutocastSetting(enabled: true, dtype: .float16))
        #expect(Autocast.dtype(.metal) == .bfloat16)
        let mid = try x.matmul(w)
        #expect(mid.dtype == .bfloat16)
        #expect(try mid.toArray() == Self.product)

        try inner.close()
        #expect(Autocast.dtype(.metal) == .float16)
        #expect(try x.matmul(w).dtype == .float16)
        try inner.close()  // a second close is a no-op
        #expect(Autocast.dtype(.metal) == .float16)

        try outer.close()
        #expect(Autocast.dtype(.metal) == nil)
        #expect(try x.matmul(w).dtype == .float32)
    }

    @Test func releasingAGuardWithoutClosingLeavesItsScope() throws {
        func enterAndDrop() throws {
            let scope = try AutocastGuard(.cpu, dtype: .bfloat16)
            #expect(Autocast.dtype(.cpu) == .bfloat16)
            _ = scope
        }
        try enterAndDrop()
        #expect(Autocast.dtype(.cpu) == nil)
    }

    @Test func disabledMetalScopeLeavesCPUUntouched() throws {
        let (x, w) = try Self.operands()
        let (cx, cw) = try Self.operands(.cpu)
        try withAutocast(.cpu, dtype: .bfloat16) {
            try withAutocast(.metal, dtype: .float16) {
                try withAutocast(.metal, enabled: false) { () throws in
                    #expect(!Autocast.isEnabled(.metal))
                    #expect(Autocast.dtype(.metal) == nil)
                    #expect(Autocast.isEnabled(.cpu))
                    #expect(Autocast.dtype(.cpu) == .bfloat16)
                    #expect(try x.matmul(w).dtype == .float32)
                    #expect(try cx.matmul(cw).dtype == .bfloat16)
                }
                #expect(Autocast.dtype(.metal) == .float16)
                #expect(Autocast.dtype(.cpu) == .bfloat16)
            }
        }
        // With nothing active, a disabled metal scope leaves cpu off as well.
        try withAutocast(.metal, dtype: .float16, enabled: false) {
            #expect(!Autocast.isEnabled(.metal))
            #expect(!Autocast.isEnabled(.cpu))
            #expect(Autocast.dtype(.cpu) == nil)
        }
        #expect(!Autocast.isEnabled())
    }

    @Test func cpuScopeWithDefaultFloat16ChangesNothing() throws {
        let (cx, cw) = try Self.operands(.cpu)
        let weight = try Tensor([1, 1, 1, 0, 1, 0], shape: [2, 3])
        try withAutocast(.cpu) {
            // The query reports what the scope was given, even though nothing is cast.
            #expect(Autocast.dtype(.cpu) == .float16)
            #expect(Autocast.isEnabled(.cpu))
            let y = try cx.matmul(cw)
            #expect(y.dtype == .float32)
            #expect(try y.toArray() == Self.product)
            #expect(try cx.linear(weight).dtype == .float32)
            // A cpu scope does not reach the metal device.
            let (x, w) = try Self.operands()
            #expect(try x.matmul(w).dtype == .float32)
        }
    }

    @Test func cpuScopeWithBFloat16Reduces() throws {
        let (cx, cw) = try Self.operands(.cpu)
        let weight = try Tensor([1, 1, 1, 0, 1, 0], shape: [2, 3])
        let (y, l) = try withAutocast(.cpu, dtype: .bfloat16) { (try cx.matmul(cw), try cx.linear(weight)) }
        #expect(y.dtype == .bfloat16)
        #expect(y.device == .cpu)
        #expect(try y.toArray() == Self.product)
        #expect(l.dtype == .bfloat16)
        #expect(try l.toArray() == [6, 2, 15, 5])
        #expect(try cx.matmul(cw).dtype == .float32)
    }

    @Test func reductionsOfLowPrecisionInputRunInFloat32UnderAutocast() throws {
        let h = try Tensor([1, 2, 3, 4], shape: [2, 2], dtype: .float16, device: .metal)
        #expect(try h.sum().dtype == .float16)  // no autocast: keeps its dtype
        let (s, m) = try withAutocast(.metal) { (try h.sum(), try h.mean(dims: [0])) }
        #expect(s.dtype == .float32)
        #expect(try s.item() == 10)
        #expect(m.dtype == .float32)
        #expect(try m.toArray() == [2, 3])
        let b = try Tensor([1, 2, 3, 4], shape: [4], dtype: .bfloat16)
        #expect(try withAutocast(.cpu, dtype: .bfloat16) { try b.sum() }.dtype == .float32)
    }

    @Test func outOfOrderCloseKeepsTheInnermostLiveGuard() throws {
        let first = try AutocastGuard(.metal, dtype: .float16)
        let second = try AutocastGuard(.metal, dtype: .bfloat16)
        try first.close()
        #expect(Autocast.dtype(.metal) == .bfloat16)
        #expect(Autocast.isEnabled(.metal))
        let (x, w) = try Self.operands()
        #expect(try x.matmul(w).dtype == .bfloat16)
        try second.close()
        #expect(!Autocast.isEnabled())
        #expect(Autocast.dtype(.metal) == nil)
        #expect(Autocast.dtype() == nil)
    }

    @Test func outOfOrderCloseOfAMiddleGuardKeepsTheInnermost() throws {
        let a = try AutocastGuard(.metal, dtype: .float16)
        let b = try AutocastGuard(.metal, dtype: .bfloat16)
        let c = try AutocastGuard(.metal, dtype: .float32)
        try b.close()
        #expect(Autocast.dtype(.metal) == .float32)
        try c.close()
        #expect(Autocast.dtype(.metal) == .float16)
        try a.close()
        #expect(!Autocast.isEnabled())
    }

    @Test func outOfOrderCloseAcrossDevices() throws {
        let metal = try AutocastGuard(.metal, dtype: .float16)
        let cpu = try AutocastGuard(.cpu, dtype: .bfloat16)
        try metal.close()
        #expect(Autocast.dtype(.metal) == nil)
        #expect(Autocast.dtype(.cpu) == .bfloat16)
        try cpu.close()
        #expect(!Autocast.isEnabled())
    }

    @Test func outOfOrderCloseOfAnEnablingGuardUnderADisablingOne() throws {
        let on = try AutocastGuard(.metal, dtype: .bfloat16)
        let off = try AutocastGuard(.metal, enabled: false)
        try on.close()
        #expect(!Autocast.isEnabled(.metal))  // the disabling guard is the innermost alive
        try off.close()
        #expect(!Autocast.isEnabled(.metal))
        #expect(Autocast.dtype() == nil)
    }

    // MARK: Threads

    @Test func closingOnAnotherThreadThrowsThreadAndChangesNothing() throws {
        let scope = try AutocastGuard(.metal, dtype: .bfloat16)
        defer { try? scope.close() }
        let seen = runOnJoinedThread { () -> (LucidError.Kind?, DType?, Bool) in
            (lucidErrorKind { try scope.close() }, Autocast.dtype(.metal), Autocast.isEnabled())
        }
        #expect(seen.0 == .thread)
        #expect(seen.1 == nil)  // the other thread never had the scope
        #expect(seen.2 == false)
        // Nothing changed here: the scope is still active and still closes normally.
        #expect(Autocast.dtype(.metal) == .bfloat16)
        let (x, w) = try Self.operands()
        #expect(try x.matmul(w).dtype == .bfloat16)
        try scope.close()
        #expect(!Autocast.isEnabled())
    }

    @Test func closingOnAThreadWithItsOwnScopesThrowsAndLeavesBothAlone() throws {
        let scope = try AutocastGuard(.metal, dtype: .float16)
        defer { try? scope.close() }
        let seen = runOnJoinedThread { () -> (LucidError.Kind?, DType?, DType?) in
            guard let own = try? AutocastGuard(.cpu, dtype: .bfloat16) else { return (nil, nil, nil) }
            let kind = lucidErrorKind { try Autocast.exitScope(scope.id) }
            let after = (Autocast.dtype(.cpu), Autocast.dtype(.metal))
            try? own.close()
            return (kind, after.0, after.1)
        }
        #expect(seen.0 == .thread)
        #expect(seen.1 == .bfloat16)
        #expect(seen.2 == nil)
        #expect(Autocast.dtype(.metal) == .float16)
        #expect(Autocast.dtype(.cpu) == nil)
        try scope.close()
        #expect(!Autocast.isEnabled())
    }

    @Test func aGuardCreatedOnAThreadThatEndedIsStale() throws {
        let made = runOnJoinedThread { () -> (AutocastGuard?, DType?) in
            let g = try? AutocastGuard(.cpu, dtype: .bfloat16)
            return (g, Autocast.dtype(.cpu))
        }
        let stale = try #require(made.0)
        #expect(made.1 == .bfloat16)
        // The ended thread's scope is not ours and is no longer live anywhere.
        #expect(Autocast.dtype(.cpu) == nil)
        #expect(lucidErrorKind { try stale.close() } == .handle)
        #expect(lucidErrorKind { try Autocast.exitScope(stale.id) } == .handle)
        // And it is harmless: scopes here work as usual around it.
        let here = try AutocastGuard(.cpu, dtype: .bfloat16)
        #expect(here.id != stale.id)
        #expect(lucidErrorKind { try stale.close() } == .handle)
        #expect(Autocast.dtype(.cpu) == .bfloat16)
        try here.close()
        #expect(!Autocast.isEnabled())
    }

    @Test func aNewThreadStartsWithAutocastOffAndKeepsItsScopesToItself() throws {
        try withAutocast(.metal, dtype: .bfloat16) {
            let seen = runOnJoinedThread { () -> (Bool, DType?, DType?) in
                let before = (Autocast.isEnabled(), Autocast.dtype())
                let inside = try? withAutocast(.metal, dtype: .float16) { Autocast.dtype(.metal) }
                return (before.0, before.1, inside)
            }
            #expect(seen.0 == false)
            #expect(seen.1 == nil)
            #expect(seen.2 == .float16)
            #expect(Autocast.dtype(.metal) == .bfloat16)
        }
    }

    // MARK: Validation and queries

    @Test(arguments: [DType.int32, .int64, .bool])
    func anInvalidDTypeIsAValueErrorAndChangesNothing(_ dtype: DType) throws {
        try withAutocast(.metal, dtype: .bfloat16) {
            #expect(lucidErrorKind { _ = try AutocastGuard(.metal, dtype: dtype) } == .value)
            #expect(lucidErrorKind { _ = try AutocastGuard(.cpu, dtype: dtype, enabled: false) } == .value)
            #expect(lucidErrorKind { _ = try Autocast.enterScope(.cpu, dtype: dtype) } == .value)
            var ran = false
            #expect(lucidErrorKind { try withAutocast(.metal, dtype: dtype) { ran = true } } == .value)
            #expect(!ran)
            #expect(Autocast.dtype(.metal) == .bfloat16)
            #expect(Autocast.dtype(.cpu) == nil)
        }
        #expect(!Autocast.isEnabled())
    }

    @Test func theInvalidDTypeErrorNamesTheDType() throws {
        let error = try #require(lucidError { _ = try AutocastGuard(.metal, dtype: .int32) })
        #expect(error.kind == .value)
        #expect(error.message.contains("int32"))
    }

    @Test func queriesWithoutADeviceFollowTheMostRecentEnablingScope() throws {
        #expect(!Autocast.isEnabled())
        #expect(Autocast.dtype() == nil)
        try withAutocast(.cpu, dtype: .bfloat16) {
            #expect(Autocast.isEnabled())
            #expect(Autocast.dtype() == .bfloat16)
            try withAutocast(.metal, dtype: .float16) {
                #expect(Autocast.dtype() == .float16)
                try withAutocast(.metal, enabled: false) {
                    // metal is off now; the most recent scope still switching autocast on is cpu's.
                    #expect(Autocast.isEnabled())
                    #expect(Autocast.dtype() == .bfloat16)
                    try withAutocast(.cpu, enabled: false) {
                        #expect(!Autocast.isEnabled())
                        #expect(Autocast.dtype() == nil)
                    }
                }
            }
        }
        #expect(!Autocast.isEnabled())
        #expect(Autocast.dtype() == nil)
    }

    @Test func queriesWithoutADeviceReportACPUScopesGivenDType() throws {
        let metal = try AutocastGuard(.metal, dtype: .bfloat16)
        let cpu = try AutocastGuard(.cpu)
        #expect(Autocast.dtype() == .float16)  // the cpu scope is the most recent
        try cpu.close()
        #expect(Autocast.dtype() == .bfloat16)
        try metal.close()
        #expect(Autocast.dtype() == nil)
    }

    @Test func queriesWithoutADeviceAfterAnOutOfOrderClose() throws {
        let metal = try AutocastGuard(.metal, dtype: .float16)
        let cpu = try AutocastGuard(.cpu, dtype: .bfloat16)
        try metal.close()
        #expect(Autocast.isEnabled())
        #expect(Autocast.dtype() == .bfloat16)
        try cpu.close()
        #expect(!Autocast.isEnabled())
        #expect(Autocast.dtype() == nil)
    }

    @Test func theTargetDTypesAreFloat16BFloat16AndFloat32() throws {
        #expect(Set(Autocast.targetDTypes) == [.float16, .bfloat16, .float32])
        #expect(try Autocast.validatedDType(nil) == .float16)
        for d in DType.allCases where !Autocast.targetDTypes.contains(d) {
            #expect(lucidErrorKind { _ = try Autocast.validatedDType(d) } == .value)
        }
    }

    // MARK: Op table

    @Test func opTableListsMatmulAndLinearAsLowerPrecisionAndSumAsFloat32() throws {
        let byName = Dictionary(OpTable.all.map { ($0.name, $0.policy) }, uniquingKeysWith: { a, _ in a })
        #expect(byName["matmul"] == .lowerPrecision)
        #expect(byName["linear"] == .lowerPrecision)
        #expect(byName["sum"] == .float32)
        #expect(byName["mean"] == .float32)
        #expect(byName["add"] == CastPolicy.none)
        #expect(OpTable.info("matmul")?.policy == .lowerPrecision)
        #expect(OpTable.info("linear")?.policy == .lowerPrecision)
        #expect(OpTable.info("sum")?.policy == .float32)
        #expect(OpTable.info("no_such_op") == nil)
        #expect(Set(OpTable.all.map(\.name)).count == OpTable.all.count)  // names are unique
        #expect(CastPolicy.lowerPrecision.description == "lower_precision")
    }

    @Test func metalIsAvailableWhereTheMetalBackendIsBuilt() {
        // The Linux product has no Metal backend; the check build (LUCID_METAL_EMULATION=1)
        // and Apple builds have one.
        #if canImport(Metal)
        #expect(Metal.isAvailable)
        #else
        #expect(!Metal.isAvailable)
        #endif
        #expect(Device.metal.description == "metal" && Device.cpu.description == "cpu")
        #expect(DType.float16.description == "lucid.float16")
    }
}
