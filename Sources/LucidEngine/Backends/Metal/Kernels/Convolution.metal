// The window gathers under convolution on the GPU, as the host computes them
// (Host+Convolution.swift): im2col copies each window of a strided [N, C, H, W] input into a
// contiguous [N, C·kh·kw, oh·ow], reading 0 outside the input; col2im, its adjoint, has one
// thread per input position sum, in float32 and in the host's order (kernel row, then
// column), the column entries whose windows cover it, rounding once. The direct passes follow,
// as implicit GEMM. Compiled after Common.metal, in one library.

// Field order and sizes match `windowShape` in Metal+Convolution.swift; s0…s3 are the strides
// of the strided operand (the input of im2col, the columns of col2im).
struct WindowShape {
    long n, c, h, w, oh, ow;
    long kh, kw, sh, sw, ph, pw, dh, dw;
    long s0, s1, s2, s3;
};

#define LUCID_IM2COL(NAME, T)                                                                        \
kernel void NAME(device const T* x [[buffer(0)]], device T* cols [[buffer(1)]],                     \
                 constant WindowShape& g [[buffer(2)]], LUCID_THREAD_POSITION) {                     \
    const ulong gid = LUCID_THREAD_INDEX;                                                            \
    long total = g.n * g.c * g.kh * g.kw * g.oh * g.ow;                                              \
    if (long(gid) >= total) return;                                                                  \
    long k = long(gid);                                                                              \
    long ox = k % g.ow; k /= g.ow;                                                                   \
    long oy = k % g.oh; k /= g.oh;                                                                   \
    long j = k % g.kw; k /= g.kw;                                                                    \
    long i = k % g.kh; k /= g.kh;                                                                    \
    long ch = k % g.c, b = k / g.c;                                                                  \
    long y = oy * g.sh - g.ph + i * g.dh, xx = ox * g.sw - g.pw + j * g.dw;                          \
    bool inside = y >= 0 && y < g.h && xx >= 0 && xx < g.w;                                          \
    cols[gid] = inside ? x[b * g.s0 + ch * g.s1 + y * g.s2 + xx * g.s3] : narrow<T>(0.0f);           \
}

#define LUCID_COL2IM(NAME, T)                                                                        \
kernel void NAME(device const T* cols [[buffer(0)]], device T* x [[buffer(1)]],                     \
                 constant WindowShape& g [[buffer(2)]], LUCID_THREAD_POSITION) {                     \
    const ulong gid = LUCID_THREAD_INDEX;                                                            \
    if (long(gid) >= g.n * g.c * g.h * g.w) return;                                                  \
    long k = long(gid);                                                                              \
    long xx = k % g.w; k /= g.w;                                                                     \
    long y = k % g.h; k /= g.h;                                                                      \
    long ch = k % g.c, b = k / g.c;                                                                  \
    float acc = 0.0f;                                                                                \
    for (long i = 0; i < g.kh; ++i) {                                                                \
        long ty = y + g.ph - i * g.dh;                                                               \
        if (ty < 0 || ty % g.sh != 0 || ty / g.sh >= g.oh) continue;                                 \
        for (long j = 0; j < g.kw; ++j) {                                                            \
            long tx = xx + g.pw - j * g.dw;                                                          \
            if (tx < 0 || tx % g.sw != 0 || tx / g.sw >= g.ow) continue;                             \
            long row = (ch * g.kh + i) * g.kw + j, column = (ty / g.sh) * g.ow + tx / g.sw;          \
            acc += widen(cols[b * g.s0 + row * g.s1 + column * g.s2]);                               \
        }                                                                                            \
    }                                                                                                \
    x[gid] = narrow<T>(acc);                                                                         \
}

LUCID_IM2COL(im2col_float32, float)
LUCID_IM2COL(im2col_float16, half)
LUCID_IM2COL(im2col_bfloat16, bfloat)
LUCID_COL2IM(col2im_float32, float)
LUCID_COL2IM(col2im_float16, half)
LUCID_COL2IM(col2im_bfloat16, bfloat)

// ---- convolution as implicit GEMM ------------------------------------------------------------
// The three passes of a grouped 2-D convolution as products on the SIMD-group tiles
// (LUCID_SIMD_TILE_PRODUCT, 32×32), each operand's window read where the product needs it: no
// im2col buffer. float32 sums, the bias added in float32, one rounding on store, 32-bit
// indices; contiguous operands. With Cg = c / groups input and Og = oc / groups output
// channels a group and kk = kh·kw:
// - forward: per (image, group), out[Og, oh·ow] = w[Og, Cg·kk] · window(x)[Cg·kk, oh·ow];
// - backward data: per (image, group), gx[Cg, h·w] = wᵀ[Cg, Og·kk] · window(gy)[Og·kk, h·w],
//   where window(gy) reads the output positions whose windows hold each input position;
// - backward weights: per group, gw[Og, Cg·kk] = gy[Og, n·oh·ow] · window(x)ᵀ[n·oh·ow, Cg·kk].
//   Its sum runs over every image's pixels while its output is small (a 7×7 stem from 3 to 64
//   channels has 2 × 5 tiles), so it is split along k into chunks of `k_chunk`: each chunk's
//   product goes in float32 to its own slice of a partial buffer, and a second pass adds the
//   slices in order and rounds once (conv_backward_weights_sum); one chunk writes directly.
//   (float32's partial pass is its direct kernel: the same float32 store.)
// Field order and sizes match `convShape` in Metal+Convolution.swift.
struct ConvShape32 {
    int n, c, oc, groups;
    int h, w, oh, ow;
    int kh, kw, sh, sw, ph, pw, dh, dw;
    int has_bias;
    int k_chunk;
};

// x at window entry l = (channel, ky, kx) of output position j, channels from `plane`
// (image · c + first channel of the group); 0 in the padding.
template <typename T>
inline float conv_window(device const T* x, constant ConvShape32& s, int plane, int l, int j) {
    int kk = s.kh * s.kw, ch = l / kk, r = l - ch * kk, ky = r / s.kw, kx = r - ky * s.kw;
    int oy = j / s.ow, ox = j - oy * s.ow;
    int iy = oy * s.sh - s.ph + ky * s.dh, ix = ox * s.sw - s.pw + kx * s.dw;
    return (iy >= 0 && iy < s.h && ix >= 0 && ix < s.w) ? widen(x[((plane + ch) * s.h + iy) * s.w + ix]) : 0.0f;
}

// gy at the output position whose window entry l = (channel, ky, kx) covers input position
// j, channels from `plane` (image · oc + first channel of the group); 0 where none does.
template <typename T>
inline float conv_covering(device const T* gy, constant ConvShape32& s, int plane, int l, int j) {
    int kk = s.kh * s.kw, ch = l / kk, r = l - ch * kk, ky = r / s.kw, kx = r - ky * s.kw;
    int iy = j / s.w, ix = j - iy * s.w;
    int ty = iy + s.ph - ky * s.dh, tx = ix + s.pw - kx * s.dw;
    if (ty < 0 || tx < 0) return 0.0f;
    int oy = ty / s.sh, ox = tx / s.sw;
    if (oy * s.sh != ty || ox * s.sw != tx || oy >= s.oh || ox >= s.ow) return 0.0f;
    return widen(gy[((plane + ch) * s.oh + oy) * s.ow + ox]);
}

// Threadgroups run over (batch entry, tile row, tile column) of an M×N result.
#define LUCID_CONV_TILE(M, N)                                                                        \
    int tiles_n = ((N) + 31) / 32, tiles_m = ((M) + 31) / 32;                                        \
    int row0 = ((int(group) / tiles_n) % tiles_m) * 32, col0 = (int(group) % tiles_n) * 32;          \
    int entry = int(group) / (tiles_n * tiles_m);

// `out` holds OUT (the dtype, or float32 partial sums).
#define LUCID_CONV_ARGS(T, OUT)                                                                      \
    device const T* x [[buffer(0)]], device const T* wt [[buffer(1)]], device const T* bias [[buffer(2)]], \
    device OUT* out [[buffer(3)]], constant ConvShape32& s [[buffer(4)]],                            \
    threadgroup float* smem [[threadgroup(0)]], uint group [[threadgroup_position_in_grid]],         \
    uint lane [[thread_index_in_threadgroup]], uint sg [[simdgroup_index_in_threadgroup]]

// x: the input; wt: the weight; out: [n, oc, oh, ow].
#define LUCID_CONV_FWD_A(i, l) widen(wt[(g * og + (i)) * kdim + (l)])
#define LUCID_CONV_FWD_B(l, j) conv_window(x, s, img * s.c + g * cg, (l), (j))
#define LUCID_CONV_FWD_STORE(i, j, v)                                                                \
    out[(img * s.oc + g * og + (i)) * pixels + (j)] =                                                \
        narrow<out_t>(s.has_bias != 0 ? (v) + widen(bias[g * og + (i)]) : (v))
#define LUCID_CONV_FORWARD(NAME, T)                                                                  \
kernel void NAME(LUCID_CONV_ARGS(T, T)) {                                                            \
    typedef T out_t;                                                                                 \
    int cg = s.c / s.groups, og = s.oc / s.groups, kdim = cg * s.kh * s.kw, pixels = s.oh * s.ow;    \
    LUCID_CONV_TILE(og, pixels)                                                                      \
    int img = entry / s.groups, g = entry % s.groups;                                                \
    LUCID_SIMD_TILE_PRODUCT(32, 32, og, pixels, kdim, LUCID_CONV_FWD_A, LUCID_CONV_FWD_B, true, false, \
                            LUCID_CONV_FWD_STORE)                                                    \
}

// x: the output gradient [n, oc, oh, ow]; wt: the weight; out: the input gradient.
#define LUCID_CONV_BWD_DATA_A(i, l) widen(wt[((g * og + (l) / kk) * cg + (i)) * kk + (l) % kk])
#define LUCID_CONV_BWD_DATA_B(l, j) conv_covering(x, s, img * s.oc + g * og, (l), (j))
#define LUCID_CONV_BWD_DATA_STORE(i, j, v) out[(img * s.c + g * cg + (i)) * pixels + (j)] = narrow<out_t>(v)
#define LUCID_CONV_BACKWARD_DATA(NAME, T)                                                            \
kernel void NAME(LUCID_CONV_ARGS(T, T)) {                                                            \
    typedef T out_t;                                                                                 \
    int cg = s.c / s.groups, og = s.oc / s.groups, kk = s.kh * s.kw, pixels = s.h * s.w;             \
    LUCID_CONV_TILE(cg, pixels)                                                                      \
    int img = entry / s.groups, g = entry % s.groups;                                                \
    LUCID_SIMD_TILE_PRODUCT(32, 32, cg, pixels, og * kk, LUCID_CONV_BWD_DATA_A, LUCID_CONV_BWD_DATA_B, \
                            kk > 1, false, LUCID_CONV_BWD_DATA_STORE)                                \
}

// x: the input; wt: the output gradient [n, oc, oh, ow]; out: the weight gradient [oc, Cg·kk]
// (or, split, float32 partial sums [chunks, oc, Cg·kk]). Threadgroups run over (chunk, group,
// tile row, tile column); chunk c sums k in [c · k_chunk, (c + 1) · k_chunk).
#define LUCID_CONV_BWD_W_A(i, l)                                                                     \
    widen(wt[((k0 + (l)) / pixels * s.oc + g * og + (i)) * pixels + (k0 + (l)) % pixels])
#define LUCID_CONV_BWD_W_B(l, j)                                                                     \
    conv_window(x, s, (k0 + (l)) / pixels * s.c + g * cg, (j), (k0 + (l)) % pixels)
#define LUCID_CONV_BWD_W_STORE(i, j, v)                                                              \
    out[((chunk * s.groups + g) * og + (i)) * kdim + (j)] = narrow<out_t>(v)
#define LUCID_CONV_BACKWARD_WEIGHTS(NAME, T, OUT)                                                    \
kernel void NAME(LUCID_CONV_ARGS(T, OUT)) {                                                          \
    typedef OUT out_t;                                                                               \
    int cg = s.c / s.groups, og = s.oc / s.groups, kdim = cg * s.kh * s.kw, pixels = s.oh * s.ow;    \
    LUCID_CONV_TILE(og, kdim)                                                                        \
    int g = entry % s.groups, chunk = entry / s.groups;                                              \
    int k0 = chunk * s.k_chunk, kn = min(s.k_chunk, s.n * pixels - k0);                              \
    LUCID_SIMD_TILE_PRODUCT(32, 32, og, kdim, kn, LUCID_CONV_BWD_W_A, LUCID_CONV_BWD_W_B, true, true, \
                            LUCID_CONV_BWD_W_STORE)                                                  \
}

// The split weight gradient's second pass: out[e] = the sum of the `chunks` partial slices
// at e, in chunk order, in float32, rounded once.
struct ConvChunks {
    uint count, chunks;
};

#define LUCID_CONV_BACKWARD_WEIGHTS_SUM(NAME, T)                                                     \
kernel void NAME(device const float* partial [[buffer(0)]], device T* out [[buffer(1)]],            \
                 constant ConvChunks& p [[buffer(2)]], LUCID_THREAD_POSITION) {                      \
    const ulong gid = LUCID_THREAD_INDEX;                                                            \
    if (gid >= ulong(p.count)) return;                                                               \
    float acc = 0.0f;                                                                                \
    for (uint c = 0; c < p.chunks; ++c) acc += partial[ulong(c) * ulong(p.count) + gid];             \
    out[gid] = narrow<T>(acc);                                                                       \
}

LUCID_CONV_FORWARD(conv_forward_float32, float)
LUCID_CONV_FORWARD(conv_forward_float16, half)
LUCID_CONV_FORWARD(conv_forward_bfloat16, bfloat)
LUCID_CONV_BACKWARD_DATA(conv_backward_data_float32, float)
LUCID_CONV_BACKWARD_DATA(conv_backward_data_float16, half)
LUCID_CONV_BACKWARD_DATA(conv_backward_data_bfloat16, bfloat)
LUCID_CONV_BACKWARD_WEIGHTS(conv_backward_weights_float32, float, float)
LUCID_CONV_BACKWARD_WEIGHTS(conv_backward_weights_float16, half, half)
LUCID_CONV_BACKWARD_WEIGHTS(conv_backward_weights_bfloat16, bfloat, bfloat)
LUCID_CONV_BACKWARD_WEIGHTS(conv_backward_weights_partial_float16, half, float)
LUCID_CONV_BACKWARD_WEIGHTS(conv_backward_weights_partial_bfloat16, bfloat, float)
LUCID_CONV_BACKWARD_WEIGHTS_SUM(conv_backward_weights_sum_float32, float)
LUCID_CONV_BACKWARD_WEIGHTS_SUM(conv_backward_weights_sum_float16, half)
LUCID_CONV_BACKWARD_WEIGHTS_SUM(conv_backward_weights_sum_bfloat16, bfloat)
