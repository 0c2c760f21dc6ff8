// Optional OpenBLAS for the CPU GEMM, loaded at first use from Debian's OpenMP build
// (libopenblas0-openmp) with dlopen, by its own path: libblas.so.3 may point at the slow
// reference BLAS. OpenBLAS 0.3.21 does not recognise recent Xeons and would silently fall back
// to its SSE3 kernels, so before loading it kiln names the kernel family itself through
// OPENBLAS_CORETYPE (SkylakeX with AVX-512, Haswell with AVX2) unless the environment already
// does. Loading at run time, rather than linking, is what lets kiln set that variable before
// the library initialises — no re-execution needed.
#pragma once

#include <string>

namespace kiln {

struct OpenBlas {
  // cblas_sgemm / cblas_dgemm (row-major order 101, transpose 111 / 112).
  void (*sgemm)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);
  void (*dgemm)(int order, int trans_a, int trans_b, int m, int n, int k, double alpha,
                const double* a, int lda, const double* b, int ldb, double beta, double* c,
                int ldc);
  void (*set_num_threads)(int threads);
  std::string core;  // the kernel family OpenBLAS runs, e.g. "SkylakeX"
};

// The loaded library, or null when kiln was built with KILN_BLAS=eigen, KILN_GEMM=eigen is set
// in the environment, or the library is not installed.
const OpenBlas* openblas();

// "openblas (SkylakeX kernels)" or "eigen", for environment summaries.
std::string gemm_source();

}  // namespace kiln
