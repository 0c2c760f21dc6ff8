// The warp-level matrix instructions kiln's tensor-core kernels use, on the emulated device: what
// core/cuda/warp_matrix.cuh calls under KILN_CUDA_EMULATE where nvcc emits the PTX instruction.
// Each is a warp-collective operation (kernel.h, warp_collective): it completes when all 32 lanes
// of the warp have reached it at the same line with the same qualifiers, and the emulator stops,
// naming the kernel, the block, the warp and the line, when a lane skips it (exits or waits
// elsewhere), when lanes disagree on the qualifiers, or when an operand is wrong:
//
//   ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{,.trans}.shared.b16  (PTX ISA 9.7.14.5.15)
//     Lane 8 m + r gives the address of row r of matrix m (lanes beyond 8 * matrices are not
//     read). Each row is 16 bytes of the block's dynamic shared memory, 16-byte aligned ("the
//     matrix addresses must be naturally aligned"): a row that is not, or that lies outside the
//     dynamic shared memory, stops the kernel. Register m of lane l holds elements
//     (l / 4, 2 (l % 4)) and (l / 4, 2 (l % 4) + 1) of matrix m, the first in the low half
//     (Figure 104); with .trans, of the matrix's transpose.
//   mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32  (PTX ISA 9.7.14.5.8)
//     D = A B + C, A 16 x 16 and B 16 x 8 bf16, C and D 16 x 8 float32, in the fragments of that
//     section. The products of bf16 values are exact; their sum with C is rounded once to
//     float32 (a tensor core's internal order and rounding are not specified, and kiln's results
//     may not depend on them beyond the last bits).
#pragma once

#include <cstdint>
#include <source_location>

namespace kiln::emulator {

// regs[0 .. matrices) of this lane; row_address is this lane's row (read for lanes < 8 matrices).
void ldmatrix(int matrices, bool transpose, std::uint32_t* regs, const void* row_address,
              const std::source_location& where);

// acc = A B + acc for this lane's fragments: a[4] (bf16 pairs, low half first), b[2], acc[4].
void mma_m16n8k16_bf16(float* acc, const std::uint32_t* a, const std::uint32_t* b,
                       const std::source_location& where);

}  // namespace kiln::emulator
