// Row normalisation on the GPU (layer_norm, group_norm), as the host computes it
// (Host+Normalization.swift): each row of a contiguous [rows, n] input becomes
// (x - mean) · rstd · weight + bias, with the mean, then the biased variance of the
// deviations, as compensated float32 sums, rstd = 1 / sqrt(var + eps), and one rounding into
// the output's dtype. weight and bias are float32 (optional), laid out as `RowAffine` says
// (KernelFamilies.swift): element k of row r reads entry (r % groups) · (n / span) + k / span;
// mean and rstd are float32 [rows]. One threadgroup per row (Common.metal's cooperating helpers); the threadgroup
// memory holds two floats per thread. Compiled after Common.metal, in one library.

// Field order and sizes match `rowsShape` in Metal+Normalization.swift.
struct RowsShape {
    long n;
    long has_weight;
    long has_bias;
    long groups;
    long span;
    float eps;
    float pad;
};

#define LUCID_NORMALIZE_ROWS(NAME, T, O)                                                             \
kernel void NAME(device const T* x [[buffer(0)]], device const float* weight [[buffer(1)]],         \
                 device const float* bias [[buffer(2)]], device O* out [[buffer(3)]],                \
                 device float* mean_out [[buffer(4)]], device float* rstd_out [[buffer(5)]],         \
                 constant RowsShape& s [[buffer(6)]], threadgroup float* partial [[threadgroup(0)]], \
                 uint row [[threadgroup_position_in_grid]], uint lane [[thread_index_in_threadgroup]], \
                 uint width [[threads_per_threadgroup]]) {                                           \
    device const T* xs = x + long(row) * s.n;                                                        \
    float sum = 0.0f, carry = 0.0f;                                                                  \
    for (long k = lane; k < s.n; k += width) compensated_add(sum, carry, widen(xs[k]));              \
    float mean = threadgroup_sum(sum, carry, partial, lane, width) / float(s.n);                     \
    sum = 0.0f;                                                                                      \
    carry = 0.0f;                                                                                    \
    for (long k = lane; k < s.n; k += width) {                                                       \
        float d = widen(xs[k]) - mean;                                                               \
        compensated_add(sum, carry, d * d);                                                          \
    }                                                                                                \
    float variance = threadgroup_sum(sum, carry, partial, lane, width) / float(s.n);                 \
    float rstd = 1.0f / precise::sqrt(variance + s.eps);                                             \
    long at = (long(row) % s.groups) * (s.n / s.span);                                               \
    for (long k = lane; k < s.n; k += width) {                                                       \
        float y = (widen(xs[k]) - mean) * rstd;                                                      \
        if (s.has_weight != 0) y = y * weight[at + k / s.span];                                      \
        if (s.has_bias != 0) y = y + bias[at + k / s.span];                                          \
        out[long(row) * s.n + k] = narrow<O>(y);                                                     \
    }                                                                                                \
    if (lane == 0) {                                                                                 \
        mean_out[row] = mean;                                                                        \
        rstd_out[row] = rstd;                                                                        \
    }                                                                                                \
}

LUCID_NORMALIZE_ROWS(normalize_rows_float32, float, float)
LUCID_NORMALIZE_ROWS(normalize_rows_float16, half, half)
LUCID_NORMALIZE_ROWS(normalize_rows_bfloat16, bfloat, bfloat)
LUCID_NORMALIZE_ROWS(normalize_rows_float16_float32, half, float)
LUCID_NORMALIZE_ROWS(normalize_rows_bfloat16_float32, bfloat, float)
