// Launch geometry shared by kiln's CUDA kernels (for .cu files only). Kernels loop over their work
// with a grid stride, so any amount of work fits a capped grid, indices are 64-bit, and a launch
// never exceeds a grid limit (x up to 2^31 - 1; y and z, at most 65535, are not used). Every
// launch configuration depends only on the problem's shape, never on the GPU it runs on, so
// reductions add in the same order on every device.
//
// Kernels are launched with KILN_LAUNCH(grid, block, stream, kernel)(args...), which is
// kernel<<<grid, block, 0, stream>>>(args...) under nvcc; kiln's CUDA emulator (KILN_CUDA=EMULATE,
// cuda_emulator/) defines it in its cuda_runtime.h to run the kernel on the CPU. The kernel is
// named with all its template arguments (a launch deduces none).
#pragma once

#include <algorithm>
#include <cstdint>

#include <cuda_runtime.h>

#ifndef KILN_LAUNCH
#define KILN_LAUNCH(grid, block, stream, ...) __VA_ARGS__<<<(grid), (block), 0, (stream)>>>
// With dynamic shared memory (more than 48 KB needs cudaFuncSetAttribute first).
#define KILN_LAUNCH_SHARED(grid, block, shared_bytes, stream, ...) \
  __VA_ARGS__<<<(grid), (block), (shared_bytes), (stream)>>>
#endif

namespace kiln::gpu {

constexpr int kThreads = 256;  // threads per block
constexpr int kWarp = 32;
#ifdef KILN_EMULATOR_MAX_BLOCKS
// The emulator's small cap: grid-stride loops take several turns, as no GPU test makes them.
constexpr std::int64_t kMaxBlocks = KILN_EMULATOR_MAX_BLOCKS;
#else
constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 20;
#endif

// Blocks for `work` items handled `per_block` at a time: at least 1, at most kMaxBlocks.
inline unsigned blocks_for(std::int64_t work, std::int64_t per_block = kThreads) {
  const std::int64_t blocks = (work + per_block - 1) / per_block;
  return static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, kMaxBlocks));
}

// This thread's first index and the stride of a grid-stride loop over threads.
__device__ inline std::int64_t thread_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::int64_t thread_count() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

}  // namespace kiln::gpu
