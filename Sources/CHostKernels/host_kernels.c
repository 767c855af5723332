#include "host_kernels.h"

#include <string.h>

#if defined(__linux__)
#include <dlfcn.h>
#include <pthread.h>
#endif

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

// ---- the OpenMP pool -------------------------------------------------------------------------

#if defined(__linux__)
// libgomp's own entry points, found in the copy already loaded (by oneDNN): GOMP_parallel is
// what GCC compiles `#pragma omp parallel` into.
typedef void (*gomp_parallel_fn)(void (*)(void *), void *, unsigned, unsigned);
typedef int (*omp_int_fn)(void);

static gomp_parallel_fn gomp_parallel;
static omp_int_fn omp_thread_num, omp_num_threads;
static int resolved;  // 0: not yet, 1: found, -1: absent

static int resolve_gomp(void) {
    int state = __atomic_load_n(&resolved, __ATOMIC_ACQUIRE);
    if (state) return state;
    void *lib = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);  // never loads it
    gomp_parallel_fn p = lib ? (gomp_parallel_fn)dlsym(lib, "GOMP_parallel") : 0;
    omp_int_fn t = lib ? (omp_int_fn)dlsym(lib, "omp_get_thread_num") : 0;
    omp_int_fn n = lib ? (omp_int_fn)dlsym(lib, "omp_get_num_threads") : 0;
    if (p && t && n) {
        gomp_parallel = p;
        omp_thread_num = t;
        omp_num_threads = n;
        state = 1;
    } else {
        state = -1;
    }
    __atomic_store_n(&resolved, state, __ATOMIC_RELEASE);
    return state;
}

// GNU OpenMP's pool does not survive fork(): a child that starts a parallel region waits
// forever for threads that stayed in the parent. A forked child runs the engine's loops on
// the dispatch pool instead.
static int forked;

static void after_fork_in_child(void) { forked = 1; }

__attribute__((constructor)) static void watch_forks(void) { pthread_atfork(0, 0, after_fork_in_child); }

struct parallel_job {
    lucid_host_part_fn fn;
    void *context;
    ptrdiff_t parts;
};

static void run_parts(void *data) {
    const struct parallel_job *job = data;
    // The team may be smaller than asked (a nested region runs on one thread): each thread
    // takes every n-th part.
    ptrdiff_t n = omp_num_threads();
    for (ptrdiff_t part = omp_thread_num(); part < job->parts; part += n) job->fn(job->context, part);
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
    if (forked || resolve_gomp() != 1) return 0;
    struct parallel_job job = {fn, context, parts};
    gomp_parallel(run_parts, &job, threads, 0);
    return 1;
#endif
}
#else
int lucid_host_parallel(ptrdiff_t parts, unsigned threads, void *context, lucid_host_part_fn fn) {
    (void)parts, (void)threads, (void)context, (void)fn;
    return 0;
}
#endif
