// Reductions of the Metal backend: sums and means over any set of axes, and the
// arg-reductions (max/min with the first index). Compiled after Common.metal and
// Elementwise.metal (for Layout), in one library. One thread per output element walks the
// reduced elements (or, for few outputs of many elements, one threadgroup per output, and for
// very many, several threadgroups per output and a second pass);
// floating sums are compensated (Kahan) float32 sums, so their error does not grow with the
// count, as the host's double sums do not.
//
// `outer` lays out the output over the kept dimensions (operand 0: the input's strides, 1: the
// output's); `inner` lays out the reduced dimensions (operand 0: the input's strides).

#define LUCID_REDUCE_FLOAT(NAME, T)                                                                  \
kernel void NAME(device const T* a [[buffer(0)]], device T* out [[buffer(1)]],                      \
                 constant Layout& outer [[buffer(2)]], constant Layout& inner [[buffer(3)]],         \
                 constant uint& mean [[buffer(4)]], LUCID_THREAD_POSITION) {                         \
    const ulong gid = LUCID_THREAD_INDEX;                                                            \
    if (ulong(gid) >= outer.count) return;                                                           \
    long base = element_offset(gid, outer, 0);                                                       \
    float sum = 0.0f, carry = 0.0f;                                                                  \
    for (ulong r = 0; r < inner.count; ++r) {                                                        \
        compensated_add(sum, carry, widen(a[base + element_offset(r, inner, 0)]));                   \
    }                                                                                                \
    if (mean != 0) sum = sum / float(inner.count);                                                   \
    out[element_offset(gid, outer, 1)] = narrow<T>(sum);                                             \
}

// Integer (and bool) sums accumulate in int64, wrapping, into an int64 output.
#define LUCID_REDUCE_INT(NAME, T)                                                                    \
kernel void NAME(device const T* a [[buffer(0)]], device long* out [[buffer(1)]],                   \
                 constant Layout& outer [[buffer(2)]], constant Layout& inner [[buffer(3)]],         \
                 LUCID_THREAD_POSITION) {                                                            \
    const ulong gid = LUCID_THREAD_INDEX;                                                            \
    if (ulong(gid) >= outer.count) return;                                                           \
    long base = element_offset(gid, outer, 0);                                                       \
    ulong sum = 0;                                                                                   \
    for (ulong r = 0; r < inner.count; ++r) sum += ulong(long(a[base + element_offset(r, inner, 0)])); \
    out[element_offset(gid, outer, 1)] = long(sum);                                                  \
}

// The same with one threadgroup per output element, for few outputs over many elements: each
// thread keeps a compensated sum of every width-th element, and the group adds them up
// (threadgroup_sum in Common.metal). The threadgroup memory holds two floats per thread.
#define LUCID_REDUCE_FLOAT_GROUP(NAME, T)                                                            \
kernel void NAME(device const T* a [[buffer(0)]], device T* out [[buffer(1)]],                      \
                 constant Layout& outer [[buffer(2)]], constant Layout& inner [[buffer(3)]],         \
                 constant uint& mean [[buffer(4)]], threadgroup float* partial [[threadgroup(0)]],   \
                 uint group [[threadgroup_position_in_grid]], uint lane [[thread_index_in_threadgroup]], \
                 uint width [[threads_per_threadgroup]]) {                                           \
    long base = element_offset(group, outer, 0);                                                     \
    float sum = 0.0f, carry = 0.0f;                                                                  \
    for (ulong r = lane; r < inner.count; r += width) {                                              \
        compensated_add(sum, carry, widen(a[base + element_offset(r, inner, 0)]));                   \
    }                                                                                                \
    float total = threadgroup_sum(sum, carry, partial, lane, width);                                 \
    if (lane == 0) {                                                                                 \
        if (mean != 0) total = total / float(inner.count);                                           \
        out[element_offset(group, outer, 1)] = narrow<T>(total);                                     \
    }                                                                                                \
}

// The same split further, for few outputs of very many elements (a loss's mean, a norm):
// `parts` threadgroups per output each sum every (parts·width)-th element from their own start
// (stage one, into a float32 partial per group), then one threadgroup per output adds its
// partials (stage two), compensated throughout.
#define LUCID_REDUCE_SPLIT(NAME, T)                                                                  \
kernel void NAME(device const T* a [[buffer(0)]], device float* partials [[buffer(1)]],             \
                 constant Layout& outer [[buffer(2)]], constant Layout& inner [[buffer(3)]],         \
                 constant uint& parts [[buffer(4)]], threadgroup float* scratch [[threadgroup(0)]],  \
                 uint group [[threadgroup_position_in_grid]], uint lane [[thread_index_in_threadgroup]], \
                 uint width [[threads_per_threadgroup]]) {                                           \
    long base = element_offset(group / parts, outer, 0);                                             \
    float sum = 0.0f, carry = 0.0f;                                                                  \
    ulong stride = ulong(parts) * ulong(width);                                                      \
    for (ulong r = ulong(group % parts) * ulong(width) + lane; r < inner.count; r += stride) {       \
        compensated_add(sum, carry, widen(a[base + element_offset(r, inner, 0)]));                   \
    }                                                                                                \
    float total = threadgroup_sum(sum, carry, scratch, lane, width);                                 \
    if (lane == 0) partials[group] = total;                                                          \
}

#define LUCID_REDUCE_MERGE(NAME, T)                                                                  \
kernel void NAME(device const float* partials [[buffer(0)]], device T* out [[buffer(1)]],           \
                 constant Layout& outer [[buffer(2)]], constant Layout& inner [[buffer(3)]],         \
                 constant uint& mean [[buffer(4)]], constant uint& parts [[buffer(5)]],              \
                 threadgroup float* scratch [[threadgroup(0)]], uint group [[threadgroup_position_in_grid]], \
                 uint lane [[thread_index_in_threadgroup]], uint width [[threads_per_threadgroup]]) { \
    float sum = 0.0f, carry = 0.0f;                                                                  \
    for (uint p = lane; p < parts; p += width) compensated_add(sum, carry, partials[group * parts + p]); \
    float total = threadgroup_sum(sum, carry, scratch, lane, width);                                 \
    if (lane == 0) {                                                                                 \
        if (mean != 0) total = total / float(inner.count);                                           \
        out[element_offset(group, outer, 1)] = narrow<T>(total);                                     \
    }                                                                                                \
}

LUCID_REDUCE_SPLIT(reduce_split_float32, float)
LUCID_REDUCE_SPLIT(reduce_split_float16, half)
LUCID_REDUCE_SPLIT(reduce_split_bfloat16, bfloat)
LUCID_REDUCE_MERGE(reduce_merge_float32, float)
LUCID_REDUCE_MERGE(reduce_merge_float16, half)
LUCID_REDUCE_MERGE(reduce_merge_bfloat16, bfloat)
LUCID_REDUCE_FLOAT(reduce_float32, float)
LUCID_REDUCE_FLOAT(reduce_float16, half)
LUCID_REDUCE_FLOAT(reduce_bfloat16, bfloat)
LUCID_REDUCE_FLOAT_GROUP(reduce_group_float32, float)
LUCID_REDUCE_FLOAT_GROUP(reduce_group_float16, half)
LUCID_REDUCE_FLOAT_GROUP(reduce_group_bfloat16, bfloat)
LUCID_REDUCE_INT(reduce_int32, int)
LUCID_REDUCE_INT(reduce_int64, long)
LUCID_REDUCE_INT(reduce_bool, uchar)

// The max (or min) along one axis and its first index; a NaN wins at once. `outer` is over the
// input's shape without the axis: operand 0 the input's strides, 1 the indices', 2 the
// values' (the indices' when there are no values, which are then not written).
#define LUCID_ARG_REDUCE(NAME, T, V, ISFLOAT)                                                        \
kernel void NAME(device const T* a [[buffer(0)]], device long* indices [[buffer(1)]],               \
                 device T* values [[buffer(2)]], constant Layout& outer [[buffer(3)]],               \
                 constant long& length [[buffer(4)]], constant long& step [[buffer(5)]],             \
                 constant uint& flags [[buffer(6)]], LUCID_THREAD_POSITION) {                        \
    const ulong gid = LUCID_THREAD_INDEX;                                                            \
    if (ulong(gid) >= outer.count) return;                                                           \
    bool is_max = (flags & 1u) != 0, has_values = (flags & 2u) != 0;                                 \
    long base = element_offset(gid, outer, 0);                                                       \
    V best_value = V(a[base]);                                                                       \
    long best = 0;                                                                                   \
    for (long r = 1; r < length; ++r) {                                                              \
        if (ISFLOAT && isnan(float(best_value))) break;                                              \
        V x = V(a[base + r * step]);                                                                 \
        if ((ISFLOAT && isnan(float(x))) || (is_max ? x > best_value : x < best_value)) {           \
            best_value = x;                                                                          \
            best = r;                                                                                \
        }                                                                                            \
    }                                                                                                \
    indices[element_offset(gid, outer, 1)] = best;                                                   \
    if (has_values) values[element_offset(gid, outer, 2)] = a[base + best * step];                   \
}

// The floating arg-reductions with one threadgroup per output, for few outputs along a long
// axis (under 2^24 elements, so that an index is exact as a float): each thread keeps the best
// of every width-th element, and the group merges the threads' bests in a tree, by one rule
// (arg_takes): a NaN beats a number, then the larger (or smaller) value, then on a tie the
// earlier index; so the first NaN, or the first extreme, wins, as in the serial kernel. The
// threadgroup memory holds a value and an index per thread; an idle thread holds no element
// (the far infinity at index `length`, which every element beats).
inline bool arg_takes(bool is_max, float best, float best_index, float x, float x_index) {
    bool best_nan = isnan(best), x_nan = isnan(x);
    if (best_nan || x_nan) return x_nan && (!best_nan || x_index < best_index);
    if (x == best) return x_index < best_index;
    return is_max ? x > best : x < best;
}

#define LUCID_ARG_REDUCE_GROUP(NAME, T)                                                              \
kernel void NAME(device const T* a [[buffer(0)]], device long* indices [[buffer(1)]],               \
                 device T* values [[buffer(2)]], constant Layout& outer [[buffer(3)]],               \
                 constant long& length [[buffer(4)]], constant long& step [[buffer(5)]],             \
                 constant uint& flags [[buffer(6)]], threadgroup float* scratch [[threadgroup(0)]],  \
                 uint group [[threadgroup_position_in_grid]], uint lane [[thread_index_in_threadgroup]], \
                 uint width [[threads_per_threadgroup]]) {                                           \
    bool is_max = (flags & 1u) != 0, has_values = (flags & 2u) != 0;                                 \
    long base = element_offset(group, outer, 0);                                                     \
    float best = is_max ? -INFINITY : INFINITY, best_index = float(length);                          \
    for (long r = long(lane); r < length; r += long(width)) {                                        \
        float x = widen(a[base + r * step]);                                                         \
        if (arg_takes(is_max, best, best_index, x, float(r))) {                                      \
            best = x;                                                                                \
            best_index = float(r);                                                                   \
        }                                                                                            \
    }                                                                                                \
    scratch[lane] = best;                                                                            \
    scratch[width + lane] = best_index;                                                              \
    threadgroup_barrier(mem_flags::mem_threadgroup);                                                 \
    for (uint half_width = width / 2; half_width > 0; half_width /= 2) {                             \
        if (lane < half_width) {                                                                     \
            float x = scratch[lane + half_width], xi = scratch[width + lane + half_width];           \
            if (arg_takes(is_max, scratch[lane], scratch[width + lane], x, xi)) {                    \
                scratch[lane] = x;                                                                   \
                scratch[width + lane] = xi;                                                          \
            }                                                                                        \
        }                                                                                            \
        threadgroup_barrier(mem_flags::mem_threadgroup);                                             \
    }                                                                                                \
    if (lane == 0) {                                                                                 \
        long at = long(scratch[width]);                                                              \
        indices[element_offset(group, outer, 1)] = at;                                               \
        if (has_values) values[element_offset(group, outer, 2)] = a[base + at * step];               \
    }                                                                                                \
}

LUCID_ARG_REDUCE_GROUP(arg_reduce_group_float32, float)
LUCID_ARG_REDUCE_GROUP(arg_reduce_group_float16, half)
LUCID_ARG_REDUCE_GROUP(arg_reduce_group_bfloat16, bfloat)
LUCID_ARG_REDUCE(arg_reduce_float32, float, float, true)
LUCID_ARG_REDUCE(arg_reduce_float16, half, float, true)
LUCID_ARG_REDUCE(arg_reduce_bfloat16, bfloat, float, true)
LUCID_ARG_REDUCE(arg_reduce_int32, int, long, false)
LUCID_ARG_REDUCE(arg_reduce_int64, long, long, false)
