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
                    try failures.check(
                        try (x * 3).to(.bfloat16).relu().to(.float32).sum().item()
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
extension ConcurrencyTests {
    /// In-place writes from several threads: each writes its own tensors (recorded and not,
    /// through views, with the version check in backward), its own elements of one shared
    /// buffer, and reads a shared tensor; the graph, the allocator, the version counters and
    /// the autocast cache are shared. Under the thread sanitizer this is the race check.
    @Test func inPlaceWritesOnSeveralThreadsKeepTheEngineWhole() throws {
        let workers = 4, rounds = 20
        let shared = try Tensor.zeros([workers * rounds])
        let reads = try Tensor(Self.values(64, 3), shape: [64])
        let failures = Failures()
        DispatchQueue.concurrentPerform(iterations: workers) { worker in
            do {
                for round in 0..<rounds {
                    // Unrecorded: arithmetic in place, a fill and an element of the shared buffer.
                    let buf = try Tensor.zeros([64])
                    try InPlace.binary(.add, buf.impl, reads.impl, alpha: 2, op: "add_")
                    try InPlace.binary(.mul, buf.impl, scalar: ScalarOperand(float: 0.5), op: "mul_")
                    try failures.check(try buf.toArray() == (try reads.toArray()), "add_/mul_ on worker \(worker)")
                    let index = [worker * rounds + round]
                    try index.withUnsafeBufferPointer {
                        try InPlace.setElement(shared.impl, $0, ScalarOperand(float: Double(worker + 1)), op: "__setitem__")
                    }
                    // Recorded: a write through a view reaches its base's history.
                    let x = try Tensor(Self.values(6, worker &+ round), shape: [2, 3]).requiringGrad()
                    let y = try x * 1
                    let row = try GradMode.with(false) { try Indexing.subscripted(y.impl, [.int(0)]) }
                    let square = try Indexing.subscripted(try (x * x).impl, [.int(0)])  // recorded
                    let newY = try #require(try InPlace.assign(row, square, base: y.impl, op: "copy_"))
                    try Tensor(newY).sum().backward()
                    let xs = Self.values(6, worker &+ round)
                    let want: [Float] = (0..<6).map { $0 < 3 ? 2 * xs[$0] : 1 }
                    try failures.check(try x.grad?.toArray() == want, "CopySlices gradient on worker \(worker)")
                    // A saved tensor written since is refused.
                    let e = try x.exp()
                    try GradMode.with(false) { _ = try InPlace.fill(e.impl, ScalarOperand(float: 0), base: nil, op: "fill_") }
                    try failures.check(lucidErrorKind { try e.sum().backward() } == .runtime, "version check on worker \(worker)")
                }
            } catch {
                failures.record("worker \(worker): \(error)")
            }
        }
        #expect(failures.messages.isEmpty, "\(failures.messages)")
        let written = try shared.toArray()
        #expect(written == (0..<workers).flatMap { w in [Float](repeating: Float(w + 1), count: rounds) })
    }
}

private final class Failures: @unchecked Sendable {
    private let lock = Lock()
    private var list: [String] = []
    var messages: [String] { lock.withLock { list } }
    func record(_ m: String) { lock.withLock { list.append(m) } }
    func check(_ ok: Bool, _ what: String) throws { if !ok { record(what) } }
}
