// Shared by every kernel file: the backend compiles each other Kernels/*.metal file as a
// library of its own, this file first (a library made from source has no include path), so
// they use these helpers without including anything; a file sees only this one, never
// another family's.
//
// Kept to the part of the Metal Shading Language that also compiles as C++ against
// tests/metal/include/metal_stdlib (the emulation): no threadgroup arrays declared inside a
// kernel, no function constants.

#include <metal_stdlib>
#include <metal_simdgroup_matrix>
using namespace metal;

// ---- the index of a 1-D kernel's thread ---------------------------------------------------
// A thread's position in the grid is 32-bit: a dispatch of 2^32 threads or more would wrap.
// `MetalBackend.encode(_:count:)` dispatches up to `rowThreads` threads as one row and more as
// rows of a 2-D grid; a 1-D kernel takes LUCID_THREAD_POSITION as its last parameters and its
// 64-bit index as LUCID_THREAD_INDEX (row * row length + column). The last row's threads past
// the count return at the kernel's guard.
#define LUCID_THREAD_POSITION uint2 lucid_position [[thread_position_in_grid]], uint2 lucid_grid [[threads_per_grid]]
#define LUCID_THREAD_INDEX (ulong(lucid_position.y) * ulong(lucid_grid.x) + ulong(lucid_position.x))

// ---- storing float32 results --------------------------------------------------------------
// Bit-exact narrowing with the host kernels' rules (HalfConversions.swift), not the GPU's
// conversion instructions, so that every device rounds alike and NaNs keep the reference
// libraries' bits: round to nearest even, subnormals kept, overflow to infinity; float16 NaNs
// keep the top ten payload bits (forced non-zero), bfloat16 NaNs become the quiet NaN.

inline ushort float16_bits(float x) {
    uint f = as_type<uint>(x);
    ushort sign = ushort((f >> 16) & 0x8000u);
    int exponent = int((f >> 23) & 0xffu);
    uint mantissa = f & 0x7fffffu;
    if (exponent == 0xff) {
        if (mantissa == 0) return sign | 0x7c00;
        ushort payload = ushort(mantissa >> 13);
        return sign | 0x7c00 | (payload == 0 ? ushort(1) : payload);
    }
    int e = exponent - 112;
    if (e >= 31) return sign | 0x7c00;
    if (e <= 0) {
        if (e < -10) return sign;
        uint full = mantissa | 0x800000u;
        uint shift = uint(14 - e);
        uint q = full >> shift;
        uint rest = full & ((1u << shift) - 1u);
        uint halfway = 1u << (shift - 1u);
        if (rest > halfway || (rest == halfway && (q & 1u) == 1u)) q += 1u;
        return sign | ushort(q);
    }
    uint q = (uint(e) << 10) | (mantissa >> 13);
    uint rest = mantissa & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (q & 1u) == 1u)) q += 1u;
    return sign | ushort(q);
}

inline ushort bfloat16_bits(float x) {
    uint f = as_type<uint>(x);
    if ((f & 0x7fffffffu) > 0x7f800000u) return (f & 0x80000000u) != 0 ? ushort(0xffc0) : ushort(0x7fc0);
    return ushort((f + 0x7fffu + ((f >> 16) & 1u)) >> 16);
}

// Reading a stored value as float32, exactly (NaN payloads included).
inline float widen(float x) { return x; }
inline float widen(half h) {
    uint b = uint(as_type<ushort>(h));
    uint sign = (b & 0x8000u) << 16, exponent = (b >> 10) & 0x1fu, mantissa = b & 0x3ffu;
    if (exponent == 0x1fu) return as_type<float>(sign | 0x7f800000u | (mantissa << 13));
    if (exponent == 0u) return as_type<float>(sign | as_type<uint>(float(mantissa) * 5.9604644775390625e-8f));
    return as_type<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}
inline float widen(bfloat b) { return as_type<float>(uint(as_type<ushort>(b)) << 16); }

template <typename T> inline T narrow(float x) { return T(x); }
template <> inline half narrow<half>(float x) { return as_type<half>(float16_bits(x)); }
template <> inline bfloat narrow<bfloat>(float x) { return as_type<bfloat>(bfloat16_bits(x)); }

// ---- cooperating threadgroups ------------------------------------------------------------
// For kernels that run a threadgroup of `width` threads (a power of two) per row, combining
// per-thread values: first within each SIMD group of 32 (fewer when the group is narrower)
// by an XOR butterfly of `simd_shuffle_xor` (every lane ends with the same value), then across
// the SIMD groups' results through `partial` in threadgroup memory. Shuffles rather than
// `simd_max`/`simd_sum`, whose NaN rule and rounding MSL leaves open: the maximum keeps NaN
// and the sum keeps every rounding error (TwoSum), as the host's compensated sums do. Every
// thread of the group must call them (they hold barriers and SIMD-group collectives), and
// every thread gets the result.

// sum += x, keeping the rounding error in `carry` (Kahan). Once the sum is infinite or NaN
// there is no error to keep: inf - inf would turn it into NaN.
inline void compensated_add(thread float& sum, thread float& carry, float x) {
    float y = x - carry;
    float t = sum + y;
    carry = isfinite(t) ? (t - sum) - y : 0.0f;
    sum = t;
}

inline float max_or_nan(float a, float b) { return (isnan(a) || a > b) ? a : b; }

// a + b as s and its exact rounding error (TwoSum, in either order); no error once s is not
// finite.
inline float two_sum(float a, float b, thread float& error) {
    float s = a + b;
    error = 0.0f;
    if (isfinite(s)) {
        float bb = s - a;
        error = (a - (s - bb)) + (b - bb);
    }
    return s;
}

// The largest of `lanes` (a power of two up to 32) consecutive lanes' values of a SIMD group
// (NaN if any is NaN); every lane of them ends with it.
inline float simd_lanes_max(float value, uint lanes) {
    for (uint d = lanes / 2; d > 0; d /= 2) value = max_or_nan(value, simd_shuffle_xor(value, ushort(d)));
    return value;
}

// The sum of `lanes` (a power of two up to 32) consecutive lanes' compensated sums (sum - carry
// each), as a sum and its error term (`error`), added by TwoSum so that no rounding error is
// lost; every lane of them ends with both.
inline float simd_lanes_sum(float sum, float carry, uint lanes, thread float& error) {
    float s = sum;
    error = -carry;
    for (uint d = lanes / 2; d > 0; d /= 2) {
        float other = simd_shuffle_xor(s, ushort(d)), other_error = simd_shuffle_xor(error, ushort(d));
        float e;
        s = two_sum(s, other, e);
        error = (error + other_error) + e;
    }
    return s;
}

// The largest of the threads' values (NaN if any is NaN); `partial` holds `width` floats.
inline float threadgroup_max(float value, threadgroup float* partial, uint lane, uint width) {
    uint lanes = min(width, 32u);
    value = simd_lanes_max(value, lanes);
    uint groups = width / lanes;
    if (lane % lanes == 0) partial[lane / lanes] = value;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float result = partial[0];
    for (uint g = 1; g < groups; ++g) result = max_or_nan(result, partial[g]);
    threadgroup_barrier(mem_flags::mem_threadgroup);  // partial may be reused at once
    return result;
}

// The sum of the threads' compensated sums (sum - carry each), added without losing the
// error terms; `partial` holds 2 · width floats.
inline float threadgroup_sum(float sum, float carry, threadgroup float* partial, uint lane, uint width) {
    uint lanes = min(width, 32u);
    float error;
    float s = simd_lanes_sum(sum, carry, lanes, error);
    uint groups = width / lanes;
    if (lane % lanes == 0) {
        partial[lane / lanes] = s;
        partial[groups + lane / lanes] = error;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float total = partial[0], total_error = partial[groups];
    for (uint g = 1; g < groups; ++g) {
        float e;
        total = two_sum(total, partial[g], e);
        total_error = total_error + partial[groups + g] + e;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return isfinite(total) ? total + total_error : total;
}

// ---- products on the SIMD groups' matrix units ---------------------------------------------
// The main loop of every tiled product (gemm_simd and gemm_simd64, the implicit-GEMM
// convolutions): a threadgroup of four SIMD groups (128 threads, 2×2) computes the BM×BN block
// of an M×N×K product at (row0, col0), each SIMD group a (BM/2)×(BN/2) block as
// (BM/16)×(BN/16) `simdgroup_float8x8` accumulators; BM and BN are 32 or 64. Slices of
// LUCID_SG_BK along k are staged in threadgroup memory as float32, a as [BM][BK + PAD] and b
// as [BK][BN + PAD]: rows padded by LUCID_SG_PAD floats, so that the eight rows an 8×8 load
// reads start in different banks. Past the edges they hold 0. `LOAD_A(i, l)` and
// `LOAD_B(l, j)` are float expressions read only for in-range indices; `A_ALONG_K`
// (`B_ALONG_K`), a condition the same for the whole group, says that a's (b's) neighbours
// along k are neighbours in memory, and the staging then runs along k, so that neighbouring
// threads read neighbouring elements. Last, `STORE(i, j, v)` runs for every output (i, j) inside
// the M×N product with its float32 sum v: the accumulators pass through threadgroup memory
// an 8-row strip of every SIMD group at a time. Expects `lane`, `sg` and `smem`
// (LUCID_SG_FLOATS(BM, BN) floats) in scope. All threads of the group run it.
#define LUCID_SG_BK 16
#define LUCID_SG_PAD 4
#define LUCID_SG_THREADS 128
#define LUCID_SG_FLOATS(BM, BN) ((BM) * (LUCID_SG_BK + LUCID_SG_PAD) + LUCID_SG_BK * ((BN) + LUCID_SG_PAD))
#define LUCID_UNROLL _Pragma("clang loop unroll(full)")
#define LUCID_SIMD_TILE_PRODUCT(BM, BN, M, N, K, LOAD_A, LOAD_B, A_ALONG_K, B_ALONG_K, STORE)          \
    {                                                                                                \
        const int lda = LUCID_SG_BK + LUCID_SG_PAD, ldb = (BN) + LUCID_SG_PAD;                       \
        threadgroup float* ta = smem;                                                                \
        threadgroup float* tb = smem + (BM) * lda;                                                   \
        const int sr = int(sg / 2u) * ((BM) / 2), sc = int(sg % 2u) * ((BN) / 2);                    \
        const bool a_along_k = (A_ALONG_K), b_along_k = (B_ALONG_K);                                 \
        simdgroup_float8x8 acc[(BM) / 16][(BN) / 16];                                                \
        LUCID_UNROLL for (int fm = 0; fm < (BM) / 16; ++fm) {                                        \
            LUCID_UNROLL for (int fn = 0; fn < (BN) / 16; ++fn) {                                    \
                acc[fm][fn] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);                       \
            }                                                                                        \
        }                                                                                            \
        for (int l0 = 0; l0 < (K); l0 += LUCID_SG_BK) {                                              \
            for (int e = int(lane); e < (BM) * LUCID_SG_BK; e += LUCID_SG_THREADS) {                 \
                int r = a_along_k ? e / LUCID_SG_BK : e % (BM);                                      \
                int q = a_along_k ? e % LUCID_SG_BK : e / (BM);                                      \
                int i = row0 + r, l = l0 + q;                                                        \
                ta[r * lda + q] = (i < (M) && l < (K)) ? LOAD_A(i, l) : 0.0f;                        \
            }                                                                                        \
            for (int e = int(lane); e < LUCID_SG_BK * (BN); e += LUCID_SG_THREADS) {                 \
                int q = b_along_k ? e % LUCID_SG_BK : e / (BN);                                      \
                int c = b_along_k ? e / LUCID_SG_BK : e % (BN);                                      \
                int l = l0 + q, j = col0 + c;                                                        \
                tb[q * ldb + c] = (l < (K) && j < (N)) ? LOAD_B(l, j) : 0.0f;                        \
            }                                                                                        \
            threadgroup_barrier(mem_flags::mem_threadgroup);                                         \
            LUCID_UNROLL for (int k8 = 0; k8 < LUCID_SG_BK; k8 += 8) {                               \
                simdgroup_float8x8 af[(BM) / 16], bf[(BN) / 16];                                     \
                LUCID_UNROLL for (int fm = 0; fm < (BM) / 16; ++fm) {                                \
                    simdgroup_load(af[fm], ta + (sr + fm * 8) * lda + k8, ulong(lda));               \
                }                                                                                    \
                LUCID_UNROLL for (int fn = 0; fn < (BN) / 16; ++fn) {                                \
                    simdgroup_load(bf[fn], tb + k8 * ldb + sc + fn * 8, ulong(ldb));                 \
                }                                                                                    \
                LUCID_UNROLL for (int fm = 0; fm < (BM) / 16; ++fm) {                                \
                    LUCID_UNROLL for (int fn = 0; fn < (BN) / 16; ++fn) {                            \
                        simdgroup_multiply_accumulate(acc[fm][fn], af[fm], bf[fn], acc[fm][fn]);     \
                    }                                                                                \
                }                                                                                    \
            }                                                                                        \
            threadgroup_barrier(mem_flags::mem_threadgroup);                                         \
        }                                                                                            \
        /* SIMD group g's rows fm·8 … fm·8 + 7 at smem[g · 8 · BN/2], BN/2 floats a row */          \
        const int half_n = (BN) / 2, strip = 8 * half_n;                                             \
        LUCID_UNROLL for (int fm = 0; fm < (BM) / 16; ++fm) {                                        \
            LUCID_UNROLL for (int fn = 0; fn < (BN) / 16; ++fn) {                                    \
                simdgroup_store(acc[fm][fn], smem + int(sg) * strip + fn * 8, ulong(half_n));        \
            }                                                                                        \
            threadgroup_barrier(mem_flags::mem_threadgroup);                                         \
            for (int e = int(lane); e < 4 * strip; e += LUCID_SG_THREADS) {                          \
                int owner = e / strip, r = e % strip / half_n, c = e % half_n;                       \
                int i = row0 + owner / 2 * ((BM) / 2) + fm * 8 + r;                                  \
                int j = col0 + owner % 2 * half_n + c;                                               \
                if (i < (M) && j < (N)) {                                                            \
                    float v = smem[e];                                                               \
                    STORE(i, j, v);                                                                  \
                }                                                                                    \
            }                                                                                        \
            threadgroup_barrier(mem_flags::mem_threadgroup);                                         \
        }                                                                                            \
    }

// ---- strided operands --------------------------------------------------------------------
// The layout of up to three operands over one shape (row-major over `shape`), bound with
// setBytes, in two forms: `Layout` with 64-bit counts, sizes and strides, and `Layout32`, the
// same in 32 bits, for operands whose every count and offset fits (`MetalLayout` in
// MetalBackend.swift writes both and decides). A strided kernel comes in both forms
// (LUCID_INDEX_FORMS): NAME takes a `Layout32` and a 32-bit thread index, so that an element
// costs a 32-bit divide and modulo per dimension, NAME_wide a `Layout` and the 64-bit index.
struct Layout {
    uint ndim;
    uint pad;
    ulong count;
    long shape[8];
    long strides[3][8];
};

struct Layout32 {
    uint ndim;
    uint count;
    uint shape[8];
    int strides[3][8];
};

// The offset type of each form (element_offset's result), for a kernel's other offsets.
typedef long LayoutOffset;
typedef int Layout32Offset;

inline long element_offset(ulong flat, constant Layout& L, uint operand) {
    long off = 0;
    for (int d = int(L.ndim) - 1; d >= 0; --d) {
        ulong extent = ulong(L.shape[d]);
        long i = long(flat % extent);
        flat /= extent;
        off += i * L.strides[operand][d];
    }
    return off;
}

// The outermost dimension needs no division: what is left of the index is its position.
inline int element_offset(uint flat, constant Layout32& L, uint operand) {
    int off = 0;
    for (int d = int(L.ndim) - 1; d > 0; --d) {
        uint extent = L.shape[d];
        off += int(flat % extent) * L.strides[operand][d];
        flat /= extent;
    }
    return L.ndim > 0 ? off + int(flat) * L.strides[operand][0] : 0;
}

// Both forms of a strided kernel from one macro AT(NAME, ..., L, I): L the layout type, I the
// index type.
#define LUCID_INDEX_FORMS(AT, NAME, ...) AT(NAME, __VA_ARGS__, Layout32, uint) AT(NAME##_wide, __VA_ARGS__, Layout, ulong)
