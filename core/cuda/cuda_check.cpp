// The throwing half of cuda_check.h: messages name the failing call, where it was made, CUDA's
// error and, for faults that a kernel leaves behind, how to find the kernel.
#include "core/cuda/cuda_check.h"

#include <string_view>

#include <cublas_v2.h>

#include "core/error.h"

namespace kiln::gpu {

namespace {

// The path from "core/" on, so messages do not carry the build machine's checkout path.
std::string_view short_path(std::string_view file) {
  const std::size_t at = file.rfind("core/");
  return at == std::string_view::npos ? file : file.substr(at);
}

}  // namespace

void throw_cuda_error(cudaError_t error, const char* expr, const char* file, int line) {
  // Reading the error clears it unless it is sticky (a fault inside a kernel, which leaves the
  // context unusable); then name the way to find the kernel.
  (void)cudaGetLastError();
  const bool launch = std::string_view(expr) == "cudaGetLastError()";
  fail("CUDA error at {}:{}: {} failed: {} ({}){}", short_path(file), line,
       launch ? "kernel launch" : expr, cudaGetErrorString(error), cudaGetErrorName(error),
       error == cudaErrorIllegalAddress || error == cudaErrorLaunchFailure
           ? "; a kernel faulted earlier: rerun with CUDA_LAUNCH_BLOCKING=1 (or compute-sanitizer) "
             "to find it"
           : "");
}

void throw_cublas_error(cublasStatus_t status, const char* expr, const char* file, int line) {
  fail("cuBLAS error at {}:{}: {} failed: {} ({})", short_path(file), line, expr,
       cublasGetStatusString(status), static_cast<int>(status));
}

void throw_error(const std::string& message) { throw Error(message); }

}  // namespace kiln::gpu
