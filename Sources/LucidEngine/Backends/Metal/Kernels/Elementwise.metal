// Elementwise kernels of the Metal backend: binary arithmetic (tensor-tensor and
// tensor-scalar), unary functions and their derivatives, comparisons and selection.
//
// Operands are strided views of up to 8 dimensions (broadcasts have stride 0); every thread
// computes one element of the output. Operands that are all contiguous and of one shape take
// the `_contig` forms instead (four elements a thread as 4-wide vectors, 32-bit indices), and
// binary operands that merge into three dimensions or fewer (a broadcast bias or scale) the
// `_grid` forms (no division). Floating types are stored as float, half or bfloat and
// computed in float32, rounding once on store, as the host kernels do. The backend compiles
// this library with fast math off, so NaN and infinities follow IEEE 754. Compiled after
// Common.metal (whose `Layout` the strided forms take), as a library of its own.

// ---- binary ------------------------------------------------------------------------------
// Op codes: BinaryKernel's raw values (add 0, sub, mul, div, pow, maximum, minimum 6; bitwise and,
// or, xor 7-9, for integers and bool only; atan2 10, copysign 11, fmod 21, remainder 22, floor and
// trunc division 23-24, fmax, fmin, heaviside 25-27; shifts, gcd and lcm 28-31, integers only).
// BinaryKernel.hasMetalKernel lists the ops these kernels take.

// The quotient of a floating division rounded down (floor) or toward zero: (x - fmod(x, y)) / y
// is an integer up to one rounding, so it is taken to the nearest one, then moved down by one
// where the remainder's sign differs from y's (floor); as the host computes it.
inline float divide_rounded(float x, float y, bool floor_mode) {
    if (y == 0.0f) return floor_mode ? floor(x / y) : trunc(x / y);
    float r = precise::fmod(x, y);
    float q = rint((x - r) / y);
    if (floor_mode && r != 0.0f && (y < 0.0f) != (r < 0.0f)) q -= 1.0f;
    return q == 0.0f ? copysign(0.0f, x / y) : q;
}

inline float binary_float(uint op, float x, float y) {
    switch (op) {
    case 0: return x + y;
    case 1: return x - y;
    case 2: return x * y;
    case 3: return x / y;
    case 4: return precise::pow(x, y);
    case 5: return (isnan(x) || isnan(y)) ? NAN : max(x, y);
    case 10: return precise::atan2(x, y);
    case 11: return copysign(x, y);
    case 21: return precise::fmod(x, y);
    case 22: {
        float r = precise::fmod(x, y);
        return (r != 0.0f && (r < 0.0f) != (y < 0.0f)) ? r + y : r;
    }
    case 23: return divide_rounded(x, y, true);
    case 24: return divide_rounded(x, y, false);
    case 25: return isnan(x) ? y : (isnan(y) ? x : max(x, y));
    case 26: return isnan(x) ? y : (isnan(y) ? x : min(x, y));
    case 27: return x == 0.0f ? y : (x > 0.0f ? 1.0f : 0.0f);
    default: return (isnan(x) || isnan(y)) ? NAN : min(x, y);
    }
}

inline long integer_power(long base, long exponent) {
    if (exponent < 0) {
        if (base == 1) return 1;
        if (base == -1) return (exponent & 1) == 0 ? 1 : -1;
        return 0;
    }
    ulong result = 1, b = ulong(base);
    ulong e = ulong(exponent);
    while (e > 0) {
        if (e & 1) result *= b;
        b *= b;
        e >>= 1;
    }
    return long(result);
}

constant long LONG_LOWEST = -9223372036854775807L - 1L;

// An int64 result stored as T: truncated, as the host stores it; a bool stores v != 0.
template <typename T> inline T from_long(long v) { return T(v); }
template <> inline uchar from_long<uchar>(long v) { return v != 0 ? 1 : 0; }

// Wrapping integer arithmetic, computed in unsigned form (signed overflow is undefined).
inline long binary_int(uint op, long x, long y) {
    switch (op) {
    case 0: return long(ulong(x) + ulong(y));
    case 1: return long(ulong(x) - ulong(y));
    case 2: return long(ulong(x) * ulong(y));
    case 3: return y == 0 ? 0 : ((x == LONG_LOWEST && y == -1) ? LONG_LOWEST : x / y);
    case 4: return integer_power(x, y);
    case 5: return max(x, y);
    case 6: return min(x, y);
    case 7: return x & y;
    case 8: return x | y;
    case 21: case 24:  // fmod, trunc division (a divisor of 0 is refused before; LONG_LOWEST / -1 wraps)
        if (y == 0) return 0;
        if (y == -1) return op == 21 ? 0 : long(0ul - ulong(x));
        return op == 21 ? x % y : x / y;
    case 22: case 23: {  // remainder, floor division
        if (y == 0) return 0;
        if (y == -1) return op == 22 ? 0 : long(0ul - ulong(x));
        long q = x / y, r = x % y;
        bool adjust = r != 0 && (r < 0) != (y < 0);
        return op == 22 ? (adjust ? r + y : r) : (adjust ? q - 1 : q);
    }
    case 25: return max(x, y);
    case 26: return min(x, y);
    case 27: return x == 0 ? y : (x > 0 ? 1 : 0);
    // Shifts by a negative count or 64 or more give 0 (left) or the sign (right).
    case 28: return (y < 0 || y >= 64) ? 0 : long(ulong(x) << ulong(y));
    case 29: return (y < 0 || y >= 64) ? (x < 0 ? -1 : 0) : x >> y;
    case 30: case 31: {
        ulong u = ulong(x < 0 ? long(0ul - ulong(x)) : x), v = ulong(y < 0 ? long(0ul - ulong(y)) : y);
        while (v != 0) { ulong t = u % v; u = v; v = t; }
        if (op == 30) return long(u);
        if (u == 0) return 0;
        long m = long(ulong(x / long(u)) * ulong(y));
        return (m < 0 && m != LONG_LOWEST) ? -m : m;
    }
    default: return x ^ y;
    }
}

#define LUCID_BINARY_FLOAT_AT(NAME, T, L, I)                                                         \
kernel void NAME(device const T* a [[buffer(0)]], device const T* b [[buffer(1)]],                   \
                 device T* out [[buffer(2)]], constant L& layout [[buffer(3)]],                      \
                 constant uint& op [[buffer(4)]], LUCID_THREAD_POSITION) {                           \
    const I gid = I(LUCID_THREAD_INDEX);                                                             \
    if (gid >= layout.count) return;                                                                 \
    float x = widen(a[element_offset(gid, layout, 0)]), y = widen(b[element_offset(gid, layout, 1)]); \
    out[element_offset(gid, layout, 2)] = narrow<T>(binary_float(op, x, y));                         \
}
#define LUCID_BINARY_FLOAT(NAME, T) LUCID_INDEX_FORMS(LUCID_BINARY_FLOAT_AT, NAME, T)

#define LUCID_BINARY_INT_AT(NAME, T, L, I)                                                           \
kernel void NAME(device const T* a [[buffer(0)]], device const T* b [[buffer(1)]],                   \
                 device T* out [[buffer(2)]], constant L& layout [[buffer(3)]],                      \
                 constant uint& op [[buffer(4)]], LUCID_THREAD_POSITION) {                           \
    const I gid = I(LUCID_THREAD_INDEX);                                                             \
    if (gid >= layout.count) return;                                                                 \
    long x = long(a[element_offset(gid, layout, 0)]), y = long(b[element_offset(gid, layout, 1)]);   \
    out[element_offset(gid, layout, 2)] = from_long<T>(binary_int(op, x, y));                        \
}
#define LUCID_BINARY_INT(NAME, T) LUCID_INDEX_FORMS(LUCID_BINARY_INT_AT, NAME, T)

// The contiguous forms: operands of one shape, each contiguous (no broadcast) and starting at
// a multiple of four elements, fewer than 2^31 elements. Each thread takes four consecutive
// elements with 32-bit indices and no per-dimension division, as one aligned 4-wide vector
// load and store per operand (element by element in a last, partial run); consecutive threads
// read consecutive runs.
#define LUCID_CONTIG_RANGE                                                                           \
    if (gid * 4u >= ulong(count)) return;                                                            \
    uint first = uint(gid) * 4u;                                                                     \
    uint last = min(first + 4u, count);

#define LUCID_VEC4(T, P) (*(device const vec<T, 4>*)((P) + first))
#define LUCID_STORE_VEC4(T, P, V) (*(device vec<T, 4>*)((P) + first) = (V))

#define LUCID_BINARY_FLOAT_CONTIG(NAME, T)                                                           \
kernel void NAME(device const T* a [[buffer(0)]], device const T* b [[buffer(1)]],                   \
                 device T* out [[buffer(2)]], constant uint& count [[buffer(3)]],                    \
                 constant uint& op [[buffer(4)]], LUCID_THREAD_POSITION) {                           \
    const ulong gid = LUCID_THREAD_INDEX;                                                            \
    LUCID_CONTIG_RANGE                                                                               \
    if (last - first == 4u) {                                                                        \
        vec<T, 4> x = LUCID_VEC4(T, a), y = LUCID_VEC4(T, b), r;                                     \
        for (uint k = 0; k < 4u; ++k) r[k] = narrow<T>(binary_float(op, widen(x[k]), widen(y[k])));  \
        LUCID_STORE_VEC4(T, out, r);                                                                 \
        return;                                                                                      \
    }                                                                                                \
    for (uint i = first; i < last; ++i) out[i] = narrow<T>(binary_float(op, widen(a[i]), widen(b[i]))); \
}

#define LUCID_BINARY_INT_CONTIG(NAME, T)                                                             \
kernel void NAME(device const T* a [[buffer(0)]], device const T* b [[buffer(1)]],                   \
                 device T* out [[buffer(2)]], constant uint& count [[buffer(3)]],                    \
                 constant uint& op [[buffer(4)]], LUCID_THREAD_POSITION) {                           \
    const ulong gid = LUCID_THREAD_INDEX;                                                            \
    LUCID_CONTIG_RANGE                                                                               \
    for (uint i = first; i < last; ++i) out[i] = from_long<T>(binary_int(op, long(a[i]), long(b[i]))); \
}

LUCID_BINARY_FLOAT_CONTIG(binary_contig_float32, float)
LUCID_BINARY_FLOAT_CONTIG(binary_contig_float16, half)
LUCID_BINARY_FLOAT_CONTIG(binary_contig_bfloat16, bfloat)
LUCID_BINARY_INT_CONTIG(binary_contig_int32, int)
LUCID_BINARY_INT_CONTIG(binary_contig_int64, long)
LUCID_BINARY_INT_CONTIG(binary_contig_bool, uchar)

// Broadcasting without division: operands whose layout merges into at most three dimensions
// run as a grid of threads (x the innermost dimension), each thread one element, its operands'
// offsets its position times their strides (0 where one broadcasts), in 32 bits. Field order
// and sizes match `gridShape` in Metal+Elementwise.swift.
struct GridShape {
    uint size[3];
    int strides[3][3];  // per operand (a, b, out), along x, y, z
};

inline int grid_offset(uint3 p, constant GridShape& g, uint operand) {
    return int(p.x) * g.strides[operand][0] + int(p.y) * g.strides[operand][1] + int(p.z) * g.strides[operand][2];
}

#define LUCID_GRID_ARGS(T)                                                                           \
    device const T* a [[buffer(0)]], device const T* b [[buffer(1)]], device T* out [[buffer(2)]],   \
    constant GridShape& g [[buffer(3)]], constant uint& op [[buffer(4)]], uint3 p [[thread_position_in_grid]]
#define LUCID_GRID_INSIDE if (p.x >= g.size[0] || p.y >= g.size[1] || p.z >= g.size[2]) return;

#define LUCID_BINARY_FLOAT_GRID(NAME, T)                                                             \
kernel void NAME(LUCID_GRID_ARGS(T)) {                                                               \
    LUCID_GRID_INSIDE                                                                                \
    float x = widen(a[grid_offset(p, g, 0)]), y = widen(b[grid_offset(p, g, 1)]);                    \
    out[grid_offset(p, g, 2)] = narrow<T>(binary_float(op, x, y));                                   \
}

#define LUCID_BINARY_INT_GRID(NAME, T)                                                               \
kernel void NAME(LUCID_GRID_ARGS(T)) {                                                               \
    LUCID_GRID_INSIDE                                                                                \
    long x = long(a[grid_offset(p, g, 0)]), y = long(b[grid_offset(p, g, 1)]);                       \
    out[grid_offset(p, g, 2)] = from_long<T>(binary_int(op, x, y));                                  \
}

LUCID_BINARY_FLOAT_GRID(binary_grid_float32, float)
LUCID_BINARY_FLOAT_GRID(binary_grid_float16, half)
LUCID_BINARY_FLOAT_GRID(binary_grid_bfloat16, bfloat)
LUCID_BINARY_INT_GRID(binary_grid_int32, int)
LUCID_BINARY_INT_GRID(binary_grid_int64, long)
LUCID_BINARY_INT_GRID(binary_grid_bool, uchar)

LUCID_BINARY_FLOAT(binary_float32, float)
LUCID_BINARY_FLOAT(binary_float16, half)
LUCID_BINARY_FLOAT(binary_bfloat16, bfloat)
LUCID_BINARY_INT(binary_int32, int)
LUCID_BINARY_INT(binary_int64, long)
LUCID_BINARY_INT(binary_bool, uchar)

// `a op s` (or `s op a` when `scalar_first`); the scalar is float32 for floating types and
// int64 for integers, as the host kernels take it.
#define LUCID_BINARY_SCALAR_FLOAT_AT(NAME, T, L, I)                                                  \
kernel void NAME(device const T* a [[buffer(0)]], device T* out [[buffer(1)]],                       \
                 constant L& layout [[buffer(2)]], constant uint& op [[buffer(3)]],                  \
                 constant float& scalar [[buffer(4)]], constant uint& scalar_first [[buffer(5)]],    \
                 LUCID_THREAD_POSITION) {                                                            \
    const I gid = I(LUCID_THREAD_INDEX);                                                             \
    if (gid >= layout.count) return;                                                                 \
    float x = widen(a[element_offset(gid, layout, 0)]);                                              \
    float r = scalar_first != 0 ? binary_float(op, scalar, x) : binary_float(op, x, scalar);         \
    out[element_offset(gid, layout, 1)] = narrow<T>(r);                                              \
}
#define LUCID_BINARY_SCALAR_FLOAT(NAME, T) LUCID_INDEX_FORMS(LUCID_BINARY_SCALAR_FLOAT_AT, NAME, T)

#define LUCID_BINARY_SCALAR_INT_AT(NAME, T, L, I)                                                    \
kernel void NAME(device const T* a [[buffer(0)]], device T* out [[buffer(1)]],                       \
                 constant L& layout [[buffer(2)]], constant uint& op [[buffer(3)]],                  \
                 constant long& scalar [[buffer(4)]], constant uint& scalar_first [[buffer(5)]],     \
                 LUCID_THREAD_POSITION) {                                                            \
    const I gid = I(LUCID_THREAD_INDEX);                                                             \
    if (gid >= layout.count) return;                                                                 \
    long x = long(a[element_offset(gid, layout, 0)]);                                                \
    long r = scalar_first != 0 ? binary_int(op, scalar, x) : binary_int(op, x, scalar);              \
    out[element_offset(gid, layout, 1)] = from_long<T>(r);                                           \
}
#define LUCID_BINARY_SCALAR_INT(NAME, T) LUCID_INDEX_FORMS(LUCID_BINARY_SCALAR_INT_AT, NAME, T)

#define LUCID_BINARY_SCALAR_FLOAT_CONTIG(NAME, T)                                                    \
kernel void NAME(device const T* a [[buffer(0)]], device T* out [[buffer(1)]],                       \
                 constant uint& count [[buffer(2)]], constant uint& op [[buffer(3)]],                \
                 constant float& scalar [[buffer(4)]], constant uint& scalar_first [[buffer(5)]],    \
                 LUCID_THREAD_POSITION) {                                                            \
    const ulong gid = LUCID_THREAD_INDEX;                                                            \
    LUCID_CONTIG_RANGE                                                                               \
    if (last - first == 4u) {                                                                        \
        vec<T, 4> x = LUCID_VEC4(T, a), r;                                                           \
        for (uint k = 0; k < 4u; ++k) {                                                              \
            float v = widen(x[k]);                                                                   \
            r[k] = narrow<T>(scalar_first != 0 ? binary_float(op, scalar, v) : binary_float(op, v, scalar)); \
        }                                                                                            \
        LUCID_STORE_VEC4(T, out, r);                                                                 \
        return;                                                                                      \
    }                                                                                                \
    for (uint i = first; i < last; ++i) {                                                            \
        float x = widen(a[i]);                                                                       \
        out[i] = narrow<T>(scalar_first != 0 ? binary_float(op, scalar, x) : binary_float(op, x, scalar)); \
    }                                                                                                \
}

LUCID_BINARY_SCALAR_FLOAT_CONTIG(binary_scalar_contig_float32, float)
LUCID_BINARY_SCALAR_FLOAT_CONTIG(binary_scalar_contig_float16, half)
LUCID_BINARY_SCALAR_FLOAT_CONTIG(binary_scalar_contig_bfloat16, bfloat)

LUCID_BINARY_SCALAR_FLOAT(binary_scalar_float32, float)
LUCID_BINARY_SCALAR_FLOAT(binary_scalar_float16, half)
LUCID_BINARY_SCALAR_FLOAT(binary_scalar_bfloat16, bfloat)
LUCID_BINARY_SCALAR_INT(binary_scalar_int32, int)
LUCID_BINARY_SCALAR_INT(binary_scalar_int64, long)
LUCID_BINARY_SCALAR_INT(binary_scalar_bool, uchar)

// ---- unary -------------------------------------------------------------------------------
// Op codes: UnaryKernel's raw values.

constant float SQRT_2_OVER_PI = 0.7978846f;
constant float INV_SQRT_2 = 0.70710677f;
constant float INV_SQRT_2PI = 0.3989423f;
constant float LN_2 = 0.6931472f;
constant float LN_10 = 2.3025851f;

inline float sigmoid_of(float x) { return 1.0f / (1.0f + precise::exp(-x)); }

// erfc(x) for float32 (metal_stdlib has no erf): W. J. Cody's rational approximations as
// in Numerical Recipes' erfcc, relative error below 1.2e-7 everywhere, so the negative tail of
// gelu keeps its relative accuracy.
inline float erfc_of(float x) {
    float z = fabs(x);
    float t = 1.0f / (1.0f + 0.5f * z);
    float r = t * precise::exp(-z * z - 1.26551223f + t * (1.00002368f + t * (0.37409196f + t * (0.09678418f +
              t * (-0.18628806f + t * (0.27886807f + t * (-1.13520398f + t * (1.48851587f +
              t * (-0.82215223f + t * 0.17087277f)))))))));
    return x >= 0.0f ? r : 2.0f - r;
}

// log(1 + x) accurate for small x (Goldberg: log(u) · x / (u − 1) with u = 1 + x rounded).
inline float log1p_of(float x) {
    float u = 1.0f + x;
    if (u == 1.0f) return x;
    if (isinf(u)) return u;
    return precise::log(u) * (x / (u - 1.0f));
}

// e**x - 1 accurate for small x (Kahan: (u - 1) · x / log(u) with u = e**x rounded).
inline float expm1_of(float x) {
    float u = precise::exp(x);
    if (u == 1.0f) return x;
    float um1 = u - 1.0f;
    if (um1 == -1.0f || isinf(u)) return um1;
    return um1 * (x / precise::log(u));
}

inline float unary_float(uint op, float x) {
    switch (op) {
    case 0: return -x;
    case 1: return x < 0.0f ? 0.0f : x;
    case 2: return precise::exp(x);
    case 3: return precise::log(x);
    case 4: return log1p_of(x);
    case 5: return precise::sqrt(x);
    case 6: return 1.0f / precise::sqrt(x);
    case 7: return fabs(x);
    case 8: return precise::tanh(x);
    case 9: return sigmoid_of(x);
    case 10: return x * sigmoid_of(x);
    case 11: return 0.5f * x * erfc_of(-x * INV_SQRT_2);
    case 12: return x * sigmoid_of(2.0f * SQRT_2_OVER_PI * (x + 0.044715f * x * x * x));
    case 13: return x > 20.0f ? x : log1p_of(precise::exp(x));
    case 14: return precise::sin(x);
    case 15: return precise::cos(x);
    case 16: return expm1_of(x);
    case 17: return precise::tan(x);
    case 18: return precise::asin(x);
    case 19: return precise::acos(x);
    case 20: return precise::atan(x);
    case 22: return floor(x);
    case 23: return ceil(x);
    case 24: return trunc(x);
    case 25: return isnan(x) ? x : (x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f));
    case 31: return precise::log2(x);
    case 32: return precise::log10(x);
    case 33: return precise::exp2(x);
    case 34: return precise::sinh(x);
    case 35: return precise::cosh(x);
    case 36: return precise::asinh(x);
    case 37: return precise::acosh(x);
    case 38: return precise::atanh(x);
    default: return rint(x);
    }
}

inline float unary_derivative(uint op, float x, float y) {
    switch (op) {
    case 0: return -1.0f;
    case 1: return y > 0.0f ? 1.0f : 0.0f;
    case 2: return y;
    case 3: return 1.0f / x;
    case 4: return 1.0f / (1.0f + x);
    case 5: return 0.5f / y;
    case 6: return -0.5f * y * y * y;
    case 7: return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);
    case 8: return 1.0f - y * y;
    case 9: return y * (1.0f - y);
    case 10: { float s = sigmoid_of(x); return s * (1.0f + x * (1.0f - s)); }
    case 11: return 0.5f * erfc_of(-x * INV_SQRT_2) + x * INV_SQRT_2PI * precise::exp(-0.5f * x * x);
    case 12: {
        float u = SQRT_2_OVER_PI * (x + 0.044715f * x * x * x);
        float s = sigmoid_of(2.0f * u);
        return s + 2.0f * x * s * (1.0f - s) * SQRT_2_OVER_PI * (1.0f + 3.0f * 0.044715f * x * x);
    }
    case 13: return x > 20.0f ? 1.0f : sigmoid_of(x);
    case 14: return precise::cos(x);
    case 15: return -precise::sin(x);
    case 16: return y + 1.0f;
    case 17: return 1.0f + y * y;
    case 18: return 1.0f / precise::sqrt(1.0f - x * x);
    case 19: return -1.0f / precise::sqrt(1.0f - x * x);
    case 20: return 1.0f / (1.0f + x * x);
    case 31: return 1.0f / (x * LN_2);
    case 32: return 1.0f / (x * LN_10);
    case 33: return y * LN_2;
    case 34: return precise::cosh(x);
    case 35: return precise::sinh(x);
    case 36: return 1.0f / precise::sqrt(x * x + 1.0f);
    case 37: return 1.0f / precise::sqrt(x * x - 1.0f);
    case 38: return 1.0f / (1.0f - x * x);
    default: return 0.0f;  // round, floor, ceil, trunc, sign
    }
}

#define LUCID_UNARY_AT(NAME, T, L, I)                                                                \
kernel void NAME(device const T* a [[buffer(0)]], device T* out [[buffer(1)]],                       \
                 constant L& layout [[buffer(2)]], constant uint& op [[buffer(3)]],                  \
                 LUCID_THREAD_POSITION) {                                                            \
    const I gid = I(LUCID_THREAD_INDEX);                                                             \
    if (gid >= layout.count) return;                                                                 \
    out[element_offset(gid, layout, 1)] = narrow<T>(unary_float(op, widen(a[element_offset(gid, layout, 0)]))); \
}
#define LUCID_UNARY(NAME, T) LUCID_INDEX_FORMS(LUCID_UNARY_AT, NAME, T)

// gradIn = grad * d op(x)/dx over four operands that share one layout's shape: x, y and grad
// use the strides of operands 0..2 of `inputs`, gradIn those of operand 0 of `output`.
#define LUCID_UNARY_BACKWARD_AT(NAME, T, L, I)                                                       \
kernel void NAME(device const T* x [[buffer(0)]], device const T* y [[buffer(1)]],                   \
                 device const T* grad [[buffer(2)]], device T* grad_in [[buffer(3)]],                \
                 constant L& inputs [[buffer(4)]], constant L& output [[buffer(5)]],                 \
                 constant uint& op [[buffer(6)]], LUCID_THREAD_POSITION) {                           \
    const I gid = I(LUCID_THREAD_INDEX);                                                             \
    if (gid >= inputs.count) return;                                                                 \
    float xv = widen(x[element_offset(gid, inputs, 0)]), yv = widen(y[element_offset(gid, inputs, 1)]); \
    float g = widen(grad[element_offset(gid, inputs, 2)]);                                           \
    grad_in[element_offset(gid, output, 0)] = narrow<T>(g * unary_derivative(op, xv, yv));           \
}
#define LUCID_UNARY_BACKWARD(NAME, T) LUCID_INDEX_FORMS(LUCID_UNARY_BACKWARD_AT, NAME, T)

// The unary ops that keep integers (UnaryKernel.keepsIntegers): neg (wrapping), relu, abs
// (int64's lowest stays itself), round, floor, ceil, trunc (unchanged), sign; computed in int64
// and truncated into the dtype.
inline long unary_int(uint op, long x) {
    switch (op) {
    case 0: return long(0ul - ulong(x));
    case 1: return max(x, 0L);
    case 21: case 22: case 23: case 24: return x;
    case 25: return x > 0 ? 1L : (x < 0 ? -1L : 0L);
    default: return x == LONG_LOWEST ? x : (x < 0 ? -x : x);
    }
}

#define LUCID_UNARY_INT_AT(NAME, T, L, I)                                                            \
kernel void NAME(device const T* a [[buffer(0)]], device T* out [[buffer(1)]],                       \
                 constant L& layout [[buffer(2)]], constant uint& op [[buffer(3)]],                  \
                 LUCID_THREAD_POSITION) {                                                            \
    const I gid = I(LUCID_THREAD_INDEX);                                                             \
    if (gid >= layout.count) return;                                                                 \
    out[element_offset(gid, layout, 1)] = T(unary_int(op, long(a[element_offset(gid, layout, 0)]))); \
}
#define LUCID_UNARY_INT(NAME, T) LUCID_INDEX_FORMS(LUCID_UNARY_INT_AT, NAME, T)

LUCID_UNARY_INT(unary_int32, int)
LUCID_UNARY_INT(unary_int64, long)
#define LUCID_UNARY_CONTIG(NAME, T)                                                                  \
kernel void NAME(device const T* a [[buffer(0)]], device T* out [[buffer(1)]],                       \
                 constant uint& count [[buffer(2)]], constant uint& op [[buffer(3)]],                \
                 LUCID_THREAD_POSITION) {                                                            \
    const ulong gid = LUCID_THREAD_INDEX;                                                            \
    LUCID_CONTIG_RANGE                                                                               \
    if (last - first == 4u) {                                                                        \
        vec<T, 4> x = LUCID_VEC4(T, a), r;                                                           \
        for (uint k = 0; k < 4u; ++k) r[k] = narrow<T>(unary_float(op, widen(x[k])));                \
        LUCID_STORE_VEC4(T, out, r);                                                                 \
        return;                                                                                      \
    }                                                                                                \
    for (uint i = first; i < last; ++i) out[i] = narrow<T>(unary_float(op, widen(a[i])));            \
}

LUCID_UNARY_CONTIG(unary_contig_float32, float)
LUCID_UNARY_CONTIG(unary_contig_float16, half)
LUCID_UNARY_CONTIG(unary_contig_bfloat16, bfloat)
LUCID_UNARY(unary_float32, float)
LUCID_UNARY(unary_float16, half)
LUCID_UNARY(unary_bfloat16, bfloat)
LUCID_UNARY_BACKWARD(unary_backward_float32, float)
LUCID_UNARY_BACKWARD(unary_backward_float16, half)
LUCID_UNARY_BACKWARD(unary_backward_bfloat16, bfloat)

// ---- comparisons and selection ----------------------------------------------------------
// Op codes: CompareKernel's raw values (eq, ne, lt, le, gt, ge). Bool is one byte, 0 or 1.

template <typename V>
inline bool compare_values(uint op, V x, V y) {
    switch (op) {
    case 0: return x == y;
    case 1: return x != y;
    case 2: return x < y;
    case 3: return x <= y;
    case 4: return x > y;
    default: return x >= y;
    }
}

#define LUCID_COMPARE_AT(NAME, T, V, L, I)                                                           \
kernel void NAME(device const T* a [[buffer(0)]], device const T* b [[buffer(1)]],                   \
                 device uchar* out [[buffer(2)]], constant L& layout [[buffer(3)]],                  \
                 constant uint& op [[buffer(4)]], LUCID_THREAD_POSITION) {                           \
    const I gid = I(LUCID_THREAD_INDEX);                                                             \
    if (gid >= layout.count) return;                                                                 \
    V x = V(a[element_offset(gid, layout, 0)]), y = V(b[element_offset(gid, layout, 1)]);            \
    out[element_offset(gid, layout, 2)] = compare_values(op, x, y) ? 1 : 0;                          \
}
#define LUCID_COMPARE(NAME, T, V) LUCID_INDEX_FORMS(LUCID_COMPARE_AT, NAME, T, V)

LUCID_COMPARE(compare_float32, float, float)
LUCID_COMPARE(compare_float16, half, float)
LUCID_COMPARE(compare_bfloat16, bfloat, float)
LUCID_COMPARE(compare_int32, int, long)
LUCID_COMPARE(compare_int64, long, long)
LUCID_COMPARE(compare_bool, uchar, long)

// out = cond ? a : b. Operand 0 of `layout` is cond, 1 is a, 2 is b; out uses `output`.
#define LUCID_SELECT_AT(NAME, T, L, I)                                                               \
kernel void NAME(device const uchar* cond [[buffer(0)]], device const T* a [[buffer(1)]],            \
                 device const T* b [[buffer(2)]], device T* out [[buffer(3)]],                       \
                 constant L& layout [[buffer(4)]], constant L& output [[buffer(5)]],                 \
                 LUCID_THREAD_POSITION) {                                                            \
    const I gid = I(LUCID_THREAD_INDEX);                                                             \
    if (gid >= layout.count) return;                                                                 \
    bool c = cond[element_offset(gid, layout, 0)] != 0;                                              \
    out[element_offset(gid, output, 0)] = c ? a[element_offset(gid, layout, 1)] : b[element_offset(gid, layout, 2)]; \
}
#define LUCID_SELECT(NAME, T) LUCID_INDEX_FORMS(LUCID_SELECT_AT, NAME, T)

LUCID_SELECT(select_float32, float)
LUCID_SELECT(select_float16, half)
LUCID_SELECT(select_bfloat16, bfloat)
LUCID_SELECT(select_int32, int)
LUCID_SELECT(select_int64, long)
LUCID_SELECT(select_bool, uchar)

// ---- copy and fill -----------------------------------------------------------------------

// Strided copy with conversion; operand 0 of `layout` is the source, 1 the destination.
#define LUCID_COPY_AT(NAME, S, D, L, I)                                                              \
kernel void NAME(device const S* src [[buffer(0)]], device D* dst [[buffer(1)]],                     \
                 constant L& layout [[buffer(2)]], LUCID_THREAD_POSITION) {                          \
    const I gid = I(LUCID_THREAD_INDEX);                                                             \
    if (gid >= layout.count) return;                                                                 \
    dst[element_offset(gid, layout, 1)] = D(src[element_offset(gid, layout, 0)]);                    \
}
#define LUCID_COPY(NAME, S, D) LUCID_INDEX_FORMS(LUCID_COPY_AT, NAME, S, D)

LUCID_COPY(copy_float32, float, float)
LUCID_COPY(copy_float16, half, half)
LUCID_COPY(copy_bfloat16, bfloat, bfloat)
LUCID_COPY(copy_int32, int, int)
LUCID_COPY(copy_int64, long, long)
LUCID_COPY(copy_bool, uchar, uchar)
LUCID_COPY(copy_int32_float32, int, float)
LUCID_COPY(copy_int64_float32, long, float)
LUCID_COPY(copy_bool_float32, uchar, float)
LUCID_COPY(copy_int32_int64, int, long)
LUCID_COPY(copy_int64_int32, long, int)
#define LUCID_COPY_WIDEN_AT(NAME, S, L, I)                                                           \
kernel void NAME(device const S* src [[buffer(0)]], device float* dst [[buffer(1)]],                 \
                 constant L& layout [[buffer(2)]], LUCID_THREAD_POSITION) {                          \
    const I gid = I(LUCID_THREAD_INDEX);                                                             \
    if (gid >= layout.count) return;                                                                 \
    dst[element_offset(gid, layout, 1)] = widen(src[element_offset(gid, layout, 0)]);                \
}
#define LUCID_COPY_WIDEN(NAME, S) LUCID_INDEX_FORMS(LUCID_COPY_WIDEN_AT, NAME, S)

LUCID_COPY_WIDEN(copy_float16_float32, half)
LUCID_COPY_WIDEN(copy_bfloat16_float32, bfloat)

#define LUCID_COPY_NARROW_AT(NAME, D, L, I)                                                          \
kernel void NAME(device const float* src [[buffer(0)]], device D* dst [[buffer(1)]],                 \
                 constant L& layout [[buffer(2)]], LUCID_THREAD_POSITION) {                          \
    const I gid = I(LUCID_THREAD_INDEX);                                                             \
    if (gid >= layout.count) return;                                                                 \
    dst[element_offset(gid, layout, 1)] = narrow<D>(src[element_offset(gid, layout, 0)]);            \
}
#define LUCID_COPY_NARROW(NAME, D) LUCID_INDEX_FORMS(LUCID_COPY_NARROW_AT, NAME, D)

LUCID_COPY_NARROW(copy_float32_float16, half)
LUCID_COPY_NARROW(copy_float32_bfloat16, bfloat)

// Between the 16-bit floats: through float32, exactly, then one rounding.
#define LUCID_COPY_FLOAT_AT(NAME, S, D, L, I)                                                        \
kernel void NAME(device const S* src [[buffer(0)]], device D* dst [[buffer(1)]],                     \
                 constant L& layout [[buffer(2)]], LUCID_THREAD_POSITION) {                          \
    const I gid = I(LUCID_THREAD_INDEX);                                                             \
    if (gid >= layout.count) return;                                                                 \
    dst[element_offset(gid, layout, 1)] = narrow<D>(widen(src[element_offset(gid, layout, 0)]));     \
}
#define LUCID_COPY_FLOAT(NAME, S, D) LUCID_INDEX_FORMS(LUCID_COPY_FLOAT_AT, NAME, S, D)

LUCID_COPY_FLOAT(copy_float16_bfloat16, half, bfloat)
LUCID_COPY_FLOAT(copy_bfloat16_float16, bfloat, half)

// An integer as float32 rounded to odd (HalfConversions.swift roundedToOddFloat): rounding
// that to 16 bits is then the one correct rounding of the integer.
inline float odd_float(long v) {
    ulong m = v < 0 ? ulong(0) - ulong(v) : ulong(v);
    if (m < (1ul << 24)) return float(v);
    int shift = (64 - int(clz(m))) - 24;
    ulong top = m >> ulong(shift);
    if ((m & ((1ul << ulong(shift)) - 1ul)) != 0ul) top |= 1ul;
    float f = float(top) * as_type<float>(uint(127 + shift) << 23);
    return v < 0 ? -f : f;
}

#define LUCID_COPY_INT_TO_HALF_AT(NAME, S, D, L, I)                                                  \
kernel void NAME(device const S* src [[buffer(0)]], device D* dst [[buffer(1)]],                     \
                 constant L& layout [[buffer(2)]], LUCID_THREAD_POSITION) {                          \
    const I gid = I(LUCID_THREAD_INDEX);                                                             \
    if (gid >= layout.count) return;                                                                 \
    dst[element_offset(gid, layout, 1)] = narrow<D>(odd_float(long(src[element_offset(gid, layout, 0)]))); \
}
#define LUCID_COPY_INT_TO_HALF(NAME, S, D) LUCID_INDEX_FORMS(LUCID_COPY_INT_TO_HALF_AT, NAME, S, D)

LUCID_COPY_INT_TO_HALF(copy_int32_float16, int, half)
LUCID_COPY_INT_TO_HALF(copy_int64_float16, long, half)
LUCID_COPY_INT_TO_HALF(copy_bool_float16, uchar, half)
LUCID_COPY_INT_TO_HALF(copy_int32_bfloat16, int, bfloat)
LUCID_COPY_INT_TO_HALF(copy_int64_bfloat16, long, bfloat)
LUCID_COPY_INT_TO_HALF(copy_bool_bfloat16, uchar, bfloat)

// float -> integer as the host casts (HostElement.swift truncatingToInt64): toward zero,
// saturating at int64's range (then int32's), NaN to 0.
inline long truncated_long(float v) {
    if (isnan(v)) return 0;
    if (v >= 9223372036854775808.0f) return long(0x7fffffffffffffffl);
    if (v <= -9223372036854775808.0f) return -long(0x7fffffffffffffffl) - 1;
    return long(v);
}

#define LUCID_COPY_FLOAT_TO_INT_AT(NAME, S, D, LO, HI, L, I)                                         \
kernel void NAME(device const S* src [[buffer(0)]], device D* dst [[buffer(1)]],                     \
                 constant L& layout [[buffer(2)]], LUCID_THREAD_POSITION) {                          \
    const I gid = I(LUCID_THREAD_INDEX);                                                             \
    if (gid >= layout.count) return;                                                                 \
    long v = truncated_long(widen(src[element_offset(gid, layout, 0)]));                             \
    dst[element_offset(gid, layout, 1)] = D(clamp(v, long(LO), long(HI)));                           \
}
#define LUCID_COPY_FLOAT_TO_INT(NAME, S, D, LO, HI) LUCID_INDEX_FORMS(LUCID_COPY_FLOAT_TO_INT_AT, NAME, S, D, LO, HI)

#define LUCID_INT64_MIN (-long(0x7fffffffffffffffl) - 1)
#define LUCID_INT64_MAX long(0x7fffffffffffffffl)
LUCID_COPY_FLOAT_TO_INT(copy_float32_int32, float, int, -2147483648l, 2147483647l)
LUCID_COPY_FLOAT_TO_INT(copy_float16_int32, half, int, -2147483648l, 2147483647l)
LUCID_COPY_FLOAT_TO_INT(copy_bfloat16_int32, bfloat, int, -2147483648l, 2147483647l)
LUCID_COPY_FLOAT_TO_INT(copy_float32_int64, float, long, LUCID_INT64_MIN, LUCID_INT64_MAX)
LUCID_COPY_FLOAT_TO_INT(copy_float16_int64, half, long, LUCID_INT64_MIN, LUCID_INT64_MAX)
LUCID_COPY_FLOAT_TO_INT(copy_bfloat16_int64, bfloat, long, LUCID_INT64_MIN, LUCID_INT64_MAX)

// To bool: non-zero (NaN included) is true.
#define LUCID_COPY_TO_BOOL_AT(NAME, S, L, I)                                                         \
kernel void NAME(device const S* src [[buffer(0)]], device uchar* dst [[buffer(1)]],                 \
                 constant L& layout [[buffer(2)]], LUCID_THREAD_POSITION) {                          \
    const I gid = I(LUCID_THREAD_INDEX);                                                             \
    if (gid >= layout.count) return;                                                                 \
    dst[element_offset(gid, layout, 1)] = widen_any(src[element_offset(gid, layout, 0)]) != 0 ? 1 : 0; \
}
#define LUCID_COPY_TO_BOOL(NAME, S) LUCID_INDEX_FORMS(LUCID_COPY_TO_BOOL_AT, NAME, S)

inline float widen_any(float x) { return x; }
inline float widen_any(half x) { return widen(x); }
inline float widen_any(bfloat x) { return widen(x); }
inline long widen_any(int x) { return long(x); }
inline long widen_any(long x) { return x; }

LUCID_COPY_TO_BOOL(copy_float32_bool, float)
LUCID_COPY_TO_BOOL(copy_float16_bool, half)
LUCID_COPY_TO_BOOL(copy_bfloat16_bool, bfloat)
LUCID_COPY_TO_BOOL(copy_int32_bool, int)
LUCID_COPY_TO_BOOL(copy_int64_bool, long)
LUCID_COPY(copy_bool_int32, uchar, int)
LUCID_COPY(copy_bool_int64, uchar, long)

// out = value; the backend rounds the value as the host kernels do (float16/bfloat16 from a
// float32 rounded to odd, so that the one rounding here is the only one that counts).
#define LUCID_FILL_FLOAT_AT(NAME, T, L, I)                                                           \
kernel void NAME(device T* out [[buffer(0)]], constant L& layout [[buffer(1)]],                      \
                 constant float& value [[buffer(2)]], LUCID_THREAD_POSITION) {                       \
    const I gid = I(LUCID_THREAD_INDEX);                                                             \
    if (gid >= layout.count) return;                                                                 \
    out[element_offset(gid, layout, 0)] = narrow<T>(value);                                          \
}
#define LUCID_FILL_FLOAT(NAME, T) LUCID_INDEX_FORMS(LUCID_FILL_FLOAT_AT, NAME, T)

#define LUCID_FILL_INT_AT(NAME, T, L, I)                                                             \
kernel void NAME(device T* out [[buffer(0)]], constant L& layout [[buffer(1)]],                      \
                 constant long& value [[buffer(2)]], LUCID_THREAD_POSITION) {                        \
    const I gid = I(LUCID_THREAD_INDEX);                                                             \
    if (gid >= layout.count) return;                                                                 \
    out[element_offset(gid, layout, 0)] = T(value);                                                  \
}
#define LUCID_FILL_INT(NAME, T) LUCID_INDEX_FORMS(LUCID_FILL_INT_AT, NAME, T)

LUCID_FILL_FLOAT(fill_float32, float)
LUCID_FILL_FLOAT(fill_float16, half)
LUCID_FILL_FLOAT(fill_bfloat16, bfloat)
LUCID_FILL_INT(fill_int32, int)
LUCID_FILL_INT(fill_int64, long)

#define LUCID_FILL_BOOL_AT(NAME, T, L, I)                                                            \
kernel void NAME(device T* out [[buffer(0)]], constant L& layout [[buffer(1)]],                      \
                 constant long& value [[buffer(2)]], LUCID_THREAD_POSITION) {                        \
    const I gid = I(LUCID_THREAD_INDEX);                                                             \
    if (gid >= layout.count) return;                                                                 \
    out[element_offset(gid, layout, 0)] = value != 0 ? 1 : 0;                                        \
}

LUCID_INDEX_FORMS(LUCID_FILL_BOOL_AT, fill_bool, uchar)

// The 8- and 16-bit integers (uint8, int8, int16) have copies and fills only; the backend
// runs their other kernels on the host. Integers narrow by wrapping (two's complement), floats
// by truncation toward zero then wrapping, as the host stores them (HostElement.swift).
#define LUCID_COPY_FLOAT_TO_SMALL_AT(NAME, S, D, L, I)                                               \
kernel void NAME(device const S* src [[buffer(0)]], device D* dst [[buffer(1)]],                     \
                 constant L& layout [[buffer(2)]], LUCID_THREAD_POSITION) {                          \
    const I gid = I(LUCID_THREAD_INDEX);                                                             \
    if (gid >= layout.count) return;                                                                 \
    dst[element_offset(gid, layout, 1)] = D(truncated_long(widen(src[element_offset(gid, layout, 0)]))); \
}
#define LUCID_COPY_FLOAT_TO_SMALL(NAME, S, D) LUCID_INDEX_FORMS(LUCID_COPY_FLOAT_TO_SMALL_AT, NAME, S, D)

inline long widen_any(uchar x) { return long(x); }
inline long widen_any(int8_t x) { return long(x); }
inline long widen_any(int16_t x) { return long(x); }

#define LUCID_COPY_SMALL(T, NAME)                                                                    \
LUCID_COPY(copy_##NAME, T, T)                                                                        \
LUCID_COPY(copy_##NAME##_int32, T, int)                                                              \
LUCID_COPY(copy_##NAME##_int64, T, long)                                                             \
LUCID_COPY(copy_int32_##NAME, int, T)                                                                \
LUCID_COPY(copy_int64_##NAME, long, T)                                                               \
LUCID_COPY(copy_bool_##NAME, uchar, T)                                                               \
LUCID_COPY_TO_BOOL(copy_##NAME##_bool, T)                                                            \
LUCID_COPY(copy_##NAME##_float32, T, float)                                                          \
LUCID_COPY_INT_TO_HALF(copy_##NAME##_float16, T, half)                                               \
LUCID_COPY_INT_TO_HALF(copy_##NAME##_bfloat16, T, bfloat)                                            \
LUCID_COPY_FLOAT_TO_SMALL(copy_float32_##NAME, float, T)                                             \
LUCID_COPY_FLOAT_TO_SMALL(copy_float16_##NAME, half, T)                                              \
LUCID_COPY_FLOAT_TO_SMALL(copy_bfloat16_##NAME, bfloat, T)                                           \
LUCID_FILL_INT(fill_##NAME, T)

LUCID_COPY_SMALL(uchar, uint8)
LUCID_COPY_SMALL(int8_t, int8)
LUCID_COPY_SMALL(int16_t, int16)
LUCID_COPY(copy_uint8_int8, uchar, int8_t)
LUCID_COPY(copy_uint8_int16, uchar, int16_t)
LUCID_COPY(copy_int8_uint8, int8_t, uchar)
LUCID_COPY(copy_int8_int16, int8_t, int16_t)
LUCID_COPY(copy_int16_uint8, int16_t, uchar)
LUCID_COPY(copy_int16_int8, int16_t, int8_t)
