#if canImport(CDNNL)
import CDNNL
import CHostKernels

/// oneDNN 3 on the CPU: batched GEMM through its matmul primitive for the dtypes where it
/// beats widening to float32 for BLAS (bfloat16 on AVX-512 BF16 and AMX, large float32),
/// vectorised unary ops, softmax and the pieces of fused attention; convolution is in
/// DNNL+Convolution.swift. Primitives are built once per shape, layout and dtype and kept;
/// anything oneDNN declines falls back to the engine's own kernels.
enum DNNL {
    struct Key: Hashable {
        var dtype: DType, outType: DType, bias: Bool, scale: Float
        var dims: [Int]  // batch_a, batch_b, m, n, k
        var strides: [Int]  // a (batch, row, col), b (batch, row, col)
    }

    final class Runtime: @unchecked Sendable {
        var engine: dnnl_engine_t?
        var stream: dnnl_stream_t?
        var matmuls: [Key: Matmul] = [:]
        /// The matmuls over packed weights, each with the reorder that packs them (`pack`).
        var packedMatmuls: [Key: (matmul: Matmul, reorder: Primitive, plain: MemoryDesc)] = [:]
        var eltwise: [EltwiseKey: Primitive] = [:]
        /// nil for a softmax oneDNN would run only on its reference implementation (declined).
        var softmax: [SoftmaxKey: Primitive?] = [:]
        private let lock = Lock()
        /// The threads the primitives above were built for (0: none built yet).
        private var threads: Int32 = 0

        init?() {
            // LUCID_DNNL=0 turns oneDNN off (the BLAS and im2col paths then serve everything).
            if let v = environmentValue("LUCID_DNNL"), ["0", "false", "off", "no"].contains(v.lowercased()) { return nil }
            guard dnnl_engine_create(&engine, dnnl_cpu, 0) == dnnl_success,
                dnnl_stream_create(&stream, engine, UInt32(dnnl_stream_default_flags.rawValue)) == dnnl_success
            else {
                return nil
            }
        }

        /// Runs `body` holding the runtime's lock, with oneDNN set to the engine's thread
        /// count. oneDNN fixes a primitive's threads when it is built and takes them from
        /// OpenMP's setting for the calling thread, so that setting is made on the calling
        /// thread for the call and then put back (the OpenMP runtime is shared with the rest
        /// of the process: another library's count is its own), and the primitives are
        /// dropped when the count changes: built for another count they would keep it.
        ///
        /// A forked child runs oneDNN on one thread: GNU OpenMP's pool stayed in the parent,
        /// and a parallel region of more than one thread would wait for it forever. So does a
        /// process whose cores another keeps busy (`lucid_host_solo`), until they are free.
        func locked<R>(_ body: () -> R) -> R {
            lock.withLock {
                let want = lucid_host_forks() != 0 || lucid_host_solo() != 0 ? 1 : Int32(HostThreads.current)
                let before = lucid_dnnl_num_threads()
                if before != want { lucid_dnnl_set_num_threads(want) }
                defer { if before != want { lucid_dnnl_set_num_threads(before) } }
                if threads != want {
                    threads = want
                    matmuls.removeAll()
                    packedMatmuls.removeAll()
                    eltwise.removeAll()
                    softmax.removeAll()
                    DNNL.dropConvolutions()
                }
                return body()
            }
        }
    }

    struct EltwiseKey: Hashable { var alg: UInt32, dtype: DType, count: Int, backward = false }
    struct SoftmaxKey: Hashable { var shape: [Int], axis: Int, log: Bool, dtype: DType, outType: DType }

    /// oneDNN's execution argument indices (`DNNL_ARG_*`).
    enum Arg {
        static let src: Int32 = 1, dst: Int32 = 17, weights: Int32 = 33, bias: Int32 = 41
        static let diffSrc: Int32 = 129, diffDst: Int32 = 145, diffWeights: Int32 = 161
    }

    /// An owned memory descriptor: in oneDNN 3 descriptors are opaque objects that must be
    /// destroyed, and those a primitive descriptor reports belong to it, so they are cloned.
    final class MemoryDesc: @unchecked Sendable {
        let md: dnnl_memory_desc_t

        private init(_ md: dnnl_memory_desc_t) { self.md = md }
        deinit { dnnl_memory_desc_destroy(md) }

        /// A plain layout with the given element strides.
        convenience init?(_ shape: [Int], strides: [Int], _ type: dnnl_data_type_t) {
            var md: dnnl_memory_desc_t?
            let d = shape.map(Int64.init), s = strides.map(Int64.init)
            let status = d.withUnsafeBufferPointer { dp in
                s.withUnsafeBufferPointer { sp in
                    dnnl_memory_desc_create_with_strides(&md, Int32(shape.count), dp.baseAddress, type, sp.baseAddress)
                }
            }
            guard status == dnnl_success, let md else { return nil }
            self.init(md)
        }

        /// A layout left to the primitive (`format_tag::any`): oneDNN picks its fastest.
        convenience init?(any shape: [Int], _ type: dnnl_data_type_t) {
            var md: dnnl_memory_desc_t?
            let d = shape.map(Int64.init)
            let status = d.withUnsafeBufferPointer {
                dnnl_memory_desc_create_with_tag(&md, Int32(shape.count), $0.baseAddress, type, dnnl_format_tag_any)
            }
            guard status == dnnl_success, let md else { return nil }
            self.init(md)
        }

        /// A copy of a descriptor owned by something else (a primitive descriptor).
        convenience init?(cloning other: const_dnnl_memory_desc_t) {
            var md: dnnl_memory_desc_t?
            guard dnnl_memory_desc_clone(&md, other) == dnnl_success, let md else { return nil }
            self.init(md)
        }

        var byteSize: Int { dnnl_memory_desc_get_size(md) }

        func sameLayout(as other: MemoryDesc) -> Bool { dnnl_memory_desc_equal(md, other.md) != 0 }
    }

    /// A built primitive, destroyed with its last reference (a cache eviction).
    final class Primitive: @unchecked Sendable {
        let handle: dnnl_primitive_t
        /// The threads it runs on: OpenMP's setting for the thread that built it.
        let threads = lucid_dnnl_num_threads()
        init(_ handle: dnnl_primitive_t) { self.handle = handle }
        deinit { dnnl_primitive_destroy(handle) }

        /// The primitive a primitive descriptor describes; the descriptor is destroyed.
        static func make(from pd: dnnl_primitive_desc_t?) -> Primitive? {
            guard let pd else { return nil }
            defer { dnnl_primitive_desc_destroy(pd) }
            var prim: dnnl_primitive_t?
            guard dnnl_primitive_create(&prim, pd) == dnnl_success, let prim else { return nil }
            return Primitive(prim)
        }
    }

    static let runtime = Runtime()
    static let maxPrimitives = 512
    /// Multiply-adds below which a matmul runs on one thread. Measured on bfloat16 products
    /// with two threads: one thread is 3× faster at 1M under a passive OpenMP wait policy
    /// (each product wakes the pool's sleeping threads) and 12% slower with spinning threads;
    /// at 4M, 1.4× faster and 1.4× slower.
    static let smallMatmulWork = 1 << 20

    /// Executes `prim` on `arguments` (index, layout, address) and waits for it.
    static func execute(
        _ rt: Runtime, _ prim: Primitive,
        _ arguments: [(Int32, MemoryDesc, UnsafeMutableRawPointer)]
    ) -> Bool {
        var args: [dnnl_exec_arg_t] = []
        defer { for a in args { dnnl_memory_destroy(a.memory) } }
        for (index, desc, address) in arguments {
            var mem: dnnl_memory_t?
            guard dnnl_memory_create(&mem, desc.md, rt.engine, address) == dnnl_success else { return false }
            args.append(dnnl_exec_arg_t(arg: index, memory: mem))
        }
        // A primitive on several threads is judged as a parallel region, for contention with
        // another process.
        let region = prim.threads > 1 ? lucid_host_region_begin() : nil
        defer { if let region { lucid_host_region_end(region) } }
        guard dnnl_primitive_execute(prim.handle, rt.stream, Int32(args.count), &args) == dnnl_success else { return false }
        return dnnl_stream_wait(rt.stream) == dnnl_success
    }

    /// Stores a built primitive in one of the caches, emptying a full cache first.
    static func keep<K: Hashable, V>(_ value: V, as key: K, in cache: inout [K: V]) {
        if cache.count >= maxPrimitives { cache.removeAll() }
        cache[key] = value
    }

    /// Whether `pd` is one of oneDNN's reference implementations: plain loops, far slower
    /// than the engine's own paths.
    static func isReference(_ pd: dnnl_primitive_desc_t) -> Bool {
        var name: UnsafePointer<CChar>?
        guard dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) == dnnl_success, let name else {
            return false
        }
        return String(cString: name).hasPrefix("ref")
    }

    /// oneDNN's type for `d`, where oneDNN has kernels for it on this CPU.
    static func dataType(_ d: DType) -> dnnl_data_type_t? {
        switch d {
        case .float32: return dnnl_f32
        case .bfloat16: return servesBFloat16 ? dnnl_bf16 : nil
        default: return nil
        }
    }

    /// Whether oneDNN builds bfloat16 primitives on this CPU: it has bfloat16 kernels for
    /// AVX-512 and newer and declines them elsewhere (an AVX2 CPU). Asked once, with a 1×1×1
    /// matmul; where it declines, everything bfloat16 stays on the engine's own kernels from
    /// the start rather than failing to build a primitive at each call.
    static let servesBFloat16: Bool = {
        guard let rt = runtime, let one = MemoryDesc([1, 1, 1], strides: [1, 1, 1], dnnl_bf16) else { return false }
        var pd: dnnl_primitive_desc_t?
        guard dnnl_matmul_primitive_desc_create(&pd, rt.engine, one.md, one.md, nil, one.md, nil) == dnnl_success else {
            return false
        }
        dnnl_primitive_desc_destroy(pd)
        return true
    }()

    /// `out[i] = a[i] @ b[i] (+ bias)` as `Backend.gemm` specifies, or false when oneDNN does
    /// not take it (then nothing was written).
    static func gemm(_ a: TensorImpl, _ b: TensorImpl, bias: TensorImpl?, into out: TensorImpl) -> Bool {
        guard let rt = runtime else { return false }
        return rt.locked { matmul(rt, a, b, bias: bias, scale: 1, into: out) }
    }

    /// A matmul primitive with the layouts of its arguments.
    final class Matmul: @unchecked Sendable {
        let primitive: Primitive
        let src: MemoryDesc, weights: MemoryDesc, dst: MemoryDesc, bias: MemoryDesc?
        init(_ primitive: Primitive, _ src: MemoryDesc, _ weights: MemoryDesc, _ dst: MemoryDesc, _ bias: MemoryDesc?) {
            (self.primitive, self.src, self.weights, self.dst, self.bias) = (primitive, src, weights, dst, bias)
        }
    }

    /// `out[i] = scale · a[i] @ b[i] (+ bias)` with the lock held: `a` [B|1, M, K] and `b`
    /// [B|1, K, N] of one dtype (any strides, batch stride 0 for a broadcast operand), `out`
    /// a contiguous [B, M, N] of float32 or a's dtype.
    static func matmul(
        _ rt: Runtime, _ a: TensorImpl, _ b: TensorImpl, bias: TensorImpl?, scale: Float,
        into out: TensorImpl
    ) -> Bool {
        guard let inType = dataType(a.dtype), let outType = dataType(out.dtype),
            b.dtype == a.dtype, bias.map({ $0.dtype == out.dtype && $0.isContiguous }) ?? true,
            out.numel > 0, a.shape[2] > 0
        else { return false }
        let batch = out.shape[0], m = out.shape[1], n = out.shape[2], k = a.shape[2]
        // A row or column stride of 0 (an expanded operand, such as the gradient of a sum)
        // sends oneDNN to its reference kernel, a thousand times slower than packing it first,
        // which the BLAS path does.
        guard a.strides[1] != 0 || m == 1, a.strides[2] != 0 || k == 1, b.strides[1] != 0 || k == 1,
            b.strides[2] != 0 || n == 1
        else { return false }
        // A batch stride of 0 is a broadcast operand: oneDNN takes it as batch size 1.
        let ba = a.strides[0] == 0 ? 1 : batch, bb = b.strides[0] == 0 ? 1 : batch
        let key = Key(
            dtype: a.dtype, outType: out.dtype, bias: bias != nil, scale: scale, dims: [ba, bb, m, n, k],
            strides: [
                ba == 1 ? m * k : a.strides[0], a.strides[1], a.strides[2],
                bb == 1 ? k * n : b.strides[0], b.strides[1], b.strides[2],
            ])
        guard let mm = matmulPrimitive(rt, key, inType, outType) else { return false }
        var args = [
            (Arg.src, mm.src, HostBackend.address(a)), (Arg.weights, mm.weights, HostBackend.address(b)),
            (Arg.dst, mm.dst, HostBackend.address(out)),
        ]
        if let bias, let md = mm.bias { args.append((Arg.bias, md, HostBackend.address(bias))) }
        return execute(rt, mm.primitive, args)
    }

    /// A right operand `b` ([1, K, N]) reordered once into the layout oneDNN's matmul picks
    /// for products with `m`-row left operands, with the primitive that reads it. A recurrent
    /// layer multiplies its hidden-state weights at every step; given them in a plain layout,
    /// oneDNN packs them again at every call, which at the layers' shapes ([16, 128] by
    /// [128, 512]) is most of the product's time.
    final class PackedWeights: @unchecked Sendable {
        let matmul: Matmul
        let block: (UnsafeMutableRawPointer, Int)
        /// The product's shape: [rows, k] by [k, n].
        let rows: Int, k: Int, n: Int
        let inType: DType, outType: DType
        init(_ matmul: Matmul, _ block: (UnsafeMutableRawPointer, Int), _ key: Key) {
            (self.matmul, self.block) = (matmul, block)
            (rows, n, k) = (key.dims[2], key.dims[3], key.dims[4])
            (inType, outType) = (key.dtype, key.outType)
        }
        deinit { HostAllocator.shared.release(block.0, size: block.1) }
    }

    /// `b` packed for `gemm(_:packed:bias:into:)`, or nil when oneDNN does not take it.
    static func pack(_ b: TensorImpl, rows m: Int, bias: Bool, outType: DType) -> PackedWeights? {
        guard let rt = runtime, let inType = dataType(b.dtype), let outT = dataType(outType), b.ndim == 3, b.shape[0] == 1
        else { return nil }
        let k = b.shape[1], n = b.shape[2]
        guard m > 0, k > 0, n > 0, b.strides[1] != 0 || k == 1, b.strides[2] != 0 || n == 1 else { return nil }
        let key = Key(
            dtype: b.dtype, outType: outType, bias: bias, scale: 1, dims: [1, 1, m, n, k],
            strides: [m * k, k, 1, k * n, b.strides[1], b.strides[2]])
        return rt.locked { () -> PackedWeights? in
            guard let (mm, reorder, plain) = rt.packedMatmuls[key] ?? packedMatmul(rt, key, inType, outT),
                let block = try? HostAllocator.shared.allocate(max(mm.weights.byteSize, 1))
            else { return nil }
            let packed = PackedWeights(mm, block, key)
            // The reorder's source and destination are its `from` and `to` arguments (1 and 17).
            guard execute(rt, reorder, [(Arg.src, plain, HostBackend.address(b)), (Arg.dst, mm.weights, block.0)]) else {
                return nil
            }
            return packed
        }
    }

    /// The matmul `pack` builds for `key` (a [1, m, k] by [1, k, n] product), whose weights
    /// take the layout oneDNN picks, with the reorder into it from b's plain layout.
    private static func packedMatmul(_ rt: Runtime, _ key: Key, _ inType: dnnl_data_type_t, _ outType: dnnl_data_type_t)
        -> (Matmul, Primitive, MemoryDesc)?
    {
        let (m, n, k) = (key.dims[2], key.dims[3], key.dims[4])
        guard let src = MemoryDesc([1, m, k], strides: [m * k, k, 1], inType),
            let plain = MemoryDesc([1, k, n], strides: Array(key.strides[3..<6]), inType),
            let any = MemoryDesc(any: [1, k, n], inType),
            let dst = MemoryDesc([1, m, n], strides: [m * n, n, 1], outType)
        else { return nil }
        let biasDesc = key.bias ? MemoryDesc([1, 1, n], strides: [n, n, 1], outType) : nil
        if key.bias && biasDesc == nil { return nil }
        let made = buildingMatmul(work: m * n * k) { () -> (Primitive, MemoryDesc)? in
            var pd: dnnl_primitive_desc_t?
            guard dnnl_matmul_primitive_desc_create(&pd, rt.engine, src.md, any.md, biasDesc?.md, dst.md, nil) == dnnl_success,
                let pd
            else { return nil }
            let chosen = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0).flatMap { MemoryDesc(cloning: $0) }
            guard let prim = Primitive.make(from: pd), let chosen else { return nil }
            return (prim, chosen)
        }
        guard let (prim, chosen) = made else { return nil }
        var rpd: dnnl_primitive_desc_t?
        guard dnnl_reorder_primitive_desc_create(&rpd, plain.md, rt.engine, chosen.md, rt.engine, nil) == dnnl_success,
            let reorder = Primitive.make(from: rpd)
        else { return nil }
        let built = (Matmul(prim, src, chosen, dst, biasDesc), reorder, plain)
        keep(built, as: key, in: &rt.packedMatmuls)
        return built
    }

    /// `out = a @ b (+ bias)` with `b` as `pack` packed it: `a` a row-major [1, rows, K] of
    /// b's dtype, `out` a contiguous [1, rows, N] of the packed output type; false (nothing
    /// written) for anything else.
    static func gemm(_ a: TensorImpl, packed p: PackedWeights, bias: TensorImpl?, into out: TensorImpl) -> Bool {
        let k = p.k
        guard let rt = runtime, a.dtype == p.inType, out.dtype == p.outType, a.shape == [1, p.rows, k],
            out.shape == [1, p.rows, p.n], a.strides[1] == k || p.rows == 1, a.strides[2] == 1 || k == 1, out.isContiguous,
            (bias != nil) == (p.matmul.bias != nil), bias.map({ $0.dtype == p.outType && $0.isContiguous && $0.numel == p.n }) ?? true
        else { return false }
        var args = [
            (Arg.src, p.matmul.src, HostBackend.address(a)), (Arg.weights, p.matmul.weights, p.block.0),
            (Arg.dst, p.matmul.dst, HostBackend.address(out)),
        ]
        if let bias, let md = p.matmul.bias { args.append((Arg.bias, md, HostBackend.address(bias))) }
        return rt.locked { execute(rt, p.matmul.primitive, args) }
    }

    private static func matmulPrimitive(
        _ rt: Runtime, _ key: Key, _ inType: dnnl_data_type_t,
        _ outType: dnnl_data_type_t
    ) -> Matmul? {
        if let p = rt.matmuls[key] { return p }
        let (ba, bb, m, n, k) = (key.dims[0], key.dims[1], key.dims[2], key.dims[3], key.dims[4])
        guard let src = MemoryDesc([ba, m, k], strides: Array(key.strides[0..<3]), inType),
            let wei = MemoryDesc([bb, k, n], strides: Array(key.strides[3..<6]), inType),
            let dst = MemoryDesc([max(ba, bb), m, n], strides: [m * n, n, 1], outType)
        else { return nil }
        let bias = key.bias ? MemoryDesc([1, 1, n], strides: [n, n, 1], outType) : nil
        if key.bias && bias == nil { return nil }
        // The scale multiplies the float32 accumulator before it is rounded to the output
        // type (oneDNN 3 keeps output scales for quantised types; a linear post-op is its
        // form for floating point).
        var attr: dnnl_primitive_attr_t?
        var postOps: dnnl_post_ops_t?
        defer {
            if attr != nil { dnnl_primitive_attr_destroy(attr) }
            if postOps != nil { dnnl_post_ops_destroy(postOps) }
        }
        if key.scale != 1 {
            guard dnnl_primitive_attr_create(&attr) == dnnl_success, dnnl_post_ops_create(&postOps) == dnnl_success,
                dnnl_post_ops_append_eltwise(postOps, dnnl_eltwise_linear, key.scale, 0) == dnnl_success,
                dnnl_primitive_attr_set_post_ops(attr, postOps) == dnnl_success
            else { return nil }
        }
        let made = buildingMatmul(work: max(ba, bb) * m * n * k) { () -> Primitive? in
            var pd: dnnl_primitive_desc_t?
            guard dnnl_matmul_primitive_desc_create(&pd, rt.engine, src.md, wei.md, bias?.md, dst.md, attr) == dnnl_success
            else { return nil }
            return Primitive.make(from: pd)
        }
        guard let prim = made else { return nil }
        let built = Matmul(prim, src, wei, dst, bias)
        keep(built, as: key, in: &rt.matmuls)
        return built
    }

    /// `body`, which builds a matmul primitive of `work` multiply-adds, with oneDNN set to one
    /// thread for a small product: waking the pool's threads (a system call each under a
    /// passive wait policy) takes longer than the product itself.
    private static func buildingMatmul<R>(work: Int, _ body: () -> R) -> R {
        let threads = lucid_dnnl_num_threads()
        let single = threads > 1 && work < smallMatmulWork
        if single { lucid_dnnl_set_num_threads(1) }
        defer { if single { lucid_dnnl_set_num_threads(threads) } }
        return body()
    }
}

extension DNNL {
    /// oneDNN's vectorised (and threaded) form of a unary op, where it is as accurate as libm
    /// (within a few ulp). Its log loses relative accuracy near 1, so that stays on libm. Its
    /// exact gelu is PyTorch's CPU kernel to the bit: absolute error below 2e-6, but below
    /// x = -3 it loses relative accuracy (about 1e-4 at -3, flushing to 0 past -5.5), where
    /// FastMath's keeps 1e-7. It serves float32 only (10× faster than FastMath here), as in
    /// PyTorch; bfloat16, whose tails it would flush although bfloat16 holds them, keeps FastMath.
    /// GELU's tanh form and SiLU are not served: the host's loops (CHostKernels, on the widest
    /// vector unit) are faster (oneDNN's tanh form took 4 ns an element on AVX2, 4x the host's).
    private static func algorithm(_ op: UnaryKernel) -> (dnnl_alg_kind_t, Float)? {
        switch op {
        // sigmoid and tanh run on the host loops built for several vector units
        // (CHostKernels), which take one pass and need no scan for non-finite values.
        case .exp: return (dnnl_eltwise_exp, 0)
        case .gelu: return (dnnl_eltwise_gelu_erf, 0)
        default: return nil
        }
    }

    /// Below this many elements oneDNN's per-call set-up outweighs its faster loop.
    static let minEltwiseCount = 1 << 14

    /// `out = op(a)` for contiguous tensors of one shape and dtype (float32 or bfloat16), or
    /// false when oneDNN does not take it (then nothing was written).
    static func unary(_ op: UnaryKernel, _ a: TensorImpl, into out: TensorImpl) -> Bool {
        guard op != .gelu || a.dtype == .float32,
            let rt = runtime, let (alg, alpha) = algorithm(op), let type = dataType(a.dtype), a.dtype == out.dtype,
            a.isContiguous, out.isContiguous, a.numel >= minEltwiseCount,
            // oneDNN's exp turns NaN into inf and its gelu +inf into NaN: tensors holding either
            // take the host loops, so that a value's result does not depend on its tensor's size.
            !HostBackend.containsNonFinite(a)
        else { return false }
        let n = a.numel
        return rt.locked { () -> Bool in
            guard let md = MemoryDesc([n], strides: [1], type) else { return false }
            let key = EltwiseKey(alg: alg.rawValue, dtype: a.dtype, count: n)
            var prim = rt.eltwise[key]
            if prim == nil {
                var pd: dnnl_primitive_desc_t?
                guard
                    dnnl_eltwise_forward_primitive_desc_create(
                        &pd, rt.engine, dnnl_forward_inference, alg, md.md, md.md,
                        alpha, 0, nil) == dnnl_success,
                    let made = Primitive.make(from: pd)
                else { return false }
                keep(made, as: key, in: &rt.eltwise)
                prim = made
            }
            guard let prim else { return false }
            return execute(rt, prim, [(Arg.src, md, HostBackend.address(a)), (Arg.dst, md, HostBackend.address(out))])
        }
    }

    /// `gradIn = grad · op'(x)` through oneDNN's eltwise backward, for the float32 ops whose
    /// derivative reads the input through a transcendental function (the exact gelu),
    /// or false when oneDNN does not take it. Its derivatives at NaN and ±inf are NaN,
    /// as the host loops' are, so no tensor needs turning away here.
    static func unaryBackward(_ op: UnaryKernel, x: TensorImpl, grad: TensorImpl, into gradIn: TensorImpl) -> Bool {
        guard op == .gelu, x.dtype == .float32, let rt = runtime, let (alg, alpha) = algorithm(op), let type = dataType(x.dtype),
            x.dtype == grad.dtype, x.dtype == gradIn.dtype, x.isContiguous, grad.isContiguous, gradIn.isContiguous,
            x.numel >= minEltwiseCount
        else { return false }
        let n = x.numel
        return rt.locked { () -> Bool in
            guard let md = MemoryDesc([n], strides: [1], type) else { return false }
            let key = EltwiseKey(alg: alg.rawValue, dtype: x.dtype, count: n, backward: true)
            var prim = rt.eltwise[key]
            if prim == nil {
                var hint: dnnl_primitive_desc_t?
                guard
                    dnnl_eltwise_forward_primitive_desc_create(
                        &hint, rt.engine, dnnl_forward_training, alg, md.md, md.md,
                        alpha, 0, nil) == dnnl_success, let hint
                else { return false }
                defer { dnnl_primitive_desc_destroy(hint) }
                var pd: dnnl_primitive_desc_t?
                guard
                    dnnl_eltwise_backward_primitive_desc_create(
                        &pd, rt.engine, alg, md.md, md.md, md.md, alpha, 0, hint,
                        nil) == dnnl_success,
                    let made = Primitive.make(from: pd)
                else { return false }
                keep(made, as: key, in: &rt.eltwise)
                prim = made
            }
            guard let prim else { return false }
            return execute(
                rt, prim,
                [
                    (Arg.src, md, HostBackend.address(x)), (Arg.diffDst, md, HostBackend.address(grad)),
                    (Arg.diffSrc, md, HostBackend.address(gradIn)),
                ])
        }
    }
}

extension DNNL {
    /// softmax (or log-softmax) of a contiguous float32/bfloat16 tensor along `axis`, in
    /// float32 arithmetic, or false when oneDNN does not take it.
    static func softmax(_ x: TensorImpl, axis: Int, log: Bool, into out: TensorImpl) -> Bool {
        guard let rt = runtime, x.dtype == out.dtype else { return false }
        return rt.locked { softmax(rt, x, axis: axis, log: log, into: out) }
    }

    /// Whether `softmax` takes this softmax (its primitive made and kept on the first ask).
    static func takesSoftmax(_ x: TensorImpl, axis: Int, log: Bool, into out: TensorImpl) -> Bool {
        guard let rt = runtime, x.dtype == out.dtype else { return false }
        return rt.locked { softmaxPlan(rt, x, axis: axis, log: log, into: out) != nil }
    }

    /// The same with the lock held; `out` may be float32 or bfloat16 whatever `x` is.
    static func softmax(_ rt: Runtime, _ x: TensorImpl, axis: Int, log: Bool, into out: TensorImpl) -> Bool {
        guard let (prim, md, outMD) = softmaxPlan(rt, x, axis: axis, log: log, into: out) else { return false }
        return execute(rt, prim, [(Arg.src, md, HostBackend.address(x)), (Arg.dst, outMD, HostBackend.address(out))])
    }

    /// The primitive and memory descriptors of a softmax oneDNN takes (the lock held), or nil.
    private static func softmaxPlan(
        _ rt: Runtime, _ x: TensorImpl, axis: Int, log: Bool,
        into out: TensorImpl
    ) -> (Primitive, MemoryDesc, MemoryDesc)? {
        guard let type = dataType(x.dtype), let outType = dataType(out.dtype), x.shape == out.shape,
            x.isContiguous, out.isContiguous, x.numel > 0, x.ndim <= 12
        else { return nil }
        let key = SoftmaxKey(shape: x.shape, axis: axis, log: log, dtype: x.dtype, outType: out.dtype)
        let strides = Shape.contiguousStrides(x.shape)
        guard let md = MemoryDesc(x.shape, strides: strides, type),
            let outMD = MemoryDesc(x.shape, strides: strides, outType)
        else { return nil }
        let prim: Primitive?
        if let cached = rt.softmax[key] {
            prim = cached
        } else {
            var pd: dnnl_primitive_desc_t?
            guard
                dnnl_softmax_forward_primitive_desc_create(
                    &pd, rt.engine, dnnl_forward_inference,
                    log ? dnnl_softmax_log : dnnl_softmax_accurate,
                    md.md, outMD.md, Int32(axis), nil) == dnnl_success,
                let pd
            else { return nil }
            // Along an axis its kernels do not take (the channels of an image batch, on AVX2)
            // oneDNN has only its reference softmax, a hundred times slower than the composed
            // form: declined, and remembered so.
            if isReference(pd) {
                dnnl_primitive_desc_destroy(pd)
                prim = nil
            } else {
                prim = Primitive.make(from: pd)
            }
            keep(prim, as: key, in: &rt.softmax)
        }
        guard let prim else { return nil }
        return (prim, md, outMD)
    }
}

extension DNNL {
    /// Scores held per chunk of batch entries: about one core's L2 cache, so that the
    /// scores the softmax reads, and the weights the second product reads, are still cached.
    static let attentionChunkBytes = 1 << 21

    /// `out = softmax(scale · q·kᵀ (causal: top-left aligned)) · v` for q [B, L, E],
    /// k [B, S, E], v [B, S, Ev] of one dtype (any strides), `out` a contiguous [B, L, Ev] and
    /// `weights` (when given) a contiguous [B, L, S] of that dtype. The scores and the softmax
    /// are float32; the scores of a few batch entries at a time stay in cache between the
    /// three steps. A 16-bit dtype oneDNN has no kernels for on this CPU (bfloat16 below
    /// AVX-512, float16) runs float32 products on widened copies, with the softmax's weights
    /// rounded to the dtype first, as its own products would read them. False when it fails
    /// (then `out` may hold partial results); `takesAttention` says beforehand whether oneDNN
    /// takes the problem.
    static func attention(
        _ q: TensorImpl, _ k: TensorImpl, _ v: TensorImpl, scale: Float, causal: Bool,
        weights: TensorImpl?, into out: TensorImpl
    ) -> Bool {
        guard let rt = runtime, takesAttention(q, k, v, weights: weights, into: out) else { return false }
        let widen = dataType(q.dtype) == nil
        let batch = q.shape[0], l = q.shape[1], s = k.shape[1], ev = v.shape[2]
        let chunk = max(1, min(batch, attentionChunkBytes / max(1, l * s * 4)))
        let host = Backends.host
        func widened(_ t: TensorImpl) -> TensorImpl? {
            guard widen else { return t }
            guard let w = try? TensorImpl.empty(t.shape, dtype: .float32, on: out.backend) else { return nil }
            host.copy(t, into: w)
            return w
        }
        guard let scores = try? TensorImpl.empty([chunk, l, s], dtype: .float32, on: out.backend),
            let probs = try? weights ?? TensorImpl.empty([chunk, l, s], dtype: q.dtype, on: out.backend),
            let wq = widened(q), let wk = widened(k), let wv = widened(v),
            let wide = widen ? try? TensorImpl.empty([chunk, l, ev], dtype: .float32, on: out.backend) : out
        else { return false }
        func slice(_ t: TensorImpl, _ start: Int, _ count: Int, _ transposed: Bool = false) -> TensorImpl {
            let st = t.strides, sh = t.shape
            return t.view(
                shape: transposed ? [count, sh[2], sh[1]] : [count, sh[1], sh[2]],
                strides: transposed ? [st[0], st[2], st[1]] : st, offset: t.offset + start * st[0])
        }
        return rt.locked { () -> Bool in
            var start = 0
            while start < batch {
                let count = min(chunk, batch - start)
                let sc = slice(scores, 0, count)
                let p = weights == nil ? slice(probs, 0, count) : slice(probs, start, count)
                guard matmul(rt, slice(wq, start, count), slice(wk, start, count, true), bias: nil, scale: scale, into: sc)
                else { return false }
                if causal { maskFuture(sc) }
                if widen {
                    // The weights rounded to the dtype, in the scores' place as float32.
                    guard softmax(rt, sc, axis: 2, log: false, into: sc) else { return false }
                    if weights == nil && q.dtype == .bfloat16 {
                        let x = HostBackend.address(sc).assumingMemoryBound(to: Float.self)
                        HostThreads.forEachRange(sc.numel) { r in BFloat16FastPath.round(x + r.lowerBound, r.count) }
                    } else {
                        host.copy(sc, into: p)
                        host.copy(p, into: sc)
                    }
                    let o = slice(wide, 0, count)
                    guard matmul(rt, sc, slice(wv, start, count), bias: nil, scale: 1, into: o) else { return false }
                    host.copy(o, into: slice(out, start, count))
                } else {
                    guard softmax(rt, sc, axis: 2, log: false, into: p),
                        matmul(rt, p, slice(wv, start, count), bias: nil, scale: 1, into: slice(out, start, count))
                    else { return false }
                }
                start += count
            }
            return true
        }
    }

    /// Whether `attention` takes this problem: float32, or a 16-bit float (in oneDNN's kernels
    /// or on float32 copies); contiguous results; no empty dimension.
    static func takesAttention(
        _ q: TensorImpl, _ k: TensorImpl, _ v: TensorImpl, weights: TensorImpl?,
        into out: TensorImpl
    ) -> Bool {
        guard runtime != nil, q.dtype == .float32 || q.dtype == .bfloat16 || q.dtype == .float16,
            k.dtype == q.dtype, v.dtype == q.dtype, out.dtype == q.dtype,
            out.isContiguous, weights.map({ $0.isContiguous && $0.dtype == q.dtype }) ?? true
        else { return false }
        return [q.shape[0], q.shape[1], q.shape[2], k.shape[1], v.shape[2]].allSatisfy { $0 > 0 }
    }

    /// Sets the scores of positions after each row's own (column > row) to -inf.
    private static func maskFuture(_ scores: TensorImpl) {
        let count = scores.shape[0], l = scores.shape[1], s = scores.shape[2]
        let base = HostBackend.address(scores).assumingMemoryBound(to: Float.self)
        for b in 0..<count {
            for i in 0..<l where i + 1 < s {
                let row = base + (b * l + i) * s
                (row + i + 1).update(repeating: -.infinity, count: s - i - 1)
            }
        }
    }
}
#endif
