// Host loops that need instructions beyond the baseline the engine is compiled for. Each
// entry point picks, once per process, the widest vector unit this CPU has; the results are
// the same on every path.
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

#ifdef __cplusplus
}
#endif

#endif
