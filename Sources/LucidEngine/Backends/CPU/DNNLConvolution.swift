#if canImport(CDNNL)
import CDNNL

/// Direct 2-D convolution through oneDNN (forward, backward data, backward weights) on plain
/// NCHW tensors, for float32 and bfloat16. Each pass's primitive is built once per problem and
/// kept; a problem oneDNN can only serve with its reference kernels is declined, and the op
/// layer then uses im2col and GEMM.
extension DNNL {
    private struct ConvKey: Hashable {
        var pass: ConvolutionPassKind
        var problem: ConvolutionProblem
        var bias: Bool
    }

    /// A built pass: the primitive, and for each argument whose layout oneDNN chose to differ
    /// from plain NCHW/OIHW, that layout and the reorder between the two.
    private final class ConvPrimitive: @unchecked Sendable {
        let primitive: dnnl_primitive_t
        var layouts: [Int32: (md: dnnl_memory_desc_t, reorder: dnnl_primitive_t)] = [:]
        init(_ p: dnnl_primitive_t) { primitive = p }
    }

    private final class ConvCache: @unchecked Sendable {
        var primitives: [ConvKey: ConvPrimitive?] = [:]  // nil: declined
    }

    private static let convCache = ConvCache()

    /// Inputs already reordered into a kernel's layout, for the next pass that reads the same
    /// tensor in the same layout: the forward's input again in backward weights, the output
    /// gradient in both backward passes. Tensors never change once made, so a live storage
    /// at the same offset holds the same values; an entry goes once its storage is freed.
    private final class StagedInputs: @unchecked Sendable {
        struct Entry {
            weak var storage: Storage?
            let offset: Int
            var md: dnnl_memory_desc_t
            let block: (UnsafeMutableRawPointer, Int)
        }
        var entries: [Entry] = []
        static let capacity = 4

        func purge() {
            entries.removeAll { e in
                if e.storage == nil { HostAllocator.shared.release(e.block.0, size: e.block.1); return true }
                return false
            }
        }

        /// The staged copy of `t` in layout `md`, now the most recently used entry (so that
        /// inserting the other inputs of the same pass never evicts it).
        func find(_ t: TensorImpl, _ md: dnnl_memory_desc_t) -> UnsafeMutableRawPointer? {
            var md = md
            for i in entries.indices where entries[i].storage === t.storage && entries[i].offset == t.offset {
                if dnnl_memory_desc_equal(&entries[i].md, &md) != 0 {
                    let e = entries.remove(at: i)
                    entries.append(e)
                    return e.block.0
                }
            }
            return nil
        }

        func insert(_ t: TensorImpl, _ md: dnnl_memory_desc_t, _ block: (UnsafeMutableRawPointer, Int)) {
            if entries.count >= Self.capacity {
                let old = entries.removeFirst()
                HostAllocator.shared.release(old.block.0, size: old.block.1)
            }
            entries.append(Entry(storage: t.storage, offset: t.offset, md: md, block: block))
        }
    }

    private static let staged = StagedInputs()
    /// oneDNN's argument indices: outputs of the passes, and inputs.
    private static let outputs: Set<Int32> = [17, 129, 161]  // DST, DIFF_SRC, DIFF_WEIGHTS

    private static func plainDescs(_ p: ConvolutionProblem, _ type: dnnl_data_type_t)
        -> (src: dnnl_memory_desc_t, weights: dnnl_memory_desc_t, dst: dnnl_memory_desc_t, bias: dnnl_memory_desc_t)? {
        let cg = p.channels / p.groups, og = p.outChannels / p.groups, kk = p.kH * p.kW
        let src = [p.batch, p.channels, p.inH, p.inW], dst = [p.batch, p.outChannels, p.outH, p.outW]
        guard let s = desc(src, Shape.contiguousStrides(src), type),
              let w = desc(weightShape(p), p.groups == 1 ? [cg * kk, kk, p.kW, 1] : [og * cg * kk, cg * kk, kk, p.kW, 1], type),
              let d = desc(dst, Shape.contiguousStrides(dst), type),
              let b = desc([p.outChannels], [1], type) else { return nil }
        return (s, w, d, b)
    }

    private static func weightShape(_ p: ConvolutionProblem) -> [Int] {
        let cg = p.channels / p.groups, og = p.outChannels / p.groups
        return p.groups == 1 ? [p.outChannels, cg, p.kH, p.kW] : [p.groups, og, cg, p.kH, p.kW]
    }

    /// A descriptor that lets oneDNN pick the layout its fastest kernel wants.
    private static func anyDesc(_ shape: [Int], _ type: dnnl_data_type_t) -> dnnl_memory_desc_t? {
        var md = dnnl_memory_desc_t()
        let d = shape.map(Int64.init)
        let status = d.withUnsafeBufferPointer { dnnl_memory_desc_init_by_tag(&md, Int32(shape.count), $0.baseAddress, type, dnnl_format_tag_any) }
        return status == dnnl_success ? md : nil
    }

    private static func primitive(_ rt: Runtime, _ key: ConvKey, _ type: dnnl_data_type_t) -> ConvPrimitive? {
        if let cached = convCache.primitives[key] { return cached }
        let made = build(rt, key, type)
        if convCache.primitives.count >= maxPrimitives {
            for case let old? in convCache.primitives.values {
                dnnl_primitive_destroy(old.primitive)
                for l in old.layouts.values { dnnl_primitive_destroy(l.reorder) }
            }
            convCache.primitives.removeAll()
        }
        convCache.primitives[key] = made
        return made
    }

    private static func build(_ rt: Runtime, _ key: ConvKey, _ type: dnnl_data_type_t) -> ConvPrimitive? {
        let p = key.problem
        guard let plain = plainDescs(p, type),
              var src = anyDesc([p.batch, p.channels, p.inH, p.inW], type),
              var wei = anyDesc(weightShape(p), type),
              var dst = anyDesc([p.batch, p.outChannels, p.outH, p.outW], type) else { return nil }
        var bias = plain.bias
        let strides = [p.strideH, p.strideW].map(Int64.init)
        let dilates = [p.dilH - 1, p.dilW - 1].map(Int64.init)  // oneDNN counts the gaps
        let pad = [p.padH, p.padW].map(Int64.init)
        // The backward passes need the forward primitive descriptor as a hint.
        var forwardOp = dnnl_convolution_desc_t()
        let withBias = key.bias && key.pass == .forward
        let status = withUnsafeMutablePointer(to: &bias) { bp in
            dnnl_dilated_convolution_forward_desc_init(&forwardOp, key.pass == .forward ? dnnl_forward_inference : dnnl_forward_training,
                                                       dnnl_convolution_direct, &src, &wei, withBias ? UnsafePointer(bp) : nil,
                                                       &dst, strides, dilates, pad, pad)
        }
        var hint: dnnl_primitive_desc_t?
        guard status == dnnl_success, dnnl_primitive_desc_create(&hint, &forwardOp, nil, rt.engine, nil) == dnnl_success else {
            return nil
        }
        defer { dnnl_primitive_desc_destroy(hint) }
        var pd: dnnl_primitive_desc_t?
        let queries: [(Int32, dnnl_query_t, dnnl_memory_desc_t)]
        switch key.pass {
        case .forward:
            pd = hint
            queries = [(1, dnnl_query_src_md, plain.src), (33, dnnl_query_weights_md, plain.weights), (17, dnnl_query_dst_md, plain.dst)]
        case .backwardData:
            var op = dnnl_convolution_desc_t()
            guard dnnl_dilated_convolution_backward_data_desc_init(&op, dnnl_convolution_direct, &src, &wei, &dst, strides,
                                                                   dilates, pad, pad) == dnnl_success,
                  dnnl_primitive_desc_create(&pd, &op, nil, rt.engine, hint) == dnnl_success else { return nil }
            queries = [(145, dnnl_query_diff_dst_md, plain.dst), (33, dnnl_query_weights_md, plain.weights),
                       (129, dnnl_query_diff_src_md, plain.src)]
        case .backwardWeights:
            var op = dnnl_convolution_desc_t()
            guard dnnl_dilated_convolution_backward_weights_desc_init(&op, dnnl_convolution_direct, &src, &wei, nil, &dst,
                                                                      strides, dilates, pad, pad) == dnnl_success,
                  dnnl_primitive_desc_create(&pd, &op, nil, rt.engine, hint) == dnnl_success else { return nil }
            queries = [(1, dnnl_query_src_md, plain.src), (145, dnnl_query_diff_dst_md, plain.dst),
                       (161, dnnl_query_diff_weights_md, plain.weights)]
        }
        defer { if key.pass != .forward { dnnl_primitive_desc_destroy(pd) } }
        // A reference implementation would be far slower than im2col and GEMM: decline it.
        var name: UnsafePointer<CChar>?
        if dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) == dnnl_success, let name,
           String(cString: name).hasPrefix("ref") {
            return nil
        }
        var prim: dnnl_primitive_t?
        guard dnnl_primitive_create(&prim, pd) == dnnl_success, let prim else { return nil }
        let built = ConvPrimitive(prim)
        for (arg, query, plainMD) in queries {
            guard let chosenPtr = dnnl_primitive_desc_query_md(pd, query, 0) else { return nil }
            var chosen = chosenPtr.pointee, plainCopy = plainMD
            if dnnl_memory_desc_equal(&chosen, &plainCopy) != 0 { continue }
            var rpd: dnnl_primitive_desc_t?, reorder: dnnl_primitive_t?
            let ok = outputs.contains(arg)
                ? dnnl_reorder_primitive_desc_create(&rpd, &chosen, rt.engine, &plainCopy, rt.engine, nil) == dnnl_success
                : dnnl_reorder_primitive_desc_create(&rpd, &plainCopy, rt.engine, &chosen, rt.engine, nil) == dnnl_success
            defer { dnnl_primitive_desc_destroy(rpd) }
            guard ok, dnnl_primitive_create(&reorder, rpd) == dnnl_success, let reorder else { return nil }
            built.layouts[arg] = (chosen, reorder)
        }
        return built
    }

    /// Runs one pass. `tensors` are (argument, tensor) pairs: forward reads SRC (x), WEIGHTS,
    /// optional BIAS and writes DST; backward data reads DIFF_DST and WEIGHTS and writes
    /// DIFF_SRC; backward weights reads SRC and DIFF_DST and writes DIFF_WEIGHTS. All are
    /// contiguous and of one dtype. Arguments in another layout go through reorders.
    static func convolution(_ pass: ConvolutionPassKind, _ p: ConvolutionProblem, _ tensors: [(Int32, TensorImpl)]) -> Bool {
        guard let rt = runtime, let type = dataType(p.dtype),
              tensors.allSatisfy({ $0.1.isContiguous && $0.1.dtype == p.dtype && $0.1.numel > 0 }) else { return false }
        let hasBias = tensors.contains { $0.0 == 41 }
        return rt.lock.withLock { () -> Bool in
            Self.staged.purge()
            guard let built = primitive(rt, ConvKey(pass: pass, problem: p, bias: hasBias), type),
                  let plain = plainDescs(p, type) else { return false }
            var memories: [dnnl_memory_t?] = []
            var scratch: [(UnsafeMutableRawPointer, Int)] = []
            defer {
                for m in memories { dnnl_memory_destroy(m) }
                for (ptr, size) in scratch { HostAllocator.shared.release(ptr, size: size) }
            }
            func memory(_ md: dnnl_memory_desc_t, _ ptr: UnsafeMutableRawPointer) -> dnnl_memory_t? {
                var md = md, mem: dnnl_memory_t?
                guard dnnl_memory_create(&mem, &md, rt.engine, ptr) == dnnl_success else { return nil }
                memories.append(mem)
                return mem
            }
            func run(_ prim: dnnl_primitive_t, _ args: [dnnl_exec_arg_t]) -> Bool {
                var args = args
                return dnnl_primitive_execute(prim, rt.stream, Int32(args.count), &args) == dnnl_success
            }
            var args: [dnnl_exec_arg_t] = [], afterwards: [(dnnl_primitive_t, dnnl_memory_t?, dnnl_memory_t?)] = []
            for (arg, t) in tensors {
                let plainMD: dnnl_memory_desc_t
                switch arg {
                case 1, 129: plainMD = plain.src
                case 33, 161: plainMD = plain.weights
                case 17, 145: plainMD = plain.dst
                default: plainMD = plain.bias
                }
                guard let tensorMem = memory(plainMD, HostBackend.address(t)) else { return false }
                guard let layout = built.layouts[arg] else {
                    args.append(dnnl_exec_arg_t(arg: arg, memory: tensorMem))
                    continue
                }
                if !outputs.contains(arg), let ready = Self.staged.find(t, layout.md) {
                    guard let stagedMem = memory(layout.md, ready) else { return false }
                    args.append(dnnl_exec_arg_t(arg: arg, memory: stagedMem))
                    continue
                }
                var chosen = layout.md
                guard let block = try? HostAllocator.shared.allocate(dnnl_memory_desc_get_size(&chosen)) else { return false }
                guard let stagedMem = memory(layout.md, block.0) else {
                    HostAllocator.shared.release(block.0, size: block.1)
                    return false
                }
                args.append(dnnl_exec_arg_t(arg: arg, memory: stagedMem))
                if outputs.contains(arg) {
                    scratch.append(block)
                    afterwards.append((layout.reorder, stagedMem, tensorMem))
                } else {
                    guard run(layout.reorder, [dnnl_exec_arg_t(arg: 1, memory: tensorMem), dnnl_exec_arg_t(arg: 17, memory: stagedMem)])
                    else {
                        HostAllocator.shared.release(block.0, size: block.1)
                        return false
                    }
                    Self.staged.insert(t, layout.md, block)
                }
            }
            guard run(built.primitive, args) else { return false }
            for (reorder, from, to) in afterwards {
                guard run(reorder, [dnnl_exec_arg_t(arg: 1, memory: from), dnnl_exec_arg_t(arg: 17, memory: to)]) else { return false }
            }
            return dnnl_stream_wait(rt.stream) == dnnl_success
        }
    }
}
#endif
