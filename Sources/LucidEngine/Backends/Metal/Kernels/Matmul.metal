// Matrix products on the GPU that Metal Performance Shaders does not serve: float16 and
// bfloat16 (and products with a bias), computed as the host computes them — float32
// products accumulated in float32, the bias added in float32, one rounding on store.
//
// out[i] = a[i] @ b[i] (+ bias) for a [B, M, K] and b [B, K, N] of any strides (a batch
// stride of 0 broadcasts), bias [N] contiguous, out a contiguous [B, M, N]; one thread per
// output element (tiled below for products of at least one 16×16 tile).

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

// The same product in 16×16 output tiles, for products of at least one tile: the threads of
// a threadgroup stage a 16-wide slice of a's rows and b's columns in threadgroup memory (as
// float32), so that each element is read from device memory once per tile instead of once
// per output. The threadgroup memory holds two 16×16 float tiles; groups run over
// (batch, tile row, tile column), 256 threads each. Each output still sums its k products
// in order, in float32.
#define LUCID_GEMM_TILE 16
#define LUCID_GEMM_TILED(NAME, T)                                                                    \
kernel void NAME(device const T* a [[buffer(0)]], device const T* b [[buffer(1)]],                  \
                 device const T* bias [[buffer(2)]], device T* out [[buffer(3)]],                    \
                 constant GemmShape& s [[buffer(4)]], threadgroup float* tiles [[threadgroup(0)]],   \
                 uint group [[threadgroup_position_in_grid]], uint lane [[thread_index_in_threadgroup]]) { \
    long tiles_n = (s.n + LUCID_GEMM_TILE - 1) / LUCID_GEMM_TILE;                                    \
    long tiles_m = (s.m + LUCID_GEMM_TILE - 1) / LUCID_GEMM_TILE;                                    \
    long tn = long(group) % tiles_n, tm = (long(group) / tiles_n) % tiles_m;                         \
    long batch = long(group) / (tiles_n * tiles_m);                                                  \
    long ty = long(lane) / LUCID_GEMM_TILE, tx = long(lane) % LUCID_GEMM_TILE;                       \
    long i = tm * LUCID_GEMM_TILE + ty, j = tn * LUCID_GEMM_TILE + tx;                               \
    threadgroup float* ta = tiles;                                                                   \
    threadgroup float* tb = tiles + LUCID_GEMM_TILE * LUCID_GEMM_TILE;                               \
    float acc = 0.0f;                                                                                \
    for (long l0 = 0; l0 < s.k; l0 += LUCID_GEMM_TILE) {                                             \
        long la = l0 + tx, lb = l0 + ty;                                                             \
        ta[lane] = (i < s.m && la < s.k)                                                             \
            ? widen(a[batch * s.a_strides[0] + i * s.a_strides[1] + la * s.a_strides[2]]) : 0.0f;   \
        tb[lane] = (lb < s.k && j < s.n)                                                             \
            ? widen(b[batch * s.b_strides[0] + lb * s.b_strides[1] + j * s.b_strides[2]]) : 0.0f;   \
        threadgroup_barrier(mem_flags::mem_threadgroup);                                             \
        long steps = min(long(LUCID_GEMM_TILE), s.k - l0);                                           \
        for (long q = 0; q < steps; ++q) acc += ta[ty * LUCID_GEMM_TILE + q] * tb[q * LUCID_GEMM_TILE + tx]; \
        threadgroup_barrier(mem_flags::mem_threadgroup);                                             \
    }                                                                                                \
    if (i < s.m && j < s.n) {                                                                        \
        if (s.has_bias != 0) acc += widen(bias[j]);                                                  \
        out[(batch * s.m + i) * s.n + j] = narrow<T>(acc);                                           \
    }                                                                                                \
}

LUCID_GEMM_TILED(gemm_tiled_float32, float)
LUCID_GEMM_TILED(gemm_tiled_float16, half)
LUCID_GEMM_TILED(gemm_tiled_bfloat16, bfloat)

// Integer products, as the host's plain loop: int64 wrapping arithmetic, the bias first, the
// result truncated into the dtype; one thread per output.
#define LUCID_GEMM_INT(NAME, T)                                                                      \
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
    ulong acc = s.has_bias != 0 ? ulong(long(bias[j])) : 0ul;                                        \
    for (long l = 0; l < s.k; ++l) {                                                                 \
        acc += ulong(long(a[pa + l * s.a_strides[2]])) * ulong(long(b[pb + l * s.b_strides[1]]));   \
    }                                                                                                \
    out[gid] = T(long(acc));                                                                         \
}

LUCID_GEMM_INT(gemm_int32, int)
LUCID_GEMM_INT(gemm_int64, long)
