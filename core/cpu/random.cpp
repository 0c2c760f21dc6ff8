// Random fills and dropout masks from Philox4x32-10 with the element-to-counter layout of
// core/philox.h, so the CUDA backend produces the same numbers.
#include <algorithm>

#include "core/bf16.h"
#include "core/cpu/cpu_backend.h"
#include "core/cpu/parallel.h"
#include "core/cpu/philox_block.h"
#include "core/philox.h"

namespace kiln {

namespace {

// out[i] = element(words of element i, i) for the n elements of a draw, where an element takes
// kWords of its counter's 4 words (float32: 1, four elements per counter; float64 and normals: 2).
// Counters are drawn a block at a time; the transform is copied into each task so that its
// captured constants live in registers and the loop vectorises.
template <int kWords, typename T, typename Element>
void fill_from_words(T* out, std::int64_t n, std::uint64_t seed, std::uint64_t offset,
                     const Element& element) {
  constexpr std::int64_t per = 4 / kWords;  // elements per counter
  const std::int64_t counters = (n + per - 1) / per;
  // 4096 counters per task, a multiple of the block: blocks never straddle tasks.
  parallel_chunks(counters, 4096, [&](std::int64_t begin, std::int64_t end) {
    const Element transform = element;
    alignas(64) std::uint32_t words[4 * kPhiloxBlock];
    for (std::int64_t c = begin; c < end; c += kPhiloxBlock) {
      philox_block(seed, offset + static_cast<std::uint64_t>(c), words);
      const std::int64_t first = c * per;
      T* __restrict block_out = out + first;
      const std::int64_t count = std::min(std::min(end, c + kPhiloxBlock) * per, n) - first;
#pragma omp simd
      for (std::int64_t e = 0; e < count; ++e)
        block_out[e] = transform(words + kWords * e, first + e);
    }
  });
}

}  // namespace

void CpuBackend::random_uniform(DType dtype, void* out, std::int64_t n, double low, double high,
                                std::uint64_t seed, std::uint64_t offset) {
  if (dtype == DType::f32) {
    const float lo = static_cast<float>(low), span = static_cast<float>(high - low);
    fill_from_words<1>(static_cast<float*>(out), n, seed, offset,
                       [=](const std::uint32_t* w, std::int64_t) {
                         return lo + span * philox::uniform_float(w[0]);
                       });
  } else {
    fill_from_words<2>(static_cast<double*>(out), n, seed, offset,
                       [=](const std::uint32_t* w, std::int64_t) {
                         return low + (high - low) * philox::uniform_double(w[0], w[1]);
                       });
  }
}

void CpuBackend::random_normal(DType dtype, void* out, std::int64_t n, double mean, double std,
                               std::uint64_t seed, std::uint64_t offset) {
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    fill_from_words<2>(static_cast<T*>(out), n, seed, offset,
                       [=](const std::uint32_t* w, std::int64_t) {
                         return static_cast<T>(mean + std * philox::normal_from(w[0], w[1]));
                       });
  });
}

void CpuBackend::dropout_mask(DType dtype, void* mask, std::int64_t n, double p, std::uint64_t seed,
                              std::uint64_t offset) {
  const std::uint32_t threshold = philox::dropout_threshold(p);
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T keep_value = p < 1.0 ? static_cast<T>(1.0 / (1.0 - p)) : T(0);
    // Both dtypes read one word per element (core/philox.h).
    fill_from_words<1>(static_cast<T*>(mask), n, seed, offset,
                       [=](const std::uint32_t* w, std::int64_t) {
                         return philox::dropout_keep(w[0], threshold) ? keep_value : T(0);
                       });
  });
}

// The same mask, multiplied into `in` as it is drawn: one read and one write per element instead
// of dropout_mask's write and the product's three streams (y = x * mask is dropout's forward,
// dx = dy * mask its backward). The product, not a select, so that 0 * inf stays NaN as in x *
// mask.
void CpuBackend::dropout_apply(DType dtype, void* out, const void* in, std::int64_t n, double p,
                               std::uint64_t seed, std::uint64_t offset) {
  const std::uint32_t threshold = philox::dropout_threshold(p);
  if (dtype == DType::bf16) {
    // bf16 in and out (kernels_read_bf16): the float32 product, rounded once.
    const float keep_value = p < 1.0 ? static_cast<float>(1.0 / (1.0 - p)) : 0.0f;
    const bf16* __restrict input = static_cast<const bf16*>(in);
    fill_from_words<1>(
        static_cast<bf16*>(out), n, seed, offset, [=](const std::uint32_t* w, std::int64_t i) {
          return to_bf16(to_float(input[i]) *
                         (philox::dropout_keep(w[0], threshold) ? keep_value : 0.0f));
        });
    return;
  }
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T keep_value = p < 1.0 ? static_cast<T>(1.0 / (1.0 - p)) : T(0);
    const T* __restrict input = static_cast<const T*>(in);
    fill_from_words<1>(
        static_cast<T*>(out), n, seed, offset, [=](const std::uint32_t* w, std::int64_t i) {
          return input[i] * (philox::dropout_keep(w[0], threshold) ? keep_value : T(0));
        });
  });
}

}  // namespace kiln
