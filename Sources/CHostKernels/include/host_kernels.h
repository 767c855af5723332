// Host loops that need instructions beyond the baseline the engine is compiled for. Each
// entry point picks, once per process, the widest vector unit this CPU has (or a narrower
// one named by LUCID_HOST_ISA: baseline, avx2 or avx512); the results are the same on every
// path.
#ifndef LUCID_HOST_KERNELS_H
#define LUCID_HOST_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// `n` floats rounded to bfloat16 bits: to nearest, ties to even, subnormals kept; a NaN
/// becomes the quiet NaN 0x7fc0 with its sign (ml_dtypes' rule).
void lucid_host_narrow_bf16(const float *src, uint16_t *dst, ptrdiff_t n);
/// `n` floats rounded in place to bfloat16 values (lucid_host_narrow_bf16's rounding, widened
/// back); `n` bfloat16 bits widened exactly to floats.
void lucid_host_round_bf16(float *x, ptrdiff_t n);
void lucid_host_widen_bf16(const uint16_t *src, float *dst, ptrdiff_t n);
/// Whether this CPU multiplies bfloat16 in its vector unit (x86's AVX512_BF16, at the
/// AVX-512 level), so that bfloat16 kernels (oneDNN's) run natively instead of converting to
/// float32 inside.
int lucid_host_native_bf16(void);

/// o[i] = x[i] op y[i] over `n` floats, op 0 add, 1 sub, 2 mul, 3 div; o may be x or y.
void lucid_host_arith(int op, const float *x, const float *y, float *o, ptrdiff_t n);
/// o[i] = x[i] op s, or s op x[i] when `first` is not 0 (op as lucid_host_arith); o may be x.
void lucid_host_arith_scalar(int op, const float *x, float s, int first, float *o, ptrdiff_t n);
/// o[i] = x[i] + alpha·y[i], unfused; o may be x or y.
void lucid_host_add_scaled(const float *x, const float *y, float alpha, float *o, ptrdiff_t n);

/// One row of the log-softmax backward: dx[i] = g[i] - exp(y[i])·total, where y holds the
/// row's log-probabilities and total is Σg over the row. exp is the engine's FastMath.exp,
/// bit for bit.
void lucid_host_log_softmax_backward(const float *g, const float *y, ptrdiff_t n, float total, float *dx);

/// Softmax (log != 0: log-softmax) of each of `rows` rows of n contiguous floats, into `out`
/// (x itself, or apart from it). A row holding a NaN, or only -inf, comes out all NaN; one
/// holding +inf, NaN there and 0 (log: -inf) elsewhere.
/// exp is the engine's FastMath.exp; the same bits from every variant.
void lucid_host_softmax_rows(const float *x, float *out, ptrdiff_t rows, ptrdiff_t n, int log);

/// Softmax (log != 0: log-softmax) over the n entries of each of `width` columns `inner`
/// apart (column j's entry c at x[c·inner + j]), of finite input, and its backward from the
/// output y (softmax dx = y·(g - Σg·y), log-softmax dx = g - exp(y)·Σg). exp is the engine's
/// FastMath.exp; `scratch` holds 2·width floats (the backward: width).
void lucid_host_softmax_columns(const float *x, float *out, ptrdiff_t n, ptrdiff_t inner, ptrdiff_t width, int log,
                                float *scratch);
void lucid_host_softmax_columns_backward(const float *g, const float *y, float *dx, ptrdiff_t n, ptrdiff_t inner,
                                         ptrdiff_t width, int log, float *scratch);

/// SiLU, x·sigmoid(x), and its gradient g·s·(1 + x·(1 - s)) with s = sigmoid(x), on `n`
/// floats; sigmoid is the engine's FastMath.sigmoid, bit for bit.
void lucid_host_silu(const float *x, float *o, ptrdiff_t n);
/* FastMath.sigmoid and FastMath.tanh over n floats, bit for bit (o may be x, but vectorised only when the two are apart). */
void lucid_host_sigmoid(const float *x, float *o, ptrdiff_t n);
void lucid_host_tanh(const float *x, float *o, ptrdiff_t n);
/* The fused LSTM cell over float32 rows and its backward (separate buffers; gh_more, and one
 * of gh and gc, may be NULL), bit for bit the engine's generic loops (Host+RecurrentCell.swift). */
void lucid_host_lstm_cell(const float *x, const float *y, const float *c, float *h, float *c_new, float *act,
                          ptrdiff_t batch, ptrdiff_t n);
void lucid_host_lstm_cell_backward(const float *act, const float *c, const float *gh, const float *gh_more,
                                   const float *gc, float *dg, float *dc, ptrdiff_t batch, ptrdiff_t n);
/* The same over bfloat16 bits, computed in float32 and rounded once per result. */
void lucid_host_lstm_cell_bf16(const uint16_t *x, const uint16_t *y, const uint16_t *c, uint16_t *h, uint16_t *c_new,
                               float *act, ptrdiff_t batch, ptrdiff_t n);
void lucid_host_lstm_cell_backward_bf16(const float *act, const uint16_t *c, const uint16_t *gh, const uint16_t *gh_more,
                                        const uint16_t *gc, uint16_t *dg, uint16_t *dc, ptrdiff_t batch, ptrdiff_t n);
/* The panels of b = wᵀ for lucid_host_product_rows, from w [n, k] (so that out = a · wᵀ):
 * n·k floats. */
void lucid_host_pack_panels(const float *w, float *panels, ptrdiff_t n, ptrdiff_t k);
/* The same from b [k, n] itself (so that out = a · b). */
void lucid_host_pack_panels_plain(const float *b, float *panels, ptrdiff_t n, ptrdiff_t k);
/* out[m, n] = a[m, k] · b[k, n] (+ bias[n] when given), rows of a and out apart by k and n, with
 * b packed in panels of 32 columns (the last one narrower): the panel of columns j..<j + w
 * starts at b + j·k and holds its k rows of w values one after another
 * (lucid_host_pack_panels). Each value is summed over k in order from the bias (or 0), one
 * fused multiply-add a term (the C library's where the vector unit has none), so that it has
 * the same bits in every variant and whichever rows a call is given. */
void lucid_host_product_rows(const float *a, const float *b, const float *bias, float *out, ptrdiff_t m, ptrdiff_t n,
                             ptrdiff_t k);
/* The fused Elman cell (tanh, or ReLU when relu != 0) over count float32 elements and its
 * backward from the output (gh_more may be NULL), bit for bit the engine's generic loops. */
void lucid_host_rnn_cell(const float *x, const float *y, float *h, ptrdiff_t count, int relu);
void lucid_host_rnn_cell_backward(const float *h, const float *gh, const float *gh_more, float *d, ptrdiff_t count,
                                  int relu);
/* The same over bfloat16 bits, computed in float32 and rounded once per result. */
void lucid_host_rnn_cell_bf16(const uint16_t *x, const uint16_t *y, uint16_t *h, ptrdiff_t count, int relu);
void lucid_host_rnn_cell_backward_bf16(const uint16_t *h, const uint16_t *gh, const uint16_t *gh_more, uint16_t *d,
                                       ptrdiff_t count, int relu);
/* The fused GRU cell over float32 rows and its backward (separate buffers; gh_more and gh_carry
 * may be NULL), bit for bit the engine's generic loops (Host+RecurrentCell.swift). */
void lucid_host_gru_cell(const float *x, const float *y, const float *h, float *h_new, float *act, ptrdiff_t batch,
                         ptrdiff_t n);
void lucid_host_gru_cell_backward(const float *act, const float *h, const float *gh, const float *gh_more,
                                  const float *gh_carry, float *dx, float *dy, float *dh, ptrdiff_t batch, ptrdiff_t n);
/* The same over bfloat16 bits, computed in float32 and rounded once per result. */
void lucid_host_gru_cell_bf16(const uint16_t *x, const uint16_t *y, const uint16_t *h, uint16_t *h_new, float *act,
                              ptrdiff_t batch, ptrdiff_t n);
void lucid_host_gru_cell_backward_bf16(const float *act, const uint16_t *h, const uint16_t *gh, const uint16_t *gh_more,
                                       const uint16_t *gh_carry, uint16_t *dx, uint16_t *dy, uint16_t *dh,
                                       ptrdiff_t batch, ptrdiff_t n);
/* One Adam update of n float32 parameters, gradients and moments (four separate buffers), in
 * place, as the engine's AdamKernel computes it; constants: step size, sqrt(bc2), sign,
 * coupled decay, shrink, beta1, beta2, eps. */
void lucid_host_adam(float *p, const float *g, float *m, float *v, ptrdiff_t n, const float *constants);
void lucid_host_silu_backward(const float *x, const float *g, float *o, ptrdiff_t n);
/* The exact GELU, x·Φ(x), and its gradient g·(Φ(x) + x·φ(x)), on n floats: the engine's
 * FastMath.gelu and FastMath.geluDerivative, bit for bit. */
void lucid_host_gelu(const float *x, float *o, ptrdiff_t n);
void lucid_host_gelu_backward(const float *x, const float *g, float *o, ptrdiff_t n);
/* GELU's tanh form, x·σ(2u) with u = √(2/π)·(x + 0.044715·x³) (that is, x·(1 + tanh u)/2),
 * and its gradient, on n floats: the engine's generic float32 kernel (UnaryKernel's
 * geluTanh), bit for bit. */
void lucid_host_gelu_tanh(const float *x, float *o, ptrdiff_t n);
void lucid_host_gelu_tanh_backward(const float *x, const float *g, float *o, ptrdiff_t n);

/// Whether any of `n` 32-bit (16-bit) floats, given as bits, has a magnitude (the bits with
/// the sign cleared) above `limit`: 0x7f7fffff finds NaNs and infinities in float32,
/// 0x7f800000 NaNs alone (0x7bff / 0x7c00 for float16, 0x7f7f / 0x7f80 for bfloat16).
int lucid_host_any_above32(const uint32_t *bits, ptrdiff_t n, uint32_t limit);
int lucid_host_any_above16(const uint16_t *bits, ptrdiff_t n, uint16_t limit);

/// Magnitude statistics of `n` floats given as bits (32-bit: float32; 16-bit: float16 or
/// bfloat16), for autocast's inspection. `limits` are magnitude bits in the same format: the
/// infinity, then the largest magnitudes that do not overflow float16 and bfloat16 and the
/// smallest normal ones of each, in the order o16, u16, obf, ubf. out[0] = the largest
/// magnitude's bits among values that are not NaN; out[1..6] = how many finite values are above
/// o16; are non-zero and below u16; are finite and above obf; are non-zero and below ubf; are
/// non-zero and not NaN; are infinite or NaN.
void lucid_host_cast_stats32(const uint32_t *bits, ptrdiff_t n, const uint32_t *limits, uint64_t *out);
void lucid_host_cast_stats16(const uint16_t *bits, ptrdiff_t n, const uint32_t *limits, uint64_t *out);

/// The vector unit these kernels run on, by PyTorch's names: "AVX512", "AVX2" or "DEFAULT".
const char *lucid_host_cpu_capability(void);

/// A part of a parallel loop: `part` of the parts `lucid_host_parallel` was given.
typedef void (*lucid_host_part_fn)(void *context, ptrdiff_t part);

/// Runs `fn(context, 0..<parts)` on up to `threads` threads of the GNU OpenMP pool that
/// oneDNN already uses, when that runtime is loaded in the process, and returns 1; returns 0
/// (running nothing) when it is not. One pool for oneDNN and the engine's own loops means no
/// idle thread of one spins on a core the other needs.
int lucid_host_parallel(ptrdiff_t parts, unsigned threads, void *context, lucid_host_part_fn fn);

/// A parallel region's start, for telling whether another process kept its cores busy.
typedef struct { int64_t wall_ns, cpu_ns; } lucid_host_region;

/// The clocks at a region's start: wall time, and the calling thread's CPU time.
lucid_host_region lucid_host_region_begin(void);

/// Judges a parallel region that started at `start`: when, over 50 µs or more, the calling
/// thread ran for less than 60 % of the wall time, the OS gave the cores to another process.
/// The regions are judged together in windows of 20 ms (`lucid_host_contention_judge`).
void lucid_host_region_end(lucid_host_region start);

/// Whether parallel work should run on the calling thread alone for now: another process
/// keeps the cores busy, and a team's threads would wait for each other across scheduler
/// slices. The engine's loops, and oneDNN, then use one thread; they try their threads again
/// when the hold (a second) ends.
int lucid_host_solo(void);

/// The detector's state: the end of the hold (CLOCK_MONOTONIC ns; 0: none yet), and how many
/// contended windows came in a row.
typedef struct { int64_t solo_until_ns; int contended_windows; } lucid_host_contention;

/// Judges a window of `regions` regions that closed at `now_ns`, `contended` of them
/// contended. The window is contended when at least four and two in five of its regions were.
/// Four contended windows in a row start a hold of a second; one within a second of a hold's
/// end renews it. The engine calls it on its own state; it is public for tests.
void lucid_host_contention_judge(lucid_host_contention *state, int64_t now_ns, int regions, int contended);

/// How many fork()s this process descends from since the engine was loaded: 0 in the process
/// that loaded it, 1 in its forked children, and so on. GNU OpenMP's pool does not survive a
/// fork, so a child must run oneDNN on one thread, with primitives built there.
unsigned long lucid_host_forks(void);

/* A storage's counters: its version, bumped by every in-place write and read when a saved
 * tensor is checked in backward, and its buffer's writes and aliases. Relaxed atomics: the
 * counters order nothing else. */
static inline int64_t lucid_counter_bump(int64_t *counter) {
    return __atomic_add_fetch(counter, 1, __ATOMIC_RELAXED);
}
static inline void lucid_counter_add(int64_t *counter, int64_t delta) {
    __atomic_add_fetch(counter, delta, __ATOMIC_RELAXED);
}
static inline int64_t lucid_counter_load(const int64_t *counter) {
    return __atomic_load_n(counter, __ATOMIC_RELAXED);
}

/* Byte counts of allocated memory: the count after adding `delta`, a peak raised to `value`
 * when below it, and a count set outright. Relaxed, as above. */
static inline int64_t lucid_counter_add_fetch(int64_t *counter, int64_t delta) {
    return __atomic_add_fetch(counter, delta, __ATOMIC_RELAXED);
}
static inline void lucid_counter_raise(int64_t *counter, int64_t value) {
    int64_t seen = __atomic_load_n(counter, __ATOMIC_RELAXED);
    while (seen < value &&
           !__atomic_compare_exchange_n(counter, &seen, value, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}
static inline void lucid_counter_store(int64_t *counter, int64_t value) {
    __atomic_store_n(counter, value, __ATOMIC_RELAXED);
}

#ifdef __cplusplus
}
#endif

#endif
