// kiln's CUDA emulator: the runtime API plus what device code sees (core/cuda/emulator/kernel.h).
#pragma once

#include "core/cuda/emulator/include/cuda_runtime_api.h"
#include "core/cuda/emulator/kernel.h"

template <typename T>
cudaError_t cudaMalloc(T** ptr, std::size_t size) {
  return cudaMalloc(reinterpret_cast<void**>(ptr), size);
}
