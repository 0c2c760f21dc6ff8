// The BLAS libraries kiln's CPU GEMM can call, loaded at first use with dlopen by their own paths
// from Debian's OpenMP builds: OpenBLAS (libopenblas0-openmp) and BLIS (libblis4-openmp). By path,
// because libblas.so.3 may point at the slow reference BLAS; at run time, because OpenBLAS 0.3.21
// does not recognise recent CPUs and would silently fall back to its SSE3 kernels, so kiln names
// the kernel family through OPENBLAS_CORETYPE (SkylakeX with AVX-512, Haswell with AVX2) before
// the library initialises, unless the environment already does.
//
// Which one a GEMM uses (gemm_library): KILN_GEMM=openblas|blis|eigen in the environment forces
// one (KILN_GEMM=bf16|widen chooses the path of bf16 products only: bf16_gemm below); otherwise
// OpenBLAS, else BLIS, else Eigen (why OpenBLAS before BLIS: blas_library.cpp), except that on AMD
// Zen 3 large narrow products go through BLIS's zen3 kernels, which measured faster on them, and
// that float32 products with a short k and a wide C (the logits) go through kiln's own packed
// kernel (core/cpu/packed_gemm.h) where it is built; KILN_GEMM=packed sends every float32 product
// there (float64 then takes the default library). The choice depends only on the shape and what is
// installed, never on timing, so runs are reproducible.
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

struct BlasLibrary {
  std::string name;     // "openblas" or "blis"
  std::string kernels;  // the kernel family the library runs, e.g. "Haswell", "zen3"
  // cblas_sgemm / cblas_dgemm (row-major order 101, transpose 111 / 112).
  void (*sgemm)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);
  void (*dgemm)(int order, int trans_a, int trans_b, int m, int n, int k, double alpha,
                const double* a, int lda, const double* b, int ldb, double beta, double* c,
                int ldc);
  void (*set_num_threads)(int threads);
};

// KILN_GEMM's value, empty when unset or empty; a kiln::Error naming the valid values for any
// other (a misspelt value must not silently leave the default in place).
std::string gemm_environment();

// A library by name ("openblas", "blis"), loaded on first use; null when it was not built in
// (KILN_BLAS at configure time) or is not installed.
const BlasLibrary* blas_library(const std::string& name);

// The library CPU GEMMs go through by default, null for Eigen (see the top of this file).
const BlasLibrary* gemm_library();

// The library for one product C (m x n) = op(A) (m x k) op(B) (k x n): gemm_library(), or BLIS
// for the large narrow products on Zen (blas_library.cpp says which and why).
const BlasLibrary* gemm_library(std::int64_t m, std::int64_t n, std::int64_t k);

// Whether the float32 product (m, n, k) goes through kiln's packed kernel: KILN_GEMM=packed sends
// every one there and any other KILN_GEMM none; otherwise the shapes packed_gemm_preferred names.
bool use_packed_gemm(std::int64_t m, std::int64_t n, std::int64_t k);

// How the products of bf16 operands (GemmArgs::bf16_operands) are multiplied: natively, by kiln's
// VDPBF16PS kernel (core/cpu/packed_gemm_bf16.h), where the CPU has AVX512_BF16, or widened to
// float32 and multiplied by the float32 GEMM (gemm_bf16_widened) everywhere else. KILN_GEMM=bf16
// asks for the native kernel (widening still, on a CPU without the instruction), KILN_GEMM=widen
// for widening; a KILN_GEMM that forces a float32 source (openblas, blis, eigen, packed) widens
// into that source. The two paths round differently (their sums run in different orders), so a
// run's bits depend on the path as on the thread count; each is deterministic.
enum class Bf16Gemm : std::uint8_t { native, widened };
Bf16Gemm bf16_gemm();
// bf16_gemm's path in words, and why when it is not the native kernel: "bf16 native (AVX512_BF16
// 12x32)", "bf16 widened to float32 (no AVX512_BF16)".
std::string bf16_gemm_source();

// The widening path alone: A and B widened to float32 (float32 operands of round_a, round_b
// rounded to bf16 first), then the float32 GEMM (core/cpu/gemm.cpp).
struct GemmArgs;
void gemm_bf16_widened(const GemmArgs& g);

// cpu_gemm_source() (core/backend.h), which names these choices for environment summaries, is
// defined in blas_library.cpp.

// Tells the GEMM's libraries how many threads one product may use.
void set_blas_threads(int threads);

}  // namespace kiln
