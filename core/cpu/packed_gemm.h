// kiln's own float32 GEMM for x86-64 with AVX2 and FMA (or AVX-512): Goto's scheme as BLIS
// writes it. op(A) and op(B) are copied into panels (MR rows of op(A), NR columns of op(B),
// k-major), and a micro-kernel keeps an MR x NR tile of C in registers over a block of k:
// 6 x 16 with AVX2, 12 x 32 with AVX-512 (two vectors per row, one broadcast of op(A) per row).
//
// Why kiln has one beside OpenBLAS: OpenBLAS sets C to beta C in a pass of its own (its sgemm_beta,
// 1.8% of the large-cpu AVX2 step) and then adds into C once per block of k, so a product with a
// short k and a large C (the LM head's logits, (N, V) at k = d_model) writes C to zero it before
// reading and writing it again. Here any k up to 512 is one block: each element of C is written
// once, from registers, and a large C with aligned rows (the LM head pads the logits' rows to 64
// bytes) with non-temporal stores, without reading its lines first. In the large-cpu step (2048 x
// 33278 x 512, 2 threads, Xeon) that took the logits from 311 to 289-293 ms with AVX2 and from
// 198-200 to 172-188 ms with AVX-512 (docs/performance.md). On products with a longer k the
// libraries are ahead; on the layers' short-k products the kernel was up to 8% faster alone but
// slower inside the step, so gemm.cpp sends only the wide, short ones here
// (packed_gemm_preferred).
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
// when the kernel is not built.
std::string packed_gemm_rule();

// C (m x n) = alpha op(A) op(B) + beta C for one float32 product (g.batch is ignored: the caller
// loops), row-major operands with leading dimensions; beta 0 never reads C. Runs on the OpenMP
// threads. Requires packed_gemm_built().
void packed_gemm(const GemmArgs& g);

}  // namespace kiln
