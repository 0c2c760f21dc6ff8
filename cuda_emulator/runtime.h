// What the runtime API (runtime.cpp) shares with the launcher and the stand-ins.
#pragma once

#include <cstddef>

#include "cuda_emulator/include/cuda_runtime_api.h"

namespace kiln::emulator {

// True for 0 (the default stream) and for every stream created and not destroyed.
bool is_valid_stream(cudaStream_t stream);
// Makes `error` the calling thread's last error (what cudaGetLastError returns next).
void set_last_error(cudaError_t error);

// The dynamic shared memory bytes a kernel may launch with: 48 KB, or what
// cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize) set for `function`.
std::size_t max_dynamic_shared_bytes(const void* function);
// The most cudaFuncSetAttribute accepts: an H100's shared memory per block with the opt-in.
constexpr std::size_t kMaxDynamicSharedOptIn = 227 << 10;
constexpr std::size_t kDefaultDynamicShared = 48 << 10;

}  // namespace kiln::emulator
