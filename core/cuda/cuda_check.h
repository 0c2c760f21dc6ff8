// Checks for every CUDA runtime call, cuBLAS call and kernel launch. A failure throws kiln::Error
// with file:line, the failing expression and CUDA's own name and description of the error, so a
// GPU problem surfaces where it happened rather than as a later, unrelated failure.
//
//   KILN_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream));
//   KILN_CUBLAS_CHECK(cublasSetStream(handle, stream));
//   kernel<<<grid, block, 0, stream>>>(...);
//   KILN_CUDA_CHECK_LAUNCH();
//
// The throwing functions live in cuda_check.cpp: nvcc cannot compile fmt's compile-time format
// strings, so .cu files never format messages themselves (they call throw_error for their own).
#pragma once

#include <string>

#include <cublas_api.h>
#include <cuda_runtime_api.h>

namespace kiln::gpu {

[[noreturn]] void throw_cuda_error(cudaError_t error, const char* expr, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* expr, const char* file,
                                     int line);
// Throws kiln::Error(message); for .cu files, which cannot use KILN_CHECK.
[[noreturn]] void throw_error(const std::string& message);

}  // namespace kiln::gpu

#define KILN_CUDA_CHECK(expr)                                                     \
  do {                                                                            \
    const cudaError_t kiln_cuda_error_ = (expr);                                  \
    if (kiln_cuda_error_ != cudaSuccess) [[unlikely]]                             \
      ::kiln::gpu::throw_cuda_error(kiln_cuda_error_, #expr, __FILE__, __LINE__); \
  } while (0)

#define KILN_CUBLAS_CHECK(expr)                                                        \
  do {                                                                                 \
    const cublasStatus_t kiln_cublas_status_ = (expr);                                 \
    if (kiln_cublas_status_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                     \
      ::kiln::gpu::throw_cublas_error(kiln_cublas_status_, #expr, __FILE__, __LINE__); \
  } while (0)

// After every kernel launch: reports a bad launch configuration or a missing kernel image at
// once. A fault inside a kernel is reported by the next synchronising call.
#define KILN_CUDA_CHECK_LAUNCH() KILN_CUDA_CHECK(cudaGetLastError())
