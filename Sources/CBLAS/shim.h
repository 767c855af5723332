/* OpenBLAS from the scipy-openblas32 package: its symbols carry a `scipy_` prefix
 * (scipy_cblas_sgemm, scipy_openblas_set_num_threads, scipy_LAPACKE_sgetrf). The include path
 * comes from lucid-native.pc (Package.swift). */
#if !__has_include(<cblas.h>)
#error "lucid: OpenBLAS's headers were not found. On Linux the engine takes OpenBLAS and oneDNN from PyPI: run `make build` in lucid's folder, then build with PKG_CONFIG_PATH=<lucid's folder>/.venv/lib/pkgconfig (the Swift guide, 'Building on Linux')."
#endif
#include <cblas.h>
#include <lapacke.h>
