// Optimizer steps and GradScaler's unscale on the GPU, one thread per element of contiguous
// tensors of one floating dtype, in float32 arithmetic with the host kernels' formulas
// (Host+Optimizers.swift), each stored value rounded once. Compiled after Common.metal, in one
// library.

// Field order and sizes match `MetalSGD` in Metal+Optimizers.swift.
struct SGDParams {
    float lr, momentum, dampening, weight_decay;
    uint nesterov, maximize, first_step, has_momentum;
    uint has_buffer, pad;
    ulong count;
};

#define LUCID_SGD(NAME, T)                                                                           \
kernel void NAME(device const T* p [[buffer(0)]], device const T* g [[buffer(1)]],                  \
                 device const T* buf [[buffer(2)]], device T* out_p [[buffer(3)]],                   \
                 device T* out_buf [[buffer(4)]], constant SGDParams& h [[buffer(5)]],               \
                 uint i [[thread_position_in_grid]]) {                                               \
    if (ulong(i) >= h.count) return;                                                                 \
    float w = widen(p[i]);                                                                           \
    float d = widen(g[i]);                                                                           \
    if (h.maximize != 0) d = -d;                                                                     \
    if (h.weight_decay != 0.0f) d += h.weight_decay * w;                                             \
    if (h.has_momentum != 0) {                                                                       \
        float b = d;                                                                                 \
        if (h.has_buffer != 0 && h.first_step == 0) b = h.momentum * widen(buf[i]) + (1.0f - h.dampening) * d; \
        out_buf[i] = narrow<T>(b);                                                                   \
        d = h.nesterov != 0 ? d + h.momentum * b : b;                                                \
    }                                                                                                \
    out_p[i] = narrow<T>(w - h.lr * d);                                                              \
}

LUCID_SGD(sgd_step_float32, float)
LUCID_SGD(sgd_step_float16, half)
LUCID_SGD(sgd_step_bfloat16, bfloat)

// The step's constants, computed on the host as the host kernel computes them. Field order
// and sizes match `MetalAdam` in Metal+Optimizers.swift.
struct AdamParams {
    float step_size, bc2_root, beta1, beta2, eps, coupled, shrink, sign;
    ulong count;
};

#define LUCID_ADAM(NAME, T)                                                                          \
kernel void NAME(device const T* p [[buffer(0)]], device const T* g [[buffer(1)]],                  \
                 device const T* m [[buffer(2)]], device const T* v [[buffer(3)]],                   \
                 device T* out_p [[buffer(4)]], device T* out_m [[buffer(5)]], device T* out_v [[buffer(6)]], \
                 constant AdamParams& h [[buffer(7)]], uint i [[thread_position_in_grid]]) {         \
    if (ulong(i) >= h.count) return;                                                                 \
    float w0 = widen(p[i]);                                                                          \
    float d = h.coupled == 0.0f ? h.sign * widen(g[i]) : h.sign * widen(g[i]) + h.coupled * w0;    \
    float w = h.shrink * w0;                                                                         \
    float mi = h.beta1 * widen(m[i]) + (1.0f - h.beta1) * d;                                         \
    float vi = h.beta2 * widen(v[i]) + (1.0f - h.beta2) * d * d;                                     \
    out_m[i] = narrow<T>(mi);                                                                        \
    out_v[i] = narrow<T>(vi);                                                                        \
    out_p[i] = narrow<T>(w - h.step_size * mi / (precise::sqrt(vi) / h.bc2_root + h.eps));          \
}

LUCID_ADAM(adam_step_float32, float)
LUCID_ADAM(adam_step_float16, half)
LUCID_ADAM(adam_step_bfloat16, bfloat)

// out = grad * inv_scale; any infinite or NaN result (before or after rounding) sets found[0].
// Every thread that finds one stores the same 1, so the stores need no ordering.
#define LUCID_UNSCALE(NAME, T)                                                                       \
kernel void NAME(device const T* grad [[buffer(0)]], device T* out [[buffer(1)]],                   \
                 device int* found [[buffer(2)]], constant float& inv_scale [[buffer(3)]],           \
                 constant ulong& count [[buffer(4)]], uint i [[thread_position_in_grid]]) {          \
    if (ulong(i) >= count) return;                                                                   \
    float x = widen(grad[i]) * inv_scale;                                                            \
    T stored = narrow<T>(x);                                                                         \
    out[i] = stored;                                                                                 \
    if (isinf(x) || isnan(x) || isinf(widen(stored)) || isnan(widen(stored))) found[0] = 1;          \
}

LUCID_UNSCALE(unscale_float32, float)
LUCID_UNSCALE(unscale_float16, half)
LUCID_UNSCALE(unscale_bfloat16, bfloat)
