#if !__has_include(<oneapi/dnnl/dnnl.h>)
#error "lucid: oneDNN's headers were not found. On Linux the engine takes OpenBLAS and oneDNN from PyPI: run `make build` in lucid's folder, then build with PKG_CONFIG_PATH=<lucid's folder>/.venv/lib/pkgconfig (the Swift guide, 'Building on Linux')."
#endif
#include <oneapi/dnnl/dnnl.h>

/* oneDNN's CPU runtime is OpenMP in the distributions the engine builds against; its pool
 * size follows omp_set_num_threads. Declared weak so that a oneDNN built on another runtime
 * still links, and then the call does nothing. */
extern void omp_set_num_threads(int) __attribute__((weak));
extern int omp_get_max_threads(void) __attribute__((weak));

/* OpenMP's thread count is a setting of the calling thread (its ICV). */
static inline void lucid_dnnl_set_num_threads(int n) {
    if (omp_set_num_threads) omp_set_num_threads(n);
}

static inline int lucid_dnnl_num_threads(void) {
    return omp_get_max_threads ? omp_get_max_threads() : 1;
}
