// CPU reductions over contiguous (outer, reduced, inner) data. Each output element is summed by
// one task in a fixed order that depends only on the shape (never on the thread count), with
// float64 accumulators; long rows are split into fixed chunks whose partials are added in order.
#include <algorithm>
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
// Columns and rows per task when summing over a middle dim (inner > 1): a block's float64
// accumulators (16 KB) stay in L1.
constexpr std::int64_t kColumnBlock = 2048;
constexpr std::int64_t kRowsPerTask = 256;

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
  // Summing over a middle dim (a linear layer's bias gradient: (N, out) -> (out)). A task sums
  // a chunk of kRowsPerTask rows of one block of columns, reading each row's block contiguously
  // (columns strided a whole row apart defeat the hardware prefetcher); the chunks' float64
  // partials are then added in chunk order. Chunks and blocks depend only on the shape.
  const std::int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
  const std::int64_t chunks = (reduced + kRowsPerTask - 1) / kRowsPerTask;
  std::vector<double> partial(chunks > 1 ? outer * chunks * inner : 0);
  parallel_tasks(outer * blocks * chunks, outer * reduced * inner, [&](std::int64_t task) {
    const std::int64_t o = task / (blocks * chunks);
    const std::int64_t c0 = (task / chunks % blocks) * kColumnBlock, chunk = task % chunks;
    const std::int64_t width = std::min(kColumnBlock, inner - c0);
    const std::int64_t r0 = chunk * kRowsPerTask, rows = std::min(kRowsPerTask, reduced - r0);
    double acc[kColumnBlock] = {};
    const T* base = in + (o * reduced + r0) * inner + c0;
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* row = base + r * inner;
#pragma omp simd
      for (std::int64_t c = 0; c < width; ++c) acc[c] += static_cast<double>(row[c]);
    }
    if (chunks == 1) {
      for (std::int64_t c = 0; c < width; ++c) out[o * inner + c0 + c] = static_cast<T>(acc[c]);
    } else {
      std::copy(acc, acc + width, partial.begin() + (o * chunks + chunk) * inner + c0);
    }
  });
  if (chunks == 1) return;
  parallel_chunks(outer * inner, kColumnBlock, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const std::int64_t o = i / inner, c = i % inner;
      const double* p = partial.data() + o * chunks * inner + c;
      double total = 0.0;
      for (std::int64_t chunk = 0; chunk < chunks; ++chunk) total += p[chunk * inner];
      out[i] = static_cast<T>(total);
    }
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
