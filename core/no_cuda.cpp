// Linked instead of core/cuda/ when kiln is built without CUDA (KILN_CUDA=OFF or no nvcc).
#include "core/backend.h"
#include "core/device.h"
#include "core/error.h"
#include "core/native_bf16.h"

namespace kiln {

Backend& cuda_backend(int index) {
  fail(
      "device cuda:{}: this kiln was built without CUDA; reconfigure with -DKILN_CUDA=ON on a "
      "machine with the CUDA toolkit",
      index);
}

int cuda_device_count() { return 0; }

std::string cuda_device_name(int index) {
  cuda_backend(index);  // the error
  return {};
}

NativeBf16 cuda_native_bf16(int index) {
  cuda_backend(index);  // the error
  return {};
}

}  // namespace kiln
