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

    /// A built pass: the primitive, the plain (NCHW/OIHW) layout of each argument, and for
    /// each argument whose layout oneDNN chose to differ from plain, that layout and the
    /// reorder between the two.
    private final class ConvPrimitive: @unchecked Sendable {
        let primitive: Primitive
        let plain: [Int32: MemoryDesc]
        var layouts: [Int32: (md: MemoryDesc, reorder: Primitive)] = [:]
        init(_ p: Primitive, plain: [Int32: MemoryDesc]) { (primitive, self.plain) = (p, plain) }
    }

    private final class ConvCache: @unchecked Sendable {
        var primitives: [ConvKey: ConvPrimitive?] = [:]  // nil: declined
    }

    private static let convCache = ConvCache()

    /// Forgets every built convolution (a forked child's runtime, holding its lock).
    static func dropConvolutions() { convCache.primitives.removeAll() }

    /// Inputs already reordered into a kernel's layout, for the next pass that reads the same
    /// tensor in the same layout: the forward's input again in backward weights, the output
    /// gradient in both backward passes. A live storage at the same offset and version (no
    /// in-place write since) holds the same values; an entry goes once its storage is freed.
    private final class StagedInputs: @unchecked Sendable {
        struct Entry {
            weak var storage: Storage?
            let offset: Int
            let version: Int64
            let md: MemoryDesc
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
        func find(_ t: TensorImpl, _ md: MemoryDesc) -> UnsafeMutableRawPointer? {
            for i in entries.indices
            where entries[i].storage === t.storage && entries[i].offset == t.offset
                && entries[i].version == t.storage.writes
            {
                if entries[i].md.sameLayout(as: md) {
                    let e = entries.remove(at: i)
                    entries.append(e)
                    return e.block.0
                }
            }
            return nil
        }

        func insert(_ t: TensorImpl, _ md: MemoryDesc, _ block: (UnsafeMutableRawPointer, Int)) {
            if entries.count >= Self.capacity {
                let old = entries.removeFirst()
                HostAllocator.shared.release(old.block.0, size: old.block.1)
            }
            entries.append(Entry(storage: t.storage, offset: t.offset, version: t.storage.writes, md: md, block: block))
        }
    }

    private static let staged = StagedInputs()
    /// The arguments the passes write.
    private static let outputs: Set<Int32> = [Arg.dst, Arg.diffSrc, Arg.diffWeights]

    /// The plain layouts: NCHW activations, OIHW (or GOIHW) weights, a bias vector.
    private static func plainDescs(_ p: ConvolutionProblem, _ type: dnnl_data_type_t)
        -> (src: MemoryDesc, weights: MemoryDesc, dst: MemoryDesc, bias: MemoryDesc)?
    {
        let cg = p.channels / p.groups, og = p.outChannels / p.groups, kk = p.kH * p.kW
        let src = [p.batch, p.channels, p.inH, p.inW], dst = [p.batch, p.outChannels, p.outH, p.outW]
        guard let s = MemoryDesc(src, strides: Shape.contiguousStrides(src), type),
            let w = MemoryDesc(
                weightShape(p),
                strides: p.groups == 1
                    ? [cg * kk, kk, p.kW, 1]
                    : [og * cg * kk, cg * kk, kk, p.kW, 1], type),
            let d = MemoryDesc(dst, strides: Shape.contiguousStrides(dst), type),
            let b = MemoryDesc([p.outChannels], strides: [1], type)
        else { return nil }
        return (s, w, d, b)
    }

    private static func weightShape(_ p: ConvolutionProblem) -> [Int] {
        let cg = p.channels / p.groups, og = p.outChannels / p.groups
        return p.groups == 1 ? [p.outChannels, cg, p.kH, p.kW] : [p.groups, og, cg, p.kH, p.kW]
    }

    private static func primitive(_ rt: Runtime, _ key: ConvKey, _ type: dnnl_data_type_t) -> ConvPrimitive? {
        if let cached = convCache.primitives[key] { return cached }
        let made = build(rt, key, type)
        keep(made, as: key, in: &convCache.primitives)
        return made
    }

    private static func build(_ rt: Runtime, _ key: ConvKey, _ type: dnnl_data_type_t) -> ConvPrimitive? {
        let p = key.problem
        guard let plain = plainDescs(p, type),
            let src = MemoryDesc(any: [p.batch, p.channels, p.inH, p.inW], type),
            let wei = MemoryDesc(any: weightShape(p), type),
            let dst = MemoryDesc(any: [p.batch, p.outChannels, p.outH, p.outW], type)
        else { return nil }
        let strides = [p.strideH, p.strideW].map(Int64.init)
        let dilates = [p.dilH - 1, p.dilW - 1].map(Int64.init)  // oneDNN counts the gaps
        let pad = [p.padH, p.padW].map(Int64.init)
        // The backward passes need the forward primitive descriptor as a hint. Every pass
        // describes the forward as training: the forward then picks the input layout that
        // backward weights reads, so that pass finds the forward's reordered input staged
        // instead of reordering it again (inference kernels were no faster when measured).
        let withBias = key.bias && key.pass == .forward
        var hint: dnnl_primitive_desc_t?
        guard
            dnnl_convolution_forward_primitive_desc_create(
                &hint, rt.engine, dnnl_forward_training,
                dnnl_convolution_direct, src.md, wei.md, withBias ? plain.bias.md : nil, dst.md,
                strides, dilates, pad, pad, nil) == dnnl_success, let hint
        else { return nil }
        var pd: dnnl_primitive_desc_t?
        let queries: [(Int32, dnnl_query_t, MemoryDesc)]
        switch key.pass {
        case .forward:
            pd = hint
            queries = [
                (Arg.src, dnnl_query_src_md, plain.src), (Arg.weights, dnnl_query_weights_md, plain.weights),
                (Arg.dst, dnnl_query_dst_md, plain.dst),
            ]
        case .backwardData:
            defer { dnnl_primitive_desc_destroy(hint) }
            guard
                dnnl_convolution_backward_data_primitive_desc_create(
                    &pd, rt.engine, dnnl_convolution_direct, src.md, wei.md, dst.md, strides, dilates, pad, pad,
                    hint, nil) == dnnl_success
            else { return nil }
            queries = [
                (Arg.diffDst, dnnl_query_diff_dst_md, plain.dst), (Arg.weights, dnnl_query_weights_md, plain.weights),
                (Arg.diffSrc, dnnl_query_diff_src_md, plain.src),
            ]
        case .backwardWeights:
            defer { dnnl_primitive_desc_destroy(hint) }
            guard
                dnnl_convolution_backward_weights_primitive_desc_create(
                    &pd, rt.engine, dnnl_convolution_direct, src.md, wei.md, nil, dst.md, strides, dilates, pad, pad,
                    hint, nil) == dnnl_success
            else { return nil }
            queries = [
                (Arg.src, dnnl_query_src_md, plain.src), (Arg.diffDst, dnnl_query_diff_dst_md, plain.dst),
                (Arg.diffWeights, dnnl_query_diff_weights_md, plain.weights),
            ]
        }
        guard let pd else { return nil }
        // A reference implementation would be far slower than im2col and GEMM: decline it.
        if isReference(pd) {
            dnnl_primitive_desc_destroy(pd)
            return nil
        }
        // The chosen layouts belong to `pd`: clone them before `make` destroys it.
        var chosen: [(Int32, MemoryDesc, MemoryDesc)] = []
        for (arg, query, plainMD) in queries {
            guard let md = dnnl_primitive_desc_query_md(pd, query, 0), let copy = MemoryDesc(cloning: md) else {
                dnnl_primitive_desc_destroy(pd)
                return nil
            }
            chosen.append((arg, copy, plainMD))
        }
        guard let prim = Primitive.make(from: pd) else { return nil }
        var plainByArg = Dictionary(uniqueKeysWithValues: chosen.map { ($0.0, $0.2) })
        if withBias { plainByArg[Arg.bias] = plain.bias }
        let built = ConvPrimitive(prim, plain: plainByArg)
        for (arg, layout, plainMD) in chosen where !layout.sameLayout(as: plainMD) {
            var rpd: dnnl_primitive_desc_t?
            let (from, to) = outputs.contains(arg) ? (layout, plainMD) : (plainMD, layout)
            guard dnnl_reorder_primitive_desc_create(&rpd, from.md, rt.engine, to.md, rt.engine, nil) == dnnl_success,
                let reorder = Primitive.make(from: rpd)
            else { return nil }
            built.layouts[arg] = (layout, reorder)
        }
        return built
    }

    /// Whether `convolution` takes this pass (its primitives made and kept on the first ask):
    /// `tensors` are all its operands, `bias` whether a forward adds one.
    static func takesConvolution(
        _ pass: ConvolutionPassKind, _ p: ConvolutionProblem, _ tensors: [TensorImpl],
        bias: Bool
    ) -> Bool {
        guard let rt = runtime, let type = dataType(p.dtype),
            tensors.allSatisfy({ $0.isContiguous && $0.dtype == p.dtype && $0.numel > 0 })
        else { return false }
        return rt.locked { primitive(rt, ConvKey(pass: pass, problem: p, bias: bias && pass == .forward), type) != nil }
    }

    /// Runs one pass. `tensors` are (argument, tensor) pairs: forward reads SRC (x), WEIGHTS,
    /// optional BIAS and writes DST; backward data reads DIFF_DST and WEIGHTS and writes
    /// DIFF_SRC; backward weights reads SRC and DIFF_DST and writes DIFF_WEIGHTS. All are
    /// contiguous and of one dtype. Arguments in another layout go through reorders.
    static func convolution(_ pass: ConvolutionPassKind, _ p: ConvolutionProblem, _ tensors: [(Int32, TensorImpl)]) -> Bool {
        guard let rt = runtime, let type = dataType(p.dtype),
            tensors.allSatisfy({ $0.1.isContiguous && $0.1.dtype == p.dtype && $0.1.numel > 0 })
        else { return false }
        let hasBias = tensors.contains { $0.0 == Arg.bias }
        return rt.locked { () -> Bool in
            Self.staged.purge()
            guard let built = primitive(rt, ConvKey(pass: pass, problem: p, bias: hasBias), type) else { return false }
            var memories: [dnnl_memory_t?] = []
            var scratch: [(UnsafeMutableRawPointer, Int)] = []
            defer {
                for m in memories { dnnl_memory_destroy(m) }
                for (ptr, size) in scratch { HostAllocator.shared.release(ptr, size: size) }
            }
            func memory(_ md: MemoryDesc, _ ptr: UnsafeMutableRawPointer) -> dnnl_memory_t? {
                var mem: dnnl_memory_t?
                guard dnnl_memory_create(&mem, md.md, rt.engine, ptr) == dnnl_success else { return nil }
                memories.append(mem)
                return mem
            }
            func run(_ prim: Primitive, _ args: [dnnl_exec_arg_t]) -> Bool {
                var args = args
                return dnnl_primitive_execute(prim.handle, rt.stream, Int32(args.count), &args) == dnnl_success
            }
            var args: [dnnl_exec_arg_t] = [], afterwards: [(Primitive, dnnl_memory_t?, dnnl_memory_t?)] = []
            for (arg, t) in tensors {
                guard let plainMD = built.plain[arg], let tensorMem = memory(plainMD, HostBackend.address(t)) else { return false }
                guard let layout = built.layouts[arg] else {
                    args.append(dnnl_exec_arg_t(arg: arg, memory: tensorMem))
                    continue
                }
                if !outputs.contains(arg), let ready = Self.staged.find(t, layout.md) {
                    guard let stagedMem = memory(layout.md, ready) else { return false }
                    args.append(dnnl_exec_arg_t(arg: arg, memory: stagedMem))
                    continue
                }
                guard let block = try? HostAllocator.shared.allocate(layout.md.byteSize) else { return false }
                guard let stagedMem = memory(layout.md, block.0) else {
                    HostAllocator.shared.release(block.0, size: block.1)
                    return false
                }
                args.append(dnnl_exec_arg_t(arg: arg, memory: stagedMem))
                if outputs.contains(arg) {
                    scratch.append(block)
                    afterwards.append((layout.reorder, stagedMem, tensorMem))
                } else {
                    guard
                        run(
                            layout.reorder,
                            [
                                dnnl_exec_arg_t(arg: Arg.src, memory: tensorMem),
                                dnnl_exec_arg_t(arg: Arg.dst, memory: stagedMem),
                            ])
                    else {
                        HostAllocator.shared.release(block.0, size: block.1)
                        return false
                    }
                    Self.staged.insert(t, layout.md, block)
                }
            }
            guard run(built.primitive, args) else { return false }
            for (reorder, from, to) in afterwards {
                guard run(reorder, [dnnl_exec_arg_t(arg: Arg.src, memory: from), dnnl_exec_arg_t(arg: Arg.dst, memory: to)])
                else { return false }
            }
            return dnnl_stream_wait(rt.stream) == dnnl_success
        }
    }
}
#endif
