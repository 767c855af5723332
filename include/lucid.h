/*
 * lucid.h — the C ABI of the lucid engine (liblucid.so / liblucid.dylib).
 *
 * Conventions
 *   - Every function returns an int32_t status: LUCID_OK (0) or one of the error codes
 *     below. On error, lucid_last_error() gives a message for the calling thread; it stays
 *     valid until the next failing call on that thread. Results are written through
 *     out-pointers only on success.
 *   - A tensor is an opaque 32-bit handle (lucid_tensor), a guard an opaque 64-bit one. 0 is
 *     never a valid handle. A null, forged, stale or already-released handle is reported as
 *     LUCID_ERR_HANDLE and never dereferenced (a tensor handle's slot is recognised as stale
 *     until it has been reused 1,023 times). At most 4,194,303 tensors are live at once.
 *   - Results: an op that makes one tensor writes its record to `out`, LUCID_RECORD_LEN
 *     int64 values indexed by enum lucid_record_field: the new handle with its dtype,
 *     device, ndim, requires_grad, the bytes of storage it keeps alive, and (when ndim <=
 *     LUCID_RECORD_DIMS) its sizes and strides, so that no second call is needed to learn
 *     them. Ops with several results write bare handles.
 *   - Ownership: every handle written by a call is a new reference owned by the caller, who
 *     releases it exactly once with lucid_tensor_release() or lucid_tensor_release_many().
 *     Tensors passed as inputs are borrowed. Views (reshape, transpose, ...) share storage with
 *     their source but are released independently; storage lives while any handle to it does.
 *   - A lucid_guard is owned by the thread that created it and is released exactly once,
 *     on that thread, with guard_destroy(). When its thread ends, its guards end with it
 *     and their handles become stale.
 *   - Codes: dtype 0 float32, 1 float16, 2 bfloat16, 3 int32, 4 int64, 5 bool, 6 float64,
 *     7 uint8, 8 int8, 9 int16;
 *     device 0 cpu, 1 metal. Where a code is optional, -1 means "not given".
 */
#ifndef LUCID_H
#define LUCID_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint32_t lucid_tensor;
typedef uint64_t lucid_guard;

enum lucid_status {
    LUCID_OK = 0,
    LUCID_ERR_VALUE = 1,   /* a value out of its allowed set or range (Python ValueError) */
    LUCID_ERR_TYPE = 2,    /* a wrong dtype or argument type (TypeError) */
    LUCID_ERR_INDEX = 3,   /* a dimension or index out of range (IndexError) */
    LUCID_ERR_RUNTIME = 4, /* well formed but impossible now, e.g. device mismatch (RuntimeError) */
    LUCID_ERR_HANDLE = 5,  /* null, unknown, stale or released handle */
    LUCID_ERR_THREAD = 6   /* an object used from a thread that does not own it */
};

/* The record an op writes about its result (see Conventions): int64 values at these indices.
 * Sizes and strides are written only when ndim <= LUCID_RECORD_DIMS; otherwise ask with
 * lucid_tensor_meta / lucid_tensor_shape. */
enum lucid_record_field { LUCID_RECORD_HANDLE = 0, LUCID_RECORD_DTYPE = 1, LUCID_RECORD_DEVICE = 2, LUCID_RECORD_NDIM = 3,
                          LUCID_RECORD_REQUIRES_GRAD = 4, LUCID_RECORD_STORAGE_BYTES = 5, LUCID_RECORD_SHAPE = 6,
                          LUCID_RECORD_DIMS = 8, LUCID_RECORD_STRIDES = 14, LUCID_RECORD_SHAPE_KEY = 22,
                          LUCID_RECORD_LEN = 23 };
/* LUCID_RECORD_SHAPE_KEY names the sizes in one number, for a caller that keeps a table of
 * the shapes it has seen: ndim in bits 0-2 and each size in the 60/ndim bits above them, the
 * first size lowest (0 for a scalar). It is -1 when they do not fit: ndim > 4, or a size of
 * 2^(60/ndim) or more. Equal keys other than -1 mean equal sizes. */
enum lucid_dtype { LUCID_FLOAT32 = 0, LUCID_FLOAT16 = 1, LUCID_BFLOAT16 = 2, LUCID_INT32 = 3, LUCID_INT64 = 4, LUCID_BOOL = 5, LUCID_FLOAT64 = 6,
                  LUCID_UINT8 = 7, LUCID_INT8 = 8, LUCID_INT16 = 9 };
enum lucid_device { LUCID_CPU = 0, LUCID_METAL = 1 };
enum lucid_scalar_kind { LUCID_SCALAR_FLOAT = 0, LUCID_SCALAR_INT = 1, LUCID_SCALAR_BOOL = 2 };
/* Binary op codes; the bitwise ones take integer and bool tensors only. */
enum lucid_binary_op {
    LUCID_ADD = 0, LUCID_SUB = 1, LUCID_MUL = 2, LUCID_DIV = 3, LUCID_POW = 4, LUCID_MAXIMUM = 5, LUCID_MINIMUM = 6,
    LUCID_BITWISE_AND = 7, LUCID_BITWISE_OR = 8, LUCID_BITWISE_XOR = 9,
    LUCID_ATAN2 = 10,       /* atan2(a, b) (integers promote to float32, as for the next four) */
    LUCID_COPYSIGN = 11,    /* |a| with the sign of b */
    LUCID_XLOGY = 12,       /* a log b, 0 where a is 0 */
    LUCID_XLOG1PY = 13,     /* a log1p b, 0 where a is 0 */
    LUCID_ZETA = 14,        /* the Hurwitz zeta function of a at b */
    LUCID_HYPOT = 15,       /* sqrt(a**2 + b**2) (floating operands only, as for the next five) */
    LUCID_NEXTAFTER = 16,   /* the next value after a towards b */
    LUCID_LOGADDEXP = 17,   /* log(e**a + e**b) */
    LUCID_LOGADDEXP2 = 18,  /* log2(2**a + 2**b) */
    LUCID_IGAMMA = 19,      /* the regularized lower incomplete gamma function P(a, b) */
    LUCID_IGAMMAC = 20,     /* the regularized upper incomplete gamma function Q(a, b) */
    LUCID_FMOD = 21,        /* the remainder of a / b with a's sign (integers kept, as for the next six; not bool) */
    LUCID_REMAINDER = 22,   /* the remainder of a / b with b's sign */
    LUCID_FLOOR_DIVIDE = 23, /* floor(a / b) */
    LUCID_TRUNC_DIVIDE = 24, /* trunc(a / b) */
    LUCID_FMAX = 25,        /* the maximum, NaN only where both are (bool too) */
    LUCID_FMIN = 26,        /* the minimum, NaN only where both are (bool too) */
    LUCID_HEAVISIDE = 27,   /* 0 where a < 0, b where a is 0, 1 where a > 0 (bool too) */
    LUCID_LEFT_SHIFT = 28,  /* a << b (integers only, as for the next three) */
    LUCID_RIGHT_SHIFT = 29, /* a >> b, arithmetic */
    LUCID_GCD = 30,         /* the greatest common divisor */
    LUCID_LCM = 31,         /* the least common multiple */
    LUCID_CHEBYSHEV_POLYNOMIAL_T = 32,         /* T_n(a), n = trunc(b) (0 for n < 0; as for the next eleven) */
    LUCID_CHEBYSHEV_POLYNOMIAL_U = 33,         /* U_n(a) */
    LUCID_CHEBYSHEV_POLYNOMIAL_V = 34,         /* V_n(a) */
    LUCID_CHEBYSHEV_POLYNOMIAL_W = 35,         /* W_n(a) */
    LUCID_SHIFTED_CHEBYSHEV_POLYNOMIAL_T = 36, /* T_n(2a - 1) */
    LUCID_SHIFTED_CHEBYSHEV_POLYNOMIAL_U = 37, /* U_n(2a - 1) */
    LUCID_SHIFTED_CHEBYSHEV_POLYNOMIAL_V = 38, /* V_n(2a - 1) */
    LUCID_SHIFTED_CHEBYSHEV_POLYNOMIAL_W = 39, /* W_n(2a - 1) */
    LUCID_HERMITE_POLYNOMIAL_H = 40,           /* the physicists' Hermite polynomial H_n(a) */
    LUCID_HERMITE_POLYNOMIAL_HE = 41,          /* the probabilists' Hermite polynomial He_n(a) */
    LUCID_LAGUERRE_POLYNOMIAL_L = 42,          /* the Laguerre polynomial L_n(a) */
    LUCID_LEGENDRE_POLYNOMIAL_P = 43           /* the Legendre polynomial P_n(a) */
};
/* Comparison codes (bool results, no gradient). */
enum lucid_compare_op { LUCID_EQ = 0, LUCID_NE = 1, LUCID_LT = 2, LUCID_LE = 3, LUCID_GT = 4, LUCID_GE = 5 };
/* Unary op codes (lucid_unary, lucid_unary_inplace). Each is lucid.<name>, Tensor.<name> and
 * Tensor.<name>_ in Python, documented by its comment here; a LUCID_SPECIAL_<NAME> code is
 * lucid.special.<name> only. */
enum lucid_unary_op {
    LUCID_NEG = 0,        /* -x */
    LUCID_RELU = 1,       /* max(x, 0) */
    LUCID_EXP = 2,        /* e**x */
    LUCID_LOG = 3,        /* the natural logarithm */
    LUCID_LOG1P = 4,      /* log(1 + x), exact for small x */
    LUCID_SQRT = 5,       /* the square root */
    LUCID_RSQRT = 6,      /* 1 / sqrt(x) */
    LUCID_ABS = 7,        /* the absolute value */
    LUCID_TANH = 8,       /* the hyperbolic tangent */
    LUCID_SIGMOID = 9,    /* 1 / (1 + e**-x) */
    LUCID_SILU = 10,      /* x * sigmoid(x) */
    LUCID_GELU = 11,      /* x * P(X <= x) for a standard normal X */
    LUCID_GELU_TANH = 12, /* GELU's tanh approximation */
    LUCID_SOFTPLUS = 13,  /* log(1 + e**x) */
    LUCID_SIN = 14,       /* the sine (integers promote to float32) */
    LUCID_COS = 15,       /* the cosine (integers promote to float32) */
    LUCID_EXPM1 = 16,     /* e**x - 1, exact for small x */
    LUCID_TAN = 17,       /* the tangent */
    LUCID_ASIN = 18,      /* the arcsine (NaN outside [-1, 1]) */
    LUCID_ACOS = 19,      /* the arccosine (NaN outside [-1, 1]) */
    LUCID_ATAN = 20,      /* the arctangent */
    LUCID_ROUND = 21,     /* the nearest integer, halves to even (integers unchanged; gradient 0) */
    LUCID_FLOOR = 22,     /* the largest integer not above x (integers unchanged; gradient 0) */
    LUCID_CEIL = 23,      /* the smallest integer not below x (integers unchanged; gradient 0) */
    LUCID_TRUNC = 24,     /* x rounded toward zero (integers unchanged; gradient 0) */
    LUCID_SIGN = 25,      /* -1, 0 or 1 by the sign of x (NaN stays NaN; integers keep their dtype) */
    LUCID_ERF = 26,       /* the error function */
    LUCID_ERFC = 27,      /* the complementary error function 1 - erf(x), accurate in the tail */
    LUCID_ERFINV = 28,    /* the inverse error function (NaN outside [-1, 1]) */
    LUCID_LGAMMA = 29,    /* log(abs(Gamma(x))) */
    LUCID_DIGAMMA = 30,   /* the logarithmic derivative of Gamma (-inf at 0, NaN at the negative integers) */
    LUCID_LOG2 = 31,      /* the base-2 logarithm */
    LUCID_LOG10 = 32,     /* the base-10 logarithm */
    LUCID_EXP2 = 33,      /* 2**x */
    LUCID_SINH = 34,      /* the hyperbolic sine */
    LUCID_COSH = 35,      /* the hyperbolic cosine */
    LUCID_ASINH = 36,     /* the inverse hyperbolic sine */
    LUCID_ACOSH = 37,     /* the inverse hyperbolic cosine (NaN below 1) */
    LUCID_ATANH = 38,     /* the inverse hyperbolic tangent (NaN outside [-1, 1]) */
    LUCID_SINC = 39,      /* sin(pi x) / (pi x), 1 at 0 */
    LUCID_I0 = 40,        /* the modified Bessel function of the first kind, order 0 */
    LUCID_SPECIAL_I0E = 41,          /* exp(-|x|) i0(x) */
    LUCID_SPECIAL_I1 = 42,           /* the modified Bessel function of the first kind, order 1 */
    LUCID_SPECIAL_I1E = 43,          /* exp(-|x|) i1(x) */
    LUCID_SPECIAL_NDTRI = 44,        /* the standard normal quantile: ndtr(y) = p for p in [0, 1] */
    LUCID_SPECIAL_LOG_NDTR = 45,     /* log of the standard normal distribution function, accurate in the tails */
    LUCID_SPECIAL_ERFCX = 46,        /* the scaled complementary error function exp(x**2) erfc(x) */
    LUCID_SPECIAL_BESSEL_J0 = 47,    /* the Bessel function of the first kind, order 0 (no gradient) */
    LUCID_SPECIAL_BESSEL_J1 = 48,    /* the Bessel function of the first kind, order 1 (no gradient) */
    LUCID_SPECIAL_BESSEL_Y0 = 49,    /* the Bessel function of the second kind, order 0 (no gradient) */
    LUCID_SPECIAL_BESSEL_Y1 = 50,    /* the Bessel function of the second kind, order 1 (no gradient) */
    LUCID_SPECIAL_MODIFIED_BESSEL_I0 = 51,        /* i0, as a special function (no gradient) */
    LUCID_SPECIAL_MODIFIED_BESSEL_I1 = 52,        /* i1, as a special function (no gradient) */
    LUCID_SPECIAL_MODIFIED_BESSEL_K0 = 53,        /* the modified Bessel function of the second kind, order 0 (no gradient) */
    LUCID_SPECIAL_MODIFIED_BESSEL_K1 = 54,        /* the modified Bessel function of the second kind, order 1 (no gradient) */
    LUCID_SPECIAL_SCALED_MODIFIED_BESSEL_K0 = 55, /* exp(x) k0(x) (no gradient) */
    LUCID_SPECIAL_SCALED_MODIFIED_BESSEL_K1 = 56, /* exp(x) k1(x) (no gradient) */
    LUCID_SPECIAL_SPHERICAL_BESSEL_J0 = 57,       /* sin(x) / x, 1 at 0 (no gradient) */
    LUCID_SPECIAL_AIRY_AI = 58                    /* the Airy function Ai (no gradient) */
};
enum lucid_reduce_op { LUCID_SUM = 0, LUCID_MEAN = 1, LUCID_AMAX = 2, LUCID_AMIN = 3, LUCID_LOGSUMEXP = 4 };
/* Loss reductions. */
enum lucid_reduction { LUCID_REDUCTION_NONE = 0, LUCID_REDUCTION_MEAN = 1, LUCID_REDUCTION_SUM = 2 };
enum lucid_cast_policy { LUCID_POLICY_NONE = 0, LUCID_POLICY_LOWER_PRECISION = 1, LUCID_POLICY_FLOAT32 = 2, LUCID_POLICY_PROMOTE = 3,
                         LUCID_POLICY_VIEW = 4 };
/* Subscript item kinds (lucid_index, lucid_index_put). */
enum lucid_index_kind { LUCID_INDEX_INT = 0, LUCID_INDEX_SLICE = 1, LUCID_INDEX_NONE = 2, LUCID_INDEX_ELLIPSIS = 3,
                        LUCID_INDEX_TENSOR = 4 };
/* lucid_assign flags: the value is one value written everywhere (fill_, allowed into an
 * expanded view); the value's dtype must not be of a higher kind (bool < integer < floating)
 * than the destination's, as for an in-place arithmetic op (copy_ converts any dtype); the
 * value is the in-place op's own result, so that what its backward saved of it is the
 * destination as written (a later write into it makes that backward refuse, as PyTorch's). */
enum lucid_assign_flag { LUCID_ASSIGN_FILL = 1, LUCID_ASSIGN_SAME_KIND = 2, LUCID_ASSIGN_RESULT = 4 };
/* lucid_split modes. */
enum lucid_split_mode { LUCID_SPLIT_SIZES = 0, LUCID_SPLIT_SIZE = 1, LUCID_SPLIT_CHUNKS = 2 };
/* lucid_pointwise_loss kinds. */
enum lucid_pointwise_loss_kind { LUCID_LOSS_MSE = 0, LUCID_LOSS_L1 = 1 };

/* The calling thread's last error message (NULL if none yet). Owned by the engine. */
const char *lucid_last_error(void);

/* ---- autocast -------------------------------------------------------------------------- */

/* Enters an autocast scope on the calling thread: sets (enabled, dtype) for `device` and
 * records the state it replaced. dtype -1 means float16; only float16, bfloat16 and float32
 * are accepted. Scopes may be left in any order: each device follows the innermost live
 * scope that names it, and is off once none does. */
int32_t guard_create(int32_t device, int32_t enabled, int32_t dtype, lucid_guard *out);
/* Leaves the scope. From another thread: LUCID_ERR_THREAD and nothing changes. A handle that
 * is not live (destroyed, forged, or its thread ended): LUCID_ERR_HANDLE. */
int32_t guard_destroy(lucid_guard guard);
/* Gives the op called `op` the autocast policy `policy` (a LUCID_POLICY_* code) while the
 * scope `guard` (live, the calling thread's) is: for ops on its device, an inner scope's
 * override of the same op winning. LUCID_ERR_VALUE for an unknown op or policy, an op with
 * no precision of its own (a view, or `to`: LUCID_POLICY_VIEW in the op table), the policy
 * LUCID_POLICY_VIEW, or LUCID_POLICY_LOWER_PRECISION for an op without 16-bit kernels. */
int32_t lucid_autocast_override(lucid_guard guard, const char *op, int32_t policy);
/* The policy the op called `op` has on `device` for the calling thread now, overrides
 * included. device -1: the innermost scope's that switches autocast on (metal when none). */
int32_t lucid_autocast_effective_policy(int32_t device, const char *op, int32_t *out);
/* Starts an inspection on the calling thread (lucid.amp.inspect): until it ends, every op that
 * runs in a lower precision under autocast on this thread has its floating inputs (before the
 * cast) and its result counted, by kernels on their device; nothing is read back until the end.
 * Inspections nest; each counts on its own. */
int32_t lucid_amp_inspect_begin(uint64_t *out);
/* The module path the calling thread's inspected ops are recorded under; "" or NULL: none. */
int32_t lucid_amp_inspect_set_module(const char *path);
/* Ends the inspection `id` (the calling thread's) and reads what it found (one wait for each
 * device's queued work), kept for lucid_amp_inspect_entry on this thread: *entries = how many
 * records, one per (op, module, device, dtype). LUCID_ERR_HANDLE for an id that is not live on
 * this thread. */
int32_t lucid_amp_inspect_end(uint64_t id, int64_t *entries);
/* What an inspection concludes about an op's precision. */
enum lucid_precision_verdict { LUCID_VERDICT_SAFE_FLOAT16 = 0, LUCID_VERDICT_USE_BFLOAT16 = 1, LUCID_VERDICT_KEEP_FLOAT32 = 2 };
/* Record `index` of the calling thread's last ended inspection: the op and module path
 * (engine-owned, valid for the process), the device and target dtype codes, the calls, and
 * values[0..16): for the inputs then the results, the elements seen, the largest magnitude that
 * is not NaN, and how many values were finite above 65504; non-zero below 2^-14; finite above
 * bfloat16's largest; non-zero below 2^-126; non-zero and not NaN; infinite or NaN. Then the
 * engine's verdict (a LUCID_VERDICT_* code) and why, as one line ("" when safe; engine-owned,
 * valid until this thread's next lucid_amp_inspect_end). */
int32_t lucid_amp_inspect_entry(int64_t index, const char **op, const char **module, int32_t *device,
                                int32_t *dtype, int64_t *calls, double *values, int32_t *verdict,
                                const char **reason);
/* device -1: whether autocast is on for either device. */
int32_t lucid_autocast_is_enabled(int32_t device, int32_t *out);
/* The dtype code autocast targets on `device`, or -1 when off there. device -1: the dtype of
 * the innermost scope that still switches autocast on, or -1. */
int32_t lucid_autocast_get_dtype(int32_t device, int32_t *out);
/* Live scopes in the process, across threads. */
int32_t lucid_autocast_live_guards(int64_t *out);
/* Parameter casts the calling thread's autocast weight cache holds (emptied when its
 * outermost scope exits). */
int32_t lucid_autocast_cached_casts(int64_t *out);
/* Whether the calling thread's weight cache is used (1, as for a new thread) or not (0):
 * autocast's cache_enabled. set writes the previous setting to *previous (may be NULL);
 * enabled must be 0 or 1. Casts already cached stay until the outermost scope exits. */
int32_t lucid_autocast_is_cache_enabled(int32_t *out);
int32_t lucid_autocast_set_cache_enabled(int32_t enabled, int32_t *previous);
/* The dtype a scope on `device` targets when guard_create is given -1. */
int32_t lucid_autocast_default_dtype(int32_t device, int32_t *out);
/* LUCID_OK when autocast on `device` can target `dtype`, else LUCID_ERR_VALUE naming the ones it can. */
int32_t lucid_autocast_check_dtype(int32_t device, int32_t dtype);
/* The engine's dtype and device tables: a code's name (owned by the engine), element size and
 * whether it is floating; LUCID_ERR_VALUE for an unknown code. */
int32_t lucid_dtype_info(int32_t dtype, const char **name, int32_t *itemsize, int32_t *is_floating);
int32_t lucid_device_info(int32_t device, const char **name);
/* The op table: index 0..count-1 gives a name (static storage), a LUCID_POLICY_* code and
 * whether the CPU stream has a bfloat16 kernel (when 0, bfloat16 CPU autocast runs it in
 * float32). */
int32_t lucid_op_count(int32_t *out);
int32_t lucid_op_info(int32_t index, const char **name, int32_t *policy, int32_t *cpu_bf16);

/* ---- tensors --------------------------------------------------------------------------- */

/* Copies `nbytes` of row-major elements of `dtype` (exactly numel * itemsize). */
int32_t lucid_tensor_from_host(const void *data, int64_t nbytes, const int64_t *shape, int32_t ndim,
                               int32_t dtype, int32_t device, int64_t out[LUCID_RECORD_LEN]);
/* value_kind LUCID_SCALAR_FLOAT reads `value`; LUCID_SCALAR_INT and _BOOL read `int_value`. */
int32_t lucid_tensor_full(const int64_t *shape, int32_t ndim, double value, int64_t int_value, int32_t value_kind,
                          int32_t dtype, int32_t device, int64_t out[LUCID_RECORD_LEN]);
/* start, start + step, ... up to (not including) end, computed in float64; dtype -1 is float32. */
int32_t lucid_tensor_arange(double start, double end, double step, int32_t dtype, int32_t device, int64_t out[LUCID_RECORD_LEN]);
/* The same in int64 arithmetic (exact for every int64 bound); dtype -1 is int64. */
int32_t lucid_tensor_arange_int(int64_t start, int64_t end, int64_t step, int32_t dtype, int32_t device,
                                int64_t out[LUCID_RECORD_LEN]);
/* normal 0: uniform [0, 1); 1: standard normal. Floating dtypes only. */
int32_t lucid_tensor_random(const int64_t *shape, int32_t ndim, int32_t normal, int32_t dtype,
                            int32_t device, int64_t out[LUCID_RECORD_LEN]);
int32_t lucid_manual_seed(uint64_t seed);
int32_t lucid_tensor_release(lucid_tensor t);
/* Releases `count` handles under one lock. Every live one is released; if some were not live,
 * the first of them is reported (LUCID_ERR_HANDLE) after the others are gone. */
int32_t lucid_tensor_release_many(const lucid_tensor *handles, int32_t count);
int32_t lucid_tensor_meta(lucid_tensor t, int32_t *dtype, int32_t *device, int32_t *ndim, int32_t *requires_grad);
/* Writes ndim sizes (and strides, in elements, if `strides` is not NULL); capacity >= ndim. */
int32_t lucid_tensor_shape(lucid_tensor t, int64_t *shape, int64_t *strides, int32_t capacity);
/* The tensor's record, as an op that made it writes it (enum lucid_record_field). */
int32_t lucid_tensor_record(lucid_tensor t, int64_t record[LUCID_RECORD_LEN]);
/* Copies the elements row-major; nbytes must be exactly numel * itemsize. */
int32_t lucid_tensor_to_host(lucid_tensor t, void *data, int64_t nbytes);
/* dtype / device -1: unchanged. Rounds to nearest even into float16 and bfloat16. */
int32_t lucid_tensor_to(lucid_tensor t, int32_t dtype, int32_t device, int64_t out[LUCID_RECORD_LEN]);
int32_t lucid_tensor_set_requires_grad(lucid_tensor t, int32_t flag, int64_t out[LUCID_RECORD_LEN]);
/* A second handle to the same values that does not require gradients. */
int32_t lucid_detach(lucid_tensor t, int64_t out[LUCID_RECORD_LEN]);
/* As lucid_detach, with a version counter of its own (PyTorch's `.data`): in-place writes
 * through it (and its views) change the values but not the version backward checks. */
int32_t lucid_data(lucid_tensor t, int64_t out[LUCID_RECORD_LEN]);
/* A copy of t in storage of its own, row-major (gradients flow back to t). */
int32_t lucid_clone(lucid_tensor t, int64_t out[LUCID_RECORD_LEN]);
/* The in-place write: value (broadcast to dst's shape, converted to its dtype, moved to its
 * device) goes into dst's elements, in its storage, seen by every tensor that views it; the
 * storage's version goes up by one. `flags`: enum lucid_assign_flag. `op` names the operation
 * in errors. When autograd records the write, it becomes the grad_fn of dst (of the tensor dst
 * views, for a view: every view of it then has the new history) and *recorded is set to 1;
 * otherwise nothing but the values changed and *recorded is 0. `recorded` may be NULL. */
int32_t lucid_assign(lucid_tensor dst, lucid_tensor value, int32_t flags, const char *op, int32_t *recorded);
/* Sets every element of dst to a scalar (value, or int_value for integer and bool kinds), in
 * place, expanded views included; op and recorded as for lucid_assign. */
int32_t lucid_fill(lucid_tensor dst, double value, int64_t int_value, int32_t kind, const char *op, int32_t *recorded);
/* PyTorch's `t.data = value`: t stands from now on for value's storage, shape, dtype and
 * device, cut from autograd, keeping its requires_grad (and gradient) when t is a leaf.
 * Tensors that viewed t keep the old storage. */
int32_t lucid_set_data(lucid_tensor t, lucid_tensor value);
/* dst op= other (other times alpha for LUCID_ADD and LUCID_SUB), in place, where autograd
 * records nothing (LUCID_ERR_RUNTIME otherwise: compute the result and lucid_assign it): one
 * kernel over dst's elements when the result keeps dst's dtype. other broadcasts to dst's
 * shape; a result of a higher kind than dst (a float into an integer tensor) is refused.
 * `name` names the op in errors. */
int32_t lucid_binary_inplace(int32_t op, lucid_tensor dst, lucid_tensor other, double alpha, const char *name);
/* dst op= scalar, as lucid_binary_inplace. */
int32_t lucid_binary_scalar_inplace(int32_t op, lucid_tensor dst, double value, int64_t int_value, int32_t kind,
                                    const char *name);
/* dst = op(dst), as lucid_binary_inplace. */
int32_t lucid_unary_inplace(int32_t op, lucid_tensor dst, const char *name);
/* dst[i0, i1, ...] = a scalar, for the `count` (at most 4) leading ints given, one per
 * dimension of dst, where autograd records nothing (LUCID_ERR_RUNTIME otherwise): the single
 * element write of Python's x[i] = 1.0, with no view made. */
int32_t lucid_set_element(lucid_tensor dst, int32_t count, int64_t i0, int64_t i1, int64_t i2, int64_t i3,
                          double value, int64_t int_value, int32_t kind);
/* Writes src (or, when src is 0, the scalar) into the elements dst[items] names, items as
 * for lucid_index but ints, slices, None and Ellipsis only: Python's dst[1, 2:5] = v, with no
 * view handed out; op and recorded as for lucid_assign. */
int32_t lucid_write_at(lucid_tensor dst, const int32_t *kinds, const int64_t *values, const int32_t *flags,
                       const lucid_tensor *tensors, int32_t count, lucid_tensor src, double value, int64_t int_value,
                       int32_t kind, const char *op, int32_t *recorded);
/* Handles not yet released. */
int32_t lucid_live_tensors(int64_t *out);
/* Bytes held by tensor buffers on `device` (-1: all devices) now, and at most since the last
 * reset. */
int32_t lucid_memory_stats(int32_t device, int64_t *allocated, int64_t *peak);
int32_t lucid_reset_peak_memory_stats(int32_t device);
/* Freed tensor buffers are cached for reuse; this returns the cache to the system and writes
 * the bytes freed. */
int32_t lucid_empty_cache(int64_t *freed);
/* Threads the CPU kernels use (the engine's loops, oneDNN's and OpenBLAS's pools), one
 * process-wide setting in 1..1024; it starts at the number of online cores. */
int32_t lucid_set_num_threads(int64_t n);
int32_t lucid_get_num_threads(int64_t *out);
/* 1 while the CPU kernels run on the calling thread alone because another process was found
 * keeping the cores busy (their regions' CPU time fell well below their wall time); they try
 * their threads again a second later. 0 otherwise. */
int32_t lucid_threads_contended(int32_t *out);
/* The vector unit the engine's own host loops run on, by PyTorch's names: "AVX512", "AVX2" or
 * "DEFAULT" (the baseline the engine is compiled for). The environment variable
 * LUCID_HOST_ISA (baseline, avx2 or avx512), read at the first host loop, can lower it. */
int32_t lucid_cpu_capability(const char **name);

/* ---- ops (inputs borrowed, result new) -------------------------------------------------- */

int32_t lucid_binary(int32_t op, lucid_tensor a, lucid_tensor b, int64_t out[LUCID_RECORD_LEN]);
/* a op scalar, or scalar op a when scalar_first. kind LUCID_SCALAR_FLOAT reads `value`;
 * LUCID_SCALAR_INT and _BOOL read `int_value`. */
int32_t lucid_binary_scalar(int32_t op, lucid_tensor a, double value, int64_t int_value, int32_t kind,
                            int32_t scalar_first, int64_t out[LUCID_RECORD_LEN]);
int32_t lucid_unary(int32_t op, lucid_tensor a, int64_t out[LUCID_RECORD_LEN]);
/* ~a: logical not for bool, bitwise not for integers (floating tensors are a type error). */
int32_t lucid_bitwise_not(lucid_tensor a, int64_t out[LUCID_RECORD_LEN]);
int32_t lucid_matmul(lucid_tensor a, lucid_tensor b, int64_t out[LUCID_RECORD_LEN]);
/* bias 0: none. */
int32_t lucid_linear(lucid_tensor x, lucid_tensor weight, lucid_tensor bias, int64_t out[LUCID_RECORD_LEN]);
/* ndims -1: every dimension. */
int32_t lucid_reduce(int32_t op, lucid_tensor a, const int64_t *dims, int32_t ndims, int32_t keepdim, int64_t out[LUCID_RECORD_LEN]);
/* One size may be -1. view_only: fail instead of copying when the layout needs a copy. */
int32_t lucid_reshape(lucid_tensor a, const int64_t *shape, int32_t ndim, int32_t view_only, int64_t out[LUCID_RECORD_LEN]);
int32_t lucid_transpose(lucid_tensor a, int64_t dim0, int64_t dim1, int64_t out[LUCID_RECORD_LEN]);
int32_t lucid_permute(lucid_tensor a, const int64_t *dims, int32_t ndim, int64_t out[LUCID_RECORD_LEN]);
int32_t lucid_contiguous(lucid_tensor a, int64_t out[LUCID_RECORD_LEN]);

/* ---- comparisons, selection, reductions ------------------------------------------------- */
/* A tensor argument of 0 means "absent" wherever a parameter is optional. */

int32_t lucid_compare(int32_t op, lucid_tensor a, lucid_tensor b, int64_t out[LUCID_RECORD_LEN]);
int32_t lucid_compare_scalar(int32_t op, lucid_tensor a, double value, int64_t int_value, int32_t kind,
                             int32_t scalar_first, int64_t out[LUCID_RECORD_LEN]);
/* cond ? a : b. A branch given as handle 0 is the scalar (value, int_value, kind) instead. */
int32_t lucid_where(lucid_tensor cond, lucid_tensor a, lucid_tensor b, double a_value, int64_t a_int, int32_t a_kind,
                    double b_value, int64_t b_int, int32_t b_kind, int64_t out[LUCID_RECORD_LEN]);
int32_t lucid_clamp(lucid_tensor a, int32_t has_min, double min_value, int64_t min_int, int32_t min_kind,
                    int32_t has_max, double max_value, int64_t max_int, int32_t max_kind, int64_t out[LUCID_RECORD_LEN]);
/* Variance (root != 0: standard deviation) with `correction`; ndims -1 reduces everything. */
int32_t lucid_var(lucid_tensor a, const int64_t *dims, int32_t ndims, double correction, int32_t keepdim, int32_t root,
                  int64_t out[LUCID_RECORD_LEN]);
/* Max (largest != 0) or min along dim: values and int64 indices. */
int32_t lucid_max_dim(lucid_tensor a, int64_t dim, int32_t keepdim, int32_t largest, lucid_tensor *values,
                      lucid_tensor *indices);
/* argmax / argmin along dim, or of the flattened tensor when has_dim is 0. */
int32_t lucid_argmax(lucid_tensor a, int64_t dim, int32_t has_dim, int32_t keepdim, int32_t largest, int64_t out[LUCID_RECORD_LEN]);

/* ---- shape and indexing ------------------------------------------------------------------ */

/* ndims -1 squeezes every size-1 dimension. */
int32_t lucid_squeeze(lucid_tensor a, const int64_t *dims, int32_t ndims, int64_t out[LUCID_RECORD_LEN]);
int32_t lucid_unsqueeze(lucid_tensor a, int64_t dim, int64_t out[LUCID_RECORD_LEN]);
int32_t lucid_expand(lucid_tensor a, const int64_t *shape, int32_t ndim, int64_t out[LUCID_RECORD_LEN]);
int32_t lucid_flatten(lucid_tensor a, int64_t start_dim, int64_t end_dim, int64_t out[LUCID_RECORD_LEN]);
int32_t lucid_narrow(lucid_tensor a, int64_t dim, int64_t start, int64_t length, int64_t out[LUCID_RECORD_LEN]);
/* torch.diagonal: the view of the diagonal of dimensions dim1 and dim2 (shifted by offset),
 * which become a last dimension. */
int32_t lucid_diagonal(lucid_tensor a, int64_t offset, int64_t dim1, int64_t dim2, int64_t out[LUCID_RECORD_LEN]);
/* torch.as_strided: the view of a's storage with `ndim` sizes and strides (in elements, not
 * negative) from storage element `offset` (a's own when has_offset is 0); it must lie inside
 * the storage. Its elements may repeat; their gradients add up. */
int32_t lucid_as_strided(lucid_tensor a, const int64_t *size, const int64_t *stride, int32_t ndim, int64_t offset,
                         int32_t has_offset, int64_t out[LUCID_RECORD_LEN]);
/* The element of a's storage where a's element 0 is. */
int32_t lucid_storage_offset(lucid_tensor a, int64_t *out);
/* 1 when a's elements lie in row-major order with no gaps (size-1 dimensions aside), else 0. */
int32_t lucid_is_contiguous(lucid_tensor a, int32_t *out);
/* Dimension `dim` of a tensor of `ndim` dimensions, wrapped into 0..<ndim (dim -1 and 0 for a
 * 0-d tensor); LUCID_ERR_INDEX, naming `op`, when it is out of range. */
int32_t lucid_wrap_dim(int64_t dim, int32_t ndim, const char *op, int64_t *out);
/* cat (stack = 0) or stack (stack = 1) of `count` tensors. */
int32_t lucid_cat(const lucid_tensor *tensors, int32_t count, int64_t dim, int32_t stack, int64_t out[LUCID_RECORD_LEN]);
/* mode LUCID_SPLIT_SIZES: pieces of the listed sizes; _SIZE: pieces of sizes[0]; _CHUNKS: sizes[0]
 * chunks. Writes up to
 * `capacity` new handles to `outs` and their number to `count`. */
int32_t lucid_split(lucid_tensor a, int32_t mode, const int64_t *sizes, int32_t nsizes, int64_t dim, lucid_tensor *outs,
                    int32_t capacity, int32_t *count);
/* a[items]: kinds lucid_index_kind (a tensor item is integer or bool); `values` holds
 * three int64 per item (the int, or start/stop/step), `flags` a slice's present parts (bits 0-2). */
int32_t lucid_index(lucid_tensor a, const int32_t *kinds, const int64_t *values, const int32_t *flags,
                    const lucid_tensor *tensors, int32_t count, int64_t out[LUCID_RECORD_LEN]);
/* A new tensor: `a` with `src` (converted to a's dtype, broadcast to the shape of a[items]) written
 * at a[items], or added there when `accumulate` (repeated positions add up). Without it, a
 * position an integer index repeats takes its last write. Items as for lucid_index. */
int32_t lucid_index_put(lucid_tensor a, const int32_t *kinds, const int64_t *values, const int32_t *flags,
                        const lucid_tensor *tensors, int32_t count, lucid_tensor src, int32_t accumulate,
                        int64_t out[LUCID_RECORD_LEN]);
/* The same write into dst itself, in place: only the elements dst[items] names are read and
 * written, an expanded view's included; op and recorded as for lucid_assign. */
int32_t lucid_index_put_inplace(lucid_tensor dst, const int32_t *kinds, const int64_t *values, const int32_t *flags,
                                const lucid_tensor *tensors, int32_t count, lucid_tensor src, int32_t accumulate,
                                const char *op, int32_t *recorded);
int32_t lucid_gather(lucid_tensor a, int64_t dim, lucid_tensor index, int64_t out[LUCID_RECORD_LEN]);
int32_t lucid_index_select(lucid_tensor a, int64_t dim, lucid_tensor index, int64_t out[LUCID_RECORD_LEN]);
int32_t lucid_embedding(lucid_tensor weight, lucid_tensor indices, int32_t has_padding_idx, int64_t padding_idx,
                        int64_t out[LUCID_RECORD_LEN]);

/* ---- layers ------------------------------------------------------------------------------ */

int32_t lucid_softmax(lucid_tensor a, int64_t dim, int32_t log, int64_t out[LUCID_RECORD_LEN]);
int32_t lucid_dropout(lucid_tensor a, double p, int32_t training, int64_t out[LUCID_RECORD_LEN]);
/* torch.nn.functional.leaky_relu: a > 0 ? a : negative_slope·a for a floating tensor (gradient
 * negative_slope at 0). */
int32_t lucid_leaky_relu(lucid_tensor a, double negative_slope, int64_t out[LUCID_RECORD_LEN]);
/* One LSTM step from the input's and the hidden state's products (xw, hw: [batch, 4 * hidden],
 * gates in PyTorch's order: input, forget, cell, output) and the cell state c ([batch, hidden]):
 * the new hidden state to h and the new cell state to c_new. */
int32_t lucid_lstm_cell(lucid_tensor xw, lucid_tensor hw, lucid_tensor c, int64_t h[LUCID_RECORD_LEN],
                        int64_t c_new[LUCID_RECORD_LEN]);
/* One LSTM layer over a sequence x ([steps, batch, features]) from the states h0 and c0
 * ([batch, hidden]), with PyTorch's weights (w_ih [4 * hidden, features], w_hh
 * [4 * hidden, hidden]) and optional biases (0 for none), from the last step to the first when
 * reverse: every step's hidden state to out ([steps, batch, hidden]), the final ones to h_n
 * and c_n. */
int32_t lucid_lstm_layer(lucid_tensor x, lucid_tensor h0, lucid_tensor c0, lucid_tensor w_ih, lucid_tensor w_hh,
                         lucid_tensor b_ih, lucid_tensor b_hh, int32_t reverse, int64_t out[LUCID_RECORD_LEN],
                         int64_t h_n[LUCID_RECORD_LEN], int64_t c_n[LUCID_RECORD_LEN]);
/* One GRU step from the input's and the hidden state's products (xw, hw: [batch, 3 * hidden],
 * each with its bias, gates in PyTorch's order: reset, update, new) and the hidden state h
 * ([batch, hidden]): the new hidden state n + z * (h - n), with n = tanh(xw_n + r * hw_n). */
int32_t lucid_gru_cell(lucid_tensor xw, lucid_tensor hw, lucid_tensor h, int64_t out[LUCID_RECORD_LEN]);
/* One GRU layer over a sequence x ([steps, batch, features]) from the state h0 ([batch, hidden]),
 * with PyTorch's weights (w_ih [3 * hidden, features], w_hh [3 * hidden, hidden]) and optional
 * biases (0 for none), from the last step to the first when reverse: every step's hidden state
 * to out ([steps, batch, hidden]), the final one to h_n. */
int32_t lucid_gru_layer(lucid_tensor x, lucid_tensor h0, lucid_tensor w_ih, lucid_tensor w_hh, lucid_tensor b_ih,
                        lucid_tensor b_hh, int32_t reverse, int64_t out[LUCID_RECORD_LEN],
                        int64_t h_n[LUCID_RECORD_LEN]);
/* One Elman RNN layer over a sequence x ([steps, batch, features]) from the state h0
 * ([batch, hidden]): h' = tanh (or, when relu, ReLU) of x w_ih^T + b_ih + h w_hh^T + b_hh, with
 * PyTorch's weights (w_ih [hidden, features], w_hh [hidden, hidden]) and optional biases (0 for
 * none), from the last step to the first when reverse: every step's hidden state to out
 * ([steps, batch, hidden]), the final one to h_n. */
int32_t lucid_rnn_layer(lucid_tensor x, lucid_tensor h0, lucid_tensor w_ih, lucid_tensor w_hh, lucid_tensor b_ih,
                        lucid_tensor b_hh, int32_t relu, int32_t reverse, int64_t out[LUCID_RECORD_LEN],
                        int64_t h_n[LUCID_RECORD_LEN]);
int32_t lucid_layer_norm(lucid_tensor a, const int64_t *normalized_shape, int32_t ndim, lucid_tensor weight,
                         lucid_tensor bias, double eps, int64_t out[LUCID_RECORD_LEN]);
int32_t lucid_group_norm(lucid_tensor a, int64_t groups, lucid_tensor weight, lucid_tensor bias, double eps,
                         int64_t out[LUCID_RECORD_LEN]);
/* In training with running statistics, also writes their updated (float32) values; else 0. */
int32_t lucid_batch_norm(lucid_tensor a, lucid_tensor running_mean, lucid_tensor running_var, lucid_tensor weight,
                         lucid_tensor bias, int32_t training, double momentum, double eps, lucid_tensor *out,
                         lucid_tensor *new_mean, lucid_tensor *new_var);
/* params: stride h, w; padding h, w; dilation h, w; groups. */
int32_t lucid_conv2d(lucid_tensor x, lucid_tensor w, lucid_tensor b, const int64_t params[7], int64_t out[LUCID_RECORD_LEN]);
/* params: stride, padding, dilation, groups. */
int32_t lucid_conv1d(lucid_tensor x, lucid_tensor w, lucid_tensor b, const int64_t params[4], int64_t out[LUCID_RECORD_LEN]);
/* params: stride h, w; padding h, w; output padding h, w; dilation h, w; groups. */
int32_t lucid_conv_transpose2d(lucid_tensor x, lucid_tensor w, lucid_tensor b, const int64_t params[9], int64_t out[LUCID_RECORD_LEN]);
/* params: kernel h, w; stride h, w; padding h, w; dilation h, w. */
int32_t lucid_max_pool2d(lucid_tensor x, const int64_t params[8], int32_t ceil_mode, int64_t out[LUCID_RECORD_LEN]);
/* params: kernel h, w; stride h, w; padding h, w. divisor_override 0 means none. */
int32_t lucid_avg_pool2d(lucid_tensor x, const int64_t params[6], int32_t ceil_mode, int32_t count_include_pad,
                         int64_t divisor_override, int64_t out[LUCID_RECORD_LEN]);
int32_t lucid_adaptive_avg_pool2d(lucid_tensor x, int64_t out_h, int64_t out_w, int64_t out[LUCID_RECORD_LEN]);
/* Scaled dot-product attention; a bool mask is true where attention is allowed, a float mask is
 * added. Writes the attention weights too when `weights` is non-null. */
int32_t lucid_attention(lucid_tensor q, lucid_tensor k, lucid_tensor v, lucid_tensor mask, int32_t is_causal,
                        int32_t has_scale, double scale, double dropout_p, lucid_tensor *out, lucid_tensor *weights);

/* ---- losses (float32 under autocast) ---------------------------------------------------- */

/* kind: lucid_pointwise_loss_kind. */
int32_t lucid_pointwise_loss(int32_t kind, lucid_tensor input, lucid_tensor target, int32_t reduction, int64_t out[LUCID_RECORD_LEN]);
int32_t lucid_nll_loss(lucid_tensor input, lucid_tensor target, lucid_tensor weight, int64_t ignore_index,
                       int32_t reduction, int64_t out[LUCID_RECORD_LEN]);
int32_t lucid_cross_entropy(lucid_tensor input, lucid_tensor target, lucid_tensor weight, int64_t ignore_index,
                            int32_t reduction, double label_smoothing, int64_t out[LUCID_RECORD_LEN]);
/* Of probabilities (each log clamped at -100); refused under autocast. weight 0: none. */
int32_t lucid_binary_cross_entropy(lucid_tensor input, lucid_tensor target, lucid_tensor weight, int32_t reduction,
                                   int64_t out[LUCID_RECORD_LEN]);
int32_t lucid_bce_with_logits(lucid_tensor input, lucid_tensor target, lucid_tensor weight, lucid_tensor pos_weight,
                              int32_t reduction, int64_t out[LUCID_RECORD_LEN]);

/* ---- autograd (the graph lives in the engine) ------------------------------------------- */

/* Backpropagates from t into every leaf that requires grad; grad 0 means 1 for a one-element
 * t. Unless retain_graph, the graph's saved tensors are freed and a second backward through
 * it fails. Runs with grad mode and autocast off. */
int32_t lucid_backward(lucid_tensor t, lucid_tensor grad, int32_t retain_graph);
/* Custom functions (lucid.autograd.Function). The caller's backward gets its context, the
 * output's gradient (a new handle it owns) and an array to fill with one gradient handle per
 * input (0 for none; the engine reads them when it returns, so they must stay alive until the
 * context is released); it returns 0, or non-zero when it failed. release is called once per
 * context when no graph node needs it any more. */
typedef int32_t (*lucid_custom_backward)(uint64_t context, lucid_tensor grad, lucid_tensor *grads, int32_t count);
typedef void (*lucid_custom_release)(uint64_t context);
int32_t lucid_custom_function_callbacks(lucid_custom_backward backward, lucid_custom_release release);
/* `output` (computed by the caller, untracked) recorded as the result of a function `name` of
 * the `count` tensors `inputs`, with the registered backward and `context`: *out is the
 * tracked output (the output itself when no input requires grad or grad mode is off). */
int32_t lucid_custom_function_record(const char *name, const lucid_tensor *inputs, int32_t count, lucid_tensor output,
                                     uint64_t context, lucid_tensor *out);
/* The leaf's accumulated gradient as a new reference, or 0 when there is none. */
int32_t lucid_tensor_grad(lucid_tensor t, lucid_tensor *out);
/* Replaces the leaf's gradient (same shape, dtype and device), or clears it with 0. */
int32_t lucid_tensor_set_grad(lucid_tensor t, lucid_tensor grad);
/* The name of the op that made t ("MatmulBackward", static storage), or NULL for a leaf. */
int32_t lucid_tensor_grad_fn(lucid_tensor t, const char **name);
/* Grad mode of the calling thread (on for a new thread). `previous` may be NULL. */
int32_t lucid_set_grad_enabled(int32_t enabled, int32_t *previous);
int32_t lucid_is_grad_enabled(int32_t *out);

/* ---- gradient hooks, and autograd over several tensors ------------------------------------ */

/* A tensor's hooks (Tensor.register_hook): the caller's hook gets its context, a new handle it
 * owns (to the gradient for LUCID_HOOK_GRAD, to the leaf itself for LUCID_HOOK_POST_ACCUMULATE)
 * and where to write a replacement gradient's handle (0 for none; the engine reads it when the
 * hook returns, so it must be alive until then); it returns 0, or non-zero when it failed, which
 * fails the backward pass. release is called once per context when the engine no longer holds
 * it (the hook was removed, or its tensor and graph are gone). */
typedef int32_t (*lucid_hook_call)(uint64_t context, lucid_tensor value, lucid_tensor *replacement);
typedef void (*lucid_hook_release)(uint64_t context);
int32_t lucid_hook_callbacks(lucid_hook_call call, lucid_hook_release release);
enum lucid_hook_kind {
    LUCID_HOOK_GRAD = 0,            /* called with the tensor's gradient each time backward computes it */
    LUCID_HOOK_POST_ACCUMULATE = 1  /* called with a leaf once its gradient is accumulated into grad */
};
/* Registers the hook `context` of `kind` on t (which requires grad; a leaf for
 * LUCID_HOOK_POST_ACCUMULATE), after the hooks t already has: *key removes it. An op result's
 * hooks see the gradient of the value t had when they were registered. */
int32_t lucid_tensor_register_hook(lucid_tensor t, int32_t kind, uint64_t context, uint64_t *key);
/* Unregisters a hook; *removed is 0 when it was already gone. */
int32_t lucid_hook_remove(uint64_t key, int32_t *removed);
/* Makes the op result t keep its gradient in grad during backward passes (a leaf keeps it). */
int32_t lucid_tensor_retain_grad(lucid_tensor t);
int32_t lucid_tensor_retains_grad(lucid_tensor t, int32_t *out);
/* torch.autograd.backward: backpropagates from the `count` tensors with their gradients (0 means
 * 1 for a one-element tensor) in one pass; with input_count > 0, only `inputs` accumulate. */
int32_t lucid_autograd_backward(const lucid_tensor *tensors, const lucid_tensor *grads, int32_t count,
                                const lucid_tensor *inputs, int32_t input_count, int32_t retain_graph);
/* torch.autograd.grad: grads[i] is a new handle to the gradient of the outputs (weighted by
 * grad_outputs, 0 meaning 1 for a one-element output) with respect to inputs[i], or 0 for an
 * input they do not depend on (an error unless allow_unused). No tensor's grad changes. */
int32_t lucid_autograd_grad(const lucid_tensor *outputs, const lucid_tensor *grad_outputs, int32_t count,
                            const lucid_tensor *inputs, int32_t input_count, int32_t retain_graph, int32_t allow_unused,
                            lucid_tensor *grads);

/* ---- optimizers (one call per parameter, in place) ----------------------------------------- */

/* GradScaler's state lives in tensors of the gradients' device, so that no step waits for the
 * host: found_inf is a one-element float32 flag (non-zero: skip the step), a scale a
 * one-element float32, a growth tracker a one-element int32. An optimizer step given a
 * found_inf (0 for none) writes nothing when it is set. */

/* torch.optim.SGD: param and buffer are updated in place. buffer 0 on the first step; then
 * *new_buffer is the buffer made for it (0 when momentum is 0 or a buffer was given, or when
 * a first step with dampening was skipped). */
int32_t lucid_sgd_step(lucid_tensor param, lucid_tensor grad, lucid_tensor buffer, lucid_tensor found_inf, double lr,
                       double momentum, double dampening, double weight_decay, int32_t nesterov, int32_t maximize,
                       lucid_tensor *new_buffer);
/* torch.optim.Adam, or AdamW when `decoupled`: param, m and v are updated in place, and step (a
 * one-element float32 on param's device, the steps taken) goes up by one. m and v 0 before the
 * first step: *new_m and *new_v are then the moments made for it (0 for those given). */
int32_t lucid_adam_step(lucid_tensor param, lucid_tensor grad, lucid_tensor m, lucid_tensor v, lucid_tensor step,
                        lucid_tensor found_inf, double lr, double beta1, double beta2, double eps, double weight_decay,
                        int32_t decoupled, int32_t maximize, lucid_tensor *new_m, lucid_tensor *new_v);

/* GradScaler's unscale: grads[i] *= inv_scale in float32, in place, and found_inf is set to 1
 * when any value is infinite or NaN (left as it is otherwise). */
int32_t lucid_unscale_grads(const lucid_tensor *grads, int32_t count, lucid_tensor inv_scale, lucid_tensor found_inf);
/* GradScaler's update of scale and growth_tracker, in place: backoff_factor after a skipped
 * step, growth_factor after growth_interval clean ones (unless past the float32 range). */
int32_t lucid_update_scale(lucid_tensor scale, lucid_tensor growth_tracker, lucid_tensor found_inf,
                           double growth_factor, double backoff_factor, int64_t growth_interval);

/* ---- checkpoints (the safetensors format) -------------------------------------------------- */

/* The engine's one reader and writer of safetensors files (lucid.save / lucid.load in Python,
 * saveSafetensors / loadSafetensors in Swift). Dtypes are the format's names ("F32", "BF16",
 * "BOOL", ...): the ten of lucid's dtypes, and U16 and U32 (held as int32 and int64). */

/* Checks the file data[0..nbytes) and keeps its description on the calling thread for
 * lucid_safetensors_tensor and lucid_safetensors_metadata, until its next read: *tensors = how
 * many tensors, *metadata = how many metadata entries. Refused with LUCID_ERR_VALUE and the
 * reason ("not a valid safetensors file: ..."): a short, oversized or overlong header length; a
 * header that is not UTF-8, not JSON, nested deeper than 128, not an object or names a key
 * twice; an entry without a known dtype, a shape of non-negative integers or two
 * data_offsets; data ranges with gaps or overlaps, sizes that are not the shape's, bytes after
 * the last range; metadata that is not strings; a NUL in a name; BOOL bytes other than 0 and 1;
 * a dtype lucid cannot hold ("... which lucid cannot hold"). */
int32_t lucid_safetensors_read(const void *data, int64_t nbytes, int64_t *tensors, int64_t *metadata);
/* How many bytes of tensor data the header JSON header[0..nbytes) declares (the furthest end of
 * its data_offsets), or 0 when it is not a header: a stream is read no further than that, and
 * lucid_safetensors_read then names anything wrong. */
int32_t lucid_safetensors_declared_size(const void *header, int64_t nbytes, int64_t *size);
/* Tensor `index` of the calling thread's last read, in the order of the data: its name and
 * dtype name (engine-owned, valid until the thread's next read), its sizes written to shape
 * (capacity >= ndim), ndim, and the offset of its bytes in the data read and their count. */
int32_t lucid_safetensors_tensor(int64_t index, const char **name, const char **dtype, int64_t *shape, int32_t capacity,
                                 int32_t *ndim, int64_t *offset, int64_t *nbytes);
/* Metadata entry `index` of the last read (engine-owned, valid until the thread's next read). */
int32_t lucid_safetensors_metadata(int64_t index, const char **key, const char **value);
/* Lays out a file of `count` tensors: names[i] with dtype name dtypes[i], ndims[i] sizes
 * taken in turn from shapes, and nbytes[i] bytes at data[i] (row-major, little-endian); and
 * `metadata_count` entries keys[i]: values[i]. *size = the file's size; when capacity >= *size
 * the file is written to out, else nothing is (call again with a buffer of *size bytes).
 * Tensors are stored larger elements first, then by name, after a header padded to 8 bytes,
 * as the reference implementation writes them. LUCID_ERR_VALUE for a name given twice,
 * "__metadata__", a NUL, or bytes that are not the shape's; LUCID_ERR_TYPE for a dtype not
 * written. */
int32_t lucid_safetensors_write(const char *const *names, const char *const *dtypes, const int32_t *ndims,
                                const int64_t *shapes, const void *const *data, const int64_t *nbytes, int32_t count,
                                const char *const *keys, const char *const *values, int32_t metadata_count, void *out,
                                int64_t capacity, int64_t *size);

/* ---- platform -------------------------------------------------------------------------- */

/* 1 when Metal kernels serve the "metal" device, 0 where the host fallback does. */
int32_t lucid_metal_is_available(int32_t *out);
/* Waits until every kernel queued on "metal" has finished. LUCID_ERR_RUNTIME when "metal" is
 * unavailable (no Metal and LUCID_METAL_FALLBACK=0). */
int32_t lucid_metal_synchronize(void);
/* Ops whose kernels the "metal" device's backend declined, so that the host kernels ran them
 * over the device's memory: *out = how many distinct ops so far. Entries only ever grow. */
int32_t lucid_metal_fallback_entries(int64_t *out);
/* Entry `index` (0 <= index < entries): the op's name (engine-owned, valid for the process)
 * and how many times it ran on the host. */
int32_t lucid_metal_fallback_entry(int64_t index, const char **name, int64_t *count);
/* Runs the Metal backend's self-test now: every kernel it has, on small fixed inputs, against
 * the host kernels (the same test runs before the backend first serves "metal"; a failure
 * keeps "metal" on the host fallback). *checks = how many checks ran, *failures = how many
 * disagreed. LUCID_ERR_RUNTIME where there is no Metal backend. */
int32_t lucid_metal_self_test(int64_t *checks, int64_t *failures);
/* Check `index` of the last self-test run: the op (engine-owned name), the dtype code, the
 * largest relative error against the host, the tolerance it is held to, and what went wrong
 * beyond the numbers (the kernel compiler's message for the check "compile_library"; ""
 * otherwise; engine-owned, valid until the next self-test). */
int32_t lucid_metal_self_test_entry(int64_t index, const char **op, int32_t *dtype, double *max_error,
                                    double *tolerance, const char **detail);
/* The Metal backend's counters since the process started (zero where no Metal backend
 * serves "metal", host fallbacks aside), written to out[0..n): command buffers committed, host
 * waits for queued GPU work, new MTLBuffers, bytes cached, host fallbacks, kernel libraries
 * compiled from source, and the number of kernels dispatched so far (entries for
 * lucid_metal_dispatch_entry, as of this call). At most 7 are written. */
int32_t lucid_metal_stats(int64_t *out, int32_t n);
/* Dispatch entry `index` of the last lucid_metal_stats call: the kernel's name (engine-owned,
 * valid for the process) and how many times it was dispatched. */
int32_t lucid_metal_dispatch_entry(int64_t index, const char **kernel, int64_t *count);
/* The Metal backend's kernel libraries, one per kernel family, made when "metal" is first used
 * (this call readies it if it has not been): *count = how many (0 where there is no Metal
 * backend). */
int32_t lucid_metal_libraries(int64_t *count);
/* Library entry `index` of the last lucid_metal_libraries call (engine-owned strings, valid for
 * the process): the family's name; where its kernels came from, "prebuilt" (the library compiled
 * ahead of time, loaded from <the engine's folder>/metal or LUCID_METALLIB_DIR) or "source"
 * (compiled at run time); the prebuilt library's path, or why the family was compiled from
 * source although a folder of prebuilt libraries exists ("" when there is none); and why the
 * library failed ("" when it did not). */
int32_t lucid_metal_library_entry(int64_t index, const char **family, const char **origin, const char **detail,
                                  const char **error);
/* Receives the engine's one-time notices (e.g. the host fallback warning); NULL restores
 * the default, which writes them to standard error. Called on the thread that triggered it. */
int32_t lucid_set_warning_handler(void (*handler)(const char *message));

/* ---- linear algebra ------------------------------------------------------------------------ */
/* LAPACK factorizations of float32 / float64 matrices [..., m, n], batched over the leading
 * dimensions and differentiable (lucid.linalg composes the rest from them). A result not
 * computed is written as handle 0. */

/* LU with partial pivoting: lu (L below the diagonal, unit diagonal implied, U on and above),
 * pivots (int32 [..., min(m, n)], 1-based row swaps), info (int32 [...], k > 0 when U[k-1, k-1]
 * is zero). check != 0 raises on a zero pivot instead. */
int32_t lucid_linalg_lu_factor(lucid_tensor a, int32_t check, lucid_tensor *lu, lucid_tensor *pivots, lucid_tensor *info);
/* X with A @ X = B (left != 0) or X @ A = B, A upper or lower triangular (the other triangle is
 * not read), a unit diagonal assumed when unitriangular != 0; batch dimensions broadcast. */
int32_t lucid_linalg_solve_triangular(lucid_tensor a, lucid_tensor b, int32_t upper, int32_t left, int32_t unitriangular,
                                      int64_t out[LUCID_RECORD_LEN]);
/* Cholesky factor L (A = L @ L^T), or U (A = U^T @ U) when upper != 0, and info (int32 [...], k > 0
 * when the leading minor of order k is not positive-definite; check != 0 raises instead). */
int32_t lucid_linalg_cholesky(lucid_tensor a, int32_t upper, int32_t check, lucid_tensor *l, lucid_tensor *info);
/* Eigenvalues (ascending) and, when vectors != 0, eigenvectors (columns) of symmetric A, read
 * from its lower triangle (upper != 0: upper). */
int32_t lucid_linalg_eigh(lucid_tensor a, int32_t upper, int32_t vectors, lucid_tensor *values, lucid_tensor *vecs);
/* A = U @ diag(S) @ Vh, S descending; U and Vh full (m x m, n x n) when full != 0, and only when
 * vectors != 0. */
int32_t lucid_linalg_svd(lucid_tensor a, int32_t full, int32_t vectors, lucid_tensor *u, lucid_tensor *s, lucid_tensor *vh);
/* lucid_linalg_qr modes: Q [..., m, k] and R [..., k, n]; Q [..., m, m] and R [..., m, n]; R alone. */
enum lucid_qr_mode { LUCID_QR_REDUCED = 0, LUCID_QR_COMPLETE = 1, LUCID_QR_R = 2 };
/* A = Q @ R, as `mode` (a LUCID_QR_* code) says; q = 0 for LUCID_QR_R. */
int32_t lucid_linalg_qr(lucid_tensor a, int32_t mode, lucid_tensor *q, lucid_tensor *r);
/* LAPACK's geqrf: R and the Householder reflectors packed in qr, their scales in tau. */
int32_t lucid_linalg_geqrf(lucid_tensor a, lucid_tensor *qr, lucid_tensor *tau);
/* Bunch-Kaufman A = P L D L^T P^T of symmetric A (lower triangle read): ld (LAPACK's sytrf packing,
 * zeros above the diagonal), pivots (int32 [..., n], negative for 2 x 2 blocks), info (int32 [...],
 * k > 0 when D[k-1, k-1] is zero; check != 0 raises instead). Not differentiable. */
int32_t lucid_linalg_ldl_factor(lucid_tensor a, int32_t check, lucid_tensor *ld, lucid_tensor *pivots,
                                lucid_tensor *info);
/* X with A @ X = B for A given by lucid_linalg_ldl_factor's ld and pivots. Not differentiable. */
int32_t lucid_linalg_ldl_solve(lucid_tensor ld, lucid_tensor pivots, lucid_tensor b, int64_t out[LUCID_RECORD_LEN]);

#ifdef __cplusplus
}
#endif

#endif /* LUCID_H */
