// Random fills and dropout masks on CUDA from Philox4x32-10 (core/philox.h), with the CPU
// backend's element-to-counter layout: element i of a draw reads counter offset + i / per, word
// i % per (per = 4 for float32 uniform and dropout, 2 for float64 uniform and for normals). One
// thread per counter; the transforms are core/philox.h's, so both devices give the same numbers
// and the same dropout masks. Normals are computed in double, as on the CPU.
#include <cstdint>

#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/launch.h"
#include "core/philox.h"

namespace kiln {

namespace gpu {
namespace {

// Calls f(i, j, words) for each element i < n of each counter, j = i % per.
template <int kPer, typename F>
__device__ void for_each_counter(std::int64_t n, std::uint64_t seed, std::uint64_t offset,
                                 const F& f) {
  const std::int64_t counters = (n + kPer - 1) / kPer;
  for (std::int64_t c = thread_index(); c < counters; c += thread_count()) {
    const philox::Words w = philox::draw(seed, offset + static_cast<std::uint64_t>(c));
#pragma unroll
    for (int j = 0; j < kPer; ++j)
      if (c * kPer + j < n) f(c * kPer + j, j, w);
  }
}

__global__ void __launch_bounds__(kThreads)
    uniform_f32(float* out, std::int64_t n, float low, float span, std::uint64_t seed,
                std::uint64_t offset) {
  for_each_counter<4>(n, seed, offset, [&](std::int64_t i, int j, const philox::Words& w) {
    out[i] = low + span * philox::uniform_float(w.w[j]);
  });
}

__global__ void __launch_bounds__(kThreads)
    uniform_f64(double* out, std::int64_t n, double low, double high, std::uint64_t seed,
                std::uint64_t offset) {
  for_each_counter<2>(n, seed, offset, [&](std::int64_t i, int j, const philox::Words& w) {
    out[i] = low + (high - low) * philox::uniform_double(w.w[2 * j], w.w[2 * j + 1]);
  });
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    normal_kernel(T* out, std::int64_t n, double mean, double std, std::uint64_t seed,
                  std::uint64_t offset) {
  for_each_counter<2>(n, seed, offset, [&](std::int64_t i, int j, const philox::Words& w) {
    out[i] = static_cast<T>(mean + std * philox::normal_from(w.w[2 * j], w.w[2 * j + 1]));
  });
}

// mask[i] where in is null (dropout_mask), else in[i] * mask[i] (dropout_apply).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    dropout_kernel(T* out, const T* in, std::int64_t n, std::uint32_t threshold, T keep_value,
                   std::uint64_t seed, std::uint64_t offset) {
  for_each_counter<4>(n, seed, offset, [&](std::int64_t i, int j, const philox::Words& w) {
    const T mask = philox::dropout_keep(w.w[j], threshold) ? keep_value : T(0);
    out[i] = in == nullptr ? mask : in[i] * mask;
  });
}

}  // namespace
}  // namespace gpu

void CudaBackend::random_uniform(DType dtype, void* out, std::int64_t n, double low, double high,
                                 std::uint64_t seed, std::uint64_t offset) {
  if (n == 0) return;
  activate();
  if (dtype == DType::f32) {
    KILN_LAUNCH(gpu::blocks_for((n + 3) / 4), gpu::kThreads, stream_, gpu::uniform_f32)
    (static_cast<float*>(out), n, static_cast<float>(low), static_cast<float>(high - low), seed,
     offset);
  } else {
    KILN_LAUNCH(gpu::blocks_for((n + 1) / 2), gpu::kThreads, stream_, gpu::uniform_f64)
    (static_cast<double*>(out), n, low, high, seed, offset);
  }
  KILN_CUDA_CHECK_LAUNCH();
}

void CudaBackend::random_normal(DType dtype, void* out, std::int64_t n, double mean, double std,
                                std::uint64_t seed, std::uint64_t offset) {
  if (n == 0) return;
  activate();
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    KILN_LAUNCH(gpu::blocks_for((n + 1) / 2), gpu::kThreads, stream_, gpu::normal_kernel<T>)
    (static_cast<T*>(out), n, mean, std, seed, offset);
    KILN_CUDA_CHECK_LAUNCH();
  });
}

void CudaBackend::dropout_mask(DType dtype, void* mask, std::int64_t n, double p,
                               std::uint64_t seed, std::uint64_t offset) {
  dropout_apply(dtype, mask, nullptr, n, p, seed, offset);
}

// in may be null here: then the kernel writes the mask itself (dropout_mask).
void CudaBackend::dropout_apply(DType dtype, void* out, const void* in, std::int64_t n, double p,
                                std::uint64_t seed, std::uint64_t offset) {
  if (n == 0) return;
  activate();
  const std::uint32_t threshold = philox::dropout_threshold(p);
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T keep_value = p < 1.0 ? static_cast<T>(1.0 / (1.0 - p)) : T(0);
    KILN_LAUNCH(gpu::blocks_for((n + 3) / 4), gpu::kThreads, stream_, gpu::dropout_kernel<T>)
    (static_cast<T*>(out), static_cast<const T*>(in), n, threshold, keep_value, seed, offset);
    KILN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace kiln
