// Tensor cores for kiln's kernels (for .cu files only): the warp-level PTX instructions the
// attention kernels use, as inline-asm wrappers under nvcc and as the CUDA emulator's
// warp-collective operations under KILN_CUDA_EMULATE (cuda_emulator/warp_matrix.h), which check
// every lane's operands and stop, naming the kernel and the line, where the hardware is undefined.
//
//   ldmatrix_x{1,2,4}[_trans](regs, row)  ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16:
//       lane 8 m + r gives the address of row r (16 bytes, 16-byte aligned, in dynamic shared
//       memory) of 8 x 8 matrix m; regs[m] of lane l gets elements (l / 4, 2 (l % 4) + {0, 1}) of
//       matrix m, or of its transpose with _trans (PTX ISA 9.7.14.5.15).
//   mma_bf16_16816(acc, a, b)            mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32:
//       acc = A B + acc on this lane's fragments (PTX ISA 9.7.14.5.8), groupID = lane / 4,
//       threadID_in_group = lane % 4 (t): a[r] holds A's elements 2r and 2r + 1, a_i at row
//       groupID (+ 8 for i = 2, 3, 6, 7), column 2t + (i & 1) (+ 8 for i >= 4); b[r] holds b_2r
//       and b_2r+1, b_i at row 2t + (i & 1) (+ 8 for i >= 2), column groupID; acc[i] at row
//       groupID (+ 8 for i >= 2), column 2t + (i & 1).
//   pack_bf16x2(lo, hi)                   two floats rounded to bf16 (nearest, ties to even) in
//       one register, lo in the low half: cvt.rn.bf16x2.f32.
//   dynamic_shared<T>()                   the block's dynamic shared memory (KILN_LAUNCH_SHARED).
//
// The bf16 instructions need sm_80 or later: compiled for an older architecture (the compute_75
// PTX kiln also ships), mma_bf16_16816 traps, and the kernels' launchers check the PTX version a
// kernel was compiled for before they launch it.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "core/bf16.h"

#ifdef KILN_CUDA_EMULATE
#include <source_location>

#include "cuda_emulator/warp_matrix.h"
#endif

namespace kiln::gpu {

#ifdef KILN_CUDA_EMULATE

template <typename T>
T* dynamic_shared() {
  return reinterpret_cast<T*>(emulator::dynamic_shared_memory());
}

inline void ldmatrix_x1(std::uint32_t (&r)[1], const void* row,
                        std::source_location where = std::source_location::current()) {
  emulator::ldmatrix(1, false, r, row, where);
}
inline void ldmatrix_x2(std::uint32_t (&r)[2], const void* row,
                        std::source_location where = std::source_location::current()) {
  emulator::ldmatrix(2, false, r, row, where);
}
inline void ldmatrix_x4(std::uint32_t (&r)[4], const void* row,
                        std::source_location where = std::source_location::current()) {
  emulator::ldmatrix(4, false, r, row, where);
}
inline void ldmatrix_x1_trans(std::uint32_t (&r)[1], const void* row,
                              std::source_location where = std::source_location::current()) {
  emulator::ldmatrix(1, true, r, row, where);
}
inline void ldmatrix_x2_trans(std::uint32_t (&r)[2], const void* row,
                              std::source_location where = std::source_location::current()) {
  emulator::ldmatrix(2, true, r, row, where);
}
inline void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* row,
                              std::source_location where = std::source_location::current()) {
  emulator::ldmatrix(4, true, r, row, where);
}

inline void mma_bf16_16816(float (&acc)[4], const std::uint32_t (&a)[4],
                           const std::uint32_t (&b)[2],
                           std::source_location where = std::source_location::current()) {
  emulator::mma_m16n8k16_bf16(acc, a, b, where);
}

inline std::uint32_t pack_bf16x2(float lo, float hi) {
  return std::uint32_t{to_bf16(lo).bits} | std::uint32_t{to_bf16(hi).bits} << 16;
}

#else

template <typename T>
__device__ inline T* dynamic_shared() {
  extern __shared__ __align__(16) unsigned char kiln_dynamic_shared[];
  return reinterpret_cast<T*>(kiln_dynamic_shared);
}

__device__ inline std::uint32_t shared_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

__device__ inline void ldmatrix_x1(std::uint32_t (&r)[1], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
               : "=r"(r[0])
               : "r"(shared_address(row)));
}
__device__ inline void ldmatrix_x2(std::uint32_t (&r)[2], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(shared_address(row)));
}
__device__ inline void ldmatrix_x4(std::uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
}
__device__ inline void ldmatrix_x1_trans(std::uint32_t (&r)[1], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
               : "=r"(r[0])
               : "r"(shared_address(row)));
}
__device__ inline void ldmatrix_x2_trans(std::uint32_t (&r)[2], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(shared_address(row)));
}
__device__ inline void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
}

__device__ inline void mma_bf16_16816(float (&acc)[4], const std::uint32_t (&a)[4],
                                      const std::uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();
#endif
}

__device__ inline std::uint32_t pack_bf16x2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  std::uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return std::uint32_t{to_bf16(lo).bits} | std::uint32_t{to_bf16(hi).bits} << 16;
#endif
}

#endif

}  // namespace kiln::gpu
