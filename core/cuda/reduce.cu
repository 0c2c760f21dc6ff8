// CUDA reductions over contiguous input viewed as (outer, reduced, inner): sum, sum of squares
// and max with its index. Deterministic without atomics: the work is cut into a partition fixed
// by the shape alone, every piece is reduced in a fixed order (sequential loops, then the
// butterflies of block_reduce.cuh), and partial results are added in index order by a second
// kernel. Sums accumulate in float64, as the CPU's do.
//
//   inner == 1, short rows:   one warp per row
//   inner == 1, long rows:    one block per (row, chunk of kRowChunk); chunk partials summed after
//   inner  > 1:               one thread per output column walking the reduced dim; when there
//                             are few columns and many rows, per-chunk partials summed after
#include <cstdint>

#include <cuda/std/cmath>

#include "core/cuda/block_reduce.cuh"
#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/launch.h"
#include "core/cuda/scratch.h"

namespace kiln {

namespace gpu {
namespace {

constexpr std::int64_t kWarpRowMax = 1024;   // rows up to this long: a warp each
constexpr std::int64_t kRowChunk = 32768;    // a block reduces at most this much of one row
constexpr std::int64_t kFewColumns = 32768;  // fewer output columns than this: chunk the rows
constexpr std::int64_t kColumnChunk = 256;   // rows per chunk when chunking columns

template <bool kSquare, typename T>
__device__ double term(T x) {
  const double v = static_cast<double>(x);
  if constexpr (kSquare) return v * v;
  return v;
}

// out (rows) = sum of each row of x (rows, cols), one warp per row.
template <bool kSquare, typename T>
__global__ void __launch_bounds__(kThreads)
    sum_rows_warp(const T* x, T* out, std::int64_t rows, std::int64_t cols) {
  constexpr int kRowsPerBlock = kThreads / kWarp;
  const int lane = threadIdx.x % kWarp;
  for (std::int64_t row =
           static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
       row < rows; row += static_cast<std::int64_t>(gridDim.x) * kRowsPerBlock) {
    const T* xr = x + row * cols;
    double acc = 0.0;
    for (std::int64_t j = lane; j < cols; j += kWarp) acc += term<kSquare>(xr[j]);
    acc = warp_reduce(acc, SumOp{});
    if (lane == 0) out[row] = static_cast<T>(acc);
  }
}

// out (rows, chunks) = sums of each row's chunks of kRowChunk elements, one block per chunk.
// With one chunk per row, Out is T and out is the result; otherwise Out is double (partials).
template <bool kSquare, typename T, typename Out>
__global__ void __launch_bounds__(kThreads) sum_rows_block(const T* x, Out* out, std::int64_t rows,
                                                           std::int64_t cols, std::int64_t chunks) {
  __shared__ double shared[kWarp];
  const std::int64_t tasks = rows * chunks;
  for (std::int64_t task = blockIdx.x; task < tasks; task += gridDim.x) {
    const std::int64_t row = task / chunks, begin = (task % chunks) * kRowChunk;
    const std::int64_t end = begin + kRowChunk < cols ? begin + kRowChunk : cols;
    const T* xr = x + row * cols;
    double acc = 0.0;
    for (std::int64_t j = begin + threadIdx.x; j < end; j += blockDim.x)
      acc += term<kSquare>(xr[j]);
    acc = block_reduce(acc, SumOp{}, 0.0, shared);
    if (threadIdx.x == 0) out[task] = static_cast<Out>(acc);
  }
}

// out (outer, chunks, inner) = sums over each chunk of `chunk_rows` rows of the reduced dim,
// one thread per output element. With one chunk, Out is T and out is the result.
template <typename T, typename Out>
__global__ void __launch_bounds__(kThreads)
    sum_columns(const T* x, Out* out, std::int64_t outer, std::int64_t reduced, std::int64_t inner,
                std::int64_t chunks, std::int64_t chunk_rows) {
  const std::int64_t total = outer * chunks * inner;
  for (std::int64_t t = thread_index(); t < total; t += thread_count()) {
    const std::int64_t c = t % inner, rest = t / inner;
    const std::int64_t chunk = rest % chunks, o = rest / chunks;
    const std::int64_t r0 = chunk * chunk_rows;
    const std::int64_t r1 = r0 + chunk_rows < reduced ? r0 + chunk_rows : reduced;
    const T* p = x + (o * reduced + r0) * inner + c;
    double acc = 0.0;
    for (std::int64_t r = r0; r < r1; ++r, p += inner) acc += static_cast<double>(*p);
    out[t] = static_cast<Out>(acc);
  }
}

// out (outer, inner) = partial (outer, chunks, inner) summed over chunks in index order.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    sum_partials(const double* partial, T* out, std::int64_t outer, std::int64_t chunks,
                 std::int64_t inner) {
  for (std::int64_t t = thread_index(); t < outer * inner; t += thread_count()) {
    const std::int64_t o = t / inner, c = t % inner;
    double acc = 0.0;
    for (std::int64_t k = 0; k < chunks; ++k) acc += partial[(o * chunks + k) * inner + c];
    out[t] = static_cast<T>(acc);
  }
}

// Rows of x (rows, cols) summed (of squares with kSquare) into out (rows).
template <bool kSquare, typename T>
void sum_rows(CachingAllocator& allocator, cudaStream_t stream, const T* x, T* out,
              std::int64_t rows, std::int64_t cols) {
  if (cols <= kWarpRowMax) {
    KILN_LAUNCH(blocks_for(rows, kThreads / kWarp), kThreads, stream, sum_rows_warp<kSquare, T>)
    (x, out, rows, cols);
    KILN_CUDA_CHECK_LAUNCH();
    return;
  }
  const std::int64_t chunks = (cols + kRowChunk - 1) / kRowChunk;
  if (chunks == 1) {
    KILN_LAUNCH(blocks_for(rows, 1), kThreads, stream, sum_rows_block<kSquare, T, T>)
    (x, out, rows, cols, 1);
    KILN_CUDA_CHECK_LAUNCH();
    return;
  }
  Scratch<double> partial(allocator, rows * chunks);
  KILN_LAUNCH(blocks_for(rows * chunks, 1), kThreads, stream, sum_rows_block<kSquare, T, double>)
  (x, partial.get(), rows, cols, chunks);
  KILN_CUDA_CHECK_LAUNCH();
  KILN_LAUNCH(blocks_for(rows), kThreads, stream, sum_partials<T>)
  (partial.get(), out, rows, chunks, 1);
  KILN_CUDA_CHECK_LAUNCH();
}

template <typename T>
void sum_middle(CachingAllocator& allocator, cudaStream_t stream, const T* x, T* out,
                std::int64_t outer, std::int64_t reduced, std::int64_t inner) {
  const std::int64_t columns = outer * inner;
  if (columns >= kFewColumns || reduced <= kColumnChunk) {
    KILN_LAUNCH(blocks_for(columns), kThreads, stream, sum_columns<T, T>)
    (x, out, outer, reduced, inner, 1, reduced);
    KILN_CUDA_CHECK_LAUNCH();
    return;
  }
  const std::int64_t chunks = (reduced + kColumnChunk - 1) / kColumnChunk;
  Scratch<double> partial(allocator, columns * chunks);
  KILN_LAUNCH(blocks_for(columns * chunks), kThreads, stream, sum_columns<T, double>)
  (x, partial.get(), outer, reduced, inner, chunks, kColumnChunk);
  KILN_CUDA_CHECK_LAUNCH();
  KILN_LAUNCH(blocks_for(columns), kThreads, stream, sum_partials<T>)
  (partial.get(), out, outer, chunks, inner);
  KILN_CUDA_CHECK_LAUNCH();
}

// values/indices (rows) = max of each row of x (rows, cols) and its index; kGroup threads (a warp
// or the block) per row. Each thread scans its elements in increasing index order.
template <int kGroup, typename T>
__global__ void __launch_bounds__(kThreads)
    max_rows(const T* x, T* values, std::int64_t* indices, std::int64_t rows, std::int64_t cols) {
  constexpr int kRowsPerBlock = kThreads / kGroup;
  __shared__ T shared_values[kWarp];
  __shared__ std::int64_t shared_indices[kWarp];
  const int lane = threadIdx.x % kGroup;
  for (std::int64_t row =
           static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kGroup;
       row < rows; row += static_cast<std::int64_t>(gridDim.x) * kRowsPerBlock) {
    const T* xr = x + row * cols;
    ArgMax<T> best{T(0), -1};
    for (std::int64_t j = lane; j < cols; j += kGroup) best = better(best, ArgMax<T>{xr[j], j});
    if constexpr (kGroup == kWarp) {
      best = warp_argmax(best);
    } else {
      best = block_argmax(best, shared_values, shared_indices);
    }
    if (lane == 0) {
      values[row] = best.value;
      indices[row] = best.index;
    }
  }
}

// The CPU's loop, one thread per output column (o, c) of (outer, inner).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    max_columns(const T* x, T* values, std::int64_t* indices, std::int64_t outer,
                std::int64_t reduced, std::int64_t inner) {
  for (std::int64_t t = thread_index(); t < outer * inner; t += thread_count()) {
    const std::int64_t o = t / inner, c = t % inner;
    const T* p = x + o * reduced * inner + c;
    T best = p[0];
    std::int64_t best_index = 0;
    for (std::int64_t r = 1; r < reduced && !::cuda::std::isnan(best); ++r) {
      const T v = p[r * inner];
      if (v > best || ::cuda::std::isnan(v)) {
        best = v;
        best_index = r;
      }
    }
    values[t] = best;
    indices[t] = best_index;
  }
}

}  // namespace
}  // namespace gpu

void CudaBackend::sum(const ReduceArgs& args, const void* in, void* out) {
  const DType dtype = args.dtype;
  const std::int64_t outer = args.outer, reduced = args.reduced, inner = args.inner;
  if (outer * inner == 0) return;
  activate();
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(in);
    T* y = static_cast<T*>(out);
    if (inner == 1) {
      gpu::sum_rows<false>(*allocator_, stream_, x, y, outer, reduced);
    } else {
      gpu::sum_middle(*allocator_, stream_, x, y, outer, reduced, inner);
    }
  });
}

void CudaBackend::sum_squares(const ReduceArgs& args, const void* in, void* out) {
  const std::int64_t n = args.outer * args.reduced * args.inner;
  activate();
  dispatch_floating(args.dtype, [&](auto tag) {
    using T = decltype(tag);
    gpu::sum_rows<true>(*allocator_, stream_, static_cast<const T*>(in), static_cast<T*>(out), 1,
                        n);
  });
}

void CudaBackend::max(const ReduceArgs& args, const void* in, void* values, std::int64_t* indices) {
  const DType dtype = args.dtype;
  const std::int64_t outer = args.outer, reduced = args.reduced, inner = args.inner;
  if (outer * inner == 0 || reduced == 0) return;
  activate();
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(in);
    T* v = static_cast<T*>(values);
    if (inner > 1) {
      KILN_LAUNCH(gpu::blocks_for(outer * inner), gpu::kThreads, stream_, gpu::max_columns<T>)
      (x, v, indices, outer, reduced, inner);
    } else if (reduced <= gpu::kWarpRowMax) {
      KILN_LAUNCH(gpu::blocks_for(outer, gpu::kThreads / gpu::kWarp), gpu::kThreads, stream_,
                  gpu::max_rows<gpu::kWarp, T>)
      (x, v, indices, outer, reduced);
    } else {
      KILN_LAUNCH(gpu::blocks_for(outer, 1), gpu::kThreads, stream_,
                  gpu::max_rows<gpu::kThreads, T>)
      (x, v, indices, outer, reduced);
    }
    KILN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace kiln
