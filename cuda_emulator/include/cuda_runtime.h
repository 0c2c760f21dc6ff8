// kiln's CUDA emulator: the runtime API plus what device code sees (cuda_emulator/kernel.h).
#pragma once

#include "cuda_emulator/include/cuda_runtime_api.h"
#include "cuda_emulator/kernel.h"

template <typename T>
cudaError_t cudaMalloc(T** ptr, std::size_t size) {
  return cudaMalloc(reinterpret_cast<void**>(ptr), size);
}

// As the real cuda_runtime.h: a kernel's attributes, through its address.
template <typename T>
cudaError_t cudaFuncSetAttribute(T* entry, cudaFuncAttribute attr, int value) {
  return cudaFuncSetAttribute(reinterpret_cast<const void*>(entry), attr, value);
}
template <typename T>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, T* entry) {
  return cudaFuncGetAttributes(attr, reinterpret_cast<const void*>(entry));
}
