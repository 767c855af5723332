#if canImport(Metal) && !LUCID_NO_METAL
import Metal

/// Fused attention on the GPU (Kernels/Attention.metal): one pass over the keys with an online
/// softmax in float32 (each row's maximum and sum over a SIMD group's lanes), the products on
/// the SIMD groups' matrix units from padded tiles (half for float16), causal and bool masks,
/// head dimensions up to 128, with a variant of fixed loop bounds for each common head (32, 64,
/// 80, 96, 128); the scores never reach device memory unless the weights are asked for. Larger
/// heads, and indices past 32 bits, are composed.
extension MetalBackend: AttentionKernels {
    /// A variant of the kernel: its SIMD groups (8 query rows each), keys a step, head
    /// dimension (exact, or the largest it takes) and the bytes of a tile's element.
    struct AttentionVariant {
        let name: String, simdGroups: Int, keys: Int, dimension: Int, tileBytes: Int
        var threads: Int { 32 * simdGroups }
        /// Threadgroup memory in bytes (the layout Kernels/Attention.metal documents): the
        /// scores (rows padded by four floats) and a diagonal a SIMD group as float32; the q, k
        /// and v tiles (rows padded by 16 bytes), the output staged over the k and v tiles.
        var bytes: Int {
            let rows = 8 * simdGroups, tileRow = (dimension + 16 / tileBytes) * tileBytes
            let floats = rows * (keys + 4) + 64 * simdGroups
            return 4 * floats + rows * tileRow + Swift.max(2 * keys * tileRow, 4 * rows * dimension)
        }
    }

    /// The head dimensions with a variant of their own (queries, keys and values alike).
    static let exactHeads = [32, 64, 80, 96, 128]

    /// The variant for head dimensions e (queries and keys) and ev (values), or nil above 128:
    /// a common head's own (`attention_h<e>_<dtype>`) when e == ev, else the generic variant
    /// for heads up to 64 or 128 (`attention_<64|128>_<dtype>`).
    static func attentionVariant(e: Int, ev: Int, dtype: DType) -> AttentionVariant? {
        let head = Swift.max(e, ev)
        guard head <= 128 else { return nil }
        let exact = e == ev && exactHeads.contains(e)
        let dimension = exact ? e : (head <= 64 ? 64 : 128)
        // float16 tiles are half; float32 and bfloat16 tiles float32.
        let tileBytes = dtype == .float16 ? 2 : 4
        let simdGroups = dimension <= 64 ? 4 : 2
        let keys = dimension > 80 && tileBytes == 4 ? 16 : 32
        let name = exact ? "attention_h\(e)_\(dtype.name)" : "attention_\(dimension)_\(dtype.name)"
        return AttentionVariant(name: name, simdGroups: simdGroups, keys: keys, dimension: dimension, tileBytes: tileBytes)
    }

    func attentionRoute(_ call: KernelCall) -> KernelRoute {
        let (q, k, v) = (call.reads[0], call.reads[1], call.reads[2])
        let mask = call.reads.count > 3 ? call.reads[3] : nil
        let dtype = q.dtype
        guard [DType.float32, .float16, .bfloat16].contains(dtype), k.dtype == dtype, v.dtype == dtype,
            call.writes.allSatisfy({ $0.dtype == dtype && $0.isContiguous }), mask.map({ $0.dtype == .bool }) ?? true,
            let variant = Self.attentionVariant(e: q.shape[2], ev: v.shape[2], dtype: dtype),
            (maxThreadsPerThreadgroup(variant.name) ?? 0) >= variant.threads,
            attentionShape(q, k, v, mask: mask, scale: 1, causal: false, weights: false) != nil
        else { return .compose }
        return .native
    }

    func attention(
        _ q: TensorImpl, _ k: TensorImpl, _ v: TensorImpl, mask: TensorImpl?, scale: Float, causal: Bool,
        weights: TensorImpl?, into out: TensorImpl
    ) throws {
        guard out.numel > 0 else { return }
        guard let variant = Self.attentionVariant(e: q.shape[2], ev: v.shape[2], dtype: q.dtype),
            (maxThreadsPerThreadgroup(variant.name) ?? 0) >= variant.threads,
            let shape = attentionShape(q, k, v, mask: mask, scale: scale, causal: causal, weights: weights != nil)
        else { throw LucidError.runtime("attention: no fused kernel takes q \(q.shape), k \(k.shape), v \(v.shape) here") }
        // Without a mask the kernel still binds a bool buffer there (it reads none of it).
        let unmasked = mask == nil ? try TensorImpl.empty([1], dtype: .bool, on: self) : nil
        let rows = 8 * variant.simdGroups
        let groups = q.shape[0] * ((q.shape[1] + rows - 1) / rows)
        encode(
            variant.name, groups: groups, width: variant.threads,
            floatsPerThread: (variant.bytes / 4 + variant.threads - 1) / variant.threads
        ) { e in
            bind(q, 0, e)
            bind(k, 1, e)
            bind(v, 2, e)
            bind(mask ?? unmasked!, 3, e)
            bind(out, 4, e)
            bind(weights ?? out, 5, e)  // written only when write_weights is set
            setBytes(shape, 6, e)
        }
    }
}

/// The problem the attention kernel reads (Kernels/Attention.metal `AttentionShape`: 20 int32
/// words and the scale), or nil when an index does not fit 32 bits.
private func attentionShape(
    _ q: TensorImpl, _ k: TensorImpl, _ v: TensorImpl, mask: TensorImpl?, scale: Float,
    causal: Bool, weights: Bool
) -> [UInt32]? {
    let (batch, l, s, e, ev) = (q.shape[0], q.shape[1], k.shape[1], q.shape[2], v.shape[2])
    let limit = Int(Int32.max)
    // The furthest element each operand's indices reach, and the outputs' sizes.
    func reach(_ t: TensorImpl) -> Int { t.offset + zip(t.shape, t.strides).reduce(0) { $0 + max($1.0 - 1, 0) * $1.1 } }
    let operands = [q, k, v] + (mask.map { [$0] } ?? [])
    guard operands.allSatisfy({ reach($0) <= limit && $0.strides.allSatisfy { $0 >= 0 } }), batch * l * max(s, ev) <= limit
    else { return nil }
    let strides = operands.flatMap { $0.strides } + (mask == nil ? [0, 0, 0] : [])
    // Offsets are folded into the bound buffers; the strides index from there.
    let words = [batch, l, s, e, ev] + strides + [mask == nil ? 0 : 1, causal ? 1 : 0, weights ? 1 : 0]
    return words.map { UInt32(bitPattern: Int32($0)) } + [scale.bitPattern]
}
#endif
