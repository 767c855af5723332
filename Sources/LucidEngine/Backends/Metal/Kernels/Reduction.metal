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

#define LUCID_REDUCE_FLOAT_AT(NAME, T, L, I)                                                         \
kernel void NAME(device const T* a [[buffer(0)]], device T* out [[buffer(1)]],                       \
                 constant L& outer [[buffer(2)]], constant L& inner [[buffer(3)]],                   \
                 constant uint& mean [[buffer(4)]], LUCID_THREAD_POSITION) {                         \
    const I gid = I(LUCID_THREAD_INDEX);                                                             \
    if (gid >= outer.count) return;                                                                  \
    auto base = element_offset(gid, outer, 0);                                                       \
    float sum = 0.0f, carry = 0.0f;                                                                  \
    for (I r = 0; r < inner.count; ++r) {                                                            \
        compensated_add(sum, carry, widen(a[base + element_offset(r, inner, 0)]));                   \
    }                                                                                                \
    if (mean != 0) sum = sum / float(inner.count);                                                   \
    out[element_offset(gid, outer, 1)] = narrow<T>(sum);                                             \
}

// Integer (and bool) sums accumulate in int64, wrapping, into an int64 output.
#define LUCID_REDUCE_INT_AT(NAME, T, L, I)                                                           \
kernel void NAME(device const T* a [[buffer(0)]], device long* out [[buffer(1)]],                    \
                 constant L& outer [[buffer(2)]], constant L& inner [[buffer(3)]],                   \
                 LUCID_THREAD_POSITION) {                                                            \
    const I gid = I(LUCID_THREAD_INDEX);                                                             \
    if (gid >= outer.count) return;                                                                  \
    auto base = element_offset(gid, outer, 0);                                                       \
    ulong sum = 0;                                                                                   \
    for (I r = 0; r < inner.count; ++r) sum += ulong(long(a[base + element_offset(r, inner, 0)]));   \
    out[element_offset(gid, outer, 1)] = long(sum);                                                  \
}

// The same with a SIMD group per output element, for many outputs over rows of a few dozen
// elements or more: a threadgroup of `width` threads takes width / 32 outputs, each SIMD group
// one, its lanes a compensated sum of every 32nd element, added across the lanes by
// simd_lanes_sum (Common.metal). No threadgroup memory and no barrier; a SIMD group past the
// last output still takes part in the shuffles.
#define LUCID_REDUCE_FLOAT_SIMD_AT(NAME, T, L, I)                                                    \
kernel void NAME(device const T* a [[buffer(0)]], device T* out [[buffer(1)]],                       \
                 constant L& outer [[buffer(2)]], constant L& inner [[buffer(3)]],                   \
                 constant uint& mean [[buffer(4)]], uint group [[threadgroup_position_in_grid]],     \
                 uint sg [[simdgroup_index_in_threadgroup]], uint sl [[thread_index_in_simdgroup]],  \
                 uint width [[threads_per_threadgroup]]) {                                           \
    const I row = I(group) * I(width / 32u) + I(sg);                                                 \
    bool live = row < outer.count;                                                                   \
    float sum = 0.0f, carry = 0.0f;                                                                  \
    if (live) {                                                                                      \
        auto base = element_offset(row, outer, 0);                                                   \
        for (I r = I(sl); r < inner.count; r += 32u) {                                               \
            compensated_add(sum, carry, widen(a[base + element_offset(r, inner, 0)]));               \
        }                                                                                            \
    }                                                                                                \
    float error;                                                                                     \
    float total = simd_lanes_sum(sum, carry, 32u, error);                                            \
    if (isfinite(total)) total = total + error;                                                      \
    if (live && sl == 0) {                                                                           \
        if (mean != 0) total = total / float(inner.count);                                           \
        out[element_offset(row, outer, 1)] = narrow<T>(total);                                       \
    }                                                                                                \
}

// The same with one threadgroup per output element, for few outputs over many elements: each
// thread keeps a compensated sum of every width-th element, and the group adds them up
// (threadgroup_sum in Common.metal). The threadgroup memory holds two floats per thread.
#define LUCID_REDUCE_FLOAT_GROUP_AT(NAME, T, L, I)                                                   \
kernel void NAME(device const T* a [[buffer(0)]], device T* out [[buffer(1)]],                       \
                 constant L& outer [[buffer(2)]], constant L& inner [[buffer(3)]],                   \
                 constant uint& mean [[buffer(4)]], threadgroup float* partial [[threadgroup(0)]],   \
                 uint group [[threadgroup_position_in_grid]], uint lane [[thread_index_in_threadgroup]], \
                 uint width [[threads_per_threadgroup]]) {                                           \
    auto base = element_offset(I(group), outer, 0);                                                  \
    float sum = 0.0f, carry = 0.0f;                                                                  \
    for (I r = lane; r < inner.count; r += width) {                                                  \
        compensated_add(sum, carry, widen(a[base + element_offset(r, inner, 0)]));                   \
    }                                                                                                \
    float total = threadgroup_sum(sum, carry, partial, lane, width);                                 \
    if (lane == 0) {                                                                                 \
        if (mean != 0) total = total / float(inner.count);                                           \
        out[element_offset(I(group), outer, 1)] = narrow<T>(total);                                  \
    }                                                                                                \
}

// The same split further, for few outputs of very many elements (a loss's mean, a norm):
// `parts` threadgroups per output each sum every (parts·width)-th element from their own start
// (stage one, into a float32 partial per group), then one threadgroup per output adds its
// partials (stage two), compensated throughout.
#define LUCID_REDUCE_SPLIT_AT(NAME, T, L, I)                                                         \
kernel void NAME(device const T* a [[buffer(0)]], device float* partials [[buffer(1)]],              \
                 constant L& outer [[buffer(2)]], constant L& inner [[buffer(3)]],                   \
                 constant uint& parts [[buffer(4)]], threadgroup float* scratch [[threadgroup(0)]],  \
                 uint group [[threadgroup_position_in_grid]], uint lane [[thread_index_in_threadgroup]], \
                 uint width [[threads_per_threadgroup]]) {                                           \
    auto base = element_offset(I(group / parts), outer, 0);                                          \
    float sum = 0.0f, carry = 0.0f;                                                                  \
    I stride = I(parts) * I(width);                                                                  \
    for (I r = I(group % parts) * I(width) + lane; r < inner.count; r += stride) {                   \
        compensated_add(sum, carry, widen(a[base + element_offset(r, inner, 0)]));                   \
    }                                                                                                \
    float total = threadgroup_sum(sum, carry, scratch, lane, width);                                 \
    if (lane == 0) partials[group] = total;                                                          \
}

#define LUCID_REDUCE_MERGE_AT(NAME, T, L, I)                                                         \
kernel void NAME(device const float* partials [[buffer(0)]], device T* out [[buffer(1)]],            \
                 constant L& outer [[buffer(2)]], constant L& inner [[buffer(3)]],                   \
                 constant uint& mean [[buffer(4)]], constant uint& parts [[buffer(5)]],              \
                 threadgroup float* scratch [[threadgroup(0)]], uint group [[threadgroup_position_in_grid]], \
                 uint lane [[thread_index_in_threadgroup]], uint width [[threads_per_threadgroup]]) { \
    float sum = 0.0f, carry = 0.0f;                                                                  \
    for (uint p = lane; p < parts; p += width) compensated_add(sum, carry, partials[group * parts + p]); \
    float total = threadgroup_sum(sum, carry, scratch, lane, width);                                 \
    if (lane == 0) {                                                                                 \
        if (mean != 0) total = total / float(inner.count);                                           \
        out[element_offset(I(group), outer, 1)] = narrow<T>(total);                                  \
    }                                                                                                \
}

#define LUCID_REDUCE_FLOATS(KIND, AT)                                                                \
    LUCID_INDEX_FORMS(AT, KIND##_float32, float)                                                     \
    LUCID_INDEX_FORMS(AT, KIND##_float16, half)                                                      \
    LUCID_INDEX_FORMS(AT, KIND##_bfloat16, bfloat)

LUCID_REDUCE_FLOATS(reduce_split, LUCID_REDUCE_SPLIT_AT)
LUCID_REDUCE_FLOATS(reduce_merge, LUCID_REDUCE_MERGE_AT)
LUCID_REDUCE_FLOATS(reduce, LUCID_REDUCE_FLOAT_AT)
LUCID_REDUCE_FLOATS(reduce_simd, LUCID_REDUCE_FLOAT_SIMD_AT)
LUCID_REDUCE_FLOATS(reduce_group, LUCID_REDUCE_FLOAT_GROUP_AT)
LUCID_INDEX_FORMS(LUCID_REDUCE_INT_AT, reduce_int32, int)
LUCID_INDEX_FORMS(LUCID_REDUCE_INT_AT, reduce_int64, long)
LUCID_INDEX_FORMS(LUCID_REDUCE_INT_AT, reduce_bool, uchar)

// The max (or min) along one axis and its first index; a NaN wins at once. `outer` is over the
// input's shape without the axis: operand 0 the input's strides, 1 the indices', 2 the
// values' (the indices' when there are no values, which are then not written). The axis's
// length and step are of the layout's offset type (LayoutOffset, Layout32Offset).
#define LUCID_ARG_REDUCE_AT(NAME, T, V, ISFLOAT, L, I)                                               \
kernel void NAME(device const T* a [[buffer(0)]], device long* indices [[buffer(1)]],                \
                 device T* values [[buffer(2)]], constant L& outer [[buffer(3)]],                    \
                 constant L##Offset& length [[buffer(4)]], constant L##Offset& step [[buffer(5)]],   \
                 constant uint& flags [[buffer(6)]], LUCID_THREAD_POSITION) {                        \
    const I gid = I(LUCID_THREAD_INDEX);                                                             \
    if (gid >= outer.count) return;                                                                  \
    bool is_max = (flags & 1u) != 0, has_values = (flags & 2u) != 0;                                 \
    auto base = element_offset(gid, outer, 0);                                                       \
    V best_value = V(a[base]);                                                                       \
    L##Offset best = 0;                                                                              \
    for (L##Offset r = 1; r < length; ++r) {                                                         \
        if (ISFLOAT && isnan(float(best_value))) break;                                              \
        V x = V(a[base + r * step]);                                                                 \
        if ((ISFLOAT && isnan(float(x))) || (is_max ? x > best_value : x < best_value)) {            \
            best_value = x;                                                                          \
            best = r;                                                                                \
        }                                                                                            \
    }                                                                                                \
    indices[element_offset(gid, outer, 1)] = long(best);                                             \
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

#define LUCID_ARG_REDUCE_GROUP_AT(NAME, T, L, I)                                                     \
kernel void NAME(device const T* a [[buffer(0)]], device long* indices [[buffer(1)]],                \
                 device T* values [[buffer(2)]], constant L& outer [[buffer(3)]],                    \
                 constant L##Offset& length [[buffer(4)]], constant L##Offset& step [[buffer(5)]],   \
                 constant uint& flags [[buffer(6)]], threadgroup float* scratch [[threadgroup(0)]],  \
                 uint group [[threadgroup_position_in_grid]], uint lane [[thread_index_in_threadgroup]], \
                 uint width [[threads_per_threadgroup]]) {                                           \
    bool is_max = (flags & 1u) != 0, has_values = (flags & 2u) != 0;                                 \
    auto base = element_offset(I(group), outer, 0);                                                  \
    float best = is_max ? -INFINITY : INFINITY, best_index = float(length);                          \
    for (L##Offset r = L##Offset(lane); r < length; r += L##Offset(width)) {                         \
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
        L##Offset at = L##Offset(scratch[width]);                                                    \
        indices[element_offset(I(group), outer, 1)] = long(at);                                      \
        if (has_values) values[element_offset(I(group), outer, 2)] = a[base + at * step];            \
    }                                                                                                \
}

// The same with a SIMD group per output, for many outputs along an axis of a few dozen elements
// or more (under 2^24): each lane keeps the best of every 32nd element, and the lanes merge
// their bests by arg_takes in an XOR butterfly of shuffles; a total order, so every lane ends
// with the first NaN or the first extreme, as the serial kernel finds it. A threadgroup of
// `width` threads takes width / 32 outputs; a SIMD group past the last still shuffles.
#define LUCID_ARG_REDUCE_SIMD_AT(NAME, T, L, I)                                                      \
kernel void NAME(device const T* a [[buffer(0)]], device long* indices [[buffer(1)]],                \
                 device T* values [[buffer(2)]], constant L& outer [[buffer(3)]],                    \
                 constant L##Offset& length [[buffer(4)]], constant L##Offset& step [[buffer(5)]],   \
                 constant uint& flags [[buffer(6)]], uint group [[threadgroup_position_in_grid]],    \
                 uint sg [[simdgroup_index_in_threadgroup]], uint sl [[thread_index_in_simdgroup]],  \
                 uint width [[threads_per_threadgroup]]) {                                           \
    bool is_max = (flags & 1u) != 0, has_values = (flags & 2u) != 0;                                 \
    const I row = I(group) * I(width / 32u) + I(sg);                                                 \
    bool live = row < outer.count;                                                                   \
    float best = is_max ? -INFINITY : INFINITY, best_index = float(length);                          \
    auto base = live ? element_offset(row, outer, 0) : 0;                                            \
    for (L##Offset r = L##Offset(sl); live && r < length; r += 32) {                                 \
        float x = widen(a[base + r * step]);                                                         \
        if (arg_takes(is_max, best, best_index, x, float(r))) {                                      \
            best = x;                                                                                \
            best_index = float(r);                                                                   \
        }                                                                                            \
    }                                                                                                \
    for (ushort d = 16; d > 0; d /= 2) {                                                             \
        float x = simd_shuffle_xor(best, d), xi = simd_shuffle_xor(best_index, d);                   \
        if (arg_takes(is_max, best, best_index, x, xi)) {                                            \
            best = x;                                                                                \
            best_index = xi;                                                                         \
        }                                                                                            \
    }                                                                                                \
    if (live && sl == 0) {                                                                           \
        L##Offset at = L##Offset(best_index);                                                        \
        indices[element_offset(row, outer, 1)] = long(at);                                           \
        if (has_values) values[element_offset(row, outer, 2)] = a[base + at * step];                 \
    }                                                                                                \
}

#define LUCID_ARG_REDUCE_FLOAT_AT(NAME, T, L, I) LUCID_ARG_REDUCE_AT(NAME, T, float, true, L, I)
#define LUCID_ARG_REDUCE_INT_AT(NAME, T, L, I) LUCID_ARG_REDUCE_AT(NAME, T, long, false, L, I)

LUCID_REDUCE_FLOATS(arg_reduce_group, LUCID_ARG_REDUCE_GROUP_AT)
LUCID_REDUCE_FLOATS(arg_reduce_simd, LUCID_ARG_REDUCE_SIMD_AT)
LUCID_REDUCE_FLOATS(arg_reduce, LUCID_ARG_REDUCE_FLOAT_AT)
LUCID_INDEX_FORMS(LUCID_ARG_REDUCE_INT_AT, arg_reduce_int32, int)
LUCID_INDEX_FORMS(LUCID_ARG_REDUCE_INT_AT, arg_reduce_int64, long)
