// Fused scaled dot-product attention, forward: out = softmax(scale · q·kᵀ, masked) · v in one
// pass over the keys (online softmax), with no score matrix in device memory. Compiled after
// Common.metal, in one library.
//
// q [B, L, E], k [B, S, E], v [B, S, Ev] of one dtype T and any strides; out [B, L, Ev]
// contiguous. A threadgroup of SGS SIMD groups takes BQ = 8·SGS query rows of one batch entry,
// each SIMD group 8 of them, whose q it keeps in SIMD-group matrices. For each block of BK keys
// the threadgroup stages k and v as they lie (key-major, no transpose) in tiles of TT — half for
// float16, float for float32 and bfloat16 — whose rows are padded by 16 bytes (PAD elements) so
// that the lanes of a SIMD-group load do not meet in one memory bank; each SIMD group computes
// the 8×BK scores of its rows on the matrix units (a transposed load of the k tile, float32
// sums) into a padded float32 tile. Then the row softmax: for each of its rows, lane c takes
// key c, and simd_max and simd_sum give the block's maximum and sum over the lanes; every lane
// keeps each row's running maximum and sum, the block's scores become exp(score − max), and the
// rows' accumulators are rescaled by exp(old max − new max) (a diagonal product) before adding
// p·v. Masked positions (beyond the keys, after the row's own when causal, false in the bool
// mask) score −inf; a row with none left comes out NaN, as softmax over −inf does.
//
// The head dimension is a compile-time constant D in every variant: EXACT ones take E = Ev = D
// (the common heads, 32 to 128), so that every loop over it has fixed bounds and no test;
// generic ones take any E, Ev up to D, padded with zeros to a multiple of 8. With
// `write_weights` a second pass writes the softmax itself ([B, L, S], rounded to T) for the
// backward pass. 32-bit indices.
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

// An element as the tiles hold it: float16 stays half, float32 stays float, bfloat16 is
// widened to float (exactly).
inline half attention_tile(half x) { return x; }
inline float attention_tile(float x) { return x; }
inline float attention_tile(bfloat x) { return widen(x); }

// Stages the block of BK keys from k0 into `ks` ([BK][LD], zero past the keys and E), then each
// SIMD group's 8 × BK products of its query rows (`qm`) against them into its rows of `sc`
// ([BQ][LS]); every thread of the group runs it (it holds barriers).
#define LUCID_ATTENTION_SCORES(TT, MT, BK, D, LD, LS, THREADS, EXACT)                                 \
    for (int e = int(lane); e < BK * D; e += THREADS) {                                              \
        int c = e / D, d = e % D, j = k0 + c;                                                        \
        ks[c * LD + d] = (j < s.s && (EXACT || d < s.e))                                             \
            ? attention_tile(k[b * s.k_strides[0] + j * s.k_strides[1] + d * s.k_strides[2]]) : TT(0); \
    }                                                                                                \
    threadgroup_barrier(mem_flags::mem_threadgroup);                                                 \
    for (int ct = 0; ct < BK / 8; ++ct) {                                                            \
        simdgroup_float8x8 product = zero;                                                           \
        MT km;                                                                                       \
        for (int t = 0; t < ep / 8; ++t) {                                                           \
            simdgroup_load(km, ks + ct * 8 * LD + t * 8, LD, ulong2(0), true);                       \
            simdgroup_multiply_accumulate(product, qm[t], km, product);                              \
        }                                                                                            \
        simdgroup_store(product, sc + int(sg) * 8 * LS + ct * 8, LS);                                \
    }                                                                                                \
    threadgroup_barrier(mem_flags::mem_threadgroup);

// Threadgroup memory, in bytes: the scores [BQ][LS] and a diagonal [8][8] per SIMD group as
// float, then the tiles of TT: q [BQ][LD], and k and v [BK][LD] each, whose space also stages
// the output ([BQ][D] floats) at the end (`AttentionVariant.bytes` in Metal+Attention.swift).
#define LUCID_ATTENTION(NAME, T, TT, MT, SGS, BK, D, PAD, EXACT)                                     \
kernel void NAME(device const T* q [[buffer(0)]], device const T* k [[buffer(1)]],                  \
                 device const T* v [[buffer(2)]], device const uchar* mask [[buffer(3)]],            \
                 device T* out [[buffer(4)]], device T* weights [[buffer(5)]],                       \
                 constant AttentionShape& s [[buffer(6)]], threadgroup float* smem [[threadgroup(0)]], \
                 uint group [[threadgroup_position_in_grid]], uint lane [[thread_index_in_threadgroup]], \
                 uint sg [[simdgroup_index_in_threadgroup]], uint sl [[thread_index_in_simdgroup]]) {  \
    const int BQ = 8 * SGS, THREADS = 32 * SGS, LD = D + PAD, LS = BK + 4;                           \
    int blocks = (s.l + BQ - 1) / BQ, b = int(group) / blocks, row0 = (int(group) % blocks) * BQ;   \
    const int ep = EXACT ? D : (s.e + 7) / 8 * 8, evp = EXACT ? D : (s.ev + 7) / 8 * 8;              \
    threadgroup float* sc = smem;                                                                    \
    threadgroup float* diag = sc + BQ * LS + int(sg) * 64;                                           \
    threadgroup TT* qs = (threadgroup TT*)(sc + BQ * LS + SGS * 64);                                 \
    threadgroup TT* ks = qs + BQ * LD;                                                               \
    threadgroup TT* vs = ks + BK * LD;                                                               \
    threadgroup float* stage = (threadgroup float*)ks;                                               \
    for (int e = int(lane); e < BQ * D; e += THREADS) {                                              \
        int r = e / D, c = e % D, i = row0 + r;                                                      \
        qs[r * LD + c] = (i < s.l && (EXACT || c < s.e))                                             \
            ? attention_tile(q[b * s.q_strides[0] + i * s.q_strides[1] + c * s.q_strides[2]]) : TT(0); \
    }                                                                                                \
    threadgroup_barrier(mem_flags::mem_threadgroup);                                                 \
    const simdgroup_float8x8 zero = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);                 \
    MT qm[D / 8];                                                                                    \
    for (int t = 0; t < ep / 8; ++t) simdgroup_load(qm[t], qs + int(sg) * 8 * LD + t * 8, LD);      \
    simdgroup_float8x8 acc[D / 8];                                                                   \
    for (int t = 0; t < D / 8; ++t) acc[t] = zero;                                                   \
    float row_max[8], row_sum[8], row_scale[8];                                                      \
    for (int r = 0; r < 8; ++r) { row_max[r] = -INFINITY; row_sum[r] = 0.0f; }                       \
    int last = s.causal != 0 ? min(s.s, row0 + BQ) : s.s;                                            \
    for (int k0 = 0; k0 < last; k0 += BK) {                                                          \
        for (int e = int(lane); e < BK * D; e += THREADS) {                                          \
            int c = e / D, d = e % D, j = k0 + c;                                                    \
            vs[c * LD + d] = (j < s.s && (EXACT || d < s.ev))                                        \
                ? attention_tile(v[b * s.v_strides[0] + j * s.v_strides[1] + d * s.v_strides[2]]) : TT(0); \
        }                                                                                            \
        LUCID_ATTENTION_SCORES(TT, MT, BK, D, LD, LS, THREADS, EXACT)                                \
        for (int r = 0; r < 8; ++r) {                                                                \
            int i = row0 + int(sg) * 8 + r, c = int(sl);                                             \
            threadgroup float* score = sc + (int(sg) * 8 + r) * LS + c;                              \
            float x = c < BK ? attention_score(*score, s, mask, b, i, k0 + c) : -INFINITY;           \
            float m = max_or_nan(row_max[r], simd_max(x));                                           \
            float base = m == -INFINITY ? 0.0f : m;                                                  \
            float p = precise::exp(x - base);                                                        \
            if (c < BK) *score = p;                                                                  \
            row_scale[r] = precise::exp(row_max[r] - base);                                          \
            row_sum[r] = row_sum[r] * row_scale[r] + simd_sum(p);                                    \
            row_max[r] = m;                                                                          \
        }                                                                                            \
        for (int e = int(sl); e < 64; e += 32) diag[e] = e / 8 == e % 8 ? row_scale[e / 8] : 0.0f;  \
        threadgroup_barrier(mem_flags::mem_threadgroup);                                             \
        simdgroup_float8x8 dm, pm;                                                                   \
        MT vm;                                                                                       \
        simdgroup_load(dm, diag, 8);                                                                 \
        for (int t = 0; t < evp / 8; ++t) {                                                          \
            simdgroup_multiply_accumulate(acc[t], dm, acc[t], zero);                                 \
            for (int kk = 0; kk < BK; kk += 8) {                                                     \
                simdgroup_load(pm, sc + int(sg) * 8 * LS + kk, LS);                                  \
                simdgroup_load(vm, vs + kk * LD + t * 8, LD);                                        \
                simdgroup_multiply_accumulate(acc[t], pm, vm, acc[t]);                               \
            }                                                                                        \
        }                                                                                            \
        threadgroup_barrier(mem_flags::mem_threadgroup);                                             \
    }                                                                                                \
    if (s.write_weights != 0) {                                                                      \
        for (int k0 = 0; k0 < s.s; k0 += BK) {                                                       \
            LUCID_ATTENTION_SCORES(TT, MT, BK, D, LD, LS, THREADS, EXACT)                            \
            for (int e = int(sl); e < 8 * BK; e += 32) {                                             \
                int r = e / BK, i = row0 + int(sg) * 8 + r, j = k0 + e % BK;                         \
                if (i < s.l && j < s.s) {                                                            \
                    float base = row_max[r] == -INFINITY ? 0.0f : row_max[r];                        \
                    float x = attention_score(sc[(int(sg) * 8 + r) * LS + e % BK], s, mask, b, i, j); \
                    weights[(b * s.l + i) * s.s + j] = narrow<T>(precise::exp(x - base) / row_sum[r]); \
                }                                                                                    \
            }                                                                                        \
            threadgroup_barrier(mem_flags::mem_threadgroup);                                         \
        }                                                                                            \
    }                                                                                                \
    for (int t = 0; t < evp / 8; ++t) simdgroup_store(acc[t], stage + int(sg) * 8 * D + t * 8, D);  \
    threadgroup_barrier(mem_flags::mem_threadgroup);                                                 \
    for (int e = int(sl); e < 8 * D; e += 32) {                                                      \
        int r = e / D, i = row0 + int(sg) * 8 + r, c = e % D;                                        \
        if (i < s.l && (EXACT || c < s.ev)) out[(b * s.l + i) * s.ev + c] = narrow<T>(stage[int(sg) * 8 * D + e] / row_sum[r]); \
    }                                                                                                \
}

// Each variant for one dtype: T, its tile type TT and matrix type MT, and the padding of a
// tile's rows (16 bytes). Heads up to 64: four SIMD groups, 32 rows and 32 keys a step; wider:
// two SIMD groups, 16 rows, and 32 keys a step in half tiles, 16 in float tiles over 80
// (`attentionVariant` in Metal+Attention.swift chooses, and sizes the memory).
#define LUCID_ATTENTION_VARIANTS(T, TT, MT, PAD, NAME, WIDE_KEYS)                                    \
    LUCID_ATTENTION(attention_h32_##NAME, T, TT, MT, 4, 32, 32, PAD, true)                           \
    LUCID_ATTENTION(attention_h64_##NAME, T, TT, MT, 4, 32, 64, PAD, true)                           \
    LUCID_ATTENTION(attention_h80_##NAME, T, TT, MT, 2, 32, 80, PAD, true)                           \
    LUCID_ATTENTION(attention_h96_##NAME, T, TT, MT, 2, WIDE_KEYS, 96, PAD, true)                    \
    LUCID_ATTENTION(attention_h128_##NAME, T, TT, MT, 2, WIDE_KEYS, 128, PAD, true)                  \
    LUCID_ATTENTION(attention_64_##NAME, T, TT, MT, 4, 32, 64, PAD, false)                           \
    LUCID_ATTENTION(attention_128_##NAME, T, TT, MT, 2, WIDE_KEYS, 128, PAD, false)

LUCID_ATTENTION_VARIANTS(float, float, simdgroup_float8x8, 4, float32, 16)
LUCID_ATTENTION_VARIANTS(half, half, simdgroup_half8x8, 8, float16, 32)
LUCID_ATTENTION_VARIANTS(bfloat, float, simdgroup_float8x8, 4, bfloat16, 16)
