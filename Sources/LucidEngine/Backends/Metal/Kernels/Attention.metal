// Fused scaled dot-product attention, forward: out = softmax(scale · q·kᵀ, masked) · v in one
// pass over the keys (online softmax), with no score matrix in device memory. Compiled after
// Common.metal, in one library.
//
// q [B, L, E], k [B, S, E], v [B, S, Ev] of one dtype T and any strides; out [B, L, Ev]
// contiguous. A threadgroup of SGS SIMD groups takes BQ = 8·SGS query rows of one batch entry,
// each SIMD group 8 of them. For each block of BK keys the group stages kᵀ and v as float32 in
// threadgroup memory, computes the 8×BK scores of its rows on the matrix units (float32 sums),
// and thread r of the group keeps row r's running maximum and sum: the block's scores become
// exp(score − max) and the rows' accumulators are rescaled by exp(old max − new max) (a
// diagonal product) before adding p·v. Masked positions (beyond the keys, after the row's own
// when causal, false in the bool mask) score −inf; a row with none left comes out NaN, as
// softmax over −inf does. E and Ev are padded with zeros to DMAX, the largest the variant
// takes. With `write_weights` a second pass writes the softmax itself ([B, L, S], rounded to
// T) for the backward pass. 32-bit indices.
//
// Field order and sizes match `attentionShape` in Metal+Attention.swift.
struct AttentionShape {
    int batch, l, s, e, ev;
    int q_strides[3], k_strides[3], v_strides[3], mask_strides[3];
    int has_mask, causal, write_weights;
    float scale;
};

// Row i's score against key j from the staged product: scaled, or −inf where masked.
inline float attention_score(float product, constant AttentionShape& s, device const uchar* mask, int b, int i, int j) {
    bool allowed = j < s.s && (s.causal == 0 || j <= i)
        && (s.has_mask == 0 || i >= s.l || mask[b * s.mask_strides[0] + i * s.mask_strides[1] + j * s.mask_strides[2]] != 0);
    return allowed ? product * s.scale : -INFINITY;
}

// Stages the block of keys from k0 as kᵀ in threadgroup memory (zero past the keys and E),
// then each SIMD group's 8 × BK products of its query rows against them, into `sc`; every
// thread of the group runs it (it holds barriers).
#define LUCID_ATTENTION_SCORES(BK, DMAX, THREADS)                                                    \
    for (int e = int(lane); e < BK * DMAX; e += THREADS) {                                           \
        int c = e / DMAX, d = e % DMAX, j = k0 + c;                                                  \
        kt[d * BK + c] = (j < s.s && d < s.e) ? widen(k[b * s.k_strides[0] + j * s.k_strides[1] + d * s.k_strides[2]]) : 0.0f; \
    }                                                                                                \
    threadgroup_barrier(mem_flags::mem_threadgroup);                                                 \
    for (int ct = 0; ct < BK / 8; ++ct) {                                                            \
        simdgroup_float8x8 product = zero, qm, km;                                                   \
        for (int d = 0; d < ep; d += 8) {                                                            \
            simdgroup_load(qm, qs + int(sg) * 8 * DMAX + d, DMAX);                                   \
            simdgroup_load(km, kt + d * BK + ct * 8, BK);                                            \
            simdgroup_multiply_accumulate(product, qm, km, product);                                 \
        }                                                                                            \
        simdgroup_store(product, sc + int(sg) * 8 * BK + ct * 8, BK);                                \
    }                                                                                                \
    threadgroup_barrier(mem_flags::mem_threadgroup);

// Threadgroup memory, in floats: q [BQ][DMAX], kᵀ [DMAX][BK], v [BK][DMAX], scores [BQ][BK],
// three per-row values [BQ] and a diagonal [8][8] per SIMD group (`attentionFloats` in
// Metal+Attention.swift).
#define LUCID_ATTENTION(NAME, T, SGS, BK, DMAX)                                                      \
kernel void NAME(device const T* q [[buffer(0)]], device const T* k [[buffer(1)]],                  \
                 device const T* v [[buffer(2)]], device const uchar* mask [[buffer(3)]],            \
                 device T* out [[buffer(4)]], device T* weights [[buffer(5)]],                       \
                 constant AttentionShape& s [[buffer(6)]], threadgroup float* smem [[threadgroup(0)]], \
                 uint group [[threadgroup_position_in_grid]], uint lane [[thread_index_in_threadgroup]], \
                 uint sg [[simdgroup_index_in_threadgroup]], uint sl [[thread_index_in_simdgroup]]) {  \
    const int BQ = 8 * SGS, THREADS = 32 * SGS;                                                      \
    int blocks = (s.l + BQ - 1) / BQ, b = int(group) / blocks, row0 = (int(group) % blocks) * BQ;   \
    int ep = (s.e + 7) / 8 * 8, evp = (s.ev + 7) / 8 * 8;                                            \
    threadgroup float* qs = smem;                                                                    \
    threadgroup float* kt = qs + BQ * DMAX;                                                          \
    threadgroup float* vs = kt + DMAX * BK;                                                          \
    threadgroup float* sc = vs + BK * DMAX;                                                          \
    threadgroup float* row_max = sc + BQ * BK;                                                       \
    threadgroup float* row_sum = row_max + BQ;                                                       \
    threadgroup float* row_scale = row_sum + BQ;                                                     \
    threadgroup float* diag = row_scale + BQ + int(sg) * 64;                                         \
    for (int e = int(lane); e < BQ * DMAX; e += THREADS) {                                           \
        int i = row0 + e / DMAX, c = e % DMAX;                                                       \
        qs[e] = (i < s.l && c < s.e) ? widen(q[b * s.q_strides[0] + i * s.q_strides[1] + c * s.q_strides[2]]) : 0.0f; \
    }                                                                                                \
    if (int(lane) < BQ) { row_max[lane] = -INFINITY; row_sum[lane] = 0.0f; }                         \
    const simdgroup_float8x8 zero = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);                 \
    simdgroup_float8x8 acc[DMAX / 8];                                                                \
    for (int t = 0; t < DMAX / 8; ++t) acc[t] = zero;                                                \
    int last = s.causal != 0 ? min(s.s, row0 + BQ) : s.s;                                            \
    for (int k0 = 0; k0 < last; k0 += BK) {                                                          \
        for (int e = int(lane); e < BK * DMAX; e += THREADS) {                                       \
            int c = e / DMAX, d = e % DMAX, j = k0 + c;                                              \
            vs[c * DMAX + d] = (j < s.s && d < s.ev) ? widen(v[b * s.v_strides[0] + j * s.v_strides[1] + d * s.v_strides[2]]) : 0.0f; \
        }                                                                                            \
        LUCID_ATTENTION_SCORES(BK, DMAX, THREADS)                                                    \
        if (int(lane) < BQ) {                                                                        \
            int r = int(lane), i = row0 + r;                                                         \
            float old_max = row_max[r], m = old_max;                                                 \
            for (int c = 0; c < BK; ++c) m = max_or_nan(m, attention_score(sc[r * BK + c], s, mask, b, i, k0 + c)); \
            float base = m == -INFINITY ? 0.0f : m;                                                  \
            float sum = 0.0f;                                                                        \
            for (int c = 0; c < BK; ++c) {                                                           \
                float p = precise::exp(attention_score(sc[r * BK + c], s, mask, b, i, k0 + c) - base); \
                sc[r * BK + c] = p;                                                                  \
                sum += p;                                                                            \
            }                                                                                        \
            float rescale = precise::exp(old_max - base);                                           \
            row_sum[r] = row_sum[r] * rescale + sum;                                                 \
            row_max[r] = m;                                                                          \
            row_scale[r] = rescale;                                                                  \
        }                                                                                            \
        threadgroup_barrier(mem_flags::mem_threadgroup);                                             \
        for (int e = int(sl); e < 64; e += 32) diag[e] = e / 8 == e % 8 ? row_scale[int(sg) * 8 + e / 8] : 0.0f; \
        threadgroup_barrier(mem_flags::mem_threadgroup);                                             \
        simdgroup_float8x8 dm, pm, vm;                                                               \
        simdgroup_load(dm, diag, 8);                                                                 \
        for (int t = 0; t < evp / 8; ++t) {                                                          \
            simdgroup_multiply_accumulate(acc[t], dm, acc[t], zero);                                 \
            for (int kk = 0; kk < BK; kk += 8) {                                                     \
                simdgroup_load(pm, sc + int(sg) * 8 * BK + kk, BK);                                  \
                simdgroup_load(vm, vs + kk * DMAX + t * 8, DMAX);                                    \
                simdgroup_multiply_accumulate(acc[t], pm, vm, acc[t]);                               \
            }                                                                                        \
        }                                                                                            \
        threadgroup_barrier(mem_flags::mem_threadgroup);                                             \
    }                                                                                                \
    if (s.write_weights != 0) {                                                                      \
        for (int k0 = 0; k0 < s.s; k0 += BK) {                                                       \
            LUCID_ATTENTION_SCORES(BK, DMAX, THREADS)                                                \
            for (int e = int(lane); e < BQ * BK; e += THREADS) {                                     \
                int r = e / BK, i = row0 + r, j = k0 + e % BK;                                       \
                if (i < s.l && j < s.s) {                                                            \
                    float base = row_max[r] == -INFINITY ? 0.0f : row_max[r];                        \
                    float p = precise::exp(attention_score(sc[e], s, mask, b, i, j) - base) / row_sum[r]; \
                    weights[(b * s.l + i) * s.s + j] = narrow<T>(p);                                 \
                }                                                                                    \
            }                                                                                        \
            threadgroup_barrier(mem_flags::mem_threadgroup);                                         \
        }                                                                                            \
    }                                                                                                \
    for (int t = 0; t < evp / 8; ++t) simdgroup_store(acc[t], qs + int(sg) * 8 * DMAX + t * 8, DMAX); \
    threadgroup_barrier(mem_flags::mem_threadgroup);                                                 \
    for (int e = int(lane); e < BQ * DMAX; e += THREADS) {                                           \
        int r = e / DMAX, i = row0 + r, c = e % DMAX;                                                \
        if (i < s.l && c < s.ev) out[(b * s.l + i) * s.ev + c] = narrow<T>(qs[e] / row_sum[r]);      \
    }                                                                                                \
}

// Head dimensions up to 64: four SIMD groups, 32 rows and 32 keys a step (7,520 floats);
// up to 128: two SIMD groups, 16 rows and 16 keys a step (6,576 floats).
#define LUCID_ATTENTION_VARIANTS(T, NAME)                                                            \
    LUCID_ATTENTION(attention_64_##NAME, T, 4, 32, 64)                                               \
    LUCID_ATTENTION(attention_128_##NAME, T, 2, 16, 128)

LUCID_ATTENTION_VARIANTS(float, float32)
LUCID_ATTENTION_VARIANTS(half, float16)
LUCID_ATTENTION_VARIANTS(bfloat, bfloat16)
