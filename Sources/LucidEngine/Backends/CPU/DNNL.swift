#if canImport(CDNNL)
import CDNNL

/// Batched GEMM through oneDNN's matmul primitive, for the dtypes where it beats widening to
/// float32 for BLAS: bfloat16 (AVX-512 BF16 and AMX kernels). Primitives are built once per
/// shape, layout and dtype and kept; anything oneDNN declines falls back to the BLAS path.
enum DNNL {
    struct Key: Hashable {
        var dtype: DType, outType: DType, bias: Bool, scale: Float
        var dims: [Int]  // batch_a, batch_b, m, n, k
        var strides: [Int]  // a (batch, row, col), b (batch, row, col)
    }

    final class Runtime: @unchecked Sendable {
        var engine: dnnl_engine_t?
        var stream: dnnl_stream_t?
        var primitives: [Key: dnnl_primitive_t] = [:]
        var eltwise: [EltwiseKey: dnnl_primitive_t] = [:]
        var softmax: [SoftmaxKey: dnnl_primitive_t] = [:]
        let lock = Lock()

        init?() {
            // LUCID_DNNL=0 turns oneDNN off (the BLAS and im2col paths then serve everything).
            if let v = environmentValue("LUCID_DNNL"), ["0", "false", "off", "no"].contains(v.lowercased()) { return nil }
            guard dnnl_engine_create(&engine, dnnl_cpu, 0) == dnnl_success,
                  dnnl_stream_create(&stream, engine, dnnl_stream_default_flags.rawValue) == dnnl_success else { return nil }
        }
    }

    struct EltwiseKey: Hashable { var alg: UInt32, dtype: DType, count: Int }
    struct SoftmaxKey: Hashable { var shape: [Int], axis: Int, log: Bool, dtype: DType, outType: DType }

    static let runtime = Runtime()
    static let maxPrimitives = 512

    /// Runs a primitive that reads SRC (`src`, laid out as `srcMD`) and writes DST, and waits.
    static func run(_ rt: Runtime, _ prim: dnnl_primitive_t, _ srcMD: dnnl_memory_desc_t, _ src: TensorImpl,
                    _ dstMD: dnnl_memory_desc_t, _ dst: TensorImpl) -> Bool {
        var srcMD = srcMD, dstMD = dstMD
        var srcMem: dnnl_memory_t?, dstMem: dnnl_memory_t?
        defer { dnnl_memory_destroy(srcMem); dnnl_memory_destroy(dstMem) }
        guard dnnl_memory_create(&srcMem, &srcMD, rt.engine, HostBackend.address(src)) == dnnl_success,
              dnnl_memory_create(&dstMem, &dstMD, rt.engine, HostBackend.address(dst)) == dnnl_success else { return false }
        var args = [dnnl_exec_arg_t(arg: 1, memory: srcMem), dnnl_exec_arg_t(arg: 17, memory: dstMem)]  // SRC, DST
        guard dnnl_primitive_execute(prim, rt.stream, 2, &args) == dnnl_success else { return false }
        return dnnl_stream_wait(rt.stream) == dnnl_success
    }

    /// Stores a built primitive in one of the caches, emptying a full cache first.
    static func keep<K: Hashable>(_ prim: dnnl_primitive_t, as key: K, in cache: inout [K: dnnl_primitive_t]) {
        if cache.count >= maxPrimitives {
            for old in cache.values { dnnl_primitive_destroy(old) }
            cache.removeAll()
        }
        cache[key] = prim
    }

    static func dataType(_ d: DType) -> dnnl_data_type_t? {
        switch d {
        case .float32: return dnnl_f32
        case .bfloat16: return dnnl_bf16
        default: return nil
        }
    }

    static func desc(_ shape: [Int], _ strides: [Int], _ type: dnnl_data_type_t) -> dnnl_memory_desc_t? {
        var md = dnnl_memory_desc_t()
        let d = shape.map(Int64.init), s = strides.map(Int64.init)
        let status = d.withUnsafeBufferPointer { dp in
            s.withUnsafeBufferPointer { sp in
                dnnl_memory_desc_init_by_strides(&md, Int32(shape.count), dp.baseAddress, type, sp.baseAddress)
            }
        }
        return status == dnnl_success ? md : nil
    }

    /// `out[i] = a[i] @ b[i] (+ bias)` as `Backend.gemm` specifies, or false when oneDNN does
    /// not take it (then nothing was written).
    static func gemm(_ a: TensorImpl, _ b: TensorImpl, bias: TensorImpl?, into out: TensorImpl) -> Bool {
        guard let rt = runtime else { return false }
        return rt.lock.withLock { matmul(rt, a, b, bias: bias, scale: 1, into: out) }
    }

    /// `out[i] = scale · a[i] @ b[i] (+ bias)` with the lock held: `a` [B|1, M, K] and `b`
    /// [B|1, K, N] of one dtype (any strides, batch stride 0 for a broadcast operand), `out`
    /// a contiguous [B, M, N] of float32 or a's dtype.
    static func matmul(_ rt: Runtime, _ a: TensorImpl, _ b: TensorImpl, bias: TensorImpl?, scale: Float,
                       into out: TensorImpl) -> Bool {
        guard let inType = dataType(a.dtype), let outType = dataType(out.dtype),
              b.dtype == a.dtype, bias.map({ $0.dtype == out.dtype && $0.isContiguous }) ?? true,
              out.numel > 0, a.shape[2] > 0 else { return false }
        let batch = out.shape[0], m = out.shape[1], n = out.shape[2], k = a.shape[2]
        // A batch stride of 0 is a broadcast operand: oneDNN takes it as batch size 1.
        let ba = a.strides[0] == 0 ? 1 : batch, bb = b.strides[0] == 0 ? 1 : batch
        let key = Key(dtype: a.dtype, outType: out.dtype, bias: bias != nil, scale: scale, dims: [ba, bb, m, n, k],
                      strides: [ba == 1 ? m * k : a.strides[0], a.strides[1], a.strides[2],
                                bb == 1 ? k * n : b.strides[0], b.strides[1], b.strides[2]])
        guard let prim = primitive(rt, key, inType, outType) else { return false }
        return execute(rt, prim, key, inType, outType, a, b, bias, out)
    }

    private static func primitive(_ rt: Runtime, _ key: Key, _ inType: dnnl_data_type_t,
                                  _ outType: dnnl_data_type_t) -> dnnl_primitive_t? {
        if let p = rt.primitives[key] { return p }
        let (ba, bb, m, n, k) = (key.dims[0], key.dims[1], key.dims[2], key.dims[3], key.dims[4])
        let batch = max(ba, bb)
        guard var src = desc([ba, m, k], Array(key.strides[0..<3]), inType),
              var wei = desc([bb, k, n], Array(key.strides[3..<6]), inType),
              var dst = desc([batch, m, n], [m * n, n, 1], outType) else { return nil }
        var biasDesc = key.bias ? desc([1, 1, n], [n, n, 1], outType) : nil
        var op = dnnl_matmul_desc_t()
        let ok = withUnsafeMutablePointer(to: &biasDesc) { bp -> Bool in
            let biasPtr: UnsafePointer<dnnl_memory_desc_t>? = key.bias ? UnsafePointer(OpaquePointer(bp)) : nil
            return dnnl_matmul_desc_init(&op, &src, &wei, biasPtr, &dst) == dnnl_success
        }
        guard ok else { return nil }
        var attr: dnnl_primitive_attr_t?
        if key.scale != 1 {
            var scale = key.scale
            guard dnnl_primitive_attr_create(&attr) == dnnl_success,
                  dnnl_primitive_attr_set_output_scales(attr, 1, 0, &scale) == dnnl_success else {
                dnnl_primitive_attr_destroy(attr)
                return nil
            }
        }
        defer { if attr != nil { dnnl_primitive_attr_destroy(attr) } }
        var pd: dnnl_primitive_desc_t?
        guard dnnl_primitive_desc_create(&pd, &op, attr, rt.engine, nil) == dnnl_success else { return nil }
        defer { dnnl_primitive_desc_destroy(pd) }
        var prim: dnnl_primitive_t?
        guard dnnl_primitive_create(&prim, pd) == dnnl_success, let p = prim else { return nil }
        keep(p, as: key, in: &rt.primitives)
        return p
    }

    private static func execute(_ rt: Runtime, _ prim: dnnl_primitive_t, _ key: Key, _ inType: dnnl_data_type_t,
                                _ outType: dnnl_data_type_t, _ a: TensorImpl, _ b: TensorImpl, _ bias: TensorImpl?,
                                _ out: TensorImpl) -> Bool {
        let (ba, bb, m, n, k) = (key.dims[0], key.dims[1], key.dims[2], key.dims[3], key.dims[4])
        var memories: [dnnl_memory_t?] = []
        defer { for mem in memories { dnnl_memory_destroy(mem) } }
        func memory(_ shape: [Int], _ strides: [Int], _ type: dnnl_data_type_t, _ t: TensorImpl) -> dnnl_memory_t? {
            guard var md = desc(shape, strides, type) else { return nil }
            var mem: dnnl_memory_t?
            guard dnnl_memory_create(&mem, &md, rt.engine, HostBackend.address(t)) == dnnl_success else { return nil }
            memories.append(mem)
            return mem
        }
        guard let ma = memory([ba, m, k], Array(key.strides[0..<3]), inType, a),
              let mb = memory([bb, k, n], Array(key.strides[3..<6]), inType, b),
              let mo = memory([max(ba, bb), m, n], [m * n, n, 1], outType, out) else { return false }
        var args = [dnnl_exec_arg_t(arg: 1, memory: ma), dnnl_exec_arg_t(arg: 33, memory: mb),
                    dnnl_exec_arg_t(arg: 17, memory: mo)]  // DNNL_ARG_SRC, _WEIGHTS, _DST
        if let bias {
            guard let mbias = memory([1, 1, n], [n, n, 1], outType, bias) else { return false }
            args.append(dnnl_exec_arg_t(arg: 41, memory: mbias))  // DNNL_ARG_BIAS
        }
        guard dnnl_primitive_execute(prim, rt.stream, Int32(args.count), &args) == dnnl_success else { return false }
        return dnnl_stream_wait(rt.stream) == dnnl_success
    }
}

extension DNNL {
    /// oneDNN's vectorised (and threaded) form of a unary op, where it is as accurate as libm
    /// (within a few ulp). Its log loses relative accuracy near 1 and its gelu in the tails
    /// (up to 1e-5 relative), so those stay on libm.
    private static func algorithm(_ op: UnaryKernel) -> (dnnl_alg_kind_t, Float)? {
        switch op {
        case .exp: return (dnnl_eltwise_exp, 0)
        case .tanh: return (dnnl_eltwise_tanh, 0)
        case .sigmoid: return (dnnl_eltwise_logistic, 0)
        case .silu: return (dnnl_eltwise_swish, 1)
        default: return nil
        }
    }

    /// Below this many elements oneDNN's per-call set-up outweighs its faster loop.
    static let minEltwiseCount = 1 << 14

    /// `out = op(a)` for contiguous tensors of one shape and dtype (float32 or bfloat16), or
    /// false when oneDNN does not take it (then nothing was written).
    static func unary(_ op: UnaryKernel, _ a: TensorImpl, into out: TensorImpl) -> Bool {
        guard let rt = runtime, let (alg, alpha) = algorithm(op), let type = dataType(a.dtype), a.dtype == out.dtype,
              a.isContiguous, out.isContiguous, a.numel >= minEltwiseCount else { return false }
        let n = a.numel
        return rt.lock.withLock { () -> Bool in
            let key = EltwiseKey(alg: alg.rawValue, dtype: a.dtype, count: n)
            var prim = rt.eltwise[key]
            if prim == nil {
                guard var md = desc([n], [1], type) else { return false }
                var op = dnnl_eltwise_desc_t()
                guard dnnl_eltwise_forward_desc_init(&op, dnnl_forward_inference, alg, &md, alpha, 0) == dnnl_success else {
                    return false
                }
                var pd: dnnl_primitive_desc_t?
                guard dnnl_primitive_desc_create(&pd, &op, nil, rt.engine, nil) == dnnl_success else { return false }
                defer { dnnl_primitive_desc_destroy(pd) }
                guard dnnl_primitive_create(&prim, pd) == dnnl_success, prim != nil else { return false }
                keep(prim!, as: key, in: &rt.eltwise)
            }
            guard let md = desc([n], [1], type), let prim else { return false }
            return run(rt, prim, md, a, md, out)
        }
    }
}

extension DNNL {
    /// softmax (or log-softmax) of a contiguous float32/bfloat16 tensor along `axis`, in
    /// float32 arithmetic, or false when oneDNN does not take it.
    static func softmax(_ x: TensorImpl, axis: Int, log: Bool, into out: TensorImpl) -> Bool {
        guard let rt = runtime, x.dtype == out.dtype else { return false }
        return rt.lock.withLock { softmax(rt, x, axis: axis, log: log, into: out) }
    }

    /// The same with the lock held; `out` may be float32 or bfloat16 whatever `x` is.
    static func softmax(_ rt: Runtime, _ x: TensorImpl, axis: Int, log: Bool, into out: TensorImpl) -> Bool {
        guard let type = dataType(x.dtype), let outType = dataType(out.dtype), x.shape == out.shape,
              x.isContiguous, out.isContiguous, x.numel > 0, x.ndim <= 12 else { return false }
        let key = SoftmaxKey(shape: x.shape, axis: axis, log: log, dtype: x.dtype, outType: out.dtype)
        let strides = Shape.contiguousStrides(x.shape)
        guard var md = desc(x.shape, strides, type), var outMD = desc(x.shape, strides, outType) else { return false }
        var prim = rt.softmax[key]
        if prim == nil {
            var op = dnnl_softmax_v2_desc_t()
            guard dnnl_softmax_v2_forward_desc_init(&op, dnnl_forward_inference, log ? dnnl_softmax_log : dnnl_softmax_accurate,
                                                    &md, &outMD, Int32(axis)) == dnnl_success else { return false }
            var pd: dnnl_primitive_desc_t?
            guard dnnl_primitive_desc_create(&pd, &op, nil, rt.engine, nil) == dnnl_success else { return false }
            defer { dnnl_primitive_desc_destroy(pd) }
            guard dnnl_primitive_create(&prim, pd) == dnnl_success, prim != nil else { return false }
            keep(prim!, as: key, in: &rt.softmax)
        }
        guard let prim else { return false }
        return run(rt, prim, md, x, outMD, out)
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
    /// three steps. False when oneDNN does not take it (then `out` may hold partial results).
    static func attention(_ q: TensorImpl, _ k: TensorImpl, _ v: TensorImpl, scale: Float, causal: Bool,
                          weights: TensorImpl?, into out: TensorImpl) -> Bool {
        guard let rt = runtime, dataType(q.dtype) != nil, k.dtype == q.dtype, v.dtype == q.dtype, out.dtype == q.dtype,
              out.isContiguous, weights.map({ $0.isContiguous && $0.dtype == q.dtype }) ?? true else { return false }
        let batch = q.shape[0], l = q.shape[1], e = q.shape[2], s = k.shape[1], ev = v.shape[2]
        guard batch > 0, l > 0, s > 0, e > 0, ev > 0 else { return false }
        let chunk = max(1, min(batch, attentionChunkBytes / max(1, l * s * 4)))
        guard let scores = try? TensorImpl.empty([chunk, l, s], dtype: .float32, on: out.backend),
              let probs = try? weights ?? TensorImpl.empty([chunk, l, s], dtype: q.dtype, on: out.backend) else { return false }
        func slice(_ t: TensorImpl, _ start: Int, _ count: Int, _ transposed: Bool = false) -> TensorImpl {
            let st = t.strides, sh = t.shape
            return t.view(shape: transposed ? [count, sh[2], sh[1]] : [count, sh[1], sh[2]],
                          strides: transposed ? [st[0], st[2], st[1]] : st, offset: t.offset + start * st[0])
        }
        return rt.lock.withLock { () -> Bool in
            var start = 0
            while start < batch {
                let count = min(chunk, batch - start)
                let sc = slice(scores, 0, count)
                let p = weights == nil ? slice(probs, 0, count) : slice(probs, start, count)
                guard matmul(rt, slice(q, start, count), slice(k, start, count, true), bias: nil, scale: scale, into: sc)
                else { return false }
                if causal { maskFuture(sc) }
                guard softmax(rt, sc, axis: 2, log: false, into: p),
                      matmul(rt, p, slice(v, start, count), bias: nil, scale: 1, into: slice(out, start, count)) else { return false }
                start += count
            }
            return true
        }
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
