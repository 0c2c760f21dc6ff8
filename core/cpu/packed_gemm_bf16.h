// kiln's bf16 GEMM for CPUs with AVX512_BF16: the packed kernel's scheme (core/cpu/packed_gemm.h)
// with bf16 operands multiplied natively. VDPBF16PS multiplies two pairs of bf16 values per
// float32 lane and adds both products to the lane, so the panels hold bf16 pairs: two consecutive
// k of a row of op(A) or a column of op(B) in one 32-bit word (the lower k in the low half). A
// 12 x 32 tile of C stays in 24 float32 registers over a block of k (up to 1024: the logits' C
// is written once); each step broadcasts one pair of each of op(A)'s 12 rows against two
// registers of op(B)'s 32 columns: 24 instructions, 1,536 FLOPs (twice the float32 kernel's 768
// per 24 FMAs). On a Zen 4 core (one 512-bit VDPBF16PS per cycle, 231 GFLOP/s measured) it runs
// the LM's products at 77-93% of that peak, as fast as oneDNN's bf16 matmul (docs/performance.md).
//
// An operand may be float32 (GemmArgs::round_a, round_b): the packing rounds it to bf16 (to
// nearest even, exactly as .to(DType::bf16)) as it copies it, so a float32 weight is multiplied
// as bf16 without a bf16 copy of its own or a pass to make one.
//
// The instruction's arithmetic (Intel SDM, VDPBF16PS): each product of two bf16 values is exact in
// float32 and added with one rounding to nearest even, the odd k of a pair before the even one;
// subnormal inputs count as zero and subnormal results flush to zero (bf16 subnormals are below
// 2^-126). Every element of C sums its k in one order, block after block, whatever the number of
// threads: the bits do not depend on the thread count.
//
// Compiled into every x86-64 build with per-function target attributes and chosen at run time
// (cpu_has_avx512_bf16: cpuid and xgetbv), so a binary built for AVX2 uses it on a CPU that has it.
#pragma once

#include <string>

#include "core/backend.h"

namespace kiln {

// Whether this CPU runs the kernel (AVX512_BF16 with the OS's support for 512-bit registers).
bool packed_gemm_bf16_available();

// The kernel's shape, e.g. "AVX512_BF16 12x32", for environment summaries.
std::string packed_gemm_bf16_kernel();

// C (m x n, float32) = alpha op(A) op(B) + beta C for a product with g.bf16_operands, g.batch
// times: A and B are bf16, or float32 rounded to bf16 where g.round_a or g.round_b says so.
// Row-major operands with leading dimensions; beta 0 never reads C. Runs on the OpenMP threads
// (a batch of small products: one product per thread). Requires packed_gemm_bf16_available().
void packed_gemm_bf16(const GemmArgs& g);

}  // namespace kiln
