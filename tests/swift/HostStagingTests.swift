import Testing
@testable import LucidEngine

/// Memory the host cannot address, as a discrete GPU's: its bytes are reached by whole-buffer
/// copies only (counted), or by its own backend's device-side work.
private final class SeparateBuffer: DeviceBuffer, @unchecked Sendable {
    let byteCount: Int
    /// The device's side of the memory: only `SeparateMemoryBackend` touches it directly.
    let deviceMemory: UnsafeMutableRawPointer
    private let lock = Lock()
    private var copiesOut = 0, copiesIn = 0

    init(byteCount: Int) {
        self.byteCount = byteCount
        deviceMemory = .allocate(byteCount: max(byteCount, 1), alignment: 64)
    }

    deinit { deviceMemory.deallocate() }

    var hostContents: UnsafeMutableRawPointer? { nil }

    func copy(to dst: UnsafeMutableRawPointer) {
        dst.copyMemory(from: deviceMemory, byteCount: byteCount)
        lock.withLock { copiesOut += 1 }
    }

    func copy(from src: UnsafeRawPointer) {
        deviceMemory.copyMemory(from: src, byteCount: byteCount)
        lock.withLock { copiesIn += 1 }
    }

    /// How many times the buffer was copied out to the host and back in.
    var copies: (out: Int, in: Int) { lock.withLock { (copiesOut, copiesIn) } }
}

/// A host-visible alias of a `SeparateBuffer`'s device memory, for the backend's own
/// device-side work (its fills and copies).
private final class DeviceSideView: DeviceBuffer, @unchecked Sendable {
    let owner: SeparateBuffer
    init(_ owner: SeparateBuffer) { self.owner = owner }
    var byteCount: Int { owner.byteCount }
    var hostContents: UnsafeMutableRawPointer? { owner.deviceMemory }
}

/// A backend with its core only, no kernel family, over memory the host cannot address: every
/// kernel call is routed to the host kernels (those with a composition too, which the host
/// kernels then take or leave), which must work on staged copies.
private final class SeparateMemoryBackend: Backend, @unchecked Sendable {
    let device = Device.metal
    let name = "separate memory"
    private let lock = Lock()
    private var asked: [KernelOp] = []

    /// The ops this backend was asked to route, in order.
    var routed: [KernelOp] { lock.withLock { asked } }

    func allocate(byteCount: Int) throws -> any DeviceBuffer { SeparateBuffer(byteCount: byteCount) }

    func synchronize() {}

    func route(_ call: KernelCall) -> KernelRoute {
        lock.withLock { asked.append(call.op) }
        return .host
    }

    /// `t` over the device side of its memory, for the host kernels to run as this device's.
    private func deviceSide(_ t: TensorImpl) -> TensorImpl {
        let buffer = DeviceSideView(t.storage.buffer as! SeparateBuffer)
        return TensorImpl(
            storage: Storage.make(buffer: buffer, backend: Backends.host), shape: t.shape, strides: t.strides,
            offset: t.offset, dtype: t.dtype)
    }

    func write(_ bytes: UnsafeRawBufferPointer, into dst: TensorImpl) {
        guard let src = bytes.baseAddress else { return }
        HostBackend.address(deviceSide(dst)).copyMemory(from: src, byteCount: min(bytes.count, dst.numel * dst.dtype.itemSize))
    }

    func read(_ src: TensorImpl, into bytes: UnsafeMutableRawBufferPointer) {
        guard let dst = bytes.baseAddress else { return }
        dst.copyMemory(from: HostBackend.address(deviceSide(src)), byteCount: min(bytes.count, src.numel * src.dtype.itemSize))
    }

    func fill(_ out: TensorImpl, with value: Scalar) { Backends.host.fill(deviceSide(out), with: value) }

    func copy(_ src: TensorImpl, into dst: TensorImpl) { Backends.host.copy(deviceSide(src), into: deviceSide(dst)) }
}

/// The host path for a backend whose memory the host cannot address: kernel calls routed to the
/// host run on staged copies of their operands, and only what they write goes back.
@Suite struct HostStagingTests {
    private static func tensor(_ values: [Float], _ shape: [Int], on backend: SeparateMemoryBackend) throws -> TensorImpl {
        let t = try TensorImpl.empty(shape, dtype: .float32, on: backend)
        values.withUnsafeBytes { backend.write($0, into: t) }
        return t
    }

    private static func values(_ t: TensorImpl) -> [Float] {
        let c =
            t.isContiguous
            ? t
            : { () -> TensorImpl in
                let d = try! TensorImpl.empty(t.shape, dtype: t.dtype, on: t.backend)
                t.backend.copy(t, into: d)
                return d
            }()
        var out = [Float](repeating: 0, count: c.numel)
        out.withUnsafeMutableBytes { c.backend.read(c, into: $0) }
        return out
    }

    private static func copies(_ t: TensorImpl) -> (out: Int, in: Int) { (t.storage.buffer as! SeparateBuffer).copies }

    @Test func kernelsRoutedToTheHostRunOnStagedCopies() throws {
        let be = SeparateMemoryBackend()
        let a = try Self.tensor([1, 2, 3, 4, 5, 6], [2, 3], on: be)
        let b = try Self.tensor([10, 20, 30], [3], on: be)
        let before = HostKernelFallbacks.total

        let sum = try Elementwise.binary(.add, a, b)
        // Asked once, for the one kernel call.
        #expect(be.routed.count == 1)
        if case .binary(.add)? = be.routed.first {} else { Issue.record("routed \(be.routed), not one add") }
        #expect(sum.backend === be && !sum.storage.buffer.isHostVisible)
        #expect(Self.values(sum) == [11, 22, 33, 14, 25, 36])
        // The inputs were copied out and never back; the output went back once.
        #expect(Self.copies(a) == (1, 0) && Self.copies(b) == (1, 0))
        #expect(Self.copies(sum) == (1, 1))

        let total = try Reductions.reduce(.sum, sum, dims: [1], keepdim: false)
        #expect(Self.values(total) == [66, 75])
        let product = try LinearAlgebra.matmul(a, try ShapeOps.transpose(a, 0, 1))
        #expect(Self.values(product) == [14, 32, 32, 77])
        #expect(HostKernelFallbacks.total >= before + 3)
    }

    @Test func fusedKernelsTheHostHasRunOnStagedCopies() throws {
        let be = SeparateMemoryBackend()
        let x = try Self.tensor([-2, -1, 0, 1, 2, 3], [2, 3], on: be)
        let y = try Activations.leakyRelu(x, slope: 0.5)
        #expect(Self.values(y) == [-1, -0.5, 0, 1, 2, 3])
        #expect(Self.copies(y) == (1, 1))
        let norm = try Normalization.layerNorm(x, normalizedShape: [3], weight: nil, bias: nil, eps: 1e-5)
        let rows = Self.values(norm)
        #expect(abs(rows[0] + 1.2247449) < 1e-4 && abs(rows[4]) < 1e-6 && abs(rows[5] - 1.2247449) < 1e-4)
    }

    @Test func anOperandReadAndWrittenIsStagedOnce() throws {
        let be = SeparateMemoryBackend()
        let a = try Self.tensor([1, 2, 3, 4], [4], on: be)
        try InPlace.binary(.mul, a, scalar: ScalarOperand(float: 3), op: "mul_")
        #expect(Self.values(a) == [3, 6, 9, 12])
        #expect(Self.copies(a) == (1, 1))
    }
}
