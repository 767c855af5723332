#include <oneapi/dnnl/dnnl.h>

/* oneDNN's CPU runtime is OpenMP in the distributions the engine builds against; its pool
 * size follows omp_set_num_threads. Declared weak so that a oneDNN built on another runtime
 * still links, and then the call does nothing. */
extern void omp_set_num_threads(int) __attribute__((weak));

static inline void lucid_dnnl_set_num_threads(int n) {
    if (omp_set_num_threads) omp_set_num_threads(n);
}
