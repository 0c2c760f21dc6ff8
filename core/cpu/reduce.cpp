// CPU reductions over contiguous (outer, reduced, inner) data. Each output element is summed by
// one task in a fixed order that depends only on the shape (never on the thread count), with
// float64 accumulators; long rows are split into fixed chunks whose partials are added in order.
#include <cmath>
#include <limits>
#include <vector>

#include "core/cpu/cpu_backend.h"
#include "core/cpu/parallel.h"
#include "core/cpu/row_sum.h"

namespace kiln {

namespace {

// Rows longer than this (with few rows) are summed in chunks in parallel.
constexpr std::int64_t kRowChunk = 65536;
// Columns per task when summing over a middle dim (inner > 1).
constexpr std::int64_t kColumnBlock = 256;

template <typename T>
void sum_kernel(const T* in, T* out, std::int64_t outer, std::int64_t reduced, std::int64_t inner) {
  if (inner == 1) {
    if (outer >= 4 || reduced <= kRowChunk) {
      parallel_tasks(outer, outer * reduced, [&](std::int64_t o) {
        out[o] = static_cast<T>(row_sum(in + o * reduced, reduced));
      });
      return;
    }
    const std::int64_t chunks = (reduced + kRowChunk - 1) / kRowChunk;
    std::vector<double> partial(outer * chunks);
    parallel_tasks(outer * chunks, outer * reduced, [&](std::int64_t task) {
      const std::int64_t o = task / chunks, c = task % chunks;
      const std::int64_t begin = c * kRowChunk;
      const std::int64_t n = std::min(kRowChunk, reduced - begin);
      partial[task] = row_sum(in + o * reduced + begin, n);
    });
    for (std::int64_t o = 0; o < outer; ++o) {
      double total = 0.0;
      for (std::int64_t c = 0; c < chunks; ++c) total += partial[o * chunks + c];
      out[o] = static_cast<T>(total);
    }
    return;
  }
  const std::int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
  parallel_tasks(outer * blocks, outer * reduced * inner, [&](std::int64_t task) {
    const std::int64_t o = task / blocks;
    const std::int64_t c0 = (task % blocks) * kColumnBlock;
    const std::int64_t width = std::min(kColumnBlock, inner - c0);
    double acc[kColumnBlock] = {};
    const T* base = in + o * reduced * inner + c0;
    for (std::int64_t r = 0; r < reduced; ++r) {
      const T* row = base + r * inner;
      for (std::int64_t c = 0; c < width; ++c) acc[c] += static_cast<double>(row[c]);
    }
    for (std::int64_t c = 0; c < width; ++c) out[o * inner + c0 + c] = static_cast<T>(acc[c]);
  });
}

template <typename T>
void max_kernel(const T* in, T* values, std::int64_t* indices, std::int64_t outer,
                std::int64_t reduced, std::int64_t inner) {
  parallel_tasks(outer * inner, outer * reduced * inner, [&](std::int64_t task) {
    const std::int64_t o = task / inner, c = task % inner;
    const T* p = in + o * reduced * inner + c;
    T best = p[0];
    std::int64_t best_index = 0;
    for (std::int64_t r = 1; r < reduced && !std::isnan(best); ++r) {
      const T v = p[r * inner];
      if (v > best || std::isnan(v)) {
        best = v;
        best_index = r;
      }
    }
    values[task] = best;
    indices[task] = best_index;
  });
}

}  // namespace

void CpuBackend::sum(const ReduceArgs& args, const void* in, void* out) {
  dispatch_floating(args.dtype, [&](auto tag) {
    using T = decltype(tag);
    sum_kernel(static_cast<const T*>(in), static_cast<T*>(out), args.outer, args.reduced,
               args.inner);
  });
}

void CpuBackend::max(const ReduceArgs& args, const void* in, void* values, std::int64_t* indices) {
  dispatch_floating(args.dtype, [&](auto tag) {
    using T = decltype(tag);
    max_kernel(static_cast<const T*>(in), static_cast<T*>(values), indices, args.outer,
               args.reduced, args.inner);
  });
}

void CpuBackend::sum_squares(const ReduceArgs& args, const void* in, void* out) {
  const std::int64_t n = args.outer * args.reduced * args.inner;
  dispatch_floating(args.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(in);
    const std::int64_t chunks = (n + kRowChunk - 1) / kRowChunk;
    std::vector<double> partial(chunks);
    parallel_tasks(chunks, n, [&](std::int64_t c) {
      const std::int64_t begin = c * kRowChunk;
      partial[c] = row_sum_squares(x + begin, std::min(kRowChunk, n - begin));
    });
    double total = 0.0;
    for (double p : partial) total += p;
    *static_cast<T*>(out) = static_cast<T>(total);
  });
}

}  // namespace kiln
