// Whether a device multiplies bf16 operands natively, faster than float32: what train_lm's
// --precision auto asks before it picks bf16 (docs/mixed-precision.md), with the reason in words
// for the programs' banners.
//
//   const NativeBf16 bf16 = native_bf16(Device::cpu());
//   fmt::print("{}: {}\n", bf16.native ? "bf16" : "f32", bf16.why);
#pragma once

#include <string>

#include "core/device.h"

namespace kiln {

struct NativeBf16 {
  bool native = false;
  std::string
      why;  // "bf16 native (AVX512_BF16 12x32)", "NVIDIA H100 (sm_90) has bf16 tensor cores"
};

// The CPU: native where its bf16 products take kiln's AVX512_BF16 kernel (core/cpu/
// blas_library.h's bf16_gemm: not under KILN_GEMM=widen or a forced float32 library). A CUDA
// device: native from compute capability 8.0 (Ampere), the first with bf16 tensor cores.
NativeBf16 native_bf16(Device device);

// The CUDA half of native_bf16 (core/cuda/device_registry.cpp; without CUDA, core/no_cuda.cpp's
// error naming the device).
NativeBf16 cuda_native_bf16(int index);

}  // namespace kiln
