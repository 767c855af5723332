/* OpenBLAS from the scipy-openblas32 package: its symbols carry a `scipy_` prefix
 * (scipy_cblas_sgemm, scipy_openblas_set_num_threads, scipy_LAPACKE_sgetrf). The include path
 * comes from `python lucid/_native.py swift-flags`. */
#include <cblas.h>
#include <lapacke.h>
