// Shared by every kernel file: the backend compiles Kernels/*.metal as one library, this file
// first (a library made from source has no include path), so the others use these helpers
// without including anything.
//
// Kept to the part of the Metal Shading Language that also compiles as C++ against
// tests/metal/include/metal_stdlib (the emulation): no threadgroup arrays declared inside a
// kernel, no function constants.

#include <metal_stdlib>
#include <metal_simdgroup_matrix>
using namespace metal;

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
// per-thread values through `partial` in threadgroup memory. Every thread of the group must
// call them (they hold barriers), and every thread gets the result.

// sum += x, keeping the rounding error in `carry` (Kahan). Once the sum is infinite or NaN
// there is no error to keep: inf - inf would turn it into NaN.
inline void compensated_add(thread float& sum, thread float& carry, float x) {
    float y = x - carry;
    float t = sum + y;
    carry = isfinite(t) ? (t - sum) - y : 0.0f;
    sum = t;
}

inline float max_or_nan(float a, float b) { return (isnan(a) || a > b) ? a : b; }

// The largest of the threads' values (NaN if any is NaN); `partial` holds `width` floats.
inline float threadgroup_max(float value, threadgroup float* partial, uint lane, uint width) {
    partial[lane] = value;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint half_width = width / 2; half_width > 0; half_width /= 2) {
        if (lane < half_width) partial[lane] = max_or_nan(partial[lane], partial[lane + half_width]);
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    float result = partial[0];
    threadgroup_barrier(mem_flags::mem_threadgroup);  // partial may be reused at once
    return result;
}

// The sum of the threads' compensated sums (sum - carry each), added pairwise without losing
// the error terms (TwoSum); `partial` holds 2 · width floats.
inline float threadgroup_sum(float sum, float carry, threadgroup float* partial, uint lane, uint width) {
    partial[lane] = sum;
    partial[width + lane] = -carry;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint half_width = width / 2; half_width > 0; half_width /= 2) {
        if (lane < half_width) {
            float x = partial[lane], y = partial[lane + half_width];
            float s = x + y;
            float error = 0.0f;
            if (isfinite(s)) {
                float yy = s - x;
                error = (x - (s - yy)) + (y - yy);
            }
            partial[lane] = s;
            partial[width + lane] = partial[width + lane] + partial[width + lane + half_width] + error;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    float result = isfinite(partial[0]) ? partial[0] + partial[width] : partial[0];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return result;
}
