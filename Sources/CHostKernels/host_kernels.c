#include "host_kernels.h"

#include <string.h>

// Integer operations only and no branches, so that each variant vectorises: `nan` is all ones
// exactly when |f| > 0x7f800000.
#define NARROW_LOOP(src, dst, n)                                                   \
    for (ptrdiff_t i = 0; i < (n); i++) {                                          \
        uint32_t f;                                                                \
        memcpy(&f, (src) + i, sizeof f);                                           \
        uint32_t rounded = (f + 0x7fffu + ((f >> 16) & 1u)) >> 16;                 \
        uint32_t nan = 0u - (((f & 0x7fffffffu) + 0x007fffffu) >> 31);             \
        uint32_t quiet = ((f >> 16) & 0x8000u) | 0x7fc0u;                          \
        (dst)[i] = (uint16_t)((rounded & ~nan) | (quiet & nan));                   \
    }

static void narrow_baseline(const float *src, uint16_t *dst, ptrdiff_t n) { NARROW_LOOP(src, dst, n) }

#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
__attribute__((target("avx2"))) static void narrow_avx2(const float *src, uint16_t *dst, ptrdiff_t n) {
    NARROW_LOOP(src, dst, n)
}

__attribute__((target("avx512f,avx512bw"))) static void narrow_avx512(const float *src, uint16_t *dst, ptrdiff_t n) {
    NARROW_LOOP(src, dst, n)
}

typedef void (*narrow_fn)(const float *, uint16_t *, ptrdiff_t);

static narrow_fn choose_narrow(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) return narrow_avx512;
    if (__builtin_cpu_supports("avx2")) return narrow_avx2;
    return narrow_baseline;
}

void lucid_host_narrow_bf16(const float *src, uint16_t *dst, ptrdiff_t n) {
    // A race between first callers only stores the same pointer twice.
    static narrow_fn chosen;
    narrow_fn fn = __atomic_load_n(&chosen, __ATOMIC_RELAXED);
    if (!fn) {
        fn = choose_narrow();
        __atomic_store_n(&chosen, fn, __ATOMIC_RELAXED);
    }
    fn(src, dst, n);
}
#else
void lucid_host_narrow_bf16(const float *src, uint16_t *dst, ptrdiff_t n) { narrow_baseline(src, dst, n); }
#endif
