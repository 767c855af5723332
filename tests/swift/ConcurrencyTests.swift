import Dispatch
import Testing
@testable import LucidEngine

/// Several threads at once through the engine's shared state: the threaded host loops, the
/// allocator, oneDNN's primitive caches, each thread's autocast scopes and weight cache, and
/// the thread-count setting changing underneath. Run under `swift test --sanitize=thread`
/// this is the data-race check; here each thread also checks its own results.
@Suite struct ConcurrencyTests {
    /// Small integers: sums and products of them are exact in float32 and bfloat16.
    static func values(_ n: Int, _ seed: Int) -> [Float] { (0..<n).map { Float(($0 &* 7 &+ seed) % 17) - 8 } }

    @Test func threadsShareKernelsScopesAndCachesSafely() throws {
        let n = 300_000  // above the parallel loops' threshold, so loops nest in threads
        let weight = try Tensor(Self.values(32 * 32, 1), shape: [32, 32]).requiringGrad()
        let failures = Failures()
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            do {
                for round in 0..<6 {
                    if worker == 0 { try HostThreads.set(round % 2 + 1) }
                    let xs = Self.values(n, worker &+ round)
                    let x = try Tensor(xs, shape: [n])
                    let want = xs.reduce(0, +)
                    try failures.check(try (x + x).sum().item() == 2 * want, "add on worker \(worker)")
                    try failures.check(try (x * 3).to(.bfloat16).relu().to(.float32).sum().item()
                                       == 3 * xs.reduce(0) { $0 + max($1, 0) }, "bf16 relu on worker \(worker)")
                    // A scope per thread, with the shared parameter read twice: one cached cast each.
                    let a = try Tensor(Self.values(8 * 32, worker), shape: [8, 32])
                    let guardScope = try AutocastGuard(.cpu, dtype: .bfloat16)
                    let y = try a.linear(weight).relu().sum()
                    let z = try a.matmul(try weight.transpose(0, 1)).sum()
                    try failures.check(Autocast.cachedCasts == 1, "weight cache on worker \(worker)")
                    try guardScope.close()
                    try failures.check(Autocast.cachedCasts == 0 && !Autocast.isEnabled(), "scope exit on worker \(worker)")
                    try (try y.to(.float32) + (try z.to(.float32))).backward()
                    let pooled = try Tensor(Self.values(2 * 4 * 16 * 16, worker), shape: [2, 4, 16, 16]).maxPool2d(2)
                    try failures.check(pooled.shape == [2, 4, 8, 8], "max pool on worker \(worker)")
                }
            } catch {
                failures.record("worker \(worker): \(error)")
            }
        }
        try HostThreads.set(HostThreads.onlineCores)
        #expect(failures.messages.isEmpty, "\(failures.messages)")
        #expect(weight.grad != nil)
    }
}

extension ConcurrencyTests {
    @Test func backwardPassesOnSeveralThreadsAllReachASharedLeaf() throws {
        let w = try Tensor([Float](repeating: 1, count: 200_000), shape: [200_000]).requiringGrad()
        let failures = Failures()
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            do {
                for _ in 0..<25 {
                    try (w * Double(worker + 1)).sum().backward()
                }
            } catch {
                failures.record("worker \(worker): \(error)")
            }
        }
        #expect(failures.messages.isEmpty, "\(failures.messages)")
        // 25 passes from each worker, of gradient 1, 2, 3 and 4.
        #expect(try w.grad?.toArray() == [Float](repeating: 250, count: 200_000))
    }
}

/// Collects failures from worker threads.
private final class Failures: @unchecked Sendable {
    private let lock = Lock()
    private var list: [String] = []
    var messages: [String] { lock.withLock { list } }
    func record(_ m: String) { lock.withLock { list.append(m) } }
    func check(_ ok: Bool, _ what: String) throws { if !ok { record(what) } }
}
