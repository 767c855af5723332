// Matrix products on the GPU that Metal Performance Shaders does not serve: bfloat16, float16
// where MPS sums in float16 or with a bias, and layouts MPS cannot read, computed as the host
// computes them — float32 products accumulated in float32, the bias added in float32, one
// rounding on store.
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
// products whose every index fits 32 bits: a threadgroup of 128 threads per BM×BN output tile,
// 32×32 (gemm_simd) or 64×64 (gemm_simd64, for products with enough 64×64 tiles to fill the
// GPU: Metal+Matmul.swift chooses); the bias is added in float32 and each output rounded once
// into T and stored only inside the product. Threadgroup memory: LUCID_SG_FLOATS(BM, BN)
// floats; groups run over (batch, tile row, tile column).
struct GemmShape32 {
    int batch, m, n, k;
    int a_strides[3];
    int b_strides[3];
    int has_bias;
};

#define LUCID_GEMM_LOAD_A(i, l) widen(a[pa + (i) * s.a_strides[1] + (l) * s.a_strides[2]])
#define LUCID_GEMM_LOAD_B(l, j) widen(b[pb + (l) * s.b_strides[1] + (j) * s.b_strides[2]])
#define LUCID_GEMM_STORE(i, j, v)                                                                    \
    out[(batch * s.m + (i)) * s.n + (j)] = narrow<out_t>(s.has_bias != 0 ? (v) + widen(bias[j]) : (v))
#define LUCID_GEMM_SIMD(NAME, T, BM, BN)                                                             \
kernel void NAME(device const T* a [[buffer(0)]], device const T* b [[buffer(1)]],                  \
                 device const T* bias [[buffer(2)]], device T* out [[buffer(3)]],                    \
                 constant GemmShape32& s [[buffer(4)]], threadgroup float* smem [[threadgroup(0)]],  \
                 uint group [[threadgroup_position_in_grid]], uint lane [[thread_index_in_threadgroup]], \
                 uint sg [[simdgroup_index_in_threadgroup]]) {                                       \
    typedef T out_t;                                                                                 \
    int tiles_n = (s.n + (BN) - 1) / (BN), tiles_m = (s.m + (BM) - 1) / (BM);                        \
    int tn = int(group) % tiles_n, tm = (int(group) / tiles_n) % tiles_m;                            \
    int batch = int(group) / (tiles_n * tiles_m);                                                    \
    int row0 = tm * (BM), col0 = tn * (BN);                                                          \
    int pa = batch * s.a_strides[0], pb = batch * s.b_strides[0];                                    \
    LUCID_SIMD_TILE_PRODUCT(BM, BN, s.m, s.n, s.k, LUCID_GEMM_LOAD_A, LUCID_GEMM_LOAD_B,             \
                            s.a_strides[2] == 1, s.b_strides[1] == 1, LUCID_GEMM_STORE)              \
}

LUCID_GEMM_SIMD(gemm_simd_float32, float, 32, 32)
LUCID_GEMM_SIMD(gemm_simd_float16, half, 32, 32)
LUCID_GEMM_SIMD(gemm_simd_bfloat16, bfloat, 32, 32)
LUCID_GEMM_SIMD(gemm_simd64_float32, float, 64, 64)
LUCID_GEMM_SIMD(gemm_simd64_float16, half, 64, 64)
LUCID_GEMM_SIMD(gemm_simd64_bfloat16, bfloat, 64, 64)

// The bias of a float32 product Metal Performance Shaders has made, added to each row of the
// contiguous [rows, n] output in float32 (one rounding, as the host adds it): a thread per
// element over an n × rows grid.
kernel void gemm_add_bias_float32(device float* out [[buffer(0)]], device const float* bias [[buffer(1)]],
                                  constant uint2& extent [[buffer(2)]], uint2 at [[thread_position_in_grid]]) {
    if (at.x >= extent.x || at.y >= extent.y) return;
    out[ulong(at.y) * ulong(extent.x) + ulong(at.x)] += bias[at.x];
}

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
