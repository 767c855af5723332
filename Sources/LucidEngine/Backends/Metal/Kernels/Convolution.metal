// The window gathers under convolution on the GPU, as the host computes them
// (Host+Convolution.swift): im2col copies each window of a strided [N, C, H, W] input into a
// contiguous [N, C·kh·kw, oh·ow], reading 0 outside the input; col2im, its adjoint, has one
// thread per input position sum, in float32 and in the host's order (kernel row, then
// column), the column entries whose windows cover it, rounding once. Compiled after
// Common.metal, in one library.

// Field order and sizes match `windowShape` in Metal+Convolution.swift; s0…s3 are the strides
// of the strided operand (the input of im2col, the columns of col2im).
struct WindowShape {
    long n, c, h, w, oh, ow;
    long kh, kw, sh, sw, ph, pw, dh, dw;
    long s0, s1, s2, s3;
};

#define LUCID_IM2COL(NAME, T)                                                                        \
kernel void NAME(device const T* x [[buffer(0)]], device T* cols [[buffer(1)]],                     \
                 constant WindowShape& g [[buffer(2)]], uint gid [[thread_position_in_grid]]) {      \
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
                 constant WindowShape& g [[buffer(2)]], uint gid [[thread_position_in_grid]]) {      \
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
