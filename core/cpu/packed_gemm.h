// kiln's own float32 GEMM for x86-64 with AVX2 and FMA (or AVX-512): Goto's scheme as BLIS
// writes it. op(A) and op(B) are copied into panels (MR rows of op(A), NR columns of op(B),
// k-major), and a micro-kernel keeps an MR x NR tile of C in registers over a block of k:
// 6 x 16 with AVX2, 12 x 32 with AVX-512 (two vectors per row, one broadcast of op(A) per row).
//
// Why kiln has one beside OpenBLAS: the libraries block k in 256s and set C to beta C in a pass
// of its own, so a product with a short k and a large C (the LM head's logits, (N, V) at
// k = d_model) writes C once to zero it and then reads and writes it once per block of k. Here
// any k up to 512 is one block: each element of C is written once, from registers. On the
// large-cpu logits (2048 x 33278 x 512, 2 threads) that is 9-11% faster than OpenBLAS's own
// kernels on both instruction sets (docs/performance.md); on products with a long k the
// libraries stay ahead, so gemm.cpp sends only the wide, short ones here (packed_gemm_preferred).
//
// Deterministic: every element of C sums its k in order, block after block, whatever the number
// of threads; threads split the columns of C, and each packs its own panels of op(B).
#pragma once

#include <string>

#include "core/backend.h"

namespace kiln {

// Whether this build has the kernel (compiled for AVX2 and FMA, or AVX-512).
bool packed_gemm_built();

// The kernel's shape, e.g. "AVX2 6x16", for environment summaries; empty when not built.
std::string packed_gemm_kernel();

// Whether the packed kernel is the faster choice for this float32 product: k fits one block and
// C is wide and large (the logits), where it measured faster than the libraries.
bool packed_gemm_preferred(std::int64_t m, std::int64_t n, std::int64_t k);

// That rule in words, e.g. "k <= 512, n >= 4096, m >= 256", for environment summaries; empty
// where the rule takes no product (the AVX-512 kernel, or none built).
std::string packed_gemm_rule();

// C (m x n) = alpha op(A) op(B) + beta C for one float32 product (g.batch is ignored: the caller
// loops), row-major operands with leading dimensions; beta 0 never reads C. Runs on the OpenMP
// threads. Requires packed_gemm_built().
void packed_gemm(const GemmArgs& g);

}  // namespace kiln
