// kiln's CUDA emulator: the runtime API plus what device code sees (cuda_emulator/kernel.h).
#pragma once

#include "cuda_emulator/include/cuda_runtime_api.h"
#include "cuda_emulator/kernel.h"

template <typename T>
cudaError_t cudaMalloc(T** ptr, std::size_t size) {
  return cudaMalloc(reinterpret_cast<void**>(ptr), size);
}
