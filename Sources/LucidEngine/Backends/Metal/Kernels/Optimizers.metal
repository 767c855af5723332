// Optimizer steps on the GPU, one thread per element of contiguous tensors of one floating
// dtype, in float32 arithmetic with the host kernels' formulas (Host+Optimizers.swift), each
// stored value rounded once. A step given a found-inf flag (`has_found`, GradScaler's, set by
// AMP.metal's unscale) writes nothing when the flag is set, so a skipped step needs no read by
// the host. Compiled after Common.metal, in one library.

// Field order and sizes match `MetalSGD` in Metal+Optimizers.swift.
struct SGDParams {
    float lr, momentum, dampening, weight_decay;
    uint nesterov, maximize, first_step, has_momentum;
    uint has_buffer, has_found;
    ulong count;
};

#define LUCID_SGD(NAME, T)                                                                           \
kernel void NAME(device const T* p [[buffer(0)]], device const T* g [[buffer(1)]],                  \
                 device const T* buf [[buffer(2)]], device T* out_p [[buffer(3)]],                   \
                 device T* out_buf [[buffer(4)]], constant SGDParams& h [[buffer(5)]],               \
                 device const float* found [[buffer(6)]], LUCID_THREAD_POSITION) {                   \
    const ulong i = LUCID_THREAD_INDEX;                                                              \
    if (ulong(i) >= h.count || (h.has_found != 0 && found[0] != 0.0f)) return;                      \
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

// The step's hyper-parameters; the step itself is read from `step` (the steps taken, float32),
// and the bias corrections computed from it here. Field order and sizes match the words in
// Metal+Optimizers.swift.
struct AdamParams {
    float lr, beta1, beta2, eps, coupled, shrink, sign;
    uint has_found;
    ulong count;
};

#define LUCID_ADAM(NAME, T)                                                                          \
kernel void NAME(device const T* p [[buffer(0)]], device const T* g [[buffer(1)]],                  \
                 device const T* m [[buffer(2)]], device const T* v [[buffer(3)]],                   \
                 device T* out_p [[buffer(4)]], device T* out_m [[buffer(5)]], device T* out_v [[buffer(6)]], \
                 constant AdamParams& h [[buffer(7)]], device const float* step [[buffer(8)]],       \
                 device const float* found [[buffer(9)]], LUCID_THREAD_POSITION) {                   \
    const ulong i = LUCID_THREAD_INDEX;                                                              \
    if (ulong(i) >= h.count || (h.has_found != 0 && found[0] != 0.0f)) return;                      \
    float t = step[0] + 1.0f;                                                                        \
    float step_size = h.lr / (1.0f - precise::pow(h.beta1, t));                                      \
    float bc2_root = precise::sqrt(1.0f - precise::pow(h.beta2, t));                                 \
    float w0 = widen(p[i]);                                                                          \
    float d = h.coupled == 0.0f ? h.sign * widen(g[i]) : h.sign * widen(g[i]) + h.coupled * w0;    \
    float w = h.shrink * w0;                                                                         \
    float mi = h.beta1 * widen(m[i]) + (1.0f - h.beta1) * d;                                         \
    float vi = h.beta2 * widen(v[i]) + (1.0f - h.beta2) * d * d;                                     \
    out_m[i] = narrow<T>(mi);                                                                        \
    out_v[i] = narrow<T>(vi);                                                                        \
    out_p[i] = narrow<T>(w - step_size * mi / (precise::sqrt(vi) / bc2_root + h.eps));              \
}

LUCID_ADAM(adam_step_float32, float)
LUCID_ADAM(adam_step_float16, half)
LUCID_ADAM(adam_step_bfloat16, bfloat)

// After an Adam step (dispatched after it, so that every thread of the step read the old
// count): the step count goes up, unless the step was skipped.
kernel void adam_count_step(device float* step [[buffer(0)]], device const float* found [[buffer(1)]],
                            constant uint& has_found [[buffer(2)]], LUCID_THREAD_POSITION) {
    const ulong i = LUCID_THREAD_INDEX;
    if (i == 0 && !(has_found != 0 && found[0] != 0.0f)) step[0] += 1.0f;
}
