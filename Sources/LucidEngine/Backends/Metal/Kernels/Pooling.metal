// Max pooling on the GPU, over contiguous planes [P, 1, H, W], as the host computes it
// (Host+Pooling.swift): positions outside the plane are skipped, a NaN wins its window, ties
// go to the first position, an empty window gives -inf at index -1. The backward pass
// gathers: each input position sums, in output order, the gradients of the outputs whose
// index is it, in float32, rounded once. Compiled after Common.metal, in one library.

// Field order and sizes match `MetalPool` in Metal+Pooling.swift.
struct PoolGeometry {
    long planes, h, w, oh, ow;
    long kh, kw, sh, sw, ph, pw, dh, dw;
};

#define LUCID_MAX_POOL(NAME, T)                                                                      \
kernel void NAME(device const T* x [[buffer(0)]], device T* values [[buffer(1)]],                   \
                 device long* indices [[buffer(2)]], constant PoolGeometry& g [[buffer(3)]],         \
                 LUCID_THREAD_POSITION) {                                                            \
    const ulong gid = LUCID_THREAD_INDEX;                                                            \
    if (long(gid) >= g.planes * g.oh * g.ow) return;                                                 \
    long p = long(gid) / (g.oh * g.ow), o = long(gid) % (g.oh * g.ow);                               \
    long y0 = (o / g.ow) * g.sh - g.ph, x0 = (o % g.ow) * g.sw - g.pw;                               \
    device const T* plane = x + p * g.h * g.w;                                                       \
    long at = -1;                                                                                    \
    float best = -INFINITY;                                                                          \
    for (long i = 0; i < g.kh; ++i) {                                                                \
        long y = y0 + i * g.dh;                                                                      \
        if (y < 0 || y >= g.h) continue;                                                             \
        for (long j = 0; j < g.kw; ++j) {                                                            \
            long xx = x0 + j * g.dw;                                                                 \
            if (xx < 0 || xx >= g.w) continue;                                                       \
            long q = y * g.w + xx;                                                                   \
            float v = widen(plane[q]);                                                               \
            if (at < 0 || v > best || (isnan(v) && !isnan(best))) { best = v; at = q; }              \
        }                                                                                            \
    }                                                                                                \
    values[gid] = narrow<T>(best);                                                                   \
    indices[gid] = at;                                                                               \
}

#define LUCID_MAX_POOL_BACKWARD(NAME, T)                                                             \
kernel void NAME(device const T* grad [[buffer(0)]], device const long* indices [[buffer(1)]],      \
                 device T* grad_in [[buffer(2)]], constant PoolGeometry& g [[buffer(3)]],            \
                 LUCID_THREAD_POSITION) {                                                            \
    const ulong gid = LUCID_THREAD_INDEX;                                                            \
    if (long(gid) >= g.planes * g.h * g.w) return;                                                   \
    long p = long(gid) / (g.h * g.w), q = long(gid) % (g.h * g.w);                                   \
    long y = q / g.w, xx = q % g.w;                                                                  \
    /* The outputs whose windows can reach (y, xx), in increasing order. */                         \
    long oy0 = max(0L, (y + g.ph - (g.kh - 1) * g.dh + g.sh - 1) / g.sh);                            \
    long oy1 = min(g.oh - 1, (y + g.ph) / g.sh);                                                     \
    long ox0 = max(0L, (xx + g.pw - (g.kw - 1) * g.dw + g.sw - 1) / g.sw);                           \
    long ox1 = min(g.ow - 1, (xx + g.pw) / g.sw);                                                    \
    float acc = 0.0f;                                                                                \
    for (long oy = oy0; oy <= oy1; ++oy) {                                                           \
        for (long ox = ox0; ox <= ox1; ++ox) {                                                       \
            long k = p * g.oh * g.ow + oy * g.ow + ox;                                               \
            if (indices[k] == q) acc += widen(grad[k]);                                              \
        }                                                                                            \
    }                                                                                                \
    grad_in[gid] = narrow<T>(acc);                                                                   \
}

LUCID_MAX_POOL(max_pool2d_float32, float)
LUCID_MAX_POOL(max_pool2d_float16, half)
LUCID_MAX_POOL(max_pool2d_bfloat16, bfloat)
LUCID_MAX_POOL_BACKWARD(max_pool2d_backward_float32, float)
LUCID_MAX_POOL_BACKWARD(max_pool2d_backward_float16, half)
LUCID_MAX_POOL_BACKWARD(max_pool2d_backward_bfloat16, bfloat)
