/*
 * abi_user.c — calls liblucid the way a C program would, using only what include/lucid.h
 * documents, and checks every result against the header or a plain-C reference.
 *
 * Any failed check prints file:line, the call, the status and lucid_last_error() to stderr and
 * exits 1. On success it prints "abi_user: N checks passed", N being the checks executed.
 */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lucid.h"

/* ---- checking ------------------------------------------------------------------------- */

static atomic_long checks_run;

/* What the failing thread was doing: the helpers' own file:line says little on its own. */
static _Thread_local const char *section = "setup";

static const char *status_name(int32_t s) {
    switch (s) {
    case LUCID_OK: return "LUCID_OK";
    case LUCID_ERR_VALUE: return "LUCID_ERR_VALUE";
    case LUCID_ERR_TYPE: return "LUCID_ERR_TYPE";
    case LUCID_ERR_INDEX: return "LUCID_ERR_INDEX";
    case LUCID_ERR_RUNTIME: return "LUCID_ERR_RUNTIME";
    case LUCID_ERR_HANDLE: return "LUCID_ERR_HANDLE";
    case LUCID_ERR_THREAD: return "LUCID_ERR_THREAD";
    default: return "not a documented status";
    }
}

static void fail_status(const char *file, int line, const char *call, int32_t got, int32_t want) {
    const char *msg = lucid_last_error();
    fprintf(stderr, "%s:%d [%s]: %s\n    returned %d (%s), expected %d (%s)\n    lucid_last_error(): %s\n", file, line,
            section, call, (int)got, status_name(got), (int)want, status_name(want), msg ? msg : "(null)");
    exit(1);
}

static void fail_message(const char *file, int line, const char *call, const char *why) {
    const char *msg = lucid_last_error();
    fprintf(stderr, "%s:%d [%s]: %s\n    %s\n    lucid_last_error(): %s\n", file, line, section, call, why,
            msg ? msg : "(null)");
    exit(1);
}

/* The last line of a failed EXPECT, after its own description. */
static void fail_expect(void) {
    const char *msg = lucid_last_error();
    fprintf(stderr, "\n    lucid_last_error() (this thread's latest failure): %s\n", msg ? msg : "(null)");
    exit(1);
}

/* A call that must return `want`; a failure must also leave a message for this thread. */
#define CHECK_STATUS(want, call)                                                                \
    do {                                                                                        \
        int32_t st_ = (call);                                                                   \
        atomic_fetch_add(&checks_run, 1);                                                       \
        if (st_ != (want)) fail_status(__FILE__, __LINE__, #call, st_, (want));                 \
        if (st_ != LUCID_OK && (lucid_last_error() == NULL || lucid_last_error()[0] == '\0'))   \
            fail_message(__FILE__, __LINE__, #call, "failed without a lucid_last_error message"); \
    } while (0)
#define CHECK(call) CHECK_STATUS(LUCID_OK, call)

/* An op that writes its result's record to REC; the result's handle goes to `var`. The record
 * starts with var's value as its handle, so a failing call (which must write nothing) leaves
 * `var` as it was. */
#define CHECK_OP_STATUS(want, var, call)                                                        \
    do {                                                                                        \
        int64_t REC[LUCID_RECORD_LEN];                                                          \
        REC[LUCID_RECORD_HANDLE] = (int64_t)(var);                                              \
        CHECK_STATUS(want, call);                                                               \
        (var) = (lucid_tensor)REC[LUCID_RECORD_HANDLE];                                         \
    } while (0)
#define CHECK_OP(var, call) CHECK_OP_STATUS(LUCID_OK, var, call)

/* A condition on results; the format arguments describe what was seen. */
#define EXPECT(cond, ...)                                                           \
    do {                                                                            \
        atomic_fetch_add(&checks_run, 1);                                           \
        if (!(cond)) {                                                              \
            fprintf(stderr, "%s:%d [%s]: EXPECT(%s)\n    ", __FILE__, __LINE__, section, #cond); \
            fprintf(stderr, __VA_ARGS__);                                           \
            fail_expect();                                                          \
        }                                                                           \
    } while (0)

/* Out-pointers are written only on success: failing calls must leave this value in place. */
#define UNTOUCHED ((lucid_tensor)0x5eed5eedu)

static int first_mismatch(const float *got, const double *want, int n, double rtol, double atol) {
    for (int i = 0; i < n; i++) {
        if (!(fabs((double)got[i] - want[i]) <= atol + rtol * fabs(want[i]))) return i;
    }
    return -1;
}

#define EXPECT_CLOSE(got, want, n, rtol, atol)                                                  \
    do {                                                                                        \
        int i_ = first_mismatch((got), (want), (n), (rtol), (atol));                            \
        EXPECT(i_ < 0, "element %d: got %.8g, want %.8g", i_, (double)(got)[i_], (want)[i_]);  \
    } while (0)

/* ---- small helpers ---------------------------------------------------------------------- */

static lucid_tensor from_floats(const float *data, const int64_t *shape, int32_t ndim, int32_t device) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    lucid_tensor t = 0;
    CHECK_OP(t, lucid_tensor_from_host(data, n * (int64_t)sizeof(float), shape, ndim, LUCID_FLOAT32, device, REC));
    EXPECT(t != 0, "from_host wrote the null handle");
    return t;
}

static int32_t dtype_of(lucid_tensor t) {
    int32_t dtype = -9, device = -9, ndim = -9, rg = -9;
    CHECK(lucid_tensor_meta(t, &dtype, &device, &ndim, &rg));
    return dtype;
}

static float bf16_to_float(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The values of a float32 or bfloat16 tensor of n elements, as float. */
static void read_floats(lucid_tensor t, float *out, int n) {
    int32_t dtype = dtype_of(t);
    if (dtype == LUCID_BFLOAT16) {
        uint16_t raw[64];
        EXPECT(n <= 64, "read_floats: %d elements is more than the buffer holds", n);
        CHECK(lucid_tensor_to_host(t, raw, (int64_t)n * 2));
        for (int i = 0; i < n; i++) out[i] = bf16_to_float(raw[i]);
    } else {
        EXPECT(dtype == LUCID_FLOAT32, "read_floats: unexpected dtype %d", (int)dtype);
        CHECK(lucid_tensor_to_host(t, out, (int64_t)n * (int64_t)sizeof(float)));
    }
}

static void release(lucid_tensor t) { CHECK(lucid_tensor_release(t)); }

static int64_t live_tensors(void) {
    int64_t n = -1;
    CHECK(lucid_live_tensors(&n));
    return n;
}

static int64_t live_guards(void) {
    int64_t n = -1;
    CHECK(lucid_autocast_live_guards(&n));
    return n;
}

static int32_t is_enabled(int32_t device) {
    int32_t v = -9;
    CHECK(lucid_autocast_is_enabled(device, &v));
    return v;
}

static int32_t get_dtype(int32_t device) {
    int32_t v = -9;
    CHECK(lucid_autocast_get_dtype(device, &v));
    return v;
}

static void expect_autocast(int32_t device, int32_t enabled, int32_t dtype, const char *when) {
    int32_t e = is_enabled(device), d = get_dtype(device);
    EXPECT(e == enabled, "%s: is_enabled(%d) = %d, want %d", when, (int)device, (int)e, (int)enabled);
    EXPECT(d == dtype, "%s: get_dtype(%d) = %d, want %d", when, (int)device, (int)d, (int)dtype);
}

static void matmul_ref(const double *a, const double *b, double *c, int m, int k, int n) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int p = 0; p < k; p++) s += a[i * k + p] * b[p * n + j];
            c[i * n + j] = s;
        }
}

static void widen(const float *src, double *dst, int n) {
    for (int i = 0; i < n; i++) dst[i] = src[i];
}

/* ---- the warning handler ---------------------------------------------------------------- */

static char notice_text[1024];
static atomic_int notices;
static pthread_t notice_thread;

static void on_notice(const char *message) {
    if (atomic_fetch_add(&notices, 1) == 0) {
        snprintf(notice_text, sizeof notice_text, "%s", message ? message : "(null)");
        notice_thread = pthread_self();
    }
}

/* ---- sections --------------------------------------------------------------------------- */

static const float A_DATA[6] = {0.5f, -1.0f, 1.5f, 2.0f, -0.25f, 0.75f};
static const float B_DATA[6] = {1.0f, 0.5f, -2.0f, 0.25f, 1.5f, -1.0f};
static const float W_DATA[12] = {0.1f, -0.2f, 0.3f, 0.4f, 0.5f, -0.6f, 0.7f, 0.8f, -0.9f, 1.0f, 1.1f, -1.2f};

/* The notice is sent once per process when device 1 is first used, so the handler goes in first. */
static void test_warning_handler(void) {
    section = "warning handler";
    int32_t metal = -1;
    CHECK(lucid_metal_is_available(&metal));
    EXPECT(metal == 0 || metal == 1, "lucid_metal_is_available wrote %d", (int)metal);
    CHECK(lucid_set_warning_handler(on_notice));

    int64_t shape[2] = {2, 3};
    lucid_tensor m = from_floats(A_DATA, shape, 2, LUCID_METAL);
    if (metal == 0) {
        EXPECT(atomic_load(&notices) == 1, "first use of device 1 sent %d notices, want 1", atomic_load(&notices));
        EXPECT(strstr(notice_text, "metal") != NULL, "notice does not mention metal: %s", notice_text);
        EXPECT(pthread_equal(notice_thread, pthread_self()), "the notice arrived on another thread");
    } else {
        EXPECT(atomic_load(&notices) == 0, "Metal is available yet %d notices were sent", atomic_load(&notices));
    }

    /* One-time: more work on device 1 sends nothing further. */
    lucid_tensor sq = 0, back = 0;
    CHECK_OP(sq, lucid_binary(LUCID_MUL, m, m, REC));
    CHECK_OP(back, lucid_tensor_to(sq, -1, LUCID_CPU, REC));
    float got[6];
    double want[6];
    for (int i = 0; i < 6; i++) want[i] = (double)A_DATA[i] * A_DATA[i];
    read_floats(back, got, 6);
    EXPECT_CLOSE(got, want, 6, 1e-6, 0);
    EXPECT(atomic_load(&notices) == (metal == 0 ? 1 : 0), "%d notices after further use of device 1",
           atomic_load(&notices));
    release(back);
    release(sq);
    release(m);
    CHECK(lucid_set_warning_handler(NULL));
}

static void test_tensors_and_ops(void) {
    section = "tensors and ops";
    int64_t s23[2] = {2, 3}, s34[2] = {3, 4};
    lucid_tensor a = from_floats(A_DATA, s23, 2, LUCID_CPU);
    lucid_tensor b = from_floats(B_DATA, s23, 2, LUCID_CPU);
    lucid_tensor w = from_floats(W_DATA, s34, 2, LUCID_CPU);

    /* Metadata and a bit-exact round trip. */
    int32_t dtype = -9, device = -9, ndim = -9, rg = -9;
    CHECK(lucid_tensor_meta(a, &dtype, &device, &ndim, &rg));
    EXPECT(dtype == LUCID_FLOAT32 && device == LUCID_CPU && ndim == 2 && rg == 0, "meta %d %d %d %d", (int)dtype,
           (int)device, (int)ndim, (int)rg);
    int64_t shape[4] = {0}, strides[4] = {0};
    CHECK(lucid_tensor_shape(a, shape, strides, 4));
    EXPECT(shape[0] == 2 && shape[1] == 3 && strides[0] == 3 && strides[1] == 1,
           "shape [%" PRId64 ", %" PRId64 "] strides [%" PRId64 ", %" PRId64 "]", shape[0], shape[1], strides[0],
           strides[1]);
    CHECK(lucid_tensor_shape(a, shape, NULL, 2)); /* strides are optional */
    float round[6];
    CHECK(lucid_tensor_to_host(a, round, sizeof round));
    EXPECT(memcmp(round, A_DATA, sizeof round) == 0, "to_host does not return the bytes from_host was given");

    /* D = tanh((a + b) * (a - b)); M = D @ w. */
    lucid_tensor sum = 0, diff = 0, prod = 0, th = 0, m = 0;
    CHECK_OP(sum, lucid_binary(LUCID_ADD, a, b, REC));
    CHECK_OP(diff, lucid_binary(LUCID_SUB, a, b, REC));
    CHECK_OP(prod, lucid_binary(LUCID_MUL, sum, diff, REC));
    CHECK_OP(th, lucid_unary(LUCID_TANH, prod, REC));
    CHECK_OP(m, lucid_matmul(th, w, REC));

    double d_ref[6], w_ref[12], m_ref[8];
    for (int i = 0; i < 6; i++) {
        double x = A_DATA[i], y = B_DATA[i];
        d_ref[i] = tanh((x + y) * (x - y));
    }
    widen(W_DATA, w_ref, 12);
    matmul_ref(d_ref, w_ref, m_ref, 2, 3, 4);

    float got[8];
    read_floats(th, got, 6);
    EXPECT_CLOSE(got, d_ref, 6, 1e-5, 1e-6);
    read_floats(m, got, 8);
    EXPECT_CLOSE(got, m_ref, 8, 1e-5, 1e-6);
    CHECK(lucid_tensor_shape(m, shape, strides, 4));
    EXPECT(shape[0] == 2 && shape[1] == 4, "matmul shape [%" PRId64 ", %" PRId64 "]", shape[0], shape[1]);

    /* A transpose is a strided view; a copying reshape of it reads it row-major. */
    lucid_tensor t = 0, t_flat = 0, m_flat = 0, t_view = UNTOUCHED;
    CHECK_OP(t, lucid_transpose(m, 0, 1, REC));
    CHECK(lucid_tensor_shape(t, shape, strides, 4));
    EXPECT(shape[0] == 4 && shape[1] == 2 && strides[0] == 1 && strides[1] == 4,
           "transpose: shape [%" PRId64 ", %" PRId64 "] strides [%" PRId64 ", %" PRId64 "]", shape[0], shape[1],
           strides[0], strides[1]);
    double t_ref[8];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++) t_ref[i * 2 + j] = m_ref[j * 4 + i];
    read_floats(t, got, 8);
    EXPECT_CLOSE(got, t_ref, 8, 1e-5, 1e-6);
    int64_t flat[1] = {-1};
    CHECK_OP_STATUS(LUCID_ERR_RUNTIME, t_view, lucid_reshape(t, flat, 1, 1, REC)); /* view_only: needs a copy */
    EXPECT(t_view == UNTOUCHED, "a failed reshape wrote its out-pointer");
    CHECK_OP(t_flat, lucid_reshape(t, flat, 1, 0, REC));
    read_floats(t_flat, got, 8);
    EXPECT_CLOSE(got, t_ref, 8, 1e-5, 1e-6);
    CHECK_OP(m_flat, lucid_reshape(m, flat, 1, 1, REC));
    CHECK(lucid_tensor_shape(m_flat, shape, strides, 4));
    EXPECT(shape[0] == 8 && strides[0] == 1, "view: shape [%" PRId64 "] strides [%" PRId64 "]", shape[0], strides[0]);

    /* Reductions: sum over dim 1, mean of everything (0-d), amax over dim 0 of the transpose. */
    lucid_tensor rsum = 0, rmean = 0, rmax = 0;
    int64_t dim1[1] = {1}, dim0[1] = {0};
    CHECK_OP(rsum, lucid_reduce(LUCID_SUM, m, dim1, 1, 0, REC));
    CHECK_OP(rmean, lucid_reduce(LUCID_MEAN, m, NULL, -1, 0, REC));
    CHECK_OP(rmax, lucid_reduce(LUCID_AMAX, t, dim0, 1, 1, REC));
    double sum_ref[2] = {0, 0}, mean_ref[1] = {0}, max_ref[2] = {-INFINITY, -INFINITY};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++) {
            sum_ref[i] += m_ref[i * 4 + j];
            mean_ref[0] += m_ref[i * 4 + j] / 8.0;
            if (m_ref[i * 4 + j] > max_ref[i]) max_ref[i] = m_ref[i * 4 + j];
        }
    read_floats(rsum, got, 2);
    EXPECT_CLOSE(got, sum_ref, 2, 1e-5, 1e-6);
    CHECK(lucid_tensor_meta(rmean, &dtype, &device, &ndim, &rg));
    EXPECT(ndim == 0, "mean over every dimension has ndim %d", (int)ndim);
    CHECK(lucid_tensor_shape(rmean, NULL, NULL, 0)); /* a 0-d tensor needs no buffer */
    read_floats(rmean, got, 1);
    EXPECT_CLOSE(got, mean_ref, 1, 1e-5, 1e-6);
    CHECK(lucid_tensor_shape(rmax, shape, NULL, 4));
    EXPECT(shape[0] == 1 && shape[1] == 2, "keepdim amax shape [%" PRId64 ", %" PRId64 "]", shape[0], shape[1]);
    read_floats(rmax, got, 2);
    EXPECT_CLOSE(got, max_ref, 2, 1e-6, 0);

    /* Views outlive their source: storage lives while any handle to it does. */
    release(m);
    read_floats(m_flat, got, 8);
    EXPECT_CLOSE(got, m_ref, 8, 1e-5, 1e-6);
    read_floats(t, got, 8);
    EXPECT_CLOSE(got, t_ref, 8, 1e-5, 1e-6);

    /* contiguous() of the transpose is row-major again; detach gives a second, gradient-free handle. */
    lucid_tensor tc = 0, det = 0;
    CHECK_OP(tc, lucid_contiguous(t, REC));
    CHECK(lucid_tensor_shape(tc, shape, strides, 4));
    EXPECT(strides[0] == 2 && strides[1] == 1, "contiguous strides [%" PRId64 ", %" PRId64 "]", strides[0], strides[1]);
    CHECK_OP(det, lucid_detach(tc, REC));
    EXPECT(det != tc, "detach returned the same handle");
    read_floats(det, got, 8);
    EXPECT_CLOSE(got, t_ref, 8, 1e-5, 1e-6);

    lucid_tensor all[] = {a, b, w, sum, diff, prod, th, t, t_flat, m_flat, rsum, rmean, rmax, tc, det};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) release(all[i]);
}

static void test_autograd(void) {
    section = "autograd";
    /* L = sum(3 x^2 + exp(x)): dL/dx = 6x + exp(x). */
    static const float X[4] = {0.3f, -0.7f, 1.2f, 0.0f};
    int64_t s4[1] = {4};
    lucid_tensor x0 = from_floats(X, s4, 1, LUCID_CPU), x = 0;
    CHECK_OP(x, lucid_tensor_set_requires_grad(x0, 1, REC));
    int32_t dtype, device, ndim, rg = 0;
    CHECK(lucid_tensor_meta(x, &dtype, &device, &ndim, &rg));
    EXPECT(rg == 1, "set_requires_grad(1) gave requires_grad %d", (int)rg);

    lucid_tensor g = UNTOUCHED;
    CHECK(lucid_tensor_grad(x, &g));
    EXPECT(g == 0, "a leaf has a gradient before any backward");

    lucid_tensor sq = 0, sq3 = 0, ex = 0, y = 0, loss = 0;
    CHECK_OP(sq, lucid_binary(LUCID_MUL, x, x, REC));
    CHECK_OP(sq3, lucid_binary_scalar(LUCID_MUL, sq, 3.0, 0, LUCID_SCALAR_FLOAT, 0, REC));
    CHECK_OP(ex, lucid_unary(LUCID_EXP, x, REC));
    CHECK_OP(y, lucid_binary(LUCID_ADD, sq3, ex, REC));
    CHECK_OP(loss, lucid_reduce(LUCID_SUM, y, NULL, -1, 0, REC));

    const char *fn = "unset";
    CHECK(lucid_tensor_grad_fn(loss, &fn));
    EXPECT(fn != NULL && fn[0] != '\0', "the loss has no grad_fn");
    CHECK(lucid_tensor_grad_fn(x, &fn));
    EXPECT(fn == NULL, "a leaf reports grad_fn %s", fn);

    /* A non-scalar root needs an explicit gradient. */
    CHECK_STATUS(LUCID_ERR_RUNTIME, lucid_backward(y, 0, 1));
    CHECK(lucid_backward(loss, 0, 0));
    CHECK(lucid_tensor_grad(x, &g));
    EXPECT(g != 0, "no gradient after backward");
    float got[6];
    double want[6];
    for (int i = 0; i < 4; i++) want[i] = 6.0 * X[i] + exp((double)X[i]);
    read_floats(g, got, 4);
    EXPECT_CLOSE(got, want, 4, 1e-5, 1e-6);
    /* Without retain_graph the saved tensors are gone. */
    CHECK_STATUS(LUCID_ERR_RUNTIME, lucid_backward(loss, 0, 0));
    lucid_tensor a1[] = {x0, x, g, sq, sq3, ex, y, loss};
    for (size_t i = 0; i < sizeof a1 / sizeof a1[0]; i++) release(a1[i]);

    /* L = sum(X @ V): dL/dX[i][j] = sum_k V[j][k]; a retained graph runs twice and accumulates. */
    static const float V[6] = {0.5f, -1.5f, 2.0f, 0.25f, -0.75f, 1.0f};
    int64_t s23[2] = {2, 3}, s32[2] = {3, 2};
    lucid_tensor X0 = from_floats(A_DATA, s23, 2, LUCID_CPU), Xg = 0, Vt = from_floats(V, s32, 2, LUCID_CPU);
    lucid_tensor mm = 0, l2 = 0, g2 = 0;
    CHECK_OP(Xg, lucid_tensor_set_requires_grad(X0, 1, REC));
    CHECK_OP(mm, lucid_matmul(Xg, Vt, REC));
    CHECK_OP(l2, lucid_reduce(LUCID_SUM, mm, NULL, -1, 0, REC));
    CHECK(lucid_backward(l2, 0, 1));
    CHECK(lucid_backward(l2, 0, 0));
    CHECK_STATUS(LUCID_ERR_RUNTIME, lucid_backward(l2, 0, 0));
    CHECK(lucid_tensor_grad(Xg, &g2));
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) want[i * 3 + j] = 2.0 * ((double)V[j * 2] + V[j * 2 + 1]);
    read_floats(g2, got, 6);
    EXPECT_CLOSE(got, want, 6, 1e-5, 1e-6);

    /* set_grad(0) clears it. */
    lucid_tensor g3 = UNTOUCHED;
    CHECK(lucid_tensor_set_grad(Xg, 0));
    CHECK(lucid_tensor_grad(Xg, &g3));
    EXPECT(g3 == 0, "the gradient survived set_grad(0)");
    lucid_tensor a2[] = {X0, Xg, Vt, mm, l2, g2};
    for (size_t i = 0; i < sizeof a2 / sizeof a2[0]; i++) release(a2[i]);
}

static void test_autocast(void) {
    section = "autocast";
    int64_t base = live_guards();
    int64_t s23[2] = {2, 3}, s34[2] = {3, 4};
    lucid_tensor a = from_floats(A_DATA, s23, 2, LUCID_CPU), w = from_floats(W_DATA, s34, 2, LUCID_CPU), m = 0;
    double a_ref[6], w_ref[12], m_ref[8];
    widen(A_DATA, a_ref, 6);
    widen(W_DATA, w_ref, 12);
    matmul_ref(a_ref, w_ref, m_ref, 2, 3, 4);
    float got[8];

    expect_autocast(LUCID_CPU, 0, -1, "before any scope");
    expect_autocast(LUCID_METAL, 0, -1, "before any scope");
    expect_autocast(-1, 0, -1, "before any scope");

    /* A cpu bfloat16 scope: matmul returns bfloat16, close to the float32 result. */
    lucid_guard g1 = 0;
    CHECK(guard_create(LUCID_CPU, 1, LUCID_BFLOAT16, &g1));
    EXPECT(g1 != 0, "guard_create wrote the null handle");
    EXPECT(live_guards() == base + 1, "live guards %" PRId64 ", want %" PRId64, live_guards(), base + 1);
    expect_autocast(LUCID_CPU, 1, LUCID_BFLOAT16, "in a cpu bfloat16 scope");
    expect_autocast(LUCID_METAL, 0, -1, "in a cpu bfloat16 scope");
    expect_autocast(-1, 1, LUCID_BFLOAT16, "in a cpu bfloat16 scope");
    CHECK_OP(m, lucid_matmul(a, w, REC));
    EXPECT(dtype_of(m) == LUCID_BFLOAT16, "matmul under a bfloat16 scope has dtype %d", (int)dtype_of(m));
    read_floats(m, got, 8);
    EXPECT_CLOSE(got, m_ref, 8, 2e-2, 2e-2);
    release(m);

    /* Nested: a disabling scope turns cpu off; a metal float16 scope (dtype -1) is independent. */
    lucid_guard g2 = 0, g3 = 0;
    CHECK(guard_create(LUCID_CPU, 0, -1, &g2));
    expect_autocast(LUCID_CPU, 0, -1, "in a disabling scope inside a bfloat16 one");
    expect_autocast(-1, 0, -1, "in a disabling scope inside a bfloat16 one");
    CHECK_OP(m, lucid_matmul(a, w, REC));
    EXPECT(dtype_of(m) == LUCID_FLOAT32, "matmul with autocast disabled has dtype %d", (int)dtype_of(m));
    release(m);
    CHECK(guard_create(LUCID_METAL, 1, -1, &g3));
    expect_autocast(LUCID_METAL, 1, LUCID_FLOAT16, "in a metal scope with dtype -1");
    expect_autocast(LUCID_CPU, 0, -1, "in a metal scope with dtype -1");
    expect_autocast(-1, 1, LUCID_FLOAT16, "in a metal scope with dtype -1");
    EXPECT(live_guards() == base + 3, "live guards %" PRId64 ", want %" PRId64, live_guards(), base + 3);

    /* Out of order: leaving the outer cpu scope first leaves cpu on the inner one (off). */
    CHECK(guard_destroy(g1));
    expect_autocast(LUCID_CPU, 0, -1, "after the outer cpu scope left first");
    expect_autocast(LUCID_METAL, 1, LUCID_FLOAT16, "after the outer cpu scope left first");
    CHECK(guard_destroy(g2));
    expect_autocast(LUCID_CPU, 0, -1, "after both cpu scopes left");
    CHECK(guard_destroy(g3));
    expect_autocast(-1, 0, -1, "after every scope left");
    EXPECT(live_guards() == base, "live guards %" PRId64 " after every scope left, want %" PRId64, live_guards(), base);

    /* Out of order the other way: the inner scope survives the outer one and still rules. */
    lucid_guard ga = 0, gb = 0;
    CHECK(guard_create(LUCID_CPU, 1, LUCID_BFLOAT16, &ga));
    CHECK(guard_create(LUCID_CPU, 1, LUCID_FLOAT32, &gb));
    expect_autocast(LUCID_CPU, 1, LUCID_FLOAT32, "in a float32 scope inside a bfloat16 one");
    CHECK(guard_destroy(ga));
    expect_autocast(LUCID_CPU, 1, LUCID_FLOAT32, "after the outer bfloat16 scope left first");
    CHECK_OP(m, lucid_matmul(a, w, REC));
    EXPECT(dtype_of(m) == LUCID_FLOAT32, "matmul under the float32 scope has dtype %d", (int)dtype_of(m));
    release(m);
    CHECK(guard_destroy(gb));
    expect_autocast(LUCID_CPU, 0, -1, "after both left");

    /* A parameter is cast once per outermost scope; the cache empties when it exits. */
    lucid_tensor p = 0, m2 = 0;
    int64_t cached = -1;
    CHECK_OP(p, lucid_tensor_set_requires_grad(w, 1, REC));
    CHECK(guard_create(LUCID_CPU, 1, LUCID_BFLOAT16, &ga));
    CHECK_OP(m, lucid_matmul(a, p, REC));
    CHECK_OP(m2, lucid_matmul(a, p, REC));
    CHECK(lucid_autocast_cached_casts(&cached));
    EXPECT(cached == 1, "cached casts %" PRId64 " after two matmuls with one parameter, want 1", cached);
    CHECK(guard_destroy(ga));
    CHECK(lucid_autocast_cached_casts(&cached));
    EXPECT(cached == 0, "cached casts %" PRId64 " after the scope exited, want 0", cached);
    release(m);
    release(m2);
    release(p);

    /* Off after destroy: float32 again. */
    CHECK_OP(m, lucid_matmul(a, w, REC));
    EXPECT(dtype_of(m) == LUCID_FLOAT32, "matmul after every scope left has dtype %d", (int)dtype_of(m));
    release(m);

    /* Bad arguments create nothing. */
    lucid_guard bad = UNTOUCHED;
    CHECK_STATUS(LUCID_ERR_VALUE, guard_create(LUCID_CPU, 1, LUCID_INT32, &bad));
    CHECK_STATUS(LUCID_ERR_VALUE, guard_create(LUCID_CPU, 1, 17, &bad));
    CHECK_STATUS(LUCID_ERR_VALUE, guard_create(3, 1, -1, &bad));
    CHECK_STATUS(LUCID_ERR_VALUE, guard_create(-1, 1, -1, &bad));
    EXPECT(bad == UNTOUCHED, "a failed guard_create wrote its out-pointer");
    CHECK_STATUS(LUCID_ERR_VALUE, guard_create(LUCID_CPU, 1, -1, NULL));
    EXPECT(live_guards() == base, "failed guard_create calls left %" PRId64 " live guards, want %" PRId64,
           live_guards(), base);
    expect_autocast(-1, 0, -1, "after failed guard_create calls");

    /* Guard handles: null, released, forged, double destroy. */
    CHECK(guard_create(LUCID_CPU, 1, -1, &ga));
    CHECK(guard_destroy(ga));
    CHECK_STATUS(LUCID_ERR_HANDLE, guard_destroy(ga));
    CHECK_STATUS(LUCID_ERR_HANDLE, guard_destroy(0));
    CHECK_STATUS(LUCID_ERR_HANDLE, guard_destroy(UINT64_C(0xfeedface12345678)));
    CHECK_STATUS(LUCID_ERR_HANDLE, guard_destroy(a)); /* a tensor handle is not a guard */
    EXPECT(live_guards() == base, "live guards %" PRId64 ", want %" PRId64, live_guards(), base);

    release(a);
    release(w);
}

static void test_error_paths(void) {
    section = "error paths";
    int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, s22[2] = {2, 2};
    int64_t before = live_tensors();
    lucid_tensor a = from_floats(A_DATA, s23, 2, LUCID_CPU);
    lucid_tensor out = UNTOUCHED;
    float buf[6];
    int32_t i32 = -9;
    int64_t i64 = -9;

    /* LUCID_ERR_VALUE: sizes, codes and null pointers. */
    CHECK_OP_STATUS(LUCID_ERR_VALUE, out, lucid_tensor_from_host(A_DATA, 20, s23, 2, LUCID_FLOAT32, LUCID_CPU, REC));
    CHECK_OP_STATUS(LUCID_ERR_VALUE, out, lucid_tensor_from_host(A_DATA, -4, s23, 2, LUCID_FLOAT32, LUCID_CPU, REC));
    CHECK_OP_STATUS(LUCID_ERR_VALUE, out, lucid_tensor_from_host(NULL, 24, s23, 2, LUCID_FLOAT32, LUCID_CPU, REC));
    CHECK_OP_STATUS(LUCID_ERR_VALUE, out, lucid_tensor_from_host(A_DATA, 24, NULL, 2, LUCID_FLOAT32, LUCID_CPU, REC));
    CHECK_OP_STATUS(LUCID_ERR_VALUE, out, lucid_tensor_from_host(A_DATA, 24, s23, 2, 6, LUCID_CPU, REC));
    CHECK_OP_STATUS(LUCID_ERR_VALUE, out, lucid_tensor_from_host(A_DATA, 24, s23, 2, -1, LUCID_CPU, REC));
    CHECK_OP_STATUS(LUCID_ERR_VALUE, out, lucid_tensor_from_host(A_DATA, 24, s23, 2, LUCID_FLOAT32, 2, REC));
    CHECK_OP_STATUS(LUCID_ERR_VALUE, out, lucid_tensor_from_host(A_DATA, 24, s23, 2, LUCID_FLOAT32, -1, REC));
    CHECK_STATUS(LUCID_ERR_VALUE, lucid_tensor_from_host(A_DATA, 24, s23, 2, LUCID_FLOAT32, LUCID_CPU, NULL));
    CHECK_OP_STATUS(LUCID_ERR_VALUE, out, lucid_tensor_to(a, 42, -1, REC));
    CHECK_OP_STATUS(LUCID_ERR_VALUE, out, lucid_tensor_to(a, -1, 9, REC));
    CHECK_OP_STATUS(LUCID_ERR_VALUE, out, lucid_binary(99, a, a, REC));
    CHECK_OP_STATUS(LUCID_ERR_VALUE, out, lucid_unary(-3, a, REC));
    CHECK_OP_STATUS(LUCID_ERR_VALUE, out, lucid_reduce(17, a, NULL, -1, 0, REC));
    CHECK_STATUS(LUCID_ERR_VALUE, lucid_binary(LUCID_ADD, a, a, NULL));
    CHECK_OP_STATUS(LUCID_ERR_VALUE, out, lucid_matmul(a, a, REC)); /* [2,3] @ [2,3] is not aligned */
    CHECK_OP_STATUS(LUCID_ERR_VALUE, out, lucid_reshape(a, s22, 2, 0, REC));
    EXPECT(out == UNTOUCHED, "a failing call wrote its out-pointer");
    EXPECT(live_tensors() == before + 1, "failing calls changed the live tensor count to %" PRId64 " (want %" PRId64 ")",
           live_tensors(), before + 1);
    CHECK_STATUS(LUCID_ERR_VALUE, lucid_tensor_to_host(a, buf, 20));
    CHECK_STATUS(LUCID_ERR_VALUE, lucid_tensor_to_host(a, NULL, 24));
    int64_t shape[2];
    CHECK_STATUS(LUCID_ERR_VALUE, lucid_tensor_shape(a, shape, NULL, 1));
    CHECK_STATUS(LUCID_ERR_VALUE, lucid_tensor_shape(a, NULL, NULL, 2));
    CHECK_STATUS(LUCID_ERR_VALUE, lucid_tensor_meta(a, &i32, NULL, &i32, &i32));
    CHECK_STATUS(LUCID_ERR_VALUE, lucid_tensor_grad(a, NULL));
    CHECK_STATUS(LUCID_ERR_VALUE, lucid_live_tensors(NULL));
    CHECK_STATUS(LUCID_ERR_VALUE, lucid_autocast_live_guards(NULL));
    CHECK_STATUS(LUCID_ERR_VALUE, lucid_autocast_is_enabled(LUCID_CPU, NULL));
    CHECK_STATUS(LUCID_ERR_VALUE, lucid_autocast_is_enabled(5, &i32));
    CHECK_STATUS(LUCID_ERR_VALUE, lucid_autocast_get_dtype(-2, &i32));
    EXPECT(i32 == -9, "a failing query wrote %d through its out-pointer", (int)i32);
    CHECK_STATUS(LUCID_ERR_VALUE, lucid_set_num_threads(0));
    CHECK(lucid_get_num_threads(&i64));
    EXPECT(i64 >= 1 && i64 <= 1024, "get_num_threads %" PRId64 " is outside 1..1024", i64);
    CHECK_STATUS(LUCID_ERR_VALUE, lucid_cpu_capability(NULL));
    const char *capability = NULL;
    CHECK(lucid_cpu_capability(&capability));
    EXPECT(capability && (!strcmp(capability, "AVX512") || !strcmp(capability, "AVX2") || !strcmp(capability, "DEFAULT")),
           "cpu_capability is %s", capability ? capability : "(null)");

    /* LUCID_ERR_TYPE: gradients on an integer tensor, mixed dtypes in matmul. */
    static const int32_t I_DATA[6] = {1, 2, 3, 4, 5, 6};
    lucid_tensor ints = 0;
    CHECK_OP(ints, lucid_tensor_from_host(I_DATA, sizeof I_DATA, s32, 2, LUCID_INT32, LUCID_CPU, REC));
    CHECK_OP_STATUS(LUCID_ERR_TYPE, out, lucid_tensor_set_requires_grad(ints, 1, REC));
    CHECK_OP_STATUS(LUCID_ERR_TYPE, out, lucid_matmul(a, ints, REC));
    EXPECT(out == UNTOUCHED, "a failing call wrote its out-pointer");

    /* LUCID_ERR_INDEX: dimensions and table indices out of range. */
    int64_t dim5[1] = {5};
    int32_t count = 0, policy = 0, bf16 = 0;
    const char *name = NULL;
    CHECK_OP_STATUS(LUCID_ERR_INDEX, out, lucid_transpose(a, 0, 5, REC));
    CHECK_OP_STATUS(LUCID_ERR_INDEX, out, lucid_reduce(LUCID_SUM, a, dim5, 1, 0, REC));
    EXPECT(out == UNTOUCHED, "a failing call wrote its out-pointer");
    CHECK(lucid_op_count(&count));
    EXPECT(count > 0, "op table has %d entries", (int)count);
    CHECK(lucid_op_info(0, &name, &policy, &bf16));
    EXPECT(name != NULL && name[0] != '\0' && policy >= LUCID_POLICY_NONE && policy <= LUCID_POLICY_PROMOTE,
           "op 0: name %s policy %d", name ? name : "(null)", (int)policy);
    CHECK_STATUS(LUCID_ERR_INDEX, lucid_op_info(count, &name, &policy, &bf16));
    CHECK_STATUS(LUCID_ERR_INDEX, lucid_op_info(-1, &name, &policy, &bf16));

    /* LUCID_ERR_RUNTIME: operands on device 0 and device 1. */
    lucid_tensor on_metal = from_floats(A_DATA, s23, 2, LUCID_METAL);
    CHECK_OP_STATUS(LUCID_ERR_RUNTIME, out, lucid_binary(LUCID_ADD, a, on_metal, REC));
    CHECK_OP_STATUS(LUCID_ERR_RUNTIME, out, lucid_binary(LUCID_MUL, on_metal, a, REC));
    EXPECT(out == UNTOUCHED, "a failing call wrote its out-pointer");
    lucid_tensor moved = 0, ok = 0;
    CHECK_OP(moved, lucid_tensor_to(on_metal, -1, LUCID_CPU, REC));
    CHECK_OP(ok, lucid_binary(LUCID_ADD, a, moved, REC));
    release(ok);
    release(moved);
    release(on_metal);

    /* LUCID_ERR_HANDLE: null, forged, released, double release, and a stale handle whose slot is reused. */
    CHECK_STATUS(LUCID_ERR_HANDLE, lucid_tensor_release(0));
    CHECK_STATUS(LUCID_ERR_HANDLE, lucid_tensor_meta(0, &i32, &i32, &i32, &i32));
    CHECK_STATUS(LUCID_ERR_HANDLE, lucid_tensor_release(a ^ (0x15au << 22))); /* another generation */
    CHECK_STATUS(LUCID_ERR_HANDLE, lucid_tensor_release((lucid_tensor)0x003fffffu)); /* a slot never issued */
    CHECK_OP_STATUS(LUCID_ERR_HANDLE, out, lucid_binary(LUCID_ADD, a, (lucid_tensor)0xdeadbeefu, REC));
    lucid_tensor tmp = from_floats(A_DATA, s23, 2, LUCID_CPU);
    release(tmp);
    CHECK_STATUS(LUCID_ERR_HANDLE, lucid_tensor_release(tmp));
    CHECK_STATUS(LUCID_ERR_HANDLE, lucid_tensor_to_host(tmp, buf, sizeof buf));
    CHECK_OP_STATUS(LUCID_ERR_HANDLE, out, lucid_matmul(tmp, a, REC));
    CHECK_STATUS(LUCID_ERR_HANDLE, lucid_backward(tmp, 0, 0));
    EXPECT(out == UNTOUCHED, "a failing call wrote its out-pointer");
    lucid_tensor reuse = from_floats(B_DATA, s23, 2, LUCID_CPU);
    CHECK_STATUS(LUCID_ERR_HANDLE, lucid_tensor_to_host(tmp, buf, sizeof buf));
    CHECK(lucid_tensor_to_host(reuse, buf, sizeof buf));
    EXPECT(memcmp(buf, B_DATA, sizeof buf) == 0, "a new handle does not hold its own values");
    release(reuse);

    /* The message stays until the next failing call on this thread; successes leave it alone. */
    char saved[512];
    CHECK_OP_STATUS(LUCID_ERR_VALUE, out, lucid_tensor_from_host(A_DATA, 24, s23, 2, 6, LUCID_CPU, REC));
    snprintf(saved, sizeof saved, "%s", lucid_last_error());
    CHECK(lucid_tensor_to_host(a, buf, sizeof buf));
    CHECK(lucid_live_tensors(&i64));
    EXPECT(strcmp(lucid_last_error(), saved) == 0, "a successful call changed lucid_last_error() to %s",
           lucid_last_error());
    CHECK_STATUS(LUCID_ERR_HANDLE, lucid_tensor_release(0));
    EXPECT(strcmp(lucid_last_error(), saved) != 0, "a new failure kept the previous message");

    release(ints);
    release(a);
    EXPECT(live_tensors() == before, "live tensors %" PRId64 " after the error paths, want %" PRId64, live_tensors(),
           before);
}

/* ---- threads ---------------------------------------------------------------------------- */

struct foreign {
    lucid_guard target;
    int32_t saw_enabled;
};

/* Tries to leave another thread's scope, first with no scope of its own, then inside one. */
static void *destroy_foreign(void *arg) {
    section = "foreign guard_destroy thread";
    struct foreign *f = arg;
    CHECK_STATUS(LUCID_ERR_THREAD, guard_destroy(f->target));
    f->saw_enabled = is_enabled(LUCID_CPU);
    lucid_guard own = 0;
    CHECK(guard_create(LUCID_CPU, 1, LUCID_FLOAT32, &own));
    CHECK_STATUS(LUCID_ERR_THREAD, guard_destroy(f->target));
    expect_autocast(LUCID_CPU, 1, LUCID_FLOAT32, "in a thread whose foreign guard_destroy failed");
    CHECK_STATUS(LUCID_ERR_HANDLE, guard_destroy(UINT64_C(0xfeedface12345678)));
    CHECK(guard_destroy(own));
    return NULL;
}

/* Enters a scope and ends without leaving it. */
static void *abandon_guard(void *arg) {
    section = "abandoning thread";
    lucid_guard *out = arg;
    CHECK(guard_create(LUCID_METAL, 1, LUCID_BFLOAT16, out));
    expect_autocast(LUCID_METAL, 1, LUCID_BFLOAT16, "in the abandoning thread");
    return NULL;
}

struct messages {
    int started_null;
    char text[512];
    int kept;
};

/* lucid_last_error() belongs to the thread: NULL before its first failure here. */
static void *own_error(void *arg) {
    section = "last-error thread";
    struct messages *m = arg;
    m->started_null = lucid_last_error() == NULL;
    CHECK_STATUS(LUCID_ERR_HANDLE, lucid_tensor_release(0));
    snprintf(m->text, sizeof m->text, "%s", lucid_last_error());
    lucid_tensor t = 0;
    int64_t s[1] = {2};
    t = from_floats(A_DATA, s, 1, LUCID_CPU);
    release(t);
    m->kept = strcmp(lucid_last_error(), m->text) == 0;
    return NULL;
}

static void test_thread_rules(void) {
    section = "thread rules";
    int64_t base = live_guards();

    /* A guard is left only on its own thread; from elsewhere nothing changes. */
    lucid_guard mine = 0;
    CHECK(guard_create(LUCID_CPU, 1, LUCID_BFLOAT16, &mine));
    struct foreign f = {mine, -1};
    pthread_t th;
    EXPECT(pthread_create(&th, NULL, destroy_foreign, &f) == 0, "pthread_create failed");
    EXPECT(pthread_join(th, NULL) == 0, "pthread_join failed");
    EXPECT(f.saw_enabled == 0, "another thread sees this thread's scope (is_enabled %d)", (int)f.saw_enabled);
    expect_autocast(LUCID_CPU, 1, LUCID_BFLOAT16, "after a foreign guard_destroy");
    EXPECT(live_guards() == base + 1, "live guards %" PRId64 ", want %" PRId64, live_guards(), base + 1);
    CHECK(guard_destroy(mine));
    expect_autocast(LUCID_CPU, 0, -1, "after guard_destroy on the owning thread");

    /* A guard whose thread has ended is stale. */
    lucid_guard orphan = 0;
    EXPECT(pthread_create(&th, NULL, abandon_guard, &orphan) == 0, "pthread_create failed");
    EXPECT(pthread_join(th, NULL) == 0, "pthread_join failed");
    EXPECT(orphan != 0, "the thread made no guard");
    EXPECT(live_guards() == base, "live guards %" PRId64 " after the owning thread ended, want %" PRId64, live_guards(),
           base);
    CHECK_STATUS(LUCID_ERR_HANDLE, guard_destroy(orphan));
    expect_autocast(LUCID_METAL, 0, -1, "on this thread after another thread's scope ended with it");

    /* lucid_last_error() is per thread. */
    char mine_text[512];
    lucid_tensor out = UNTOUCHED;
    int64_t s1[1] = {1};
    CHECK_OP_STATUS(LUCID_ERR_VALUE, out, lucid_tensor_from_host(A_DATA, 4, s1, 1, LUCID_FLOAT32, 7, REC));
    snprintf(mine_text, sizeof mine_text, "%s", lucid_last_error());
    struct messages m = {0, "", 0};
    EXPECT(pthread_create(&th, NULL, own_error, &m) == 0, "pthread_create failed");
    EXPECT(pthread_join(th, NULL) == 0, "pthread_join failed");
    EXPECT(m.started_null, "a new thread's lucid_last_error() was not NULL");
    EXPECT(m.kept, "a success on the other thread changed its message");
    EXPECT(strcmp(m.text, mine_text) != 0, "both threads report the same message: %s", m.text);
    EXPECT(strcmp(lucid_last_error(), mine_text) == 0, "another thread's failure replaced this thread's message with %s",
           lucid_last_error());
}

#define WORKERS 4
#define ROUNDS 50

/* Workers wait here until all have started, so their scopes really are live at once. */
static atomic_int workers_ready;

struct worker {
    int id;
    int32_t dtype;
};

/* Independent work under its own scope: matmuls whose dtype follows this thread's scope only,
 * a nested disabling scope, and a small backward pass. */
static void *work(void *arg) {
    section = "worker thread";
    const struct worker *wk = arg;
    lucid_guard g = 0;
    CHECK(guard_create(LUCID_CPU, 1, wk->dtype, &g));
    atomic_fetch_add(&workers_ready, 1);
    while (atomic_load(&workers_ready) < WORKERS) sched_yield();
    float av[6], bv[6];
    for (int i = 0; i < 6; i++) {
        av[i] = (float)(wk->id + 1) * 0.25f * (float)(i - 2);
        bv[i] = 0.5f - 0.125f * (float)(i * (wk->id + 1) % 5);
    }
    double a_ref[6], b_ref[6], m_ref[4];
    widen(av, a_ref, 6);
    widen(bv, b_ref, 6);
    matmul_ref(a_ref, b_ref, m_ref, 2, 3, 2);
    double tol = wk->dtype == LUCID_BFLOAT16 ? 2e-2 : 1e-5;
    int64_t s23[2] = {2, 3}, s32[2] = {3, 2};
    for (int r = 0; r < ROUNDS; r++) {
        expect_autocast(LUCID_CPU, 1, wk->dtype, "in a worker's scope");
        expect_autocast(LUCID_METAL, 0, -1, "in a worker while the main thread has a metal scope");
        lucid_tensor a = from_floats(av, s23, 2, LUCID_CPU), b = from_floats(bv, s32, 2, LUCID_CPU), m = 0;
        CHECK_OP(m, lucid_matmul(a, b, REC));
        EXPECT(dtype_of(m) == wk->dtype, "worker %d: matmul dtype %d, want %d", wk->id, (int)dtype_of(m),
               (int)wk->dtype);
        float got[6];
        read_floats(m, got, 4);
        EXPECT_CLOSE(got, m_ref, 4, tol, tol);
        release(m);

        lucid_guard off = 0;
        CHECK(guard_create(LUCID_CPU, 0, -1, &off));
        CHECK_OP(m, lucid_matmul(a, b, REC));
        EXPECT(dtype_of(m) == LUCID_FLOAT32, "worker %d: matmul dtype %d with autocast disabled", wk->id,
               (int)dtype_of(m));
        release(m);
        CHECK(guard_destroy(off));

        /* d/dx sum(x * x) = 2x; backward runs with autocast off, so the gradient is float32. */
        lucid_tensor x = 0, sq = 0, l = 0, grad = 0;
        CHECK_OP(x, lucid_tensor_set_requires_grad(a, 1, REC));
        CHECK_OP(sq, lucid_binary(LUCID_MUL, x, x, REC));
        CHECK_OP(l, lucid_reduce(LUCID_SUM, sq, NULL, -1, 0, REC));
        CHECK(lucid_backward(l, 0, 0));
        CHECK(lucid_tensor_grad(x, &grad));
        double want[6];
        for (int i = 0; i < 6; i++) want[i] = 2.0 * av[i];
        read_floats(grad, got, 6);
        EXPECT_CLOSE(got, want, 6, 1e-5, 1e-6);
        lucid_tensor all[] = {a, b, x, sq, l, grad};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) release(all[i]);
    }
    CHECK(guard_destroy(g));
    expect_autocast(LUCID_CPU, 0, -1, "after a worker left its scope");
    return NULL;
}

static void test_concurrent_workers(void) {
    section = "concurrent workers";
    int64_t base = live_guards();
    /* This thread holds a scope of its own throughout; no worker's scope may reach it. */
    lucid_guard here = 0;
    CHECK(guard_create(LUCID_METAL, 1, LUCID_FLOAT16, &here));
    pthread_t th[WORKERS];
    struct worker wk[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        wk[i].id = i;
        wk[i].dtype = i % 2 ? LUCID_BFLOAT16 : LUCID_FLOAT32;
        EXPECT(pthread_create(&th[i], NULL, work, &wk[i]) == 0, "pthread_create %d failed", i);
    }
    for (int i = 0; i < WORKERS; i++) EXPECT(pthread_join(th[i], NULL) == 0, "pthread_join %d failed", i);
    expect_autocast(LUCID_CPU, 0, -1, "on the main thread after the workers");
    expect_autocast(LUCID_METAL, 1, LUCID_FLOAT16, "on the main thread after the workers");
    CHECK(guard_destroy(here));
    EXPECT(live_guards() == base, "live guards %" PRId64 " after the workers, want %" PRId64, live_guards(), base);
}

/* An op's record says what lucid_tensor_meta and lucid_tensor_shape say, as does
 * lucid_tensor_record; beyond LUCID_RECORD_DIMS dimensions only the sizes are left out. */
static void expect_record_matches(const int64_t *rec, const char *what) {
    lucid_tensor t = (lucid_tensor)rec[LUCID_RECORD_HANDLE];
    int32_t dtype = -9, device = -9, ndim = -9, rg = -9;
    CHECK(lucid_tensor_meta(t, &dtype, &device, &ndim, &rg));
    EXPECT(rec[LUCID_RECORD_DTYPE] == dtype && rec[LUCID_RECORD_DEVICE] == device && rec[LUCID_RECORD_NDIM] == ndim &&
               rec[LUCID_RECORD_REQUIRES_GRAD] == rg,
           "%s: record says dtype %" PRId64 " device %" PRId64 " ndim %" PRId64 " requires_grad %" PRId64
           ", meta says %d %d %d %d", what, rec[LUCID_RECORD_DTYPE], rec[LUCID_RECORD_DEVICE], rec[LUCID_RECORD_NDIM],
           rec[LUCID_RECORD_REQUIRES_GRAD], (int)dtype, (int)device, (int)ndim, (int)rg);
    int64_t shape[16], strides[16];
    CHECK(lucid_tensor_shape(t, shape, strides, 16));
    for (int i = 0; i < ndim && ndim <= LUCID_RECORD_DIMS; i++)
        EXPECT(rec[LUCID_RECORD_SHAPE + i] == shape[i] && rec[LUCID_RECORD_STRIDES + i] == strides[i],
               "%s: dimension %d: record %" PRId64 "/%" PRId64 ", shape %" PRId64 "/%" PRId64, what, i,
               rec[LUCID_RECORD_SHAPE + i], rec[LUCID_RECORD_STRIDES + i], shape[i], strides[i]);
    int64_t again[LUCID_RECORD_LEN];
    for (int i = 0; i < LUCID_RECORD_LEN; i++) again[i] = -7;
    CHECK(lucid_tensor_record(t, again));
    int n = ndim <= LUCID_RECORD_DIMS ? LUCID_RECORD_SHAPE + ndim : LUCID_RECORD_SHAPE;
    for (int i = 0; i < n; i++)
        EXPECT(again[i] == rec[i], "%s: lucid_tensor_record field %d is %" PRId64 ", the op wrote %" PRId64, what, i,
               again[i], rec[i]);
    if (ndim > LUCID_RECORD_DIMS) EXPECT(again[LUCID_RECORD_SHAPE] == -7, "%s: sizes written beyond the record", what);
    EXPECT(again[LUCID_RECORD_SHAPE_KEY] == rec[LUCID_RECORD_SHAPE_KEY], "%s: lucid_tensor_record's shape key differs", what);
    /* The shape key: ndim in bits 0-2 and each size in 60/ndim bits, or -1 when they do not fit. */
    int64_t key = rec[LUCID_RECORD_SHAPE_KEY];
    int fits = ndim <= 4;
    for (int i = 0; i < ndim && fits; i++) fits = shape[i] < ((int64_t)1 << (60 / ndim));
    if (!fits) {
        EXPECT(key == -1, "%s: shape key %" PRId64 " for sizes that do not pack", what, key);
    } else {
        EXPECT(key >= 0 && (key & 7) == ndim, "%s: shape key %" PRId64 " for ndim %d", what, key, (int)ndim);
        for (int i = 0; i < ndim && key >= 0; i++) {
            int width = 60 / ndim;
            int64_t size = (key >> (3 + i * width)) & (((int64_t)1 << width) - 1);
            EXPECT(size == shape[i], "%s: shape key size %d is %" PRId64 ", want %" PRId64, what, i, size, shape[i]);
        }
    }
}

static void test_records(void) {
    section = "records";
    int64_t s23[2] = {2, 3}, perm[2] = {1, 0};
    lucid_tensor a = from_floats(A_DATA, s23, 2, LUCID_CPU);
    int64_t rec[LUCID_RECORD_LEN], view[LUCID_RECORD_LEN], grad_rec[LUCID_RECORD_LEN];
    CHECK(lucid_binary(LUCID_ADD, a, a, rec));
    expect_record_matches(rec, "a + a");
    EXPECT(rec[LUCID_RECORD_STORAGE_BYTES] == 24, "a 2x3 float32 result keeps %" PRId64 " bytes", rec[LUCID_RECORD_STORAGE_BYTES]);
    CHECK(lucid_permute((lucid_tensor)rec[LUCID_RECORD_HANDLE], perm, 2, view));
    expect_record_matches(view, "a transposed view");
    EXPECT(view[LUCID_RECORD_STRIDES] == 1 && view[LUCID_RECORD_STRIDES + 1] == 3, "view strides %" PRId64 ", %" PRId64,
           view[LUCID_RECORD_STRIDES], view[LUCID_RECORD_STRIDES + 1]);
    EXPECT(view[LUCID_RECORD_STORAGE_BYTES] == 24, "a view keeps its base's %" PRId64 " bytes", view[LUCID_RECORD_STORAGE_BYTES]);
    CHECK(lucid_tensor_set_requires_grad(a, 1, grad_rec));
    expect_record_matches(grad_rec, "a leaf that requires grad");
    EXPECT(grad_rec[LUCID_RECORD_REQUIRES_GRAD] == 1, "requires_grad is %" PRId64, grad_rec[LUCID_RECORD_REQUIRES_GRAD]);

    /* Ten dimensions: beyond the record's sizes. */
    int64_t ones[10] = {1, 1, 1, 1, 1, 1, 1, 1, 2, 3}, deep[LUCID_RECORD_LEN];
    CHECK(lucid_reshape(a, ones, 10, 1, deep));
    expect_record_matches(deep, "a 10-d view");

    /* Sizes at the shape key's limits (30 bits each for two dimensions), as views of one element. */
    int64_t one_shape[2] = {1, 1};
    lucid_tensor one = from_floats(A_DATA, one_shape, 2, LUCID_CPU);
    int64_t wide[3][2] = {{((int64_t)1 << 30) - 1, 2}, {(int64_t)1 << 30, 2}, {3, ((int64_t)1 << 30) - 1}};
    for (int i = 0; i < 3; i++) {
        int64_t big[LUCID_RECORD_LEN];
        CHECK(lucid_expand(one, wide[i], 2, big));
        expect_record_matches(big, "a wide view");
        release((lucid_tensor)big[LUCID_RECORD_HANDLE]);
    }
    release(one);

    /* Many handles released in one call; a dead one among them is reported, the rest go. */
    int64_t before = live_tensors();
    lucid_tensor batch[4] = {(lucid_tensor)rec[LUCID_RECORD_HANDLE], (lucid_tensor)view[LUCID_RECORD_HANDLE],
                             (lucid_tensor)grad_rec[LUCID_RECORD_HANDLE], (lucid_tensor)deep[LUCID_RECORD_HANDLE]};
    CHECK(lucid_tensor_release_many(batch, 2));
    EXPECT(live_tensors() == before - 2, "release_many of 2 left %" PRId64 " of %" PRId64 " live", live_tensors(), before);
    CHECK_STATUS(LUCID_ERR_HANDLE, lucid_tensor_release_many(batch, 4)); /* the first two are gone */
    EXPECT(live_tensors() == before - 4, "the live handles after a dead one were not released");
    CHECK(lucid_tensor_release_many(NULL, 0));
    CHECK_STATUS(LUCID_ERR_VALUE, lucid_tensor_release_many(NULL, 1));
    CHECK_STATUS(LUCID_ERR_VALUE, lucid_tensor_release_many(batch, -1));
    CHECK_STATUS(LUCID_ERR_VALUE, lucid_tensor_record(a, NULL));
    CHECK_STATUS(LUCID_ERR_HANDLE, lucid_tensor_record(batch[0], rec));
    release(a);
}

int main(void) {
    /* No call has failed on this thread yet. */
    EXPECT(lucid_last_error() == NULL, "lucid_last_error() before any failure: %s", lucid_last_error());
    int64_t tensors0 = live_tensors(), guards0 = live_guards();

    test_warning_handler();
    test_tensors_and_ops();
    test_records();
    test_autograd();
    test_autocast();
    test_error_paths();
    test_thread_rules();
    test_concurrent_workers();

    section = "final counters";
    int64_t tensors1 = live_tensors(), guards1 = live_guards();
    EXPECT(tensors1 == tensors0, "live tensors %" PRId64 " at the end, %" PRId64 " at the start", tensors1, tensors0);
    EXPECT(guards1 == guards0, "live guards %" PRId64 " at the end, %" PRId64 " at the start", guards1, guards0);
    expect_autocast(-1, 0, -1, "at the end");
    printf("abi_user: %ld checks passed\n", atomic_load(&checks_run));
    return 0;
}
