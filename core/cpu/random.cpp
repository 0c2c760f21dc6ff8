// Random fills and dropout masks from Philox4x32-10 with the element-to-counter layout of
// core/philox.h, so the CUDA backend produces the same numbers.
#include "core/cpu/cpu_backend.h"
#include "core/cpu/parallel.h"
#include "core/philox.h"

namespace kiln {

namespace {

// Calls f(i, words) for each element i with the words of its counter, `per` elements/counter.
template <typename F>
void for_each_counter(std::int64_t n, std::int64_t per, std::uint64_t seed, std::uint64_t offset,
                      F&& f) {
  const std::int64_t counters = (n + per - 1) / per;
  parallel_chunks(counters, 4096, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c = begin; c < end; ++c) {
      const philox::Words w = philox::draw(seed, offset + static_cast<std::uint64_t>(c));
      for (std::int64_t j = 0; j < per && c * per + j < n; ++j) f(c * per + j, j, w);
    }
  });
}

}  // namespace

void CpuBackend::random_uniform(DType dtype, void* out, std::int64_t n, double low, double high,
                                std::uint64_t seed, std::uint64_t offset) {
  if (dtype == DType::f32) {
    float* o = static_cast<float*>(out);
    const float lo = static_cast<float>(low), span = static_cast<float>(high - low);
    for_each_counter(n, 4, seed, offset,
                     [&](std::int64_t i, std::int64_t j, const philox::Words& w) {
                       o[i] = lo + span * philox::uniform_float(w.w[j]);
                     });
  } else {
    double* o = static_cast<double*>(out);
    for_each_counter(
        n, 2, seed, offset, [&](std::int64_t i, std::int64_t j, const philox::Words& w) {
          o[i] = low + (high - low) * philox::uniform_double(w.w[2 * j], w.w[2 * j + 1]);
        });
  }
}

void CpuBackend::random_normal(DType dtype, void* out, std::int64_t n, double mean, double std,
                               std::uint64_t seed, std::uint64_t offset) {
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out);
    for_each_counter(
        n, 2, seed, offset, [&](std::int64_t i, std::int64_t j, const philox::Words& w) {
          o[i] = static_cast<T>(mean + std * philox::normal_from(w.w[2 * j], w.w[2 * j + 1]));
        });
  });
}

void CpuBackend::dropout_mask(DType dtype, void* mask, std::int64_t n, double p, std::uint64_t seed,
                              std::uint64_t offset) {
  const std::uint32_t threshold = philox::dropout_threshold(p);
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(mask);
    const T keep_value = p < 1.0 ? static_cast<T>(1.0 / (1.0 - p)) : T(0);
    for_each_counter(n, 4, seed, offset,
                     [&](std::int64_t i, std::int64_t j, const philox::Words& w) {
                       o[i] = philox::dropout_keep(w.w[j], threshold) ? keep_value : T(0);
                     });
  });
}

}  // namespace kiln
