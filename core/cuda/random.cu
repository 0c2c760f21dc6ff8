// Random fills and dropout masks on CUDA from Philox4x32-10 (core/philox.h), with the CPU
// backend's element-to-counter layout: element i of a draw reads counter offset + i / per, word
// i % per (per = 4 for float32 uniform and dropout, 2 for float64 uniform and for normals). One
// thread per counter; the transforms are core/philox.h's, so both devices give the same numbers
// and the same dropout masks. Normals are computed in double, as on the CPU.
#include <cstdint>

#include "core/convert.h"
#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/launch.h"
#include "core/cuda/packs.cuh"
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

// mask[i] where in is null (dropout_mask), else in[i] * mask[i] (dropout_apply), stored as S and
// computed in C (a bf16 in and out: the float32 product, rounded once). One thread per counter.
template <typename S, typename C>
__global__ void __launch_bounds__(kThreads)
    dropout_kernel(S* out, const S* in, std::int64_t n, std::uint32_t threshold, C keep_value,
                   std::uint64_t seed, std::uint64_t offset) {
  for_each_counter<4>(n, seed, offset, [&](std::int64_t i, int j, const philox::Words& w) {
    const C mask = philox::dropout_keep(w.w[j], threshold) ? keep_value : C(0);
    out[i] = convert<S>(in == nullptr ? mask : convert<C>(in[i]) * mask);
  });
}

// dropout_apply with in and out 16-byte aligned: each thread draws the two counters of a pack of
// eight elements and moves them as one pack; the last n % 8 elements one by one. The same
// counters and words per element as dropout_kernel, so the same bits.
template <typename S, typename C>
__global__ void __launch_bounds__(kThreads)
    dropout_packed_kernel(S* out, const S* in, std::int64_t n, std::uint32_t threshold,
                          C keep_value, std::uint64_t seed, std::uint64_t offset) {
  static_assert(kPack == 8, "a pack is two counters of four words");
  const std::int64_t packs = n / kPack;
  for (std::int64_t p = thread_index(); p < packs; p += thread_count()) {
    C values[kPack];
    load_pack(in + p * kPack, values);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const philox::Words w = philox::draw(seed, offset + static_cast<std::uint64_t>(2 * p + half));
#pragma unroll
      for (int j = 0; j < 4; ++j)
        values[4 * half + j] *= philox::dropout_keep(w.w[j], threshold) ? keep_value : C(0);
    }
    store_pack(out + p * kPack, values);
  }
  for (std::int64_t i = packs * kPack + thread_index(); i < n; i += thread_count()) {
    const philox::Words w = philox::draw(seed, offset + static_cast<std::uint64_t>(i / 4));
    out[i] = convert<S>(convert<C>(in[i]) *
                        (philox::dropout_keep(w.w[i % 4], threshold) ? keep_value : C(0)));
  }
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

// in may be null here: then the kernel writes the mask itself (dropout_mask). A bf16 in and out
// (kernels_read_bf16) multiply in float32.
void CudaBackend::dropout_apply(DType dtype, void* out, const void* in, std::int64_t n, double p,
                                std::uint64_t seed, std::uint64_t offset) {
  if (n == 0) return;
  activate();
  const std::uint32_t threshold = philox::dropout_threshold(p);
  const auto run = [&](auto storage_tag, auto compute_tag) {
    using S = decltype(storage_tag);
    using C = decltype(compute_tag);
    const C keep_value = p < 1.0 ? static_cast<C>(1.0 / (1.0 - p)) : C(0);
    if (in != nullptr && gpu::aligned16(out) && gpu::aligned16(in) && n >= gpu::kPack) {
      KILN_LAUNCH(gpu::blocks_for(n / gpu::kPack), gpu::kThreads, stream_,
                  gpu::dropout_packed_kernel<S, C>)
      (static_cast<S*>(out), static_cast<const S*>(in), n, threshold, keep_value, seed, offset);
    } else {
      KILN_LAUNCH(gpu::blocks_for((n + 3) / 4), gpu::kThreads, stream_, gpu::dropout_kernel<S, C>)
      (static_cast<S*>(out), static_cast<const S*>(in), n, threshold, keep_value, seed, offset);
    }
    KILN_CUDA_CHECK_LAUNCH();
  };
  if (dtype == DType::bf16 && in != nullptr) {
    run(bf16{}, float{});
    return;
  }
  dispatch_floating(dtype, [&](auto tag) { run(tag, tag); });
}

}  // namespace kiln
