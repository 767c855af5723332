#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A caching allocator for host buffers. Freed blocks are kept in per-size free lists and
/// handed out again, so a training loop that makes the same shapes every step stops paying
/// for `malloc` and, above all, for first-touch page faults on fresh memory. Sizes are rounded
/// up to quarter steps between powers of two (at most 25% slack); at most `limit` bytes are
/// kept, beyond which freed blocks go back to the system.
final class HostAllocator: @unchecked Sendable {
    static let shared = HostAllocator(limit: HostAllocator.configuredLimit())

    /// The cache limit: `LUCID_CACHE_LIMIT_MB` (0 turns caching off), else 2 GiB.
    private static func configuredLimit() -> Int {
        if let raw = environmentValue("LUCID_CACHE_LIMIT_MB"), let mb = Int(raw), mb >= 0 { return mb << 20 }
        return 2 << 30
    }

    private let lock = Lock()
    /// Free blocks of up to `smallLimit` bytes, by size / 64 (their sizes are multiples of 64),
    /// so that a small tensor's block is found without hashing; larger ones by size.
    private static let smallLimit = 4096
    private var smallLists = [[UnsafeMutableRawPointer]](repeating: [], count: smallLimit / 64 + 1)
    private var freeLists: [Int: [UnsafeMutableRawPointer]] = [:]
    private var cached = 0
    /// Bytes held in free blocks.
    var cachedBytes: Int { lock.withLock { cached } }
    let limit: Int

    init(limit: Int) { self.limit = limit }

    /// The block size a request of `bytes` is served with.
    static func blockSize(_ bytes: Int) -> Int {
        let n = max(bytes, 64)
        if n <= 4096 { return (n + 63) & ~63 }
        let high = Int.bitWidth - 1 - n.leadingZeroBitCount  // 2^high <= n
        let quarter = 1 << (high - 2)
        return (n + quarter - 1) / quarter * quarter
    }

    /// A 64-byte aligned block of at least `bytes`, and its size.
    func allocate(_ bytes: Int) throws -> (UnsafeMutableRawPointer, Int) {
        let size = Self.blockSize(bytes)
        if let p = lock.withLock({ () -> UnsafeMutableRawPointer? in
            let found = size <= Self.smallLimit ? smallLists[size >> 6].popLast() : freeLists[size]?.popLast()
            guard let p = found else { return nil }
            cached -= size
            return p
        }) {
            return (p, size)
        }
        if let p = Self.system(size) { return (p, size) }
        emptyCache()  // give the cached blocks back and try once more
        guard let p = Self.system(size) else { throw LucidError.runtime("out of memory: could not allocate \(bytes) bytes") }
        return (p, size)
    }

    private static func system(_ size: Int) -> UnsafeMutableRawPointer? {
        var raw: UnsafeMutableRawPointer?
        return posix_memalign(&raw, 64, size) == 0 ? raw : nil
    }

    /// Returns a block from `allocate` to the cache (or to the system past the limit).
    func release(_ p: UnsafeMutableRawPointer, size: Int) {
        let kept = lock.withLock { () -> Bool in
            guard cached + size <= limit else { return false }
            if size <= Self.smallLimit {
                smallLists[size >> 6].append(p)
            } else {
                freeLists[size, default: []].append(p)
            }
            cached += size
            return true
        }
        if !kept { free(p) }
    }

    /// Frees every cached block.
    func emptyCache() {
        let blocks = lock.withLock { () -> [UnsafeMutableRawPointer] in
            let all = freeLists.values.flatMap { $0 } + smallLists.flatMap { $0 }
            freeLists.removeAll()
            for i in smallLists.indices { smallLists[i].removeAll() }
            cached = 0
            return all
        }
        for p in blocks { free(p) }
    }
}
