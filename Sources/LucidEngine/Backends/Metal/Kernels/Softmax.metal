// Softmax and log-softmax along one axis of a contiguous tensor, computed in float32 and
// rounded once. One threadgroup per row (the elements along the axis for one position of the
// others); its threads stride over the row and combine their maxima, then their sums, in
// threadgroup memory. The width is a power of two. As the op layer's composed softmax, a row
// shifts by its max only when that is finite: a row of -inf gives NaN, +inf gives NaN where
// it is and 0 (or -inf in log-softmax) elsewhere, and a NaN makes the row NaN. Compiled
// after Common.metal, in one library.

// Field order and sizes match `softmaxShape` in Metal+Softmax.swift.
struct SoftmaxShape {
    long length;  // elements along the axis
    long inner;   // the product of the dimensions after the axis (the axis's stride)
    long log;     // 1 for log-softmax
};

#define LUCID_SOFTMAX(NAME, T)                                                                       \
kernel void NAME(device const T* x [[buffer(0)]], device T* out [[buffer(1)]],                      \
                 constant SoftmaxShape& s [[buffer(2)]], threadgroup float* partial [[threadgroup(0)]], \
                 uint row [[threadgroup_position_in_grid]], uint lane [[thread_index_in_threadgroup]], \
                 uint width [[threads_per_threadgroup]]) {                                           \
    long base = (long(row) / s.inner) * s.length * s.inner + long(row) % s.inner;                    \
    float m = -INFINITY;                                                                             \
    for (long k = lane; k < s.length; k += width) m = max_or_nan(m, widen(x[base + k * s.inner]));   \
    m = threadgroup_max(m, partial, lane, width);                                                    \
    m = fabs(m) < INFINITY ? m : 0.0f;                                                               \
    float sum = 0.0f, carry = 0.0f;                                                                  \
    for (long k = lane; k < s.length; k += width) {                                                  \
        compensated_add(sum, carry, precise::exp(widen(x[base + k * s.inner]) - m));                 \
    }                                                                                                \
    sum = threadgroup_sum(sum, carry, partial, lane, width);                                         \
    float log_sum = precise::log(sum);                                                               \
    for (long k = lane; k < s.length; k += width) {                                                  \
        float shifted = widen(x[base + k * s.inner]) - m;                                            \
        out[base + k * s.inner] = narrow<T>(s.log != 0 ? shifted - log_sum : precise::exp(shifted) / sum); \
    }                                                                                                \
}

LUCID_SOFTMAX(softmax_float32, float)
LUCID_SOFTMAX(softmax_float16, half)
LUCID_SOFTMAX(softmax_bfloat16, bfloat)

// Their backward from the output y and its gradient g (one dtype, the forward's layout): softmax
// y·(g − Σ g·y), log-softmax g − exp(y)·Σ g, in float32 with a compensated sum, rounded once.
#define LUCID_SOFTMAX_BACKWARD(NAME, T)                                                              \
kernel void NAME(device const T* g [[buffer(0)]], device const T* y [[buffer(1)]],                  \
                 device T* out [[buffer(2)]], constant SoftmaxShape& s [[buffer(3)]],                \
                 threadgroup float* partial [[threadgroup(0)]], uint row [[threadgroup_position_in_grid]], \
                 uint lane [[thread_index_in_threadgroup]], uint width [[threads_per_threadgroup]]) { \
    long base = (long(row) / s.inner) * s.length * s.inner + long(row) % s.inner;                    \
    float sum = 0.0f, carry = 0.0f;                                                                  \
    for (long k = lane; k < s.length; k += width) {                                                  \
        long i = base + k * s.inner;                                                                 \
        compensated_add(sum, carry, s.log != 0 ? widen(g[i]) : widen(g[i]) * widen(y[i]));          \
    }                                                                                                \
    sum = threadgroup_sum(sum, carry, partial, lane, width);                                         \
    for (long k = lane; k < s.length; k += width) {                                                  \
        long i = base + k * s.inner;                                                                 \
        float gi = widen(g[i]), yi = widen(y[i]);                                                    \
        out[i] = narrow<T>(s.log != 0 ? gi - precise::exp(yi) * sum : yi * (gi - sum));             \
    }                                                                                                \
}

LUCID_SOFTMAX_BACKWARD(softmax_backward_float32, float)
LUCID_SOFTMAX_BACKWARD(softmax_backward_float16, half)
LUCID_SOFTMAX_BACKWARD(softmax_backward_bfloat16, bfloat)
