import Testing
@testable import LucidEngine

@Suite struct AllocatorTests {
    @Test func blockSizesRoundUpByAtMostAQuarter() {
        for n in [1, 63, 64, 65, 4096, 4097, 5000, 1 << 20, (1 << 20) + 1, 123_456_789] {
            let b = HostAllocator.blockSize(n)
            #expect(b >= n && b % 64 == 0)
            #expect(Double(b) <= max(Double(n) * 1.25, 64) + 64)
        }
        #expect(HostAllocator.blockSize(5000) == HostAllocator.blockSize(5100))  // one class
    }

    @Test func releasedBlocksAreReusedWithinTheLimit() throws {
        let a = HostAllocator(limit: 1 << 20)
        let (p, size) = try a.allocate(10_000)
        a.release(p, size: size)
        #expect(a.cachedBytes == size)
        let (q, _) = try a.allocate(9_000)  // same class: the same block comes back
        #expect(q == p)
        #expect(a.cachedBytes == 0)
        a.release(q, size: size)
        let (big, bigSize) = try a.allocate(2 << 20)
        a.release(big, size: bigSize)  // over the limit: not kept
        #expect(a.cachedBytes == size)
        a.emptyCache()
        #expect(a.cachedBytes == 0)
    }
}
