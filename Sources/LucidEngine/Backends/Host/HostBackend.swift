#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CHostKernels

/// Aligned host memory from the caching allocator, counted in `MemoryStats` under the device
/// it serves.
final class HostBuffer: DeviceBuffer, @unchecked Sendable {
    let pointer: UnsafeMutableRawPointer
    let byteCount: Int
    let blockSize: Int
    let device: Device

    var hostContents: UnsafeMutableRawPointer? { pointer }

    init(byteCount: Int, device: Device) throws {
        (pointer, blockSize) = try HostAllocator.shared.allocate(byteCount)
        self.byteCount = byteCount
        self.device = device
        MemoryStats.allocated(byteCount, on: device)
    }

    deinit {
        HostAllocator.shared.release(pointer, size: blockSize)
        MemoryStats.released(byteCount, on: device)
    }
}

/// The host backend: the CPU stream, and — as a second instance — the host fallback that
/// serves "metal" where Metal is missing. Kernels run at once on the calling thread. It has
/// every kernel family (`Host+<Family>.swift`); they also run the calls another backend routes
/// to the host, over that backend's memory.
final class HostBackend: Backend {
    let device: Device
    let name: String
    /// Families this instance declines (`LUCID_METAL_DECLINE` on the host fallback), so the
    /// op layer's paths for a backend that lacks them run and are tested without a GPU.
    let declined: Set<KernelFamily>

    /// Whether the CPU has bfloat16 arithmetic in its vector unit, which oneDNN's bfloat16
    /// kernels then use instead of converting to float32 inside.
    static let nativeBFloat16 = lucid_host_native_bf16() != 0

    init(device: Device, name: String, declining declined: Set<KernelFamily> = []) {
        self.device = device
        self.name = name
        self.declined = declined
        _ = BLAS.configured
    }

    func allocate(byteCount: Int) throws -> any DeviceBuffer { try HostBuffer(byteCount: byteCount, device: device) }

    func synchronize() {}

    func write(_ bytes: UnsafeRawBufferPointer, into dst: TensorImpl) {
        guard let src = bytes.baseAddress else { return }
        memcpy(Self.address(dst), src, min(bytes.count, dst.numel * dst.dtype.itemSize))
    }

    func read(_ src: TensorImpl, into bytes: UnsafeMutableRawBufferPointer) {
        guard let dst = bytes.baseAddress else { return }
        memcpy(dst, Self.address(src), min(bytes.count, src.numel * src.dtype.itemSize))
    }

    /// Address of element 0 of a tensor in host memory: its buffer (any backend's,
    /// synchronized), or the staged copy of a buffer the host cannot address.
    @inline(__always)
    static func address(_ t: TensorImpl) -> UnsafeMutableRawPointer {
        base(of: t.storage.buffer) + t.offset * t.dtype.itemSize
    }

    /// The host address of a buffer's first byte (see `address`).
    @inline(__always)
    static func base(of buffer: any DeviceBuffer) -> UnsafeMutableRawPointer {
        buffer.hostContents ?? HostStaging.contents(of: buffer)
    }

    /// The float32 element `t` holds (a flag, a count, a scale), read and written in place as a
    /// GPU does.
    static func float32Element(_ t: TensorImpl) -> UnsafeMutablePointer<Float> {
        address(t).assumingMemoryBound(to: Float.self)
    }

    /// Whether a found-inf flag is given and set.
    static func isSet(_ found: TensorImpl?) -> Bool { found.map { float32Element($0).pointee != 0 } ?? false }

    /// The backend for a host kernel's scratch tensors beside `t`: t's own where the host can
    /// address its memory, else the host's.
    static func scratch(beside t: TensorImpl) -> any Backend {
        t.storage.buffer.isHostVisible ? t.backend : Backends.host
    }

    func fill(_ out: TensorImpl, with value: Scalar) {
        dispatch(out.dtype, FillKernel(out: out, value: value))
    }

    func copy(_ src: TensorImpl, into dst: TensorImpl) {
        if src.dtype == dst.dtype {
            if src.isContiguous, dst.isContiguous {
                memmove(Self.address(dst), Self.address(src), src.numel * src.dtype.itemSize)
                return
            }
            // Another layout of the same dtype (a transpose, or a broadcast such as the
            // gradient of a sum): element bits moved as they are, no conversion.
            switch src.dtype.itemSize {
            case 1: return Self.copyBits(UInt8.self, src, into: dst)
            case 2: return Self.copyBits(UInt16.self, src, into: dst)
            case 4: return Self.copyBits(UInt32.self, src, into: dst)
            case 8: return Self.copyBits(UInt64.self, src, into: dst)
            default: break
            }
        }
        if BFloat16FastPath.applies(src, dst) { return BFloat16FastPath.copy(src, into: dst) }
        // One value everywhere (the gradient of a sum, cast back to a lower precision):
        // converted once, then spread as bits.
        if dst.numel > 1, src.strides.allSatisfy({ $0 == 0 }),
            let one = try? TensorImpl.empty([1], dtype: dst.dtype, on: Self.scratch(beside: dst))
        {
            dispatch(src.dtype, CopySource(src: src.view(shape: [1], strides: [0], offset: src.offset), dst: one))
            return copy(one.view(shape: dst.shape, strides: dst.shape.map { _ in 0 }, offset: 0), into: dst)
        }
        dispatch(src.dtype, CopySource(src: src, dst: dst))
    }

    /// A transposed matrix, or a batch of them (`src`'s last two strides (1, ld) with ld > 1),
    /// into a contiguous `dst` of separate storage, in square tiles: read column by column, a
    /// source line would leave the cache before its neighbouring elements were read. False
    /// (nothing written) for any other layout, or matrices too small to gain.
    private static func copyTransposed<T>(
        _ ps: UnsafePointer<T>, _ src: TensorImpl, into pd: UnsafeMutablePointer<T>, _ dst: TensorImpl
    ) -> Bool {
        let n = dst.ndim
        guard n == 2 || n == 3, dst.isContiguous, !src.storage.sharesMemory(with: dst.storage) else { return false }
        let (rows, cols) = (dst.shape[n - 2], dst.shape[n - 1])
        let ld = src.strides[n - 1], batchStride = n == 3 ? src.strides[0] : 0
        guard src.strides[n - 2] == 1, ld >= rows, rows >= tile, cols >= tile else { return false }
        let batch = n == 3 ? dst.shape[0] : 1
        let rowTiles = (rows + tile - 1) / tile
        // Parts of whole tile rows of every matrix, each part writing its own rows. A tile's
        // source lines are read whole into a buffer, then its destination lines written whole:
        // lines a power of two apart share a cache set, and kept together they would evict one
        // another.
        HostThreads.forEachRange(batch * rowTiles, grain: Swift.max(1, HostThreads.streamingGrain / (tile * cols)), align: 1) {
            range in
            withUnsafeTemporaryAllocation(of: T.self, capacity: tile * tile) { buffer in
                let t = buffer.baseAddress!
                for unit in range {
                    let b = unit / rowTiles, i0 = (unit % rowTiles) * tile
                    let s = ps + b &* batchStride, d = pd + b &* rows &* cols
                    let h = Swift.min(tile, rows - i0)
                    var j0 = 0
                    while j0 < cols {
                        let w = Swift.min(tile, cols - j0)
                        for j in 0..<w {
                            let line = s + (i0 &+ (j0 &+ j) &* ld)
                            for i in 0..<h { t[j &* tile &+ i] = line[i] }
                        }
                        for i in 0..<h {
                            let line = d + ((i0 &+ i) &* cols &+ j0)
                            for j in 0..<w { line[j] = t[j &* tile &+ i] }
                        }
                        j0 += w
                    }
                }
            }
        }
        return true
    }

    /// The side of the square tiles of `copyTransposed`.
    private static let tile = 16

    /// Copies the elements of `src` into `dst` (same shape, elements of `T`'s size), run by
    /// run: contiguous runs as block copies, a repeated element (stride 0) as a fill. Large
    /// copies between separate storages run in parallel parts.
    private static func copyBits<T>(_: T.Type, _ src: TensorImpl, into dst: TensorImpl) {
        let ps = UnsafePointer(address(src).assumingMemoryBound(to: T.self))
        let pd = address(dst).assumingMemoryBound(to: T.self)
        if copyTransposed(ps, src, into: pd, dst) { return }
        @inline(__always)
        func run(_ o: UnsafeBufferPointer<Int>, _ n: Int, _ s: UnsafeBufferPointer<Int>) {
            if s[1] == 1 && s[0] == 1 { return (pd + o[1]).update(from: ps + o[0], count: n) }
            if s[1] == 1 && s[0] == 0 { return (pd + o[1]).update(repeating: ps[o[0]], count: n) }
            var i = o[0], k = o[1]
            for _ in 0..<n {
                pd[k] = ps[i]
                i &+= s[0]; k &+= s[1]
            }
        }
        let loop = StridedLoop(shape: dst.shape, strides: [src.strides, dst.strides])
        if src.storage.sharesMemory(with: dst.storage) {
            loop.forEachRun(bases: [0, 0], run)
        } else {
            loop.forEachRunInParallel(bases: [0, 0], run)
        }
    }

    /// The families this instance declines as each op does when declined; otherwise the host
    /// kernels' own route.
    func route(_ call: KernelCall) -> KernelRoute {
        if !declined.isEmpty, declined.contains(call.op.family) { return call.op.whenDeclined }
        return Self.ownRoute(call)
    }

    /// The host kernels' route: every call natively, but those of the fused and direct kernels
    /// (see `FusedElementwiseKernels`, ...) they have no kernel for, which are composed. Those
    /// compute in float32, so a float64 call of them is always composed, from the core kernels
    /// that compute in double.
    static func ownRoute(_ call: KernelCall) -> KernelRoute {
        // The core kernels' calls (the commonest) are answered before the operands are read.
        guard call.op.isOptimisation else { return .native }
        let r = call.reads, w = call.writes
        if (r + w).contains(where: { $0.dtype == .float64 }) { return .compose }
        let plain = { (ts: [TensorImpl]) in ts.allSatisfy { $0.dtype == .float32 && $0.isContiguous } }
        // A fused backward's gradient: float32 of `like`'s shape, contiguous or one value everywhere.
        let gradient = { (g: TensorImpl, like: TensorImpl) in
            g.dtype == .float32 && g.shape == like.shape && (g.isContiguous || FloatFastPath.splats(g, like))
        }
        let takes: Bool
        switch call.op {
        case .addScaled: takes = FloatFastPath.applies(w[0], r[0], r[1])
        case .leakyRelu: takes = FloatFastPath.applies(w[0], r[0])
        case .lstmRecurrence:  // bfloat16 with float32 activations (the last write) too
            takes = plain(r + w) || (plain([w[2]]) && (r + w.dropLast()).allSatisfy { $0.dtype == .bfloat16 && $0.isContiguous })
        case .lstmRecurrenceBackward:  // the activations are the last read
            takes = plain(r + w) || (plain([r[4]]) && (r.dropLast() + w).allSatisfy { $0.dtype == .bfloat16 && $0.isContiguous })
        case .leakyReluBackward:
            takes = FloatFastPath.applies(w[0], r[0]) && (FloatFastPath.applies(w[0], r[1]) || FloatFastPath.splats(r[1], w[0]))
        case .avgPool2d(let g), .avgPool2dBackward(let g): takes = g.dilation == (1, 1) && plain(r + w)
        case .softmax(let axis, let log): takes = takesSoftmax(r[0], axis: axis, log: log, into: w[0])
        case .softmaxBackward(let axis): takes = takesSoftmaxBackward(r[0], r[1], axis: axis, into: w[0])
        case .normalizeRowsBackward(let rows): takes = rows > 0 && plain([r[1], w[0]]) && gradient(r[0], w[0])
        case .normalizeChannels(let batch, let channels):
            takes = batch > 0 && channels > 0 && plain([r[0], w[0]])
        case .normalizeChannelsBackward(let batch, let channels):
            takes = batch > 0 && channels > 0 && plain([r[1], w[0]]) && gradient(r[0], r[1])
        case .convolution(let pass, let problem):
            takes = takesConvolution(pass, problem, r + w, bias: pass == .forward && r.count > 2)
        case .attention:
            takes = r.count == 3 && takesAttention(r[0], r[1], r[2], weights: w.count > 1 ? w[1] : nil, into: w[0])
        default:
            return .native
        }
        return takes ? .native : .compose
    }
}

/// Element 0 of a tensor's host memory, typed.
@inline(__always)
func hostPointer<E: HostElement>(_ t: TensorImpl, _: E.Type) -> UnsafeMutablePointer<E.Stored> {
    HostBackend.address(t).assumingMemoryBound(to: E.Stored.self)
}

private struct FillKernel: ElementVisitor {
    let out: TensorImpl, value: Scalar
    func visit<E: HostElement>(_: E.Type) {
        guard out.numel > 0 else { return }
        let p = HostBackend.address(out).assumingMemoryBound(to: E.Stored.self)
        // The value converted once, into element 0 (one rounding from float64 into a 16-bit
        // float, through float32 rounded to odd), then its bits repeated run by run.
        let f = out.dtype.isLowPrecision ? E.Real(roundedToOddFloat(value.double)) : E.Real(value.double)
        if E.isFloat { E.setFloat(p, 0, f) } else { E.setInt(p, 0, value.int) }
        let stored = p[0]
        StridedLoop(shape: out.shape, strides: [out.strides]).forEachRun(bases: [0]) { o, n, s in
            if s[0] == 1 { return (p + o[0]).update(repeating: stored, count: n) }
            for j in 0..<n { p[o[0] &+ j &* s[0]] = stored }
        }
    }
}

private struct CopySource: ElementVisitor {
    let src: TensorImpl, dst: TensorImpl
    func visit<S: HostElement>(_: S.Type) { dispatch(dst.dtype, CopyDestination<S>(src: src, dst: dst)) }
}

private struct CopyDestination<S: HostElement>: ElementVisitor {
    let src: TensorImpl, dst: TensorImpl
    func visit<D: HostElement>(_: D.Type) {
        let ps = UnsafePointer(HostBackend.address(src).assumingMemoryBound(to: S.Stored.self))
        let pd = HostBackend.address(dst).assumingMemoryBound(to: D.Stored.self)
        let loop = StridedLoop(shape: dst.shape, strides: [src.strides, dst.strides])
        // float64 into a 16-bit float rounds once: through float32 rounded to odd.
        let roundsToOdd = src.dtype == .float64 && dst.dtype.isLowPrecision
        // One loop per conversion, chosen once per run rather than per element.
        @inline(__always)
        func run(_ o: UnsafeBufferPointer<Int>, _ n: Int, _ s: UnsafeBufferPointer<Int>) {
            var i = o[0], k = o[1]
            let (si, sk) = (s[0], s[1])
            if roundsToOdd {
                for _ in 0..<n {
                    D.setFloat(pd, k, D.Real(roundedToOddFloat(Double(S.float(ps, i)))))
                    i &+= si; k &+= sk
                }
            } else if S.isFloat {
                for _ in 0..<n {
                    D.setFloat(pd, k, D.Real(S.float(ps, i)))
                    i &+= si; k &+= sk
                }
            } else {
                for _ in 0..<n {
                    D.setInt(pd, k, S.int(ps, i))
                    i &+= si; k &+= sk
                }
            }
        }
        if src.storage.sharesMemory(with: dst.storage) {
            loop.forEachRun(bases: [0, 0], run)
        } else {
            loop.forEachRunInParallel(bases: [0, 0], run)
        }
    }
}
