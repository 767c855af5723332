#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import CHostKernels

/// How many threads the host kernels use: the engine's own parallel loops and oneDNN's OpenMP
/// pool, which they share (OpenBLAS runs on the thread that calls it: `BLAS.splitsProducts`;
/// Accelerate sizes its own). One process-wide setting, like
/// `torch.set_num_threads`; it starts at the number of online cores.
package enum HostThreads {
    private static let lock = Lock()
    nonisolated(unsafe) private static var count = onlineCores
    /// The most threads `set` accepts.
    package static let limit = 1024

    static var onlineCores: Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

    package static var current: Int { lock.withLock { count } }

    /// The vector unit the host loops built for several ones run on ("AVX512", "AVX2" or
    /// "DEFAULT"), as a C string that lives as long as the process.
    package static var cpuCapability: UnsafePointer<CChar> { lucid_host_cpu_capability() }

    /// Whether the parallel loops and oneDNN run on the calling thread alone for now, because
    /// another process was found keeping the cores busy (`lucid_host_solo`).
    package static var contended: Bool { lucid_host_solo() != 0 }

    package static func set(_ n: Int) throws {
        guard (1...limit).contains(n) else {
            throw LucidError.value("set_num_threads: expected a number of threads in 1...\(limit), got \(n)")
        }
        lock.withLock { count = n }
    }

    /// Below this many elements per thread a parallel loop costs more than it saves.
    static let grain = 1 << 16

    /// The same for a pass that only streams memory (a copy, a fill, a scan, a sum): it does
    /// so little per element that waking a sleeping thread (tens of microseconds under a
    /// passive OpenMP wait policy) pays off only past about a million elements.
    static let streamingGrain = 1 << 19

    /// Runs `body` over `0..<n` split into contiguous ranges (multiples of `align` items), on
    /// up to `current` threads when there are at least `grain` items per thread; inline
    /// otherwise.
    @inline(__always)
    static func forEachRange(_ n: Int, grain: Int = grain, align: Int = 64, _ body: (Range<Int>) -> Void) {
        guard n >= 2 * grain else { return body(0..<n) }
        let threads = min(current, n / grain)
        guard threads > 1 else { return body(0..<n) }
        let chunk = ((n + threads - 1) / threads + align - 1) / align * align
        withoutActuallyEscaping(body) { escapable in
            // The ranges are disjoint, and both runners return once all have run.
            nonisolated(unsafe) let work = escapable
            let part: @Sendable (Int) -> Void = { i in
                let lo = i * chunk, hi = min(n, lo + chunk)
                if lo < hi { work(lo..<hi) }
            }
            if !onOpenMPPool(threads, part) {
                DispatchQueue.concurrentPerform(iterations: threads, execute: part)
            }
        }
    }

    /// Runs `part(0..<parts)` on the OpenMP pool oneDNN uses, when one is loaded (Linux);
    /// false when there is none.
    private static func onOpenMPPool(_ parts: Int, _ part: (Int) -> Void) -> Bool {
        withoutActuallyEscaping(part) { escapable in
            var job = escapable
            return withUnsafeMutablePointer(to: &job) { pointer in
                lucid_host_parallel(parts, UInt32(parts), pointer) { context, i in
                    context!.assumingMemoryBound(to: ((Int) -> Void).self).pointee(i)
                } != 0
            }
        }
    }
}
