import Foundation
import Testing
@testable import LucidEngine

final class ResultBox<T>: @unchecked Sendable {
    var value: T?
}

/// Runs `body` on a new thread and waits for it.
func onNewThread<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
    let box = ResultBox<T>()
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        box.value = body()
        done.signal()
    }
    thread.start()
    done.wait()
    return box.value!
}

/// Waits until `condition` holds (thread-exit cleanup runs just after the thread's body).
func eventually(_ condition: () -> Bool) -> Bool {
    for _ in 0..<1000 where !condition() { usleep(2000) }
    return condition()
}

@Suite(.serialized) struct SwiftAutocastTests {
    let a: Tensor
    let w: Tensor

    init() throws {
        a = try Tensor([1, 2, 3, 4, 5, 6], shape: [2, 3], device: .metal)
        w = try Tensor([1, 0, -1, 2, 1, 0], shape: [3, 2], device: .metal)
    }

    @Test func closureFormCastsLowerPrecisionOps() throws {
        let y = try withAutocast(.metal, dtype: .float16) { try a.matmul(w) }
        #expect(y.dtype == .float16)
        #expect(try y.toArray() == [2, 4, 5, 10])  // small integers: exact in float16
        #expect(!Autocast.isEnabled(.metal))
        #expect(try a.matmul(w).dtype == .float32)
    }

    @Test func nestedGuardsRestoreTheOuterDType() throws {
        let outer = try AutocastGuard(.metal, dtype: .float16)
        #expect(Autocast.dtype(.metal) == .float16)
        do {
            let inner = try AutocastGuard(.metal, dtype: .bfloat16)
            #expect(Autocast.dtype(.metal) == .bfloat16)
            #expect(try a.matmul(w).dtype == .bfloat16)
            #expect(inner.replaced == AutocastSetting(enabled: true, dtype: .float16))
            try inner.close()
        }
        #expect(Autocast.dtype(.metal) == .float16)
        try outer.close()
        #expect(Autocast.dtype(.metal) == nil)
    }

    @Test func releasingAGuardLeavesItsScope() throws {
        do {
            let scope = try AutocastGuard(.metal, dtype: .bfloat16)
            #expect(Autocast.isEnabled(.metal))
            _ = scope
        }
        #expect(!Autocast.isEnabled(.metal))
    }

    @Test func closureFormRestoresOnThrow() throws {
        struct Boom: Error {}
        #expect(throws: Boom.self) {
            try withAutocast(.metal) { throw Boom() }
        }
        #expect(!Autocast.isEnabled())
    }

    @Test func disabledScopeLeavesTheOtherDeviceAlone() throws {
        try withAutocast(.cpu, dtype: .bfloat16) {
            try withAutocast(.metal, dtype: .float16) {
                try withAutocast(.metal, enabled: false) {
                    #expect(!Autocast.isEnabled(.metal))
                    #expect(Autocast.dtype(.cpu) == .bfloat16)
                    let y = try a.matmul(w)
                    #expect(y.dtype == .float32)
                }
                #expect(Autocast.dtype(.metal) == .float16)
            }
        }
    }

    @Test func cpuFloat16ChangesNothingWhileBFloat16Reduces() throws {
        let c = try Tensor([1, 2, 3, 4], shape: [2, 2])
        try withAutocast(.cpu) {
            #expect(Autocast.dtype(.cpu) == .float16)
            let y = try c.matmul(c)
            #expect(y.dtype == .float32)
        }
        let y = try withAutocast(.cpu, dtype: .bfloat16) { try c.matmul(c) }
        #expect(y.dtype == .bfloat16)
        #expect(try y.toArray() == [7, 10, 15, 22])
    }

    @Test func outOfOrderCloseKeepsTheInnermostLiveScope() throws {
        let first = try AutocastGuard(.metal, dtype: .float16)
        let second = try AutocastGuard(.metal, dtype: .bfloat16)
        try first.close()
        #expect(Autocast.dtype(.metal) == .bfloat16)
        try second.close()
        #expect(!Autocast.isEnabled())
    }

    @Test func closingOnAnotherThreadThrowsAndChangesNothing() throws {
        let scope = try AutocastGuard(.metal, dtype: .bfloat16)
        let id = scope.id
        let outcome = onNewThread { () -> (LucidError.Kind?, DType?) in
            do {
                try Autocast.exitScope(id)
                return (nil, Autocast.dtype(.metal))
            } catch let e as LucidError {
                return (e.kind, Autocast.dtype(.metal))
            } catch {
                return (nil, nil)
            }
        }
        #expect(outcome.0 == .thread)
        #expect(outcome.1 == nil)  // the other thread never saw the scope
        #expect(Autocast.dtype(.metal) == .bfloat16)
        try scope.close()
        #expect(!Autocast.isEnabled())
    }

    @Test func aScopeWhoseThreadEndedIsStale() throws {
        let before = Autocast.liveScopes
        let id = onNewThread { try? Autocast.enterScope(.cpu, dtype: .bfloat16) }
        let stale = try #require(id)
        #expect(eventually { Autocast.liveScopes == before })
        #expect(throws: LucidError.self) { try Autocast.exitScope(stale) }
        #expect(!Autocast.isEnabled())
    }

    @Test func newThreadsStartWithAutocastOff() throws {
        try withAutocast(.metal, dtype: .bfloat16) {
            #expect(onNewThread { Autocast.isEnabled() } == false)
        }
    }

    @Test func invalidDTypeIsAValueError() {
        do {
            _ = try AutocastGuard(.metal, dtype: .int32)
            Issue.record("expected an error")
        } catch let e as LucidError {
            #expect(e.kind == .value)
            #expect(e.message.contains("int32"))
        } catch {
            Issue.record("unexpected \(error)")
        }
        #expect(!Autocast.isEnabled())
    }

    @Test func queriesWithoutADeviceFollowTheInnermostEnablingScope() throws {
        #expect(Autocast.dtype() == nil)
        try withAutocast(.cpu, dtype: .bfloat16) {
            try withAutocast(.metal, dtype: .float16) {
                #expect(Autocast.dtype() == .float16)
                try withAutocast(.metal, enabled: false) {
                    #expect(Autocast.dtype() == .bfloat16)
                    #expect(Autocast.isEnabled())
                }
            }
        }
        #expect(!Autocast.isEnabled())
    }

    @Test func policyTableDeclaresTheAMPClasses() {
        #expect(OpTable.info("matmul")?.policy == .lowerPrecision)
        #expect(OpTable.info("linear")?.policy == .lowerPrecision)
        #expect(OpTable.info("sum")?.policy == .float32)
        #expect(OpTable.info("add")?.policy == CastPolicy.none)
        #expect(OpTable.info("nope") == nil)
    }
}
