// Helpers for the CUDA tests: the device's backend, poisoning for the length of a test, and
// tensors mirrored on both devices so one backend kernel can run on each and be compared.
#pragma once

#include "core/cuda/cuda_backend.h"
#include "core/kiln.h"
#include "tests/harness/near.h"
#include "tests/harness/op_table.h"

namespace kiln::testing {

inline CudaBackend& gpu_backend() { return cuda_backend_at(0); }
inline Backend& cpu_backend_ref() { return backend_for(Device::cpu()); }

// Poisoning on for a scope: every GPU block handed out is NaN-filled, so an output element a
// kernel does not write fails the comparison with the CPU.
class PoisonScope {
 public:
  PoisonScope() : before_(gpu_backend().poison()) { gpu_backend().set_poison(true); }
  ~PoisonScope() { gpu_backend().set_poison(before_); }
  PoisonScope(const PoisonScope&) = delete;
  PoisonScope& operator=(const PoisonScope&) = delete;

 private:
  bool before_;
};

// The same values on the CPU and on cuda:0.
struct Mirrored {
  Tensor cpu, gpu;
};

inline Mirrored mirrored(const Tensor& t) { return {t, t.to(Device::cuda())}; }

// Uninitialised outputs of one shape and dtype on both devices.
inline Mirrored outputs(const Shape& shape, DType dtype = DType::f32) {
  return {empty(shape, {dtype}), empty(shape, {dtype, Device::cuda()})};
}

// Uniform float32 values in [low, high) on both devices.
inline Mirrored uniform_mirrored(const Shape& shape, Generator& gen, double low = -2.0,
                                 double high = 2.0, DType dtype = DType::f32) {
  return mirrored(uniform(shape, low, high, {dtype}, &gen));
}

template <typename T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

}  // namespace kiln::testing
