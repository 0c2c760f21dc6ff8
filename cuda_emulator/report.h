// How the emulator reports what is wrong. A bug the hardware leaves undefined (a fault in a
// kernel, a barrier not every thread reaches, host code reading device memory) stops the process
// with a message that names the kernel, the block and the thread; a bad runtime call returns
// CUDA's error code, and cudaGetErrorString adds what exactly was wrong.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "cuda_emulator/include/cuda_runtime_api.h"

namespace kiln::emulator {

// Prints "kiln CUDA emulator: <message>" to stderr and aborts.
[[noreturn]] void fatal(std::string_view message);

// Returns `error` from a runtime call, remembering `detail` for cudaGetErrorString.
cudaError_t fail_call(cudaError_t error, std::string detail);
// The detail of the calling thread's last failed call, if it failed with `error`; else empty.
const std::string& error_detail(cudaError_t error);

// "0x7f..." for messages.
std::string hex(const void* p);
std::string hex(std::uintptr_t p);

// "kernel <name> (grid (x,y,z), block (x,y,z)), block (x,y,z), thread (x,y,z)" for the kernel
// thread running on this OS thread; empty when none runs (scheduler.cpp).
std::string kernel_context();

}  // namespace kiln::emulator
