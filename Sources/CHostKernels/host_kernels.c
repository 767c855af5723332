#include "host_kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>
#include <time.h>

#if defined(__linux__)
#include <dlfcn.h>
#endif

// exp(a) for the float32 steps of the engine's FastMath.exp(a, 0), in the same order and
// without fused multiply-adds, so that every variant below and the Swift loops agree bit for
// bit: round a·log2(e) to k, reduce by k·ln2 in two parts, a degree-7 Taylor polynomial,
// scale by 2^k (as 2^(k+64)·2^-64, so that gradual underflow rounds once); 0 below -104 and
// for NaN.
#pragma clang fp contract(off)
static inline __attribute__((always_inline)) float fast_exp(float a) {
    const float log2e = 1.44269504f, ln2_hi = 0.693145751953125f, ln2_lo = 1.428606765330187e-6f;
    const float rounding_shift = 12582912.0f, two_to_minus_64 = 5.421010862427522e-20f;
    float s = -104.0f >= a ? -104.0f : a;
    float shifted = s * log2e + rounding_shift;
    float kf = shifted - rounding_shift;
    int32_t bits, shift_bits;
    memcpy(&bits, &shifted, sizeof bits);
    memcpy(&shift_bits, &rounding_shift, sizeof shift_bits);
    int32_t k = (int32_t)((uint32_t)bits - (uint32_t)shift_bits);
    float clamped = -128.0f >= a ? -128.0f : a;
    float r = (clamped - kf * ln2_hi) - kf * ln2_lo + 0.0f;
    float p = 1.0f / 5040;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1;
    p = p * r + 1;
    uint32_t scale_bits = ((uint32_t)(k + 191) & 0xffu) << 23;
    float scale;
    memcpy(&scale, &scale_bits, sizeof scale);
    float y = p * scale * two_to_minus_64;
    return a >= -104.0f ? y : 0.0f;
}

// FastMath.sigmoid: 1 / (1 + e) for x >= 0 and e / (1 + e) below, from e = exp(-|x|) (which
// never overflows); NaN stays NaN.
static inline __attribute__((always_inline)) float fast_sigmoid(float x) {
    float e = fast_exp(-fabsf(x));
    float r = 1.0f / (1.0f + e);
    float y = x >= 0.0f ? r : e * r;
    return x != x ? x : y;
}

// FastMath.tanh: x + x³·P(x²) below |x| = 0.55, (1 − e)/(1 + e) with e = exp(-2|x|) above;
// NaN stays NaN.
static inline __attribute__((always_inline)) float fast_tanh(float x) {
    float a = fabsf(x);
    float z = x * x;
    float p = -0.006356495868f;
    p = p * z + 0.021127241412f;
    p = p * z - 0.053865079073f;
    p = p * z + 0.133326996820f;
    p = p * z - 0.333333206076f;
    float small = x + x * z * p;
    float e = fast_exp(-2.0f * a);
    float large = (1.0f - e) / (1.0f + e);
    float y = a < 0.55f ? small : (x < 0.0f ? -large : large);
    return x != x ? x : y;
}

// FastMath.exp(a, b): fast_exp with the argument's low part b added into the reduced
// argument, for exp(-x²) with x² split exactly; 0 below -104.
static inline __attribute__((always_inline)) float fast_exp_split(float a, float b) {
    const float log2e = 1.44269504f, ln2_hi = 0.693145751953125f, ln2_lo = 1.428606765330187e-6f;
    const float rounding_shift = 12582912.0f, two_to_minus_64 = 5.421010862427522e-20f;
    float ab = a + b;
    float s = -104.0f >= ab ? -104.0f : ab;
    float shifted = s * log2e + rounding_shift;
    float kf = shifted - rounding_shift;
    int32_t bits, shift_bits;
    memcpy(&bits, &shifted, sizeof bits);
    memcpy(&shift_bits, &rounding_shift, sizeof shift_bits);
    int32_t k = (int32_t)((uint32_t)bits - (uint32_t)shift_bits);
    float clamped = -128.0f >= a ? -128.0f : a;
    float r = (clamped - kf * ln2_hi) - kf * ln2_lo + b;
    float p = 1.0f / 5040;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1;
    p = p * r + 1;
    uint32_t scale_bits = ((uint32_t)(k + 191) & 0xffu) << 23;
    float scale;
    memcpy(&scale, &scale_bits, sizeof scale);
    float y = p * scale * two_to_minus_64;
    return ab >= -104.0f ? y : 0.0f;
}

// x with its low 12 significand bits cleared (FastMath.high): its square is exact.
static inline __attribute__((always_inline)) float high_part(float x) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    b &= 0xfffff000u;
    float h;
    memcpy(&h, &b, sizeof h);
    return h;
}

// FastMath.normalCDF and FastMath.geluDerivative, step for step.
static inline __attribute__((always_inline)) float fast_normal_cdf(float x) {
    float t = fabsf(x) * 0.70710677f;
    float u = 1.0f / (1.0f + 0.5f * t);
    float c = 0.17087277f;
    c = c * u - 0.82215223f;
    c = c * u + 1.48851587f;
    c = c * u - 1.13520398f;
    c = c * u + 0.27886807f;
    c = c * u - 0.18628806f;
    c = c * u + 0.09678418f;
    c = c * u + 0.37409196f;
    c = c * u + 1.00002368f;
    c = c * u - 1.26551223f;
    float h = high_part(t);
    float half = 0.5f * (u * fast_exp_split(-(h * h), -((t - h) * (t + h)) + c));
    return x < 0.0f ? half : 1.0f - half;
}

static inline __attribute__((always_inline)) float fast_gelu_derivative(float x) {
    float h = high_part(x);
    float gaussian = fast_exp_split(-(h * h) * 0.5f, -((x - h) * (x + h)) * 0.5f);
    return fast_normal_cdf(x) + x * 0.3989423f * gaussian;
}

static inline __attribute__((always_inline)) void gelu(const float *restrict x, float *restrict o, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++) o[i] = x[i] * fast_normal_cdf(x[i]);
}

static inline __attribute__((always_inline)) void gelu_backward(const float *restrict x, const float *restrict g,
                                                               float *restrict o, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++) o[i] = g[i] * fast_gelu_derivative(x[i]);
}

// UnaryKernel's geluTanh in float32, in its order of operations: u = √(2/π)·(x + 0.044715·x³)
// (x³ as ((0.044715·x)·x)·x), y = x·σ(2u) and y' = s + 2x·s·(1 − s)·√(2/π)·(1 + 3·0.044715·x²).
static inline __attribute__((always_inline)) float gelu_tanh_sigmoid(float x) {
    return fast_sigmoid(2.0f * (0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

static inline __attribute__((always_inline)) void gelu_tanh(const float *restrict x, float *restrict o, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++) o[i] = x[i] * gelu_tanh_sigmoid(x[i]);
}

static inline __attribute__((always_inline)) void gelu_tanh_backward(const float *restrict x, const float *restrict g,
                                                                    float *restrict o, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++) {
        float v = x[i], s = gelu_tanh_sigmoid(v);
        o[i] = g[i] * (s + 2.0f * v * s * (1.0f - s) * 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * v * v));
    }
}

static inline __attribute__((always_inline)) void sigmoid(const float *x, float *o, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++) o[i] = fast_sigmoid(x[i]);
}

static inline __attribute__((always_inline)) void tanh_(const float *x, float *o, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++) o[i] = fast_tanh(x[i]);
}

static inline __attribute__((always_inline)) void silu(const float *restrict x, float *restrict o, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++) o[i] = x[i] * fast_sigmoid(x[i]);
}

static inline __attribute__((always_inline)) void silu_backward(const float *restrict x, const float *restrict g,
                                                               float *restrict o, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++) {
        float s = fast_sigmoid(x[i]);
        o[i] = g[i] * (s * (1.0f + x[i] * (1.0f - s)));
    }
}

// bfloat16 <-> float32: widening is exact; narrowing rounds to nearest even, NaN kept quiet
// (the engine's floatToBFloat, and `narrow` below, element by element).
static inline __attribute__((always_inline)) float bf16_load(uint16_t v) {
    uint32_t u = (uint32_t)v << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline __attribute__((always_inline)) uint16_t bf16_store(float x) {
    uint32_t f;
    memcpy(&f, &x, sizeof f);
    uint32_t rounded = (f + 0x7fffu + ((f >> 16) & 1u)) >> 16;
    uint32_t nan = 0u - (((f & 0x7fffffffu) + 0x007fffffu) >> 31);
    uint32_t quiet = ((f >> 16) & 0x8000u) | 0x7fc0u;
    return (uint16_t)((rounded & ~nan) | (quiet & nan));
}

static inline __attribute__((always_inline)) float f32_load(float v) { return v; }
static inline __attribute__((always_inline)) float f32_store(float v) { return v; }

// One LSTM step over rows of T (float, or bfloat16's bits), computed in float32 as the
// engine's LSTMCellForward computes it: the gates from x + y ([batch, 4n]: input, forget, cell,
// output), c' = σf·c + σi·tanh g and h = σo·tanh c' (each rounded once into T), and the
// activations kept for the backward in float32 ([batch, 5n]: σi, σf, tanh g, σo, tanh c').
#define LUCID_LSTM_CELL(name, T, LOAD, STORE)                                                                   \
    static inline __attribute__((always_inline)) void name(const T *restrict x, const T *restrict y,           \
                                                           const T *restrict c, T *restrict h, T *restrict c_new, \
                                                           float *restrict act, ptrdiff_t batch, ptrdiff_t n) {   \
        for (ptrdiff_t b = 0; b < batch; b++) {                                                                \
            const T *xr = x + b * 4 * n, *yr = y + b * 4 * n, *cr = c + b * n;                                 \
            T *hr = h + b * n, *nr = c_new + b * n;                                                            \
            float *a = act + b * 5 * n;                                                                        \
            for (ptrdiff_t j = 0; j < n; j++) {                                                                \
                float i = fast_sigmoid(LOAD(xr[j]) + LOAD(yr[j]));                                             \
                float f = fast_sigmoid(LOAD(xr[n + j]) + LOAD(yr[n + j]));                                     \
                float g = fast_tanh(LOAD(xr[2 * n + j]) + LOAD(yr[2 * n + j]));                                \
                float o = fast_sigmoid(LOAD(xr[3 * n + j]) + LOAD(yr[3 * n + j]));                             \
                float cv = f * LOAD(cr[j]) + i * g;                                                            \
                float t = fast_tanh(cv);                                                                       \
                nr[j] = STORE(cv);                                                                             \
                hr[j] = STORE(o * t);                                                                          \
                a[j] = i;                                                                                      \
                a[n + j] = f;                                                                                  \
                a[2 * n + j] = g;                                                                              \
                a[3 * n + j] = o;                                                                              \
                a[4 * n + j] = t;                                                                              \
            }                                                                                                  \
        }                                                                                                      \
    }

// Its backward, as the engine's LSTMCellBackward computes it, from the gradient of h (gh, plus
// gh_more when given: the recurrent part) and of c' (gc), either of gh and gc absent (NULL):
// the gates' gradient dg ([batch, 4n]) and c's (dc), computed in float32.
#define LUCID_LSTM_CELL_BACKWARD(name, T, LOAD, STORE)                                                          \
    static inline __attribute__((always_inline)) void name(                                                    \
        const float *restrict act, const T *restrict c, const T *restrict gh, const T *restrict gh_more,        \
        const T *restrict gc, T *restrict dg, T *restrict dc, ptrdiff_t batch, ptrdiff_t n) {                  \
        for (ptrdiff_t b = 0; b < batch; b++) {                                                                \
            const float *a = act + b * 5 * n;                                                                  \
            for (ptrdiff_t j = 0; j < n; j++) {                                                                \
                ptrdiff_t k = b * n + j, q = b * 4 * n + j;                                                    \
                float i = a[j], f = a[n + j], g = a[2 * n + j], o = a[3 * n + j], t = a[4 * n + j];            \
                float dcn = gc ? LOAD(gc[k]) : 0.0f;                                                           \
                float dout = 0.0f;                                                                             \
                if (gh) {                                                                                      \
                    float dh = gh_more ? LOAD(gh[k]) + LOAD(gh_more[k]) : LOAD(gh[k]);                         \
                    dout = dh * t;                                                                             \
                    dcn += dh * o * (1.0f - t * t);                                                            \
                }                                                                                              \
                dg[q] = STORE(dcn * g * i * (1.0f - i));                                                       \
                dg[q + n] = STORE(dcn * LOAD(c[k]) * f * (1.0f - f));                                          \
                dg[q + 2 * n] = STORE(dcn * i * (1.0f - g * g));                                               \
                dg[q + 3 * n] = STORE(dout * o * (1.0f - o));                                                  \
                dc[k] = STORE(dcn * f);                                                                        \
            }                                                                                                  \
        }                                                                                                      \
    }

// One GRU step over rows of T, computed in float32 as the engine's GRUCellForward computes it
// (PyTorch's equations and gate order: reset, update, new): from the input's products x and
// the hidden state's y ([batch, 3n], each with its bias), r = σ(x_r + y_r), z = σ(x_z + y_z),
// n = tanh(x_n + r·y_n) and h' = n + z·(h − n), rounded once into T; the activations kept
// for the backward in float32 ([batch, 4n]: r, z, n, y_n).
#define LUCID_GRU_CELL(name, T, LOAD, STORE)                                                                    \
    static inline __attribute__((always_inline)) void name(const T *restrict x, const T *restrict y,           \
                                                           const T *restrict h, T *restrict h_new,              \
                                                           float *restrict act, ptrdiff_t batch, ptrdiff_t n) {   \
        for (ptrdiff_t b = 0; b < batch; b++) {                                                                \
            const T *xr = x + b * 3 * n, *yr = y + b * 3 * n, *hr = h + b * n;                                 \
            T *nr = h_new + b * n;                                                                             \
            float *a = act + b * 4 * n;                                                                        \
            for (ptrdiff_t j = 0; j < n; j++) {                                                                \
                float r = fast_sigmoid(LOAD(xr[j]) + LOAD(yr[j]));                                             \
                float z = fast_sigmoid(LOAD(xr[n + j]) + LOAD(yr[n + j]));                                     \
                float hn = LOAD(yr[2 * n + j]);                                                                \
                float g = fast_tanh(LOAD(xr[2 * n + j]) + r * hn);                                             \
                nr[j] = STORE(g + z * (LOAD(hr[j]) - g));                                                      \
                a[j] = r;                                                                                      \
                a[n + j] = z;                                                                                  \
                a[2 * n + j] = g;                                                                              \
                a[3 * n + j] = hn;                                                                             \
            }                                                                                                  \
        }                                                                                                      \
    }

// Its backward, as the engine's GRUCellBackward computes it, from the gradient of h' (gh, plus
// gh_more and gh_carry when given: the recurrent parts, summed in float32) and the state h the
// step started from: the gradient of the input's products (dx), of the hidden state's (dy,
// which differs from dx in the new gate's third, scaled by r) and h's direct part z·dh' (dh),
// computed in float32.
#define LUCID_GRU_CELL_BACKWARD(name, T, LOAD, STORE)                                                           \
    static inline __attribute__((always_inline)) void name(                                                    \
        const float *restrict act, const T *restrict h, const T *restrict gh, const T *restrict gh_more,        \
        const T *restrict gh_carry, T *restrict dx, T *restrict dy, T *restrict dh, ptrdiff_t batch,            \
        ptrdiff_t n) {                                                                                         \
        for (ptrdiff_t b = 0; b < batch; b++) {                                                                \
            const float *a = act + b * 4 * n;                                                                  \
            for (ptrdiff_t j = 0; j < n; j++) {                                                                \
                ptrdiff_t k = b * n + j, q = b * 3 * n + j;                                                    \
                float r = a[j], z = a[n + j], g = a[2 * n + j], hn = a[3 * n + j];                             \
                float d = LOAD(gh[k]);                                                                         \
                if (gh_more) d += LOAD(gh_more[k]);                                                            \
                if (gh_carry) d += LOAD(gh_carry[k]);                                                          \
                float dg = d * (1.0f - z) * (1.0f - g * g);                                                    \
                float dr = dg * hn * r * (1.0f - r);                                                           \
                float dz = d * (LOAD(h[k]) - g) * z * (1.0f - z);                                              \
                dx[q] = STORE(dr);                                                                             \
                dx[q + n] = STORE(dz);                                                                         \
                dx[q + 2 * n] = STORE(dg);                                                                     \
                dy[q] = STORE(dr);                                                                             \
                dy[q + n] = STORE(dz);                                                                         \
                dy[q + 2 * n] = STORE(dg * r);                                                                 \
                dh[k] = STORE(d * z);                                                                          \
            }                                                                                                  \
        }                                                                                                      \
    }

// One Elman step over count elements of T, computed in float32 as the engine's RNNCellForward
// computes it: h = act(x + y) from the input's and the hidden state's products, with act tanh
// or (relu != 0) ReLU, which keeps NaN; rounded once into T.
#define LUCID_RNN_CELL(name, T, LOAD, STORE)                                                                    \
    static inline __attribute__((always_inline)) void name(const T *restrict x, const T *restrict y,           \
                                                           T *restrict h, ptrdiff_t count, int relu) {         \
        if (relu) {                                                                                            \
            for (ptrdiff_t i = 0; i < count; i++) {                                                            \
                float v = LOAD(x[i]) + LOAD(y[i]);                                                             \
                h[i] = STORE(v < 0.0f ? 0.0f : v);                                                             \
            }                                                                                                  \
        } else {                                                                                               \
            for (ptrdiff_t i = 0; i < count; i++) h[i] = STORE(fast_tanh(LOAD(x[i]) + LOAD(y[i])));            \
        }                                                                                                      \
    }

// Its backward from the step's output h (as stored) and the gradient reaching it (gh, plus
// gh_more when given: the recurrent part, summed in float32): the gradient of the products' sum.
#define LUCID_RNN_CELL_BACKWARD(name, T, LOAD, STORE)                                                           \
    static inline __attribute__((always_inline)) void name(const T *restrict h, const T *restrict gh,          \
                                                           const T *restrict gh_more, T *restrict d,            \
                                                           ptrdiff_t count, int relu) {                         \
        for (ptrdiff_t i = 0; i < count; i++) {                                                                \
            float g = gh_more ? LOAD(gh[i]) + LOAD(gh_more[i]) : LOAD(gh[i]);                                  \
            float y = LOAD(h[i]);                                                                              \
            d[i] = STORE(relu ? (y > 0.0f ? g : 0.0f) : g * (1.0f - y * y));                                   \
        }                                                                                                      \
    }

// out[m, n] = a[m, k] · b[k, n] (+ bias) over b packed in panels (see lucid_host_product_rows):
// for each panel, `rows` rows of out at a time keep their values in registers while each of
// their k values of a scales the panel's next row into them (sequential reads of a panel that
// stays in the L1 cache): one fused multiply-add per term, in the order of k, whatever the
// rows, the panel or the vector unit.
#define LUCID_PANEL_ROWS(rows, width)                                                               \
    do {                                                                                            \
        float acc[rows][32];                                                                        \
        for (ptrdiff_t r = 0; r < (rows); r++)                                                      \
            for (ptrdiff_t q = 0; q < (width); q++) acc[r][q] = bias ? bias[j + q] : 0.0f;          \
        for (ptrdiff_t p = 0; p < k; p++) {                                                         \
            const float *restrict row = panel + p * (width);                                        \
            for (ptrdiff_t r = 0; r < (rows); r++) {                                                \
                const float s = a[(i + r) * k + p];                                                 \
                for (ptrdiff_t q = 0; q < (width); q++) acc[r][q] = fmaf(s, row[q], acc[r][q]);     \
            }                                                                                       \
        }                                                                                           \
        for (ptrdiff_t r = 0; r < (rows); r++)                                                      \
            for (ptrdiff_t q = 0; q < (width); q++) out[(i + r) * n + j + q] = acc[r][q];           \
    } while (0)

static inline __attribute__((always_inline)) void product_rows(const float *restrict a, const float *restrict b,
                                                               const float *restrict bias, float *restrict out,
                                                               ptrdiff_t m, ptrdiff_t n, ptrdiff_t k) {
    for (ptrdiff_t j = 0; j < n; j += 32) {
        const float *restrict panel = b + j * k;
        const ptrdiff_t width = n - j < 32 ? n - j : 32;
        ptrdiff_t i = 0;
        if (width == 32) {
            for (; i + 2 <= m; i += 2) LUCID_PANEL_ROWS(2, 32);
            for (; i < m; i++) LUCID_PANEL_ROWS(1, 32);
        } else {
            for (; i < m; i++) LUCID_PANEL_ROWS(1, width);
        }
    }
}

LUCID_LSTM_CELL(lstm_cell, float, f32_load, f32_store)
LUCID_LSTM_CELL(lstm_cell_bf16, uint16_t, bf16_load, bf16_store)
LUCID_LSTM_CELL_BACKWARD(lstm_cell_backward, float, f32_load, f32_store)
LUCID_LSTM_CELL_BACKWARD(lstm_cell_backward_bf16, uint16_t, bf16_load, bf16_store)
LUCID_RNN_CELL(rnn_cell, float, f32_load, f32_store)
LUCID_RNN_CELL(rnn_cell_bf16, uint16_t, bf16_load, bf16_store)
LUCID_RNN_CELL_BACKWARD(rnn_cell_backward, float, f32_load, f32_store)
LUCID_RNN_CELL_BACKWARD(rnn_cell_backward_bf16, uint16_t, bf16_load, bf16_store)
LUCID_GRU_CELL(gru_cell, float, f32_load, f32_store)
LUCID_GRU_CELL(gru_cell_bf16, uint16_t, bf16_load, bf16_store)
LUCID_GRU_CELL_BACKWARD(gru_cell_backward, float, f32_load, f32_store)
LUCID_GRU_CELL_BACKWARD(gru_cell_backward_bf16, uint16_t, bf16_load, bf16_store)

// sqrt without errno, so that a loop of it vectorises (libm's sqrtf may set errno, which keeps
// the compiler to scalar code); IEEE's correctly rounded square root either way.
#if defined(__has_builtin) && __has_builtin(__builtin_elementwise_sqrt)
#define LUCID_SQRTF(x) __builtin_elementwise_sqrt(x)
#else
#define LUCID_SQRTF(x) sqrtf(x)
#endif

// One Adam update of n float32 parameters in place, in the engine's order of operations (the
// host's AdamKernel): d = sign·g (+ coupled·w), w scaled by shrink, the moments blended, and
// w − step_size·m / (sqrt(v)/bc2_root + eps).
static inline __attribute__((always_inline)) void adam(float *restrict p, const float *restrict g, float *restrict m,
                                                       float *restrict v, ptrdiff_t n, const float *restrict k) {
    const float step_size = k[0], bc2_root = k[1], sign = k[2], coupled = k[3], shrink = k[4];
    const float b1 = k[5], b2 = k[6], eps = k[7];
    for (ptrdiff_t i = 0; i < n; i++) {
        float w0 = p[i];
        float d = coupled == 0.0f ? sign * g[i] : sign * g[i] + coupled * w0;
        float w = shrink * w0;
        float mi = b1 * m[i] + (1.0f - b1) * d;
        float vi = b2 * v[i] + (1.0f - b2) * d * d;
        m[i] = mi;
        v[i] = vi;
        p[i] = w - step_size * mi / (LUCID_SQRTF(vi) / bc2_root + eps);
    }
}

// Integer operations only and no branches, so that each variant vectorises: `nan` is all ones
// exactly when |f| > 0x7f800000.
static inline __attribute__((always_inline)) void narrow(const float *src, uint16_t *dst, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++) {
        uint32_t f;
        memcpy(&f, src + i, sizeof f);
        uint32_t rounded = (f + 0x7fffu + ((f >> 16) & 1u)) >> 16;
        uint32_t nan = 0u - (((f & 0x7fffffffu) + 0x007fffffu) >> 31);
        uint32_t quiet = ((f >> 16) & 0x8000u) | 0x7fc0u;
        dst[i] = (uint16_t)((rounded & ~nan) | (quiet & nan));
    }
}

// float32 values rounded in place to bfloat16 values (narrow's rounding, then widened back);
// bfloat16 bits widened exactly to floats.
static inline __attribute__((always_inline)) void round_bf16(float *x, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++) {
        uint32_t f;
        memcpy(&f, x + i, sizeof f);
        uint32_t rounded = (f + 0x7fffu + ((f >> 16) & 1u)) & 0xffff0000u;
        uint32_t nan = 0u - (((f & 0x7fffffffu) + 0x007fffffu) >> 31);
        uint32_t quiet = (f & 0x80000000u) | 0x7fc00000u;
        f = (rounded & ~nan) | (quiet & nan);
        memcpy(x + i, &f, sizeof f);
    }
}

static inline __attribute__((always_inline)) void widen(const uint16_t *restrict src, float *restrict dst,
                                                       ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)src[i] << 16;
        memcpy(dst + i, &u, sizeof u);
    }
}

// The four arithmetic ops over float32 runs. A run written in place (o == x) has a loop of its
// own: with o and x equal, the vectoriser's overlap check would send the general loop down its
// one-element-at-a-time path.
#define LUCID_ARITH_LOOPS(EXPR)                                                                  \
    if (o == x) {                                                                                \
        for (ptrdiff_t i = 0; i < n; i++) { const float a = o[i]; o[i] = EXPR; }                 \
    } else {                                                                                     \
        for (ptrdiff_t i = 0; i < n; i++) { const float a = x[i]; o[i] = EXPR; }                 \
    }

static inline __attribute__((always_inline)) void arith(int op, const float *x, const float *y, float *o,
                                                       ptrdiff_t n) {
    switch (op) {
    case 0: LUCID_ARITH_LOOPS(a + y[i]) break;
    case 1: LUCID_ARITH_LOOPS(a - y[i]) break;
    case 2: LUCID_ARITH_LOOPS(a * y[i]) break;
    default: LUCID_ARITH_LOOPS(a / y[i]) break;
    }
}

static inline __attribute__((always_inline)) void arith_scalar(int op, const float *x, float s, int first, float *o,
                                                              ptrdiff_t n) {
    switch (op * 2 + (first != 0)) {
    case 0: case 1: LUCID_ARITH_LOOPS(a + s) break;
    case 2: LUCID_ARITH_LOOPS(a - s) break;
    case 3: LUCID_ARITH_LOOPS(s - a) break;
    case 4: case 5: LUCID_ARITH_LOOPS(a * s) break;
    case 6: LUCID_ARITH_LOOPS(a / s) break;
    default: LUCID_ARITH_LOOPS(s / a) break;
    }
}

static inline __attribute__((always_inline)) void add_scaled(const float *x, const float *y, float alpha, float *o,
                                                            ptrdiff_t n) {
    LUCID_ARITH_LOOPS(a + alpha * y[i])
}

static inline __attribute__((always_inline)) void log_softmax_backward(const float *restrict g, const float *restrict y,
                                                                      ptrdiff_t n, float total,
                                                                      float *restrict dx) {
    for (ptrdiff_t i = 0; i < n; i++) dx[i] = g[i] - fast_exp(y[i]) * total;
}

// Softmax over the n entries of each of `width` columns that lie `inner` apart (column j's
// entry c at x[c·inner + j]), of finite input: the loops run along the columns, so that they
// vectorise. softmax: exp(x - max) / Σexp(x - max); log: (x - max) - log Σexp(x - max).
// `m` and `s` hold `width` floats each.
static inline __attribute__((always_inline)) void softmax_columns(const float *restrict x, float *restrict out,
                                                                 ptrdiff_t n, ptrdiff_t inner, ptrdiff_t width,
                                                                 int log, float *restrict m, float *restrict s) {
    for (ptrdiff_t j = 0; j < width; j++) m[j] = x[j], s[j] = 0;
    for (ptrdiff_t c = 1; c < n; c++) {
        const float *v = x + c * inner;
        for (ptrdiff_t j = 0; j < width; j++) m[j] = v[j] > m[j] ? v[j] : m[j];
    }
    for (ptrdiff_t c = 0; c < n; c++) {
        const float *v = x + c * inner;
        for (ptrdiff_t j = 0; j < width; j++) s[j] += fast_exp(v[j] - m[j]);
    }
    if (log) {
        for (ptrdiff_t j = 0; j < width; j++) s[j] = logf(s[j]);
        for (ptrdiff_t c = 0; c < n; c++) {
            const float *v = x + c * inner;
            float *o = out + c * inner;
            for (ptrdiff_t j = 0; j < width; j++) o[j] = (v[j] - m[j]) - s[j];
        }
    } else {
        for (ptrdiff_t c = 0; c < n; c++) {
            const float *v = x + c * inner;
            float *o = out + c * inner;
            for (ptrdiff_t j = 0; j < width; j++) o[j] = fast_exp(v[j] - m[j]) / s[j];
        }
    }
}

// Softmax (log: log-softmax) of each of `rows` rows of n contiguous floats; `out` is `x` itself
// or lies apart from it (each value is read before it is written). The maximum and the sum
// run in 16 lanes, combined in one order, so every variant gives the same bits. A
// row holding a NaN, or only -inf, comes out all NaN; one holding +inf, NaN there and 0 (log:
// -inf) elsewhere, as the math gives it.
enum { SOFTMAX_LANES = 16 };
static inline __attribute__((always_inline)) void softmax_rows(const float *x, float *out, ptrdiff_t rows,
                                                              ptrdiff_t n, int log) {
    const ptrdiff_t body = n - n % SOFTMAX_LANES;
    for (ptrdiff_t r = 0; r < rows; r++) {
        const float *v = x + r * n;
        float *o = out + r * n;
        float lane_max[SOFTMAX_LANES], lane_sum[SOFTMAX_LANES];
        int32_t lane_nan[SOFTMAX_LANES];
        for (int l = 0; l < SOFTMAX_LANES; l++) lane_max[l] = -INFINITY, lane_nan[l] = 0, lane_sum[l] = 0;
        for (ptrdiff_t j = 0; j < body; j += SOFTMAX_LANES)
            for (int l = 0; l < SOFTMAX_LANES; l++) {
                float a = v[j + l];
                lane_max[l] = a > lane_max[l] ? a : lane_max[l];
                lane_nan[l] |= a != a;
            }
        float m = -INFINITY;
        int nan = 0;
        for (int l = 0; l < SOFTMAX_LANES; l++) m = lane_max[l] > m ? lane_max[l] : m, nan |= lane_nan[l];
        for (ptrdiff_t j = body; j < n; j++) m = v[j] > m ? v[j] : m, nan |= v[j] != v[j];
        if (nan || m == -INFINITY) {
            for (ptrdiff_t j = 0; j < n; j++) o[j] = NAN;
            continue;
        }
        if (m == INFINITY) {  // the limit: NaN at each +inf (inf - inf), 0 (log: -inf) elsewhere
            for (ptrdiff_t j = 0; j < n; j++) o[j] = v[j] == INFINITY ? NAN : log ? -INFINITY : 0.0f;
            continue;
        }
        // The exponentials of x - max, summed per lane: softmax keeps them in out (one plain
        // loop, as wide as the vector unit, then their sum); log-softmax only sums them.
        float total = 0;
        if (log) {
            for (ptrdiff_t j = 0; j < body; j += SOFTMAX_LANES)
                for (int l = 0; l < SOFTMAX_LANES; l++) lane_sum[l] += fast_exp(v[j + l] - m);
            for (int l = 0; l < SOFTMAX_LANES; l++) total += lane_sum[l];
            for (ptrdiff_t j = body; j < n; j++) total += fast_exp(v[j] - m);
            float log_total = logf(total);
            for (ptrdiff_t j = 0; j < n; j++) o[j] = (v[j] - m) - log_total;
        } else {
            for (ptrdiff_t j = 0; j < n; j++) o[j] = fast_exp(v[j] - m);
            for (ptrdiff_t j = 0; j < body; j += SOFTMAX_LANES)
                for (int l = 0; l < SOFTMAX_LANES; l++) lane_sum[l] += o[j + l];
            for (int l = 0; l < SOFTMAX_LANES; l++) total += lane_sum[l];
            for (ptrdiff_t j = body; j < n; j++) total += o[j];
            float inverse = 1 / total;
            for (ptrdiff_t j = 0; j < n; j++) o[j] = o[j] * inverse;
        }
    }
}

// Its backward from the output y, laid out alike: softmax dx = y·(g - Σg·y); log-softmax
// dx = g - exp(y)·Σg, each sum over a column. `total` holds `width` floats.
static inline __attribute__((always_inline)) void softmax_columns_backward(const float *restrict g,
                                                                          const float *restrict y,
                                                                          float *restrict dx, ptrdiff_t n,
                                                                          ptrdiff_t inner, ptrdiff_t width, int log,
                                                                          float *restrict total) {
    for (ptrdiff_t j = 0; j < width; j++) total[j] = 0;
    for (ptrdiff_t c = 0; c < n; c++) {
        const float *gc = g + c * inner, *yc = y + c * inner;
        if (log)
            for (ptrdiff_t j = 0; j < width; j++) total[j] += gc[j];
        else
            for (ptrdiff_t j = 0; j < width; j++) total[j] += gc[j] * yc[j];
    }
    for (ptrdiff_t c = 0; c < n; c++) {
        const float *gc = g + c * inner, *yc = y + c * inner;
        float *d = dx + c * inner;
        if (log)
            for (ptrdiff_t j = 0; j < width; j++) d[j] = gc[j] - fast_exp(yc[j]) * total[j];
        else
            for (ptrdiff_t j = 0; j < width; j++) d[j] = yc[j] * (gc[j] - total[j]);
    }
}

// Each kernel is stamped out for the baseline and, on x86-64, for AVX2 (with FMA) and AVX-512; the
// always-inline bodies above take the instructions of the function they land in.
#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
#define LUCID_VARIANTS(name, params, args)                                                  \
    static void name##_baseline params { name args; }                                      \
    __attribute__((target("avx2,fma"))) static void name##_avx2 params { name args; }      \
    __attribute__((target("avx512f,avx512bw"))) static void name##_avx512 params { name args; }
#define LUCID_DISPATCH(name, args)                                                          \
    switch (isa_level()) {                                                                 \
    case ISA_AVX512: name##_avx512 args; break;                                            \
    case ISA_AVX2: name##_avx2 args; break;                                                \
    default: name##_baseline args; break;                                                  \
    }

enum { ISA_BASELINE = 1, ISA_AVX2 = 2, ISA_AVX512 = 3 };

// The widest unit this CPU has, or a narrower one named by LUCID_HOST_ISA (baseline, avx2,
// avx512), which the tests use to run every variant on one machine. A race between first
// callers only stores the same value twice.
static int isa_level(void) {
    static int level;
    int l = __atomic_load_n(&level, __ATOMIC_RELAXED);
    if (l) return l;
    __builtin_cpu_init();
    l = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") ? ISA_AVX512
        : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")        ? ISA_AVX2
                                                                                 : ISA_BASELINE;
    const char *asked = getenv("LUCID_HOST_ISA");
    if (asked) {
        int want = strcmp(asked, "baseline") == 0 ? ISA_BASELINE
                   : strcmp(asked, "avx2") == 0   ? ISA_AVX2
                   : strcmp(asked, "avx512") == 0 ? ISA_AVX512
                                                  : l;
        if (want < l) l = want;
    }
    __atomic_store_n(&level, l, __ATOMIC_RELAXED);
    return l;
}
#else
#define LUCID_VARIANTS(name, params, args) static void name##_baseline params { name args; }
#define LUCID_DISPATCH(name, args) name##_baseline args;
#endif

// Whether any of `n` values has magnitude bits (sign cleared) above `limit`: with the limit
// just below the all-ones exponent, a NaN or an infinity; at it, a NaN. An `or` over every
// element, with no early exit, so that it vectorises.
static inline void above32(const uint32_t *bits, ptrdiff_t n, uint32_t limit, int *out) {
    uint32_t found = 0;
    for (ptrdiff_t i = 0; i < n; i++) found |= (bits[i] & 0x7fffffffu) > limit;
    *out = found != 0;
}

static inline void above16(const uint16_t *bits, ptrdiff_t n, uint16_t limit, int *out) {
    uint16_t found = 0;
    for (ptrdiff_t i = 0; i < n; i++) found |= (uint16_t)(bits[i] & 0x7fffu) > limit;
    *out = found != 0;
}

// Magnitude statistics of `n` floats given as bits, for autocast's inspection: the largest
// finite-or-infinite magnitude's bits, and how many magnitudes lie in each band that
// `lucid_host_cast_stats` documents. Integer comparisons of the magnitude bits, which order
// like the values (a NaN's sit above the infinity's), with no branch and 32-bit counts over
// runs of 4096, so that it vectorises; the runs' counts are added in 64 bits.
#define LUCID_CAST_STATS(name, T, MASK)                                                                \
    static inline void name(const T *bits, ptrdiff_t n, const uint32_t *limits, uint64_t *out) {      \
        const uint32_t inf = limits[0], o16 = limits[1], u16 = limits[2], obf = limits[3], ubf = limits[4]; \
        uint32_t top = 0;                                                                               \
        uint64_t total[6] = {0, 0, 0, 0, 0, 0};                                                         \
        for (ptrdiff_t start = 0; start < n; start += 4096) {                                           \
            const ptrdiff_t end = n - start < 4096 ? n : start + 4096;                                  \
            uint32_t c1 = 0, c2 = 0, c3 = 0, c4 = 0, c5 = 0, c6 = 0, run_top = 0;                       \
            for (ptrdiff_t i = start; i < end; i++) {                                                   \
                const uint32_t m = (uint32_t)bits[i] & MASK;                                            \
                const uint32_t kept = m <= inf ? m : 0;                                                 \
                run_top = kept > run_top ? kept : run_top;                                              \
                c1 += (m > o16) & (m < inf);                                                            \
                c2 += (m - 1u) < (u16 - 1u);  /* 0 < m < u16, as one unsigned comparison */             \
                c3 += (m > obf) & (m < inf);                                                            \
                c4 += (m - 1u) < (ubf - 1u);                                                            \
                c5 += (m - 1u) < inf;          /* 0 < m <= inf */                                       \
                c6 += m >= inf;                                                                         \
            }                                                                                           \
            top = run_top > top ? run_top : top;                                                        \
            total[0] += c1; total[1] += c2; total[2] += c3; total[3] += c4; total[4] += c5; total[5] += c6; \
        }                                                                                               \
        out[0] = top;                                                                                   \
        for (int k = 0; k < 6; k++) out[k + 1] = total[k];                                              \
    }

LUCID_CAST_STATS(cast_stats32, uint32_t, 0x7fffffffu)
LUCID_CAST_STATS(cast_stats16, uint16_t, 0x7fffu)

LUCID_VARIANTS(narrow, (const float *src, uint16_t *dst, ptrdiff_t n), (src, dst, n))
LUCID_VARIANTS(round_bf16, (float *x, ptrdiff_t n), (x, n))
LUCID_VARIANTS(widen, (const uint16_t *src, float *dst, ptrdiff_t n), (src, dst, n))
LUCID_VARIANTS(arith, (int op, const float *x, const float *y, float *o, ptrdiff_t n), (op, x, y, o, n))
LUCID_VARIANTS(arith_scalar, (int op, const float *x, float s, int first, float *o, ptrdiff_t n), (op, x, s, first, o, n))
LUCID_VARIANTS(add_scaled, (const float *x, const float *y, float alpha, float *o, ptrdiff_t n), (x, y, alpha, o, n))
LUCID_VARIANTS(log_softmax_backward, (const float *g, const float *y, ptrdiff_t n, float total, float *dx),
               (g, y, n, total, dx))
LUCID_VARIANTS(softmax_columns, (const float *x, float *out, ptrdiff_t n, ptrdiff_t inner, ptrdiff_t width, int log,
                                 float *m, float *s), (x, out, n, inner, width, log, m, s))
LUCID_VARIANTS(softmax_rows, (const float *x, float *out, ptrdiff_t rows, ptrdiff_t n, int log),
               (x, out, rows, n, log))
LUCID_VARIANTS(softmax_columns_backward, (const float *g, const float *y, float *dx, ptrdiff_t n, ptrdiff_t inner,
                                          ptrdiff_t width, int log, float *total), (g, y, dx, n, inner, width, log, total))
LUCID_VARIANTS(silu, (const float *x, float *o, ptrdiff_t n), (x, o, n))
LUCID_VARIANTS(sigmoid, (const float *x, float *o, ptrdiff_t n), (x, o, n))
LUCID_VARIANTS(adam, (float *p, const float *g, float *m, float *v, ptrdiff_t n, const float *k), (p, g, m, v, n, k))
LUCID_VARIANTS(product_rows, (const float *a, const float *b, const float *bias, float *out, ptrdiff_t m, ptrdiff_t n,
                              ptrdiff_t k), (a, b, bias, out, m, n, k))
LUCID_VARIANTS(lstm_cell, (const float *x, const float *y, const float *c, float *h, float *c_new, float *act,
                           ptrdiff_t batch, ptrdiff_t n), (x, y, c, h, c_new, act, batch, n))
LUCID_VARIANTS(lstm_cell_backward, (const float *act, const float *c, const float *gh, const float *gh_more,
                                    const float *gc, float *dg, float *dc, ptrdiff_t batch, ptrdiff_t n),
               (act, c, gh, gh_more, gc, dg, dc, batch, n))
LUCID_VARIANTS(lstm_cell_bf16, (const uint16_t *x, const uint16_t *y, const uint16_t *c, uint16_t *h, uint16_t *c_new,
                                float *act, ptrdiff_t batch, ptrdiff_t n), (x, y, c, h, c_new, act, batch, n))
LUCID_VARIANTS(lstm_cell_backward_bf16, (const float *act, const uint16_t *c, const uint16_t *gh, const uint16_t *gh_more,
                                         const uint16_t *gc, uint16_t *dg, uint16_t *dc, ptrdiff_t batch, ptrdiff_t n),
               (act, c, gh, gh_more, gc, dg, dc, batch, n))
LUCID_VARIANTS(rnn_cell, (const float *x, const float *y, float *h, ptrdiff_t count, int relu), (x, y, h, count, relu))
LUCID_VARIANTS(rnn_cell_backward, (const float *h, const float *gh, const float *gh_more, float *d, ptrdiff_t count,
                                   int relu), (h, gh, gh_more, d, count, relu))
LUCID_VARIANTS(rnn_cell_bf16, (const uint16_t *x, const uint16_t *y, uint16_t *h, ptrdiff_t count, int relu),
               (x, y, h, count, relu))
LUCID_VARIANTS(rnn_cell_backward_bf16, (const uint16_t *h, const uint16_t *gh, const uint16_t *gh_more, uint16_t *d,
                                        ptrdiff_t count, int relu), (h, gh, gh_more, d, count, relu))
LUCID_VARIANTS(gru_cell, (const float *x, const float *y, const float *h, float *h_new, float *act, ptrdiff_t batch,
                          ptrdiff_t n), (x, y, h, h_new, act, batch, n))
LUCID_VARIANTS(gru_cell_backward, (const float *act, const float *h, const float *gh, const float *gh_more,
                                   const float *gh_carry, float *dx, float *dy, float *dh, ptrdiff_t batch, ptrdiff_t n),
               (act, h, gh, gh_more, gh_carry, dx, dy, dh, batch, n))
LUCID_VARIANTS(gru_cell_bf16, (const uint16_t *x, const uint16_t *y, const uint16_t *h, uint16_t *h_new, float *act,
                               ptrdiff_t batch, ptrdiff_t n), (x, y, h, h_new, act, batch, n))
LUCID_VARIANTS(gru_cell_backward_bf16, (const float *act, const uint16_t *h, const uint16_t *gh, const uint16_t *gh_more,
                                        const uint16_t *gh_carry, uint16_t *dx, uint16_t *dy, uint16_t *dh,
                                        ptrdiff_t batch, ptrdiff_t n),
               (act, h, gh, gh_more, gh_carry, dx, dy, dh, batch, n))
LUCID_VARIANTS(tanh_, (const float *x, float *o, ptrdiff_t n), (x, o, n))
LUCID_VARIANTS(silu_backward, (const float *x, const float *g, float *o, ptrdiff_t n), (x, g, o, n))
LUCID_VARIANTS(gelu, (const float *x, float *o, ptrdiff_t n), (x, o, n))
LUCID_VARIANTS(gelu_backward, (const float *x, const float *g, float *o, ptrdiff_t n), (x, g, o, n))
LUCID_VARIANTS(gelu_tanh, (const float *x, float *o, ptrdiff_t n), (x, o, n))
LUCID_VARIANTS(gelu_tanh_backward, (const float *x, const float *g, float *o, ptrdiff_t n), (x, g, o, n))
LUCID_VARIANTS(cast_stats32, (const uint32_t *bits, ptrdiff_t n, const uint32_t *limits, uint64_t *out),
               (bits, n, limits, out))
LUCID_VARIANTS(cast_stats16, (const uint16_t *bits, ptrdiff_t n, const uint32_t *limits, uint64_t *out),
               (bits, n, limits, out))
LUCID_VARIANTS(above32, (const uint32_t *bits, ptrdiff_t n, uint32_t limit, int *out), (bits, n, limit, out))
LUCID_VARIANTS(above16, (const uint16_t *bits, ptrdiff_t n, uint16_t limit, int *out), (bits, n, limit, out))

const char *lucid_host_cpu_capability(void) {
#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
    switch (isa_level()) {
    case ISA_AVX512: return "AVX512";
    case ISA_AVX2: return "AVX2";
    default: return "DEFAULT";
    }
#else
    return "DEFAULT";
#endif
}

int lucid_host_native_bf16(void) {
#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
    return isa_level() == ISA_AVX512 && __builtin_cpu_supports("avx512bf16");
#else
    return 0;
#endif
}

void lucid_host_narrow_bf16(const float *src, uint16_t *dst, ptrdiff_t n) { LUCID_DISPATCH(narrow, (src, dst, n)) }
void lucid_host_round_bf16(float *x, ptrdiff_t n) { LUCID_DISPATCH(round_bf16, (x, n)) }
void lucid_host_widen_bf16(const uint16_t *src, float *dst, ptrdiff_t n) { LUCID_DISPATCH(widen, (src, dst, n)) }

void lucid_host_arith(int op, const float *x, const float *y, float *o, ptrdiff_t n) {
    LUCID_DISPATCH(arith, (op, x, y, o, n))
}

void lucid_host_arith_scalar(int op, const float *x, float s, int first, float *o, ptrdiff_t n) {
    LUCID_DISPATCH(arith_scalar, (op, x, s, first, o, n))
}

void lucid_host_add_scaled(const float *x, const float *y, float alpha, float *o, ptrdiff_t n) {
    LUCID_DISPATCH(add_scaled, (x, y, alpha, o, n))
}

void lucid_host_log_softmax_backward(const float *g, const float *y, ptrdiff_t n, float total, float *dx) {
    LUCID_DISPATCH(log_softmax_backward, (g, y, n, total, dx))
}

void lucid_host_softmax_rows(const float *x, float *out, ptrdiff_t rows, ptrdiff_t n, int log) {
    LUCID_DISPATCH(softmax_rows, (x, out, rows, n, log))
}

void lucid_host_softmax_columns(const float *x, float *out, ptrdiff_t n, ptrdiff_t inner, ptrdiff_t width, int log,
                                float *scratch) {
    LUCID_DISPATCH(softmax_columns, (x, out, n, inner, width, log, scratch, scratch + width))
}

void lucid_host_softmax_columns_backward(const float *g, const float *y, float *dx, ptrdiff_t n, ptrdiff_t inner,
                                         ptrdiff_t width, int log, float *scratch) {
    LUCID_DISPATCH(softmax_columns_backward, (g, y, dx, n, inner, width, log, scratch))
}

void lucid_host_silu(const float *x, float *o, ptrdiff_t n) { LUCID_DISPATCH(silu, (x, o, n)) }

void lucid_host_sigmoid(const float *x, float *o, ptrdiff_t n) { LUCID_DISPATCH(sigmoid, (x, o, n)) }

void lucid_host_tanh(const float *x, float *o, ptrdiff_t n) { LUCID_DISPATCH(tanh_, (x, o, n)) }

// The panels of the k x n matrix whose element (p, q) is at src[q * column + p * row].
static void pack_panels(const float *src, float *panels, ptrdiff_t n, ptrdiff_t k, ptrdiff_t column, ptrdiff_t row) {
    for (ptrdiff_t j = 0; j < n; j += 32) {
        const ptrdiff_t width = n - j < 32 ? n - j : 32;
        float *panel = panels + j * k;
        for (ptrdiff_t p = 0; p < k; p++)
            for (ptrdiff_t q = 0; q < width; q++) panel[p * width + q] = src[(j + q) * column + p * row];
    }
}

void lucid_host_pack_panels(const float *w, float *panels, ptrdiff_t n, ptrdiff_t k) { pack_panels(w, panels, n, k, k, 1); }

void lucid_host_pack_panels_plain(const float *b, float *panels, ptrdiff_t n, ptrdiff_t k) {
    pack_panels(b, panels, n, k, 1, n);
}

void lucid_host_product_rows(const float *a, const float *b, const float *bias, float *out, ptrdiff_t m, ptrdiff_t n,
                             ptrdiff_t k) {
    LUCID_DISPATCH(product_rows, (a, b, bias, out, m, n, k))
}

void lucid_host_lstm_cell(const float *x, const float *y, const float *c, float *h, float *c_new, float *act,
                          ptrdiff_t batch, ptrdiff_t n) {
    LUCID_DISPATCH(lstm_cell, (x, y, c, h, c_new, act, batch, n))
}

void lucid_host_lstm_cell_backward(const float *act, const float *c, const float *gh, const float *gh_more,
                                   const float *gc, float *dg, float *dc, ptrdiff_t batch, ptrdiff_t n) {
    LUCID_DISPATCH(lstm_cell_backward, (act, c, gh, gh_more, gc, dg, dc, batch, n))
}

void lucid_host_lstm_cell_bf16(const uint16_t *x, const uint16_t *y, const uint16_t *c, uint16_t *h, uint16_t *c_new,
                               float *act, ptrdiff_t batch, ptrdiff_t n) {
    LUCID_DISPATCH(lstm_cell_bf16, (x, y, c, h, c_new, act, batch, n))
}

void lucid_host_lstm_cell_backward_bf16(const float *act, const uint16_t *c, const uint16_t *gh, const uint16_t *gh_more,
                                        const uint16_t *gc, uint16_t *dg, uint16_t *dc, ptrdiff_t batch, ptrdiff_t n) {
    LUCID_DISPATCH(lstm_cell_backward_bf16, (act, c, gh, gh_more, gc, dg, dc, batch, n))
}

void lucid_host_rnn_cell(const float *x, const float *y, float *h, ptrdiff_t count, int relu) {
    LUCID_DISPATCH(rnn_cell, (x, y, h, count, relu))
}

void lucid_host_rnn_cell_backward(const float *h, const float *gh, const float *gh_more, float *d, ptrdiff_t count,
                                  int relu) {
    LUCID_DISPATCH(rnn_cell_backward, (h, gh, gh_more, d, count, relu))
}

void lucid_host_rnn_cell_bf16(const uint16_t *x, const uint16_t *y, uint16_t *h, ptrdiff_t count, int relu) {
    LUCID_DISPATCH(rnn_cell_bf16, (x, y, h, count, relu))
}

void lucid_host_rnn_cell_backward_bf16(const uint16_t *h, const uint16_t *gh, const uint16_t *gh_more, uint16_t *d,
                                       ptrdiff_t count, int relu) {
    LUCID_DISPATCH(rnn_cell_backward_bf16, (h, gh, gh_more, d, count, relu))
}

void lucid_host_gru_cell(const float *x, const float *y, const float *h, float *h_new, float *act, ptrdiff_t batch,
                         ptrdiff_t n) {
    LUCID_DISPATCH(gru_cell, (x, y, h, h_new, act, batch, n))
}

void lucid_host_gru_cell_backward(const float *act, const float *h, const float *gh, const float *gh_more,
                                  const float *gh_carry, float *dx, float *dy, float *dh, ptrdiff_t batch, ptrdiff_t n) {
    LUCID_DISPATCH(gru_cell_backward, (act, h, gh, gh_more, gh_carry, dx, dy, dh, batch, n))
}

void lucid_host_gru_cell_bf16(const uint16_t *x, const uint16_t *y, const uint16_t *h, uint16_t *h_new, float *act,
                              ptrdiff_t batch, ptrdiff_t n) {
    LUCID_DISPATCH(gru_cell_bf16, (x, y, h, h_new, act, batch, n))
}

void lucid_host_gru_cell_backward_bf16(const float *act, const uint16_t *h, const uint16_t *gh, const uint16_t *gh_more,
                                       const uint16_t *gh_carry, uint16_t *dx, uint16_t *dy, uint16_t *dh,
                                       ptrdiff_t batch, ptrdiff_t n) {
    LUCID_DISPATCH(gru_cell_backward_bf16, (act, h, gh, gh_more, gh_carry, dx, dy, dh, batch, n))
}

void lucid_host_adam(float *p, const float *g, float *m, float *v, ptrdiff_t n, const float *constants) {
    LUCID_DISPATCH(adam, (p, g, m, v, n, constants))
}

int lucid_host_any_above32(const uint32_t *bits, ptrdiff_t n, uint32_t limit) {
    int found;
    LUCID_DISPATCH(above32, (bits, n, limit, &found))
    return found;
}

int lucid_host_any_above16(const uint16_t *bits, ptrdiff_t n, uint16_t limit) {
    int found;
    LUCID_DISPATCH(above16, (bits, n, limit, &found))
    return found;
}

void lucid_host_cast_stats32(const uint32_t *bits, ptrdiff_t n, const uint32_t *limits, uint64_t *out) {
    LUCID_DISPATCH(cast_stats32, (bits, n, limits, out))
}

void lucid_host_cast_stats16(const uint16_t *bits, ptrdiff_t n, const uint32_t *limits, uint64_t *out) {
    LUCID_DISPATCH(cast_stats16, (bits, n, limits, out))
}

void lucid_host_silu_backward(const float *x, const float *g, float *o, ptrdiff_t n) {
    LUCID_DISPATCH(silu_backward, (x, g, o, n))
}

void lucid_host_gelu(const float *x, float *o, ptrdiff_t n) { LUCID_DISPATCH(gelu, (x, o, n)) }

void lucid_host_gelu_backward(const float *x, const float *g, float *o, ptrdiff_t n) {
    LUCID_DISPATCH(gelu_backward, (x, g, o, n))
}

void lucid_host_gelu_tanh(const float *x, float *o, ptrdiff_t n) { LUCID_DISPATCH(gelu_tanh, (x, o, n)) }

void lucid_host_gelu_tanh_backward(const float *x, const float *g, float *o, ptrdiff_t n) {
    LUCID_DISPATCH(gelu_tanh_backward, (x, g, o, n))
}

// ---- the OpenMP pool -------------------------------------------------------------------------

// GNU OpenMP's pool does not survive fork(): a child that starts a parallel region waits
// forever for threads that stayed in the parent. A forked child runs the engine's loops on
// the dispatch pool instead, and oneDNN on one thread (DNNL.swift).
static unsigned long forks;

static void after_fork_in_child(void) { forks += 1; }

__attribute__((constructor)) static void watch_forks(void) { pthread_atfork(0, 0, after_fork_in_child); }

unsigned long lucid_host_forks(void) { return forks; }

// ---- contention ------------------------------------------------------------------------------
// Two processes whose parallel regions each want every core (two experiments, a sweep, MPI
// ranks on a laptop) make each region's threads wait for one another across the scheduler's
// slices: a 1M-element add ran 3-4x slower each, where sharing the cores would cost 2x. A
// region tells it by the calling thread's CPU time over its wall time: about 1 when the thread
// ran throughout (working, claiming the parts a late thread has not, or spinning at the closing
// barrier), a half or less when the OS gave its core to another process or it slept at the
// barrier waiting for a thread the OS had not run. A 20 ms window of regions is contended when
// at least two in five of them were (a ratio under 0.6: a process alone has about one in a
// hundred, in bursts; two 1M adds at once half, two 256 matmuls all). Four contended windows in
// a row (80 ms or more) make the work run on the calling thread alone for a second, each
// process then on a core of its own; then the threads are tried again, and one contended
// window within a second of that restores the hold. A window, not a region, decides, and a
// first hold needs four, so that a daemon busy for a moment (a burst of tens of milliseconds
// is common on a shared machine) changes nothing; and the process's first half second of
// regions, which wait for the pool's threads to start and fault their pages in, is not judged.

static lucid_host_contention contention;  // fields atomic
static int64_t window_start_ns;  // atomic
static int64_t first_region_ns;  // atomic
static int window_regions, window_contended;  // atomic

static int64_t clock_ns(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

lucid_host_region lucid_host_region_begin(void) {
    lucid_host_region r = {clock_ns(CLOCK_MONOTONIC), clock_ns(CLOCK_THREAD_CPUTIME_ID)};
    return r;
}

void lucid_host_region_end(lucid_host_region start) {
    const int64_t shortest = 50000, settling = 500000000, window = 20000000;
    int64_t now = clock_ns(CLOCK_MONOTONIC);
    int64_t wall = now - start.wall_ns;
    if (wall < shortest) return;
    int64_t first = 0;  // the process's first region sets it
    if (__atomic_compare_exchange_n(&first_region_ns, &first, now, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)
        || now - first < settling) return;
    int64_t cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID) - start.cpu_ns;
    __atomic_add_fetch(&window_regions, 1, __ATOMIC_RELAXED);
    if (cpu * 10 < wall * 6) __atomic_add_fetch(&window_contended, 1, __ATOMIC_RELAXED);
    int64_t began = __atomic_load_n(&window_start_ns, __ATOMIC_RELAXED);
    if (began != 0 && now - began < window) return;
    // One thread closes the window (the one that moves its start).
    if (!__atomic_compare_exchange_n(&window_start_ns, &began, now, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return;
    int regions = __atomic_exchange_n(&window_regions, 0, __ATOMIC_RELAXED);
    int contended = __atomic_exchange_n(&window_contended, 0, __ATOMIC_RELAXED);
    if (began != 0) lucid_host_contention_judge(&contention, now, regions, contended);
}

void lucid_host_contention_judge(lucid_host_contention *state, int64_t now_ns, int regions, int contended) {
    const int64_t hold = 1000000000;
    if (contended < 4 || contended * 5 < regions * 2) {
        __atomic_store_n(&state->contended_windows, 0, __ATOMIC_RELAXED);
        return;
    }
    int streak = __atomic_add_fetch(&state->contended_windows, 1, __ATOMIC_RELAXED);
    int64_t until = __atomic_load_n(&state->solo_until_ns, __ATOMIC_RELAXED);
    if (streak >= 4 || (until != 0 && now_ns - until < hold))
        __atomic_store_n(&state->solo_until_ns, now_ns + hold, __ATOMIC_RELAXED);
}

int lucid_host_solo(void) {
    int64_t until = __atomic_load_n(&contention.solo_until_ns, __ATOMIC_RELAXED);
    return until != 0 && clock_ns(CLOCK_MONOTONIC) < until;
}

#if defined(__linux__)
// libgomp's own entry point, found in the copy already loaded (by oneDNN): GOMP_parallel is
// what GCC compiles `#pragma omp parallel` into.
typedef void (*gomp_parallel_fn)(void (*)(void *), void *, unsigned, unsigned);

static gomp_parallel_fn gomp_parallel;
static int resolved;  // 0: not yet, 1: found, -1: absent

static int resolve_gomp(void) {
    int state = __atomic_load_n(&resolved, __ATOMIC_ACQUIRE);
    if (state) return state;
    void *lib = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);  // never loads it
    gomp_parallel_fn p = lib ? (gomp_parallel_fn)dlsym(lib, "GOMP_parallel") : 0;
    if (p) {
        gomp_parallel = p;
        state = 1;
    } else {
        state = -1;
    }
    __atomic_store_n(&resolved, state, __ATOMIC_RELEASE);
    return state;
}

struct parallel_job {
    lucid_host_part_fn fn;
    void *context;
    ptrdiff_t parts;
    ptrdiff_t next;  // the next part to claim
};

static void run_parts(void *data) {
    struct parallel_job *job = data;
    // Each thread claims the next part until none is left, so that a thread the OS schedules
    // late (another process busy on the cores) finds its share done by the others instead of
    // making them wait for it to do it. (The team may also be smaller than asked: a nested
    // region runs on one thread.)
    for (ptrdiff_t part; (part = __atomic_fetch_add(&job->next, 1, __ATOMIC_RELAXED)) < job->parts;)
        job->fn(job->context, part);
}

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define LUCID_UNDER_TSAN 1
#endif
#endif

int lucid_host_parallel(ptrdiff_t parts, unsigned threads, void *context, lucid_host_part_fn fn) {
#ifdef LUCID_UNDER_TSAN
    // ThreadSanitizer cannot see libgomp's (uninstrumented) barriers, so it would call every
    // loop a race: its runs use the dispatch pool.
    (void)parts, (void)threads, (void)context, (void)fn;
    return 0;
#else
    if (forks || resolve_gomp() != 1) return 0;
    if (threads > 1 && lucid_host_solo()) {
        for (ptrdiff_t part = 0; part < parts; ++part) fn(context, part);
        return 1;
    }
    lucid_host_region region = lucid_host_region_begin();
    struct parallel_job job = {fn, context, parts, 0};
    gomp_parallel(run_parts, &job, threads, 0);
    lucid_host_region_end(region);
    return 1;
#endif
}
#else
int lucid_host_parallel(ptrdiff_t parts, unsigned threads, void *context, lucid_host_part_fn fn) {
    (void)parts, (void)threads, (void)context, (void)fn;
    return 0;
}
#endif
