// Automatic mixed precision on the GPU: GradScaler's unscale, one thread per element of
// contiguous tensors of one floating dtype, in float32 arithmetic with the host kernels'
// formulas (Host+AMP.swift), each stored value rounded once; GradScaler's scale update; and
// autocast inspection's statistics. Flags, scales and counts stay on the device, so none of
// them needs a read by the host. Compiled after Common.metal, in one library.

// out = grad * inv_scale; any infinite or NaN result (before or after rounding) sets found[0]
// to 1. Every thread that finds one stores the same value, so the stores need no ordering.
#define LUCID_UNSCALE(NAME, T)                                                                       \
kernel void NAME(device const T* grad [[buffer(0)]], device T* out [[buffer(1)]],                   \
                 device float* found [[buffer(2)]], device const float* inv_scale [[buffer(3)]],     \
                 constant ulong& count [[buffer(4)]], LUCID_THREAD_POSITION) {                       \
    const ulong i = LUCID_THREAD_INDEX;                                                              \
    if (ulong(i) >= count) return;                                                                   \
    float x = widen(grad[i]) * inv_scale[0];                                                         \
    T stored = narrow<T>(x);                                                                         \
    out[i] = stored;                                                                                 \
    if (isinf(x) || isnan(x) || isinf(widen(stored)) || isnan(widen(stored))) found[0] = 1.0f;       \
}

LUCID_UNSCALE(unscale_float32, float)
LUCID_UNSCALE(unscale_float16, half)
LUCID_UNSCALE(unscale_bfloat16, bfloat)

// Field order and sizes match `ScaleUpdate`'s words in Metal+AMP.swift.
struct ScaleUpdateParams {
    float growth_factor, backoff_factor;
    int growth_interval;
};

// GradScaler's update, one thread: back off after a skipped step; grow after growth_interval
// clean ones, unless the grown scale leaves the float32 range.
kernel void amp_update_scale(device float* scale [[buffer(0)]], device int* tracker [[buffer(1)]],
                             device const float* found [[buffer(2)]], constant ScaleUpdateParams& u [[buffer(3)]],
                             LUCID_THREAD_POSITION) {
    const ulong i = LUCID_THREAD_INDEX;
    if (i != 0) return;
    if (found[0] != 0.0f) {
        scale[0] *= u.backoff_factor;
        tracker[0] = 0;
        return;
    }
    int clean = tracker[0] + 1;
    if (clean == u.growth_interval) {
        float grown = scale[0] * u.growth_factor;
        if (isfinite(grown)) scale[0] = grown;
        clean = 0;
    }
    tracker[0] = clean;
}

// Autocast inspection's statistics (Inspection.swift, CastStatistics): one pass over the bits
// of a contiguous tensor's values, comparing magnitude bits (which order like the values)
// against limits in the operand's own format. Each threadgroup (a power of two wide) adds up
// its threads' findings in threadgroup memory; its first thread adds them to the block's
// counters (an int32 buffer read as unsigned words) with atomics, 64-bit counts as two words
// with the carry added on wrapping, so nothing waits for the host. Field order and sizes match
// the words in Metal+AMP.swift.
struct CastStatsParams {
    uint limits[5];  // the infinity; o16, u16, obf, ubf
    uint format;     // 0: float32, 1: float16, 2: bfloat16
    uint word;       // the block's first word
    uint pad;
    ulong count;
};

inline void cast_stats_commit(thread uint* c, device atomic_int* acc, constant CastStatsParams& p,
                              threadgroup uint* scratch, uint lane, uint width) {
    for (uint k = 0; k < 7; ++k) scratch[k * width + lane] = c[k];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint s = width / 2; s > 0; s >>= 1) {
        if (lane < s) {
            scratch[lane] = max(scratch[lane], scratch[lane + s]);
            for (uint k = 1; k < 7; ++k) scratch[k * width + lane] += scratch[k * width + lane + s];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (lane != 0) return;
    uint top = scratch[0];
    if (p.format == 1u) top = as_type<uint>(widen(as_type<half>(ushort(top))));
    else if (p.format == 2u) top <<= 16;
    // Magnitudes up to the infinity's bits: positive as int, so the signed maximum is theirs.
    atomic_fetch_max_explicit(acc + p.word, int(top), memory_order_relaxed);
    for (uint k = 1; k < 7; ++k) {
        uint v = scratch[k * width];
        uint old = as_type<uint>(atomic_fetch_add_explicit(acc + p.word + 2 * k - 1, as_type<int>(v), memory_order_relaxed));
        if (old + v < old) atomic_fetch_add_explicit(acc + p.word + 2 * k, 1, memory_order_relaxed);
    }
}

#define LUCID_CAST_STATS(NAME, T, BITS, MASK)                                                        \
kernel void NAME(device const T* x [[buffer(0)]], device atomic_int* acc [[buffer(1)]],             \
                 constant CastStatsParams& p [[buffer(2)]], threadgroup uint* scratch [[threadgroup(0)]], \
                 uint group [[threadgroup_position_in_grid]], uint lane [[thread_index_in_threadgroup]], \
                 uint width [[threads_per_threadgroup]], uint groups [[threadgroups_per_grid]]) {    \
    uint c[7] = {0u, 0u, 0u, 0u, 0u, 0u, 0u};                                                        \
    const uint inf = p.limits[0];                                                                    \
    for (ulong i = ulong(group) * width + lane; i < p.count; i += ulong(groups) * width) {          \
        uint m = uint(as_type<BITS>(x[i])) & MASK;                                                   \
        if (m <= inf) c[0] = max(c[0], m);                                                           \
        c[1] += (m > p.limits[1] && m < inf) ? 1u : 0u;                                              \
        c[2] += (m != 0u && m < p.limits[2]) ? 1u : 0u;                                              \
        c[3] += (m > p.limits[3] && m < inf) ? 1u : 0u;                                              \
        c[4] += (m != 0u && m < p.limits[4]) ? 1u : 0u;                                              \
        c[5] += (m != 0u && m <= inf) ? 1u : 0u;                                                     \
        c[6] += (m >= inf) ? 1u : 0u;                                                                \
    }                                                                                                \
    cast_stats_commit(c, acc, p, scratch, lane, width);                                              \
}

LUCID_CAST_STATS(cast_stats_float32, float, uint, 0x7fffffffu)
LUCID_CAST_STATS(cast_stats_float16, half, ushort, 0x7fffu)
LUCID_CAST_STATS(cast_stats_bfloat16, bfloat, ushort, 0x7fffu)
