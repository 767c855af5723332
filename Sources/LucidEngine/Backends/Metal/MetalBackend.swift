// Compiled wherever `import Metal` works (Apple platforms, and the emulated check build on
// Linux), unless LUCID_NO_METAL is defined: the build falls back to that when the backend fails
// to compile on a Mac, so lucid still works there on the CPU and the host fallback.
#if canImport(Metal) && !LUCID_NO_METAL
import Metal
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
#if canImport(ObjectiveC)
import Foundation
#endif

/// A tensor's memory on the GPU: an `MTLBuffer` in shared storage, which on Apple Silicon's
/// unified memory is host memory too. Counted in `MemoryStats` under "metal"; when the tensor
/// goes, the buffer returns to its backend's cache.
final class MetalBuffer: DeviceBuffer, @unchecked Sendable {
    let buffer: any MTLBuffer
    let byteCount: Int
    private unowned let owner: MetalBackend
    /// The last command buffer (by generation) that binds this buffer; 0 for none. Set under
    /// the backend's lock when a kernel is encoded.
    var lastUse: UInt64 = 0

    /// The host's view of the memory (shared storage); valid once the backend has synchronized.
    var hostContents: UnsafeMutableRawPointer? { buffer.contents() }

    /// The generation of the backend's open command buffer.
    var ownerGeneration: UInt64 { owner.generation }

    init(_ buffer: any MTLBuffer, byteCount: Int, owner: MetalBackend) {
        self.buffer = buffer
        self.byteCount = byteCount
        self.owner = owner
        MemoryStats.allocated(byteCount, on: .metal)
    }

    deinit {
        MemoryStats.released(byteCount, on: .metal)
        owner.recycle(buffer, lastUse: lastUse)
    }
}

/// The layout of up to three operands over one shape, as the kernels' `Layout` struct holds it
/// (Kernels/Common.metal): uint ndim, uint pad, ulong count, long shape[8],
/// long strides[3][8] — 34 little-endian 64-bit words.
struct MetalLayout {
    static let maxRank = 8
    private(set) var words = [Int64](repeating: 0, count: 34)

    var count: Int { Int(words[1]) }
    var rank: Int { Int(words[0]) }

    /// The size of merged dimension `d` (outermost first) and an operand's stride along it.
    func size(_ d: Int) -> Int { Int(words[2 + d]) }
    func step(_ operand: Int, _ d: Int) -> Int { Int(words[10 + operand * 8 + d]) }

    /// The largest count and offset the kernels' 32-bit forms take: 2^31 - 1, or
    /// `LUCID_METAL_INDEX32_LIMIT` when that is lower (so that tests run the 64-bit forms on
    /// small tensors).
    static let index32Limit: Int = {
        let limit = Int(Int32.max)
        guard let raw = getenv("LUCID_METAL_INDEX32_LIMIT"), let n = Int(String(cString: raw)), n >= 0 else { return limit }
        return min(n, limit)
    }()

    /// The furthest offset an operand's indices reach over the layout, whatever its strides'
    /// signs.
    func reach(_ operand: Int) -> Int { (0..<rank).reduce(0) { $0 + max(size($1) - 1, 0) * abs(step(operand, $1)) } }

    /// The same layout as the kernels' `Layout32` (uint ndim, uint count, uint shape[8],
    /// int strides[3][8]: 34 32-bit words), or nil when the count, or an offset an operand
    /// reaches, does not fit `index32Limit`; then the kernel's `_wide` form takes `words`.
    var words32: [Int32]? {
        guard count <= Self.index32Limit, (0..<3).allSatisfy({ reach($0) <= Self.index32Limit }) else { return nil }
        var w = [Int32](repeating: 0, count: 34)
        w[0] = Int32(rank)
        w[1] = Int32(count)
        for d in 0..<rank {
            w[2 + d] = Int32(size(d))
            for o in 0..<3 { w[10 + o * 8 + d] = Int32(step(o, d)) }
        }
        return w
    }

    /// Whether a kernel over `layouts` takes its 32-bit form: every layout fits, and so does
    /// `reach`, the furthest offset the kernel adds up from them.
    static func narrow(_ layouts: [MetalLayout], reach: Int = 0) -> Bool {
        reach <= index32Limit && layouts.allSatisfy { $0.words32 != nil }
    }

    /// Binds the layout as the kernels' `Layout32` (`narrow`) or `Layout`.
    func bind(narrow: Bool, _ index: Int, _ e: any MTLComputeCommandEncoder) {
        if narrow, let w = words32 { setBytes(w, index, e) } else { setBytes(words, index, e) }
    }

    /// `operands` (each a strides array of `shape`'s rank) over `shape`, with dimensions of
    /// size 1 dropped and neighbours merged where every operand allows; nil when more than
    /// `maxRank` dimensions remain or there are more than three operands.
    init?(shape: [Int], operands: [[Int]]) {
        guard operands.count <= 3, let all = Self.layouts(shape: shape, operands: operands) else { return nil }
        self = all[0]
    }

    private init(count: Int, dims: [(size: Int, strides: [Int])], operands: Range<Int>) {
        words[0] = Int64(dims.count)
        words[1] = Int64(count)
        for (d, dim) in dims.enumerated() {
            words[2 + d] = Int64(dim.size)
            for (slot, o) in operands.enumerated() { words[10 + slot * 8 + d] = Int64(dim.strides[o]) }
        }
    }

    /// The layout of a call its backend's route has taken: `routed` is the shape the route
    /// checked, so the layout exists.
    init(routed shape: [Int], operands: [[Int]]) {
        guard let layout = MetalLayout(shape: shape, operands: operands) else {
            preconditionFailure("metal: a kernel was called for operands its route sends to the host")
        }
        self = layout
    }

    /// `layouts(shape:operands:)` for a call its backend's route has taken.
    static func layouts(routed shape: [Int], operands: [[Int]]) -> [MetalLayout] {
        guard let layouts = layouts(shape: shape, operands: operands) else {
            preconditionFailure("metal: a kernel was called for operands its route sends to the host")
        }
        return layouts
    }

    /// Layouts for any number of operands over one shape, three per layout, merged alike
    /// (the merge looks at every operand), so that one thread index means one element in all.
    static func layouts(shape: [Int], operands: [[Int]]) -> [MetalLayout]? {
        var dims: [(size: Int, strides: [Int])] = []
        for d in shape.indices where shape[d] != 1 {
            let strides = operands.map { $0[d] }
            if let last = dims.last, operands.indices.allSatisfy({ last.strides[$0] == strides[$0] * shape[d] }) {
                dims[dims.count - 1] = (last.size * shape[d], strides)
            } else {
                dims.append((shape[d], strides))
            }
        }
        guard dims.count <= maxRank else { return nil }
        let count = shape.reduce(1, *)
        return stride(from: 0, to: max(operands.count, 1), by: 3).map {
            MetalLayout(count: count, dims: dims, operands: $0..<min($0 + 3, operands.count))
        }
    }
}

/// The "metal" device on Apple's GPU. Kernels are encoded into an open command buffer, which
/// is committed without waiting every `commitEvery` dispatches, so the GPU works while the host
/// encodes more, and when the host needs a value (`synchronize()`: a read, a host kernel,
/// `lucid.metal.synchronize()`), which then waits only for the work it needs. A command
/// buffer's completion handler hands the buffers it used back to the cache.
///
/// A call it has no GPU kernel for (a dtype, a rank, an op such as `nonzero`) is routed to the
/// host kernels over the same shared buffers (`route(_:)`), counted in
/// `lucid.metal.host_fallback_counts()`.
final class MetalBackend: Backend, @unchecked Sendable {
    let device = Device.metal
    let name = "metal"
    let gpu: any MTLDevice
    private let queue: any MTLCommandQueue
    /// Guards the open command buffer, its encoder and the caches: ops on several threads
    /// share one queue.
    private let lock = Lock()
    /// Metal Performance Shaders' product kernels by shape, and the float16 route (Metal+Matmul.swift).
    let products = MatrixProducts()
    private var commandBuffer: (any MTLCommandBuffer)?
    private var encoder: (any MTLComputeCommandEncoder)?
    /// Dispatches encoded into the open command buffer.
    private var openDispatches = 0
    /// The kernel libraries, one per family (`MetalKernelLibrary`): compiled once, at first
    /// use, with every kernel's pipeline; a failure is kept with the compiler's message, never
    /// retried.
    private var libraries: [MetalKernelLibrary]?
    private var pipelines: [String: any MTLComputePipelineState] = [:]
    /// The families that run on the host instead (`route` answers as a backend without them),
    /// with why: their library did not compile, a pipeline did not build, or their self-test
    /// failed. Set before the backend serves "metal", and fixed from then on.
    private(set) var declinedFamilies: [KernelFamily: String] = [:]
    /// The number of command buffers opened so far: the open one's generation.
    private(set) var generation: UInt64 = 0
    /// Counters for `lucid.metal.stats()` (the lock held; `newBuffers` and the cache's under
    /// the cache's lock).
    private var counters = Metal.Stats()

    /// The open command buffer is committed, without waiting, after this many dispatches. A
    /// command queue holds at most 64 uncommitted-or-running command buffers (making one more
    /// waits), so a loop that never reads a value keeps at most that much work and memory in
    /// flight.
    static let commitEvery = 32

    /// Freed buffers, by length, for new tensors: a buffer is reused only once every command
    /// buffer that binds it has completed, so no queued kernel sees its new contents (and a
    /// host write into a new tensor needs no synchronisation). Its own lock: a buffer may be
    /// freed on any thread, the backend's lock held or not.
    private let cacheLock = Lock()
    private var freeBuffers: [Int: [any MTLBuffer]] = [:]
    private var released: [(buffer: any MTLBuffer, lastUse: UInt64)] = []
    private var cachedBytes = 0
    private var newBuffers = 0
    /// The command buffers committed and not yet seen complete, oldest first; the generation
    /// up to which every command buffer has completed; and the generations above it seen
    /// complete. Command buffers start in commit order but may complete out of it, so only
    /// an unbroken run of completed generations counts.
    private var inFlight: [(generation: UInt64, buffer: any MTLCommandBuffer)] = []
    private var completed: UInt64 = 0
    private var completedAhead: Set<UInt64> = []
    /// Messages of command buffers that failed, reported (as warnings) at the next synchronize
    /// on a caller's thread, not on Metal's completion thread.
    private var failures: [String] = []
    /// Flags of queued kernels, by the generation of the command buffer that sets them, and
    /// the checks whose flag was found set once it completed.
    private var pendingChecks: [(generation: UInt64, check: DeferredCheck)] = []
    private var foundErrors: [DeferredCheck] = []

    /// `LUCID_METAL_SYNC=1`: a kernel's check waits for it and raises at the op, instead of at
    /// the program's next synchronisation.
    static let checksAtOnce: Bool = getenv("LUCID_METAL_SYNC").map { String(cString: $0) == "1" } ?? false

    private init(gpu: any MTLDevice, queue: any MTLCommandQueue) {
        self.gpu = gpu
        self.queue = queue
    }

    /// The backend of the system's default GPU, or why there is none: no GPU, or one that is
    /// not an Apple silicon GPU of family Apple7 (M1, A14) or later with Metal 3, the GPUs the
    /// kernels are written for (SIMD groups of 32, unified memory, bfloat). Intel and AMD GPUs
    /// of a Mac and virtual GPUs report unified memory or Metal 3 too, but not Apple7.
    static func make() -> Result<MetalBackend, MetalRefusal> {
        guard let gpu = defaultDevice() else { return .failure(MetalRefusal("Metal is not available on this machine")) }
        if let reason = refusal(of: gpu) { return .failure(MetalRefusal(reason)) }
        guard let queue = gpu.makeCommandQueue() else {
            return .failure(MetalRefusal("the Metal device \(gpu.name) gave no command queue"))
        }
        return .success(MetalBackend(gpu: gpu, queue: queue))
    }

    /// Why `gpu` cannot serve "metal", or nil when it can.
    static func refusal(of gpu: any MTLDevice) -> String? {
        let missing = [
            gpu.supportsFamily(.apple7) ? nil : "the Apple7 GPU family (Apple silicon: M1, A14 or later)",
            gpu.supportsFamily(.metal3) ? nil : "Metal 3",
            gpu.hasUnifiedMemory ? nil : "unified memory",
        ].compactMap { $0 }
        guard !missing.isEmpty else { return nil }
        return "the Metal device \(gpu.name) lacks \(missing.joined(separator: " and ")), which lucid's Metal kernels need"
    }

    /// The system's default GPU. On macOS, a process that has not linked CoreGraphics gets no
    /// default device; the product links it, and the list of all devices is asked as well.
    private static func defaultDevice() -> (any MTLDevice)? {
        if let gpu = MTLCreateSystemDefaultDevice() { return gpu }
        #if os(macOS)
        let all = MTLCopyAllDevices()
        return all.first { refusal(of: $0) == nil } ?? all.first
        #else
        return nil
        #endif
    }

    // MARK: - Memory

    func allocate(byteCount: Int) throws -> any DeviceBuffer {
        // The host allocator's size classes, so that freed buffers fit new tensors (and an
        // empty tensor still gets a buffer: Metal makes none of zero length).
        let length = HostAllocator.blockSize(byteCount)
        if let cached = cacheLock.withLock({ reusable(length) }) {
            return MetalBuffer(cached, byteCount: byteCount, owner: self)
        }
        var made = gpu.makeBuffer(length: length, options: .storageModeShared)
        if made == nil {
            _ = emptyCache()  // give the cached buffers back and try once more
            made = gpu.makeBuffer(length: length, options: .storageModeShared)
        }
        guard let buffer = made else { throw LucidError.runtime("metal: could not allocate a buffer of \(byteCount) bytes") }
        cacheLock.withLock { newBuffers += 1 }
        return MetalBuffer(buffer, byteCount: byteCount, owner: self)
    }

    /// Drops every cached buffer (command buffers keep the ones they still use); the bytes.
    func emptyCache() -> Int {
        cacheLock.withLock {
            defer {
                freeBuffers.removeAll()
                released.removeAll()
                cachedBytes = 0
            }
            return cachedBytes
        }
    }

    /// A cached buffer of `length` bytes, if any (cacheLock held).
    private func reusable(_ length: Int) -> (any MTLBuffer)? {
        guard let buffer = freeBuffers[length]?.popLast() else { return nil }
        cachedBytes -= length
        return buffer
    }

    /// Takes back the buffer of a freed tensor, up to the host allocator's limit
    /// (`LUCID_CACHE_LIMIT_MB`) in all: reusable at once if no unfinished command buffer
    /// binds it, else once the command buffers up to its last use have completed.
    func recycle(_ buffer: any MTLBuffer, lastUse: UInt64) {
        cacheLock.withLock {
            guard cachedBytes + buffer.length <= HostAllocator.shared.limit else { return }
            cachedBytes += buffer.length
            if lastUse <= completed {
                freeBuffers[buffer.length, default: []].append(buffer)
            } else {
                released.append((buffer, lastUse))
            }
        }
    }

    /// Records that the command buffer of generation `number` has completed; once every one
    /// up to a generation has, the buffers they held become reusable, their flags are read and
    /// their failures reported. Called from their completion handlers, on any thread, and
    /// after a wait (more than once for one generation is harmless).
    private func completed(_ number: UInt64) {
        // Checks that passed are dropped after the lock is left: their flags' buffers come back
        // to the cache, which takes the lock.
        var passed: [DeferredCheck] = []
        cacheLock.withLock {
            guard number > completed else { return }
            completedAhead.insert(number)
            // A later command buffer may complete first: advance only over an unbroken run.
            while completedAhead.remove(completed + 1) != nil { completed += 1 }
            while let first = inFlight.first, first.generation <= completed {
                inFlight.removeFirst()
                if first.buffer.status == .error {
                    failures.append(first.buffer.error.map { "\($0)" } ?? "no error given")
                }
            }
            while let first = pendingChecks.first, first.generation <= completed {
                pendingChecks.removeFirst()
                if first.check.isSet { foundErrors.append(first.check) } else { passed.append(first.check) }
            }
            guard !released.isEmpty else { return }
            var waiting: [(buffer: any MTLBuffer, lastUse: UInt64)] = []
            for entry in released {
                if entry.lastUse <= completed {
                    freeBuffers[entry.buffer.length, default: []].append(entry.buffer)
                } else {
                    waiting.append(entry)
                }
            }
            released = waiting
        }
    }

    /// Commits the open command buffer without waiting (the lock held). Its completion handler
    /// runs on a thread of Metal's; it takes only the cache's lock.
    private func commitOpen() {
        encoder?.endEncoding()
        encoder = nil
        guard let buffer = commandBuffer else { return }
        commandBuffer = nil
        openDispatches = 0
        let number = generation
        buffer.addCompletedHandler { [unowned self] _ in self.completed(number) }
        cacheLock.withLock { inFlight.append((number, buffer)) }
        counters.commandBuffers += 1
        buffer.commit()
    }

    func synchronize() { wait(for: .max) }

    /// Waits until the command buffers up to generation `needed` have completed, committing the
    /// open one if it is among them; a wait for queued work counts as a host wait.
    private func wait(for needed: UInt64) {
        let targets: [(generation: UInt64, buffer: any MTLCommandBuffer)] = lock.withLock {
            let openNeeded = commandBuffer != nil && needed >= generation
            let queued = openNeeded && openDispatches > 0
            if openNeeded { commitOpen() }
            let bound = min(needed, generation)
            let targets = cacheLock.withLock { completed >= bound ? [] : inFlight.filter { $0.generation <= bound } }
            if queued || !targets.isEmpty { counters.hostWaits += 1 }
            return targets
        }
        // A later command buffer may complete before an earlier one: wait for each of them.
        for target in targets {
            target.buffer.waitUntilCompleted()
            completed(target.generation)
        }
        let failed = cacheLock.withLock { () -> [String] in
            defer { failures.removeAll() }
            return failures
        }
        for message in failed {
            Warnings.emit("metal: a command buffer failed (\(message)); results computed by it are wrong")
        }
    }

    func write(_ bytes: UnsafeRawBufferPointer, into dst: TensorImpl) {
        // A new tensor's buffer is used by no unfinished command buffer (see the cache): the
        // GPU's queue goes on. Otherwise wait for the work that binds it, and no more.
        let target = unsafeDowncast(dst.storage.buffer, to: MetalBuffer.self)
        let lastUse = lock.withLock { target.lastUse }
        if lastUse > cacheLock.withLock({ completed }) { wait(for: lastUse) }
        guard let src = bytes.baseAddress else { return }
        HostBackend.address(dst).copyMemory(from: src, byteCount: min(bytes.count, dst.numel * dst.dtype.itemSize))
    }

    func read(_ src: TensorImpl, into bytes: UnsafeMutableRawBufferPointer) {
        synchronize()
        guard let dst = bytes.baseAddress else { return }
        dst.copyMemory(from: HostBackend.address(src), byteCount: min(bytes.count, src.numel * src.dtype.itemSize))
    }

    /// The dtypes this backend has copy and fill kernels for but no others: every kernel call
    /// that reads or writes one runs on the host kernels (counted), over the same memory.
    static let copyOnlyTypes: Set<DType> = [.uint8, .int8, .int16]

    /// Each route of this backend's families lives beside its kernels (`Metal+<Family>.swift`).
    /// A declined family's calls go where a backend without the family sends them
    /// (`KernelOp.whenDeclined`: the host kernels, or composed from the other families).
    func route(_ call: KernelCall) -> KernelRoute {
        if !declinedFamilies.isEmpty, declinedFamilies[call.op.family] != nil { return call.op.whenDeclined }
        if call.reads.contains(where: { Self.copyOnlyTypes.contains($0.dtype) })
            || call.writes.contains(where: { Self.copyOnlyTypes.contains($0.dtype) })
        {
            return .host
        }
        return switch call.op.family {
        case .elementwise: elementwiseRoute(call)
        case .reduction: reductionRoute(call)
        case .matmul: matmulRoute(call)
        case .convolution: convolutionRoute(call)
        case .pooling: poolingRoute(call)
        case .indexing: indexingRoute(call)
        case .optimizers: optimizerRoute(call)
        case .amp: ampRoute(call)
        case .softmax: softmaxRoute(call)
        case .normalization: normalizationRoute(call)
        case .attention: attentionRoute(call)
        // LAPACK runs on the host, over the same unified memory (counted as host fallbacks).
        case .linalg: .host
        }
    }

    /// Views of `t`'s first-dimension slices, for a fill or copy over more dimensions than a
    /// layout holds.
    private static func slices(_ t: TensorImpl) -> [TensorImpl] {
        let shape = Array(t.shape.dropFirst()), strides = Array(t.strides.dropFirst())
        return (0..<t.shape[0]).map { t.view(shape: shape, strides: strides, offset: t.offset + $0 * t.strides[0]) }
    }

    func fill(_ out: TensorImpl, with value: Scalar) {
        guard out.numel > 0 else { return }
        guard let layout = MetalLayout(shape: out.shape, operands: [out.strides]) else {
            // More dimensions than a layout holds: one fill per slice of the first.
            return Self.slices(out).forEach { fill($0, with: value) }
        }
        encode(strided: "fill_\(out.dtype.name)", count: layout.count, layouts: [(layout, 1)]) { e in
            bind(out, 0, e)
            if out.dtype.isFloatingPoint {
                // One rounding into a 16-bit float, through float32 rounded to odd (as the host does).
                setBytes(out.dtype.isLowPrecision ? roundedToOddFloat(value.double) : Float(value.double), 2, e)
            } else {
                setBytes(value.int, 2, e)
            }
        }
    }

    func copy(_ src: TensorImpl, into dst: TensorImpl) {
        guard dst.numel > 0 else { return }
        // A copy kernel for every pair of dtypes: copy_<dtype>, copy_<source>_<destination>.
        let kind = src.dtype == dst.dtype ? src.dtype.name : "\(src.dtype.name)_\(dst.dtype.name)"
        guard let layout = MetalLayout(shape: dst.shape, operands: [src.strides, dst.strides]) else {
            // More dimensions than a layout holds: one copy per slice of the first.
            return zip(Self.slices(src), Self.slices(dst)).forEach { copy($0, into: $1) }
        }
        encode(strided: "copy_\(kind)", count: layout.count, layouts: [(layout, 2)]) { e in
            bind(src, 0, e)
            bind(dst, 1, e)
        }
    }

    // MARK: - Flags

    /// Registers the check of a kernel just encoded: its flag is read once the kernel's command
    /// buffer has completed, and a set flag's error is raised at the program's next
    /// synchronisation (`takeDeferredError`), so the check never makes the host wait. With
    /// `LUCID_METAL_SYNC=1` it waits and throws here.
    func deferCheck(_ check: DeferredCheck) throws {
        if Self.checksAtOnce {
            synchronize()
            if check.isSet { throw check.report() }
            return
        }
        let number = lock.withLock { generation }  // the command buffer it was encoded into
        let found: Bool = cacheLock.withLock {
            guard completed >= number else {
                pendingChecks.append((number, check))
                return false
            }
            return check.isSet  // already done (committed at the dispatch limit)
        }
        if found { cacheLock.withLock { foundErrors.append(check) } }
    }

    func takeDeferredError() -> LucidError? {
        let found: [DeferredCheck] = cacheLock.withLock {
            defer { foundErrors.removeAll() }
            return foundErrors
        }
        return found.first?.report()
    }

    /// A zeroed int32 a kernel sets to report something the host must act on (an index out of
    /// range).
    func makeFlag() throws -> TensorImpl {
        let flag = try TensorImpl.empty([1], dtype: .int32, on: self)
        fill(flag, with: Scalar(int: 0))
        return flag
    }

    // MARK: - Encoding

    /// The most threads `encode(_:count:)` dispatches as one row. A thread's position in the
    /// grid is 32-bit, so more come as rows of a 2-D grid, and the 1-D kernels take their
    /// 64-bit index from both coordinates (`LUCID_THREAD_INDEX`, Kernels/Common.metal), the
    /// last row's threads past the count returning at once. `LUCID_METAL_ROW_THREADS` lowers
    /// it, so that tests split small dispatches into rows.
    static let rowThreads: Int = {
        let limit = 1 << 30
        guard let raw = getenv("LUCID_METAL_ROW_THREADS"), let n = Int(String(cString: raw)), n > 0 else { return limit }
        return min(n, limit)
    }()

    /// Encodes one dispatch of `kernel` over `count` threads into the open command buffer (in
    /// rows of at most `rowThreads`); `bind` sets its arguments.
    func encode(_ kernel: String, count: Int, _ bind: (any MTLComputeCommandEncoder) -> Void) {
        dispatch(kernel, bind) { e, pipeline in
            let row = max(1, min(count, Self.rowThreads))
            let width = min(row, pipeline.maxTotalThreadsPerThreadgroup)
            e.dispatchThreads(
                MTLSize(width: row, height: (count + row - 1) / row, depth: 1),
                threadsPerThreadgroup: MTLSize(width: width, height: 1, depth: 1))
        }
    }

    /// Encodes one dispatch of a strided kernel over `count` threads with `layouts` bound at
    /// their buffer indices: its 32-bit form (`kernel`, the layouts as `Layout32`) when every
    /// layout fits 32 bits, else its 64-bit form (`kernel_wide`, as `Layout`).
    func encode(
        strided kernel: String, count: Int, layouts: [(layout: MetalLayout, index: Int)],
        _ bind: (any MTLComputeCommandEncoder) -> Void
    ) {
        let narrow = MetalLayout.narrow(layouts.map(\.layout))
        encode(narrow ? kernel : kernel + "_wide", count: count) { e in
            for (layout, index) in layouts { layout.bind(narrow: narrow, index, e) }
            bind(e)
        }
    }

    /// Encodes one dispatch of `kernel` over a grid of threads, in threadgroups of powers of
    /// two filled along x first (the innermost dimension), then y and z.
    func encode(_ kernel: String, grid: MTLSize, _ bind: (any MTLComputeCommandEncoder) -> Void) {
        dispatch(kernel, bind) { e, pipeline in
            let limit = pipeline.maxTotalThreadsPerThreadgroup
            var w = 1, h = 1, d = 1
            while w < grid.width && w * 2 <= limit { w *= 2 }
            while h < grid.height && w * h * 2 <= limit { h *= 2 }
            while d < grid.depth && w * h * d * 2 <= limit { d *= 2 }
            e.dispatchThreads(grid, threadsPerThreadgroup: MTLSize(width: w, height: h, depth: d))
        }
    }

    /// The most threads a threadgroup of `kernel` may have (its pipeline's limit), or nil when
    /// the kernel is not in the compiled library.
    func maxThreadsPerThreadgroup(_ kernel: String) -> Int? {
        lock.withLock { pipeline(kernel)?.maxTotalThreadsPerThreadgroup }
    }

    /// Encodes `groups` threadgroups of `width` threads each (a kernel that cooperates through
    /// threadgroup memory), with `floatsPerThread` float32s of threadgroup memory per thread
    /// at threadgroup index 0 (none for 0). `width` is capped at what the pipeline allows, keeping it a
    /// power of two when it is one: only for kernels written for any width (a kernel that needs
    /// exactly `width` threads checks `maxThreadsPerThreadgroup` first).
    func encode(
        _ kernel: String, groups: Int, width: Int, floatsPerThread: Int = 1,
        _ bind: (any MTLComputeCommandEncoder) -> Void
    ) {
        dispatch(kernel, bind) { e, pipeline in
            var w = max(1, width)
            while w > pipeline.maxTotalThreadsPerThreadgroup { w /= 2 }
            let bytes = (w * floatsPerThread * MemoryLayout<Float>.size + 15) / 16 * 16
            if bytes > 0 { e.setThreadgroupMemoryLength(bytes, index: 0) }
            e.dispatchThreadgroups(
                MTLSize(width: groups, height: 1, depth: 1),
                threadsPerThreadgroup: MTLSize(width: w, height: 1, depth: 1))
        }
    }

    /// Encodes a kernel that takes a SIMD group per row over `rows` rows: threadgroups of up to
    /// eight SIMD groups (as many as the pipeline allows), each SIMD group one row; the kernel
    /// finds its row from its threadgroup, its SIMD group and the threadgroup's width.
    func encode(simdRows kernel: String, rows: Int, _ bind: (any MTLComputeCommandEncoder) -> Void) {
        var simdGroups = 8
        let limit = maxThreadsPerThreadgroup(kernel) ?? 32
        while simdGroups > 1 && (32 * simdGroups > limit || simdGroups / 2 >= rows) { simdGroups /= 2 }
        encode(kernel, groups: (rows + simdGroups - 1) / simdGroups, width: 32 * simdGroups, floatsPerThread: 0, bind)
    }

    /// Whether the tensors given (nil skipped) are contiguous and of one floating dtype, as the
    /// optimizer and AMP kernels take them (others are routed to the host).
    static func floatingContiguous(_ tensors: [TensorImpl?]) -> Bool {
        guard let first = tensors.compactMap({ $0 }).first, first.dtype.isFloatingPoint else { return false }
        return tensors.allSatisfy { $0.map { $0.isContiguous && $0.dtype == first.dtype } ?? true }
    }

    /// Threads per threadgroup for a row of `length` elements: a power of two from one SIMD
    /// group (32) up to 256, no more than the row needs.
    static func rowWidth(_ length: Int) -> Int {
        var w = 32
        while w < 256 && w < length { w *= 2 }
        return w
    }

    private func dispatch(
        _ kernel: String, _ bind: (any MTLComputeCommandEncoder) -> Void,
        _ launch: (any MTLComputeCommandEncoder, any MTLComputePipelineState) -> Void
    ) {
        lock.withLock {
            guard let pipeline = pipeline(kernel) else {
                // Every pipeline of a library is built before the backend serves "metal", and a
                // family whose library or pipelines failed is routed to the host, so a kernel
                // reached here without a pipeline is a kernel name no library has: a bug in
                // lucid, which must not leave an output unwritten.
                preconditionFailure("metal: kernel \(kernel) is in no compiled kernel library")
            }
            guard let e = openEncoder() else {
                Warnings.emit("metal: could not open a command buffer")
                return
            }
            e.setComputePipelineState(pipeline)
            bind(e)
            launch(e, pipeline)
            counted(kernel)
        }
    }

    /// Counts one dispatch of `kernel` and commits the open command buffer once it holds
    /// `commitEvery` (the lock held).
    private func counted(_ kernel: String) {
        counters.dispatches[kernel, default: 0] += 1
        openDispatches += 1
        if openDispatches >= Self.commitEvery { commitOpen() }
    }

    /// Runs `body` with the open command buffer and no compute encoder open, for kernels that
    /// encode themselves (Metal Performance Shaders); `kernel` names it in the counts.
    func encodeIntoCommandBuffer(_ kernel: String, _ body: (any MTLCommandBuffer) -> Void) {
        lock.withLock {
            encoder?.endEncoding()
            encoder = nil
            openCommandBuffer()
            guard let commandBuffer else {
                Warnings.emit("metal: could not open a command buffer")
                return
            }
            body(commandBuffer)
            counted(kernel)
        }
    }

    private func openEncoder() -> (any MTLComputeCommandEncoder)? {
        if let encoder { return encoder }
        openCommandBuffer()
        encoder = commandBuffer?.makeComputeCommandEncoder()
        return encoder
    }

    private func openCommandBuffer() {
        // A generation is counted only for a command buffer made: each one must complete.
        guard commandBuffer == nil, let made = queue.makeCommandBuffer() else { return }
        commandBuffer = made
        generation += 1
    }

    /// The pipeline of a kernel (the lock held), compiling the kernel libraries at first use;
    /// nil when no library that compiled has the kernel or its pipeline did not build.
    private func pipeline(_ kernel: String) -> (any MTLComputePipelineState)? {
        if libraries == nil { compileLibraries() }
        return pipelines[kernel]
    }

    /// Makes every family's library and builds every pipeline of each (the lock held), once: the
    /// library compiled ahead of time where one was made from this engine's source
    /// (`MetalPrebuilt`) and loads with every pipeline, else compiled from the embedded source.
    private func compileLibraries() {
        let prebuilt = MetalPrebuilt.find()
        var compiled: [MetalKernelLibrary] = []
        for (name, source) in MetalKernelSource.families {
            var library = MetalKernelLibrary(name: name, source: MetalKernelSource.common + source)
            library.prebuiltDirectory = prebuilt?.directory
            var built: [String: any MTLComputePipelineState]?
            switch prebuilt?.load(name, source: library.source, on: gpu) {
            case .loaded(let made, let path, let identity)?:
                do {
                    built = try pipelines(of: made, name)
                    (library.origin, library.detail, library.identity) = (.prebuilt, path, identity)
                } catch {
                    library.detail = "\(path) loaded, but \((error as? LucidError)?.message ?? "\(error)")"
                }
            case .unused(let why)?: library.detail = why
            case nil: break
            }
            do {
                if built == nil {
                    counters.libraryCompiles += 1
                    let made: any MTLLibrary
                    do {
                        made = try gpu.makeLibrary(source: library.source, options: Self.compileOptions())
                    } catch {
                        throw LucidError.runtime("metal: the \(name) kernels (\(name).metal) did not compile: \(error)")
                    }
                    built = try pipelines(of: made, name)
                }
                library.kernels = built?.keys.sorted() ?? []
                pipelines.merge(built ?? [:]) { first, _ in first }
            } catch {
                library.error = (error as? LucidError)?.message ?? "\(error)"
            }
            compiled.append(library)
        }
        libraries = compiled
    }

    /// The pipeline of every kernel of `library`, the library of Kernels/<name>.metal.
    private func pipelines(of library: any MTLLibrary, _ name: String) throws -> [String: any MTLComputePipelineState] {
        var built: [String: any MTLComputePipelineState] = [:]
        for kernel in library.functionNames.sorted() {
            guard let f = library.makeFunction(name: kernel) else {
                throw LucidError.runtime("metal: the \(name) library lists \(kernel) but has no such function")
            }
            do {
                built[kernel] = try gpu.makeComputePipelineState(function: f)
            } catch {
                throw LucidError.runtime("metal: the pipeline of kernel \(kernel) (\(name).metal) did not build: \(error)")
            }
        }
        return built
    }

    /// The kernel libraries, compiled (and their pipelines built) at the first call.
    var kernelLibraries: [MetalKernelLibrary] {
        lock.withLock {
            if libraries == nil { compileLibraries() }
            return libraries ?? []
        }
    }

    /// Sends `family` to the host (its route), for `reason`; only before the backend serves
    /// "metal" (`Backends`).
    func decline(_ family: KernelFamily, because reason: String) {
        declinedFamilies[family] = declinedFamilies[family] ?? reason
    }

    /// The widths of the SIMD groups the built pipelines run in, other than 32 (Apple's GPUs),
    /// by kernel: lucid's kernels split their threadgroups into SIMD groups of 32 threads.
    var foreignExecutionWidths: [String: Int] {
        lock.withLock {
            if libraries == nil { compileLibraries() }
            return pipelines.filter { $0.value.threadExecutionWidth != 32 }.mapValues(\.threadExecutionWidth)
        }
    }

    /// MSL 3.1 (for `bfloat`), with IEEE NaN and infinities as the host kernels have them: safe
    /// math and precise functions where the OS has those options (macOS 15, iOS 18), fast math
    /// off before. Set by key, so that the same source builds against every SDK.
    static func compileOptions() -> MTLCompileOptions {
        let options = MTLCompileOptions()
        options.languageVersion = .version3_1
        #if canImport(ObjectiveC)
        if options.responds(to: NSSelectorFromString("setMathMode:")),
            options.responds(to: NSSelectorFromString("setMathFloatingPointFunctions:"))
        {
            options.setValue(0, forKey: "mathMode")  // MTLMathModeSafe
            options.setValue(1, forKey: "mathFloatingPointFunctions")  // MTLMathFloatingPointFunctionsPrecise
            return options
        }
        #endif
        options.fastMathEnabled = false
        return options
    }

    /// What the backend has done since the process started.
    var stats: Metal.Stats {
        var s = lock.withLock { counters }
        cacheLock.withLock {
            s.newBuffers = newBuffers
            s.cachedBytes = cachedBytes
        }
        s.hostFallbacks = HostKernelFallbacks.total
        return s
    }
}

/// Why the Metal backend does not serve "metal" at all (the message of the host fallback's
/// warning).
struct MetalRefusal: Error {
    let reason: String
    init(_ reason: String) { self.reason = reason }
}

/// One of the backend's kernel libraries: Kernels/Common.metal followed by one family's file
/// (Kernels/<name>.metal), compiled on its own so that a compile error, or a pipeline that does
/// not build, sends only that family to the host.
struct MetalKernelLibrary: Sendable {
    /// The file's name without .metal ("Elementwise").
    let name: String
    let source: String
    /// Where its kernels come from: compiled at run time from `source`, or loaded from the
    /// library compiled ahead of time (`MetalPrebuilt`).
    var origin = Origin.source
    /// The folder of libraries compiled ahead of time, if there is one.
    var prebuiltDirectory: String?
    /// The prebuilt library's path; for a library compiled from source although that folder
    /// exists, why its prebuilt library was not used; "" when there is no folder.
    var detail = ""
    /// What the self-test's cache knows it by: a hash of its source, or of its prebuilt file.
    var identity: UInt64
    /// Its kernels, each with a pipeline; empty when it failed.
    var kernels: [String] = []
    /// The compiler's (or pipeline builder's) message when it failed.
    var error: String?

    /// The kernel family its calls are routed by. Elementwise.metal also holds the backend's
    /// fills and copies, its core (`MetalSelfTest.Row.family` nil): without them no family runs.
    var family: KernelFamily {
        guard let f = KernelFamily(rawValue: name.lowercased()) else {
            preconditionFailure("metal: Kernels/\(name).metal is named after no kernel family")
        }
        return f
    }

    /// The family whose library holds the fills and copies.
    static let coreFamily = KernelFamily.elementwise

    enum Origin: String, Sendable {
        case source, prebuilt
    }

    init(name: String, source: String) {
        self.name = name
        self.source = source
        identity = MetalSelfTestCache.fnv1a(source.utf8)
    }
}

/// An int32 flag a kernel sets on the device (an index out of range), and the error it stands
/// for, made on the host once the flag is seen set.
struct DeferredCheck: Sendable {
    let flag: TensorImpl
    let report: @Sendable () -> LucidError

    /// Whether the kernel set the flag; only once its command buffer has completed.
    var isSet: Bool { HostBackend.address(flag).load(as: Int32.self) != 0 }
}

/// Binds a tensor's buffer (at its offset) to argument `index`, labelled with its dtype so
/// that tools (and the emulation's checks) can tell what it holds.
func bind(_ t: TensorImpl, _ index: Int, _ e: any MTLComputeCommandEncoder) {
    let buffer = t.metalBufferForEncoding().buffer
    let label = "lucid:\(t.dtype.name)"
    if buffer.label != label { buffer.label = label }
    e.setBuffer(buffer, offset: t.offset * t.dtype.itemSize, index: index)
}

extension TensorImpl {
    /// The tensor's Metal buffer, marked as used by the open command buffer; only while
    /// encoding, with the backend's lock held.
    func metalBufferForEncoding() -> MetalBuffer {
        let b = unsafeDowncast(storage.buffer, to: MetalBuffer.self)
        b.lastUse = b.ownerGeneration
        return b
    }
}

/// Binds a plain value (a scalar, or an array's elements) as constant bytes.
func setBytes<T>(_ value: T, _ index: Int, _ e: any MTLComputeCommandEncoder) {
    withUnsafeBytes(of: value) { e.setBytes($0.baseAddress!, length: $0.count, index: index) }
}

func setBytes<T>(_ values: [T], _ index: Int, _ e: any MTLComputeCommandEncoder) {
    values.withUnsafeBytes { e.setBytes($0.baseAddress!, length: $0.count, index: index) }
}
#endif
