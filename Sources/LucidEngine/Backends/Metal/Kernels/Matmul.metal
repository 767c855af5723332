// Matrix products on the GPU that Metal Performance Shaders does not serve: float16 and
// bfloat16 (and products with a bias), computed as the host computes them — float32
// products accumulated in float32, the bias added in float32, one rounding on store.
//
// out[i] = a[i] @ b[i] (+ bias) for a [B, M, K] and b [B, K, N] of any strides (a batch
// stride of 0 broadcasts), bias [N] contiguous, out a contiguous [B, M, N]: on the matrix
// units (gemm_simd below), or one thread per output element where 32-bit indices do not
// reach.

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
                 constant GemmShape& s [[buffer(4)]], LUCID_THREAD_POSITION) {                       \
    const ulong gid = LUCID_THREAD_INDEX;                                                            \
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

// The same product on the GPU's matrix units (LUCID_SIMD_TILE_PRODUCT in Common.metal), for
// products whose every index fits 32 bits: a threadgroup of 128 threads per 32×32 output tile;
// the bias is added in float32 and each output rounded once into T and stored only inside the
// product. Threadgroup memory: 1024 floats; groups run over (batch, tile row, tile column).
struct GemmShape32 {
    int batch, m, n, k;
    int a_strides[3];
    int b_strides[3];
    int has_bias;
};

#define LUCID_GEMM_LOAD_A(i, l) widen(a[pa + (i) * s.a_strides[1] + (l) * s.a_strides[2]])
#define LUCID_GEMM_LOAD_B(l, j) widen(b[pb + (l) * s.b_strides[1] + (j) * s.b_strides[2]])
#define LUCID_GEMM_SIMD(NAME, T)                                                                     \
kernel void NAME(device const T* a [[buffer(0)]], device const T* b [[buffer(1)]],                  \
                 device const T* bias [[buffer(2)]], device T* out [[buffer(3)]],                    \
                 constant GemmShape32& s [[buffer(4)]], threadgroup float* smem [[threadgroup(0)]],  \
                 uint group [[threadgroup_position_in_grid]], uint lane [[thread_index_in_threadgroup]], \
                 uint sg [[simdgroup_index_in_threadgroup]]) {                                       \
    int tiles_n = (s.n + LUCID_SG_BN - 1) / LUCID_SG_BN, tiles_m = (s.m + LUCID_SG_BM - 1) / LUCID_SG_BM; \
    int tn = int(group) % tiles_n, tm = (int(group) / tiles_n) % tiles_m;                            \
    int batch = int(group) / (tiles_n * tiles_m);                                                    \
    int row0 = tm * LUCID_SG_BM, col0 = tn * LUCID_SG_BN;                                            \
    int pa = batch * s.a_strides[0], pb = batch * s.b_strides[0];                                    \
    LUCID_SIMD_TILE_PRODUCT(s.m, s.n, s.k, LUCID_GEMM_LOAD_A, LUCID_GEMM_LOAD_B)                     \
    for (int e = int(lane); e < LUCID_SG_BM * LUCID_SG_BN; e += LUCID_SG_THREADS) {                  \
        int i = row0 + e / LUCID_SG_BN, j = col0 + e % LUCID_SG_BN;                                  \
        if (i < s.m && j < s.n) {                                                                    \
            float v = smem[e];                                                                       \
            if (s.has_bias != 0) v += widen(bias[j]);                                                \
            out[(batch * s.m + i) * s.n + j] = narrow<T>(v);                                         \
        }                                                                                            \
    }                                                                                                \
}

LUCID_GEMM_SIMD(gemm_simd_float32, float)
LUCID_GEMM_SIMD(gemm_simd_float16, half)
LUCID_GEMM_SIMD(gemm_simd_bfloat16, bfloat)

// Integer products, as the host's plain loop: int64 wrapping arithmetic, the bias first, the
// result truncated into the dtype; one thread per output.
#define LUCID_GEMM_INT(NAME, T)                                                                      \
kernel void NAME(device const T* a [[buffer(0)]], device const T* b [[buffer(1)]],                  \
                 device const T* bias [[buffer(2)]], device T* out [[buffer(3)]],                    \
                 constant GemmShape& s [[buffer(4)]], LUCID_THREAD_POSITION) {                       \
    const ulong gid = LUCID_THREAD_INDEX;                                                            \
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
