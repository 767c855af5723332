// Matrix products on the GPU that Metal Performance Shaders does not serve: float16 and
// bfloat16 (and products with a bias), computed as the host computes them — float32
// products accumulated in float32, the bias added in float32, one rounding on store.
//
// out[i] = a[i] @ b[i] (+ bias) for a [B, M, K] and b [B, K, N] of any strides (a batch
// stride of 0 broadcasts), bias [N] contiguous, out a contiguous [B, M, N]; one thread per
// output element.

// Compiled after Common.metal, in one library.

// The problem, bound with setBytes. Field order and sizes match `GemmShape` in
// Metal+Matmul.swift.
struct GemmShape {
    long batch, m, n, k;
    long a_strides[3];
    long b_strides[3];
    long has_bias;
};

#define LUCID_GEMM(NAME, T)                                                                          \
kernel void NAME(device const T* a [[buffer(0)]], device const T* b [[buffer(1)]],                  \
                 device const T* bias [[buffer(2)]], device T* out [[buffer(3)]],                    \
                 constant GemmShape& s [[buffer(4)]], uint gid [[thread_position_in_grid]]) {        \
    ulong total = ulong(s.batch) * ulong(s.m) * ulong(s.n);                                          \
    if (ulong(gid) >= total) return;                                                                 \
    long j = long(gid % ulong(s.n));                                                                 \
    long i = long((gid / ulong(s.n)) % ulong(s.m));                                                  \
    long batch = long(gid / (ulong(s.n) * ulong(s.m)));                                              \
    long pa = batch * s.a_strides[0] + i * s.a_strides[1];                                           \
    long pb = batch * s.b_strides[0] + j * s.b_strides[2];                                           \
    float acc = 0.0f;                                                                                \
    for (long l = 0; l < s.k; ++l) {                                                                 \
        acc += widen(a[pa + l * s.a_strides[2]]) * widen(b[pb + l * s.b_strides[1]]);               \
    }                                                                                                \
    if (s.has_bias != 0) acc += widen(bias[j]);                                                      \
    out[gid] = narrow<T>(acc);                                                                       \
}

LUCID_GEMM(gemm_float32, float)
LUCID_GEMM(gemm_float16, half)
LUCID_GEMM(gemm_bfloat16, bfloat)
