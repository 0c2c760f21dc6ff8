#include "core/native_bf16.h"

#include "core/cpu/blas_library.h"

namespace kiln {

NativeBf16 native_bf16(Device device) {
  if (device.is_cuda()) return cuda_native_bf16(device.index);
  return {bf16_gemm() == Bf16Gemm::native, bf16_gemm_source()};
}

}  // namespace kiln
