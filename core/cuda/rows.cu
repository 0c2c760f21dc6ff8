// Fused row kernels on CUDA: softmax (optionally causal, optionally log), layer norm and
// cross-entropy, forward and backward (and forward fused with the gradient, for the LM head),
// with the semantics of core/cpu/rows.cpp. Each row is owned by one group of threads: a warp when
// rows have at most kWarpRowMax columns (eight rows per block), else the whole block. Row
// statistics accumulate in float64 and are combined with the fixed-order reductions of
// block_reduce.cuh; cross-entropy's logsumexp takes one pass over the row (a running max and
// sum). dgamma/dbeta are summed per fixed block of rows, then the blocks in order by a second
// kernel: deterministic, no atomics.
//
// A thread of a group owns chunks of kPack consecutive columns (core/cuda/packs.cuh): its first
// at lane * kPack, then every kGroup * kPack columns. Every pass over a row walks that partition
// (for_each_chunk), reading a chunk as one 16-byte-aligned pack where the row allows and column
// by column otherwise (a row off a 16-byte boundary, the row's last partial chunk), so each thread
// sums the same columns in the same order on either path. Loops over a chunk's elements run over
// all kPack of them, unrolled, masking the tail, so that a chunk's values stay in registers (a loop
// to a run-time count left them in local memory). The forwards of softmax and layer norm keep a
// row of up to kCachedChunks chunks per thread in registers (a row of up to 1,024 columns per
// warp, 8,192 per block), so that their three passes read the row from memory once.
//
// bf16 operands (Backend::kernels_read_bf16: SoftmaxArgs::bf16_values, LayerNormArgs::bf16_input,
// CrossEntropyArgs::bf16_logits): the kernels read the bf16 operand as float32 in registers (X,
// the storage type, beside T, the arithmetic's) and run the float32 kernel's arithmetic, rounding
// once where the result is bf16 (softmax's y): the float32 kernel's bits on the widened values.
#include <cstdint>
#include <type_traits>

#include <cuda/std/limits>

#include "core/convert.h"
#include "core/cuda/block_reduce.cuh"
#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/launch.h"
#include "core/cuda/packs.cuh"
#include "core/cuda/scratch.h"
#include "core/elementwise_math.h"

namespace kiln {

namespace gpu {
namespace {

constexpr std::int64_t kWarpRowMax = 1024;  // rows up to this long: a warp each
constexpr std::int64_t kNormRowBlock = 64;  // rows per partial sum of dgamma/dbeta
constexpr int kCachedChunks = 4;            // chunks per thread a cached row holds in registers

// The threads that share one row: a warp (kGroup == 32) or the whole block (kGroup == kThreads).
// The row loop is uniform over the group, as the group's reductions require.
template <int kGroup>
struct RowGroup {
  static constexpr int kRowsPerBlock = kThreads / kGroup;
  __device__ static int lane() { return threadIdx.x % kGroup; }
  __device__ static std::int64_t first_row() {
    return static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kGroup;
  }
  __device__ static std::int64_t row_step() {
    return static_cast<std::int64_t>(gridDim.x) * kRowsPerBlock;
  }
  template <typename T, typename Op>
  __device__ static T reduce(T v, Op op, T identity, T* shared) {
    if constexpr (kGroup == kWarp) {
      return warp_reduce(v, op);
    } else {
      return block_reduce(v, op, identity, shared);
    }
  }
  // A barrier (with memory ordering) for the threads of the group.
  __device__ static void sync() {
    if constexpr (kGroup == kWarp) {
      __syncwarp();
    } else {
      __syncthreads();
    }
  }
};

// Calls f(k, first, count) for this thread's chunks of the first n columns of a row, in order: the
// k-th at column first = (lane + k kGroup) kPack, count = min(kPack, n - first) columns. With
// kChunks > 0 (a cached row: n <= kChunks kGroup kPack) the loop is unrolled, so that k is a
// constant and a chunk's registers can be named by it; the same chunks in the same order.
template <int kGroup, int kChunks, typename F>
__device__ void for_each_chunk(std::int64_t n, F&& f) {
  const std::int64_t lane = RowGroup<kGroup>::lane();
  const auto count = [n](std::int64_t first) {
    return static_cast<int>(n - first < kPack ? n - first : kPack);
  };
  if constexpr (kChunks > 0) {
#pragma unroll
    for (int k = 0; k < kChunks; ++k) {
      const std::int64_t first = (lane + k * kGroup) * kPack;
      if (first < n) f(k, first, count(first));
    }
  } else {
    int k = 0;
    for (std::int64_t first = lane * kPack; first < n; first += kGroup * kPack, ++k)
      f(k, first, count(first));
  }
}

// Columns [first, first + count) of row as T values: one pack where the chunk is whole and the
// row 16-byte aligned, else column by column.
template <typename T, typename X>
__device__ void load_chunk(const X* row, std::int64_t first, int count, T (&v)[kPack]) {
  if (count == kPack && aligned16(row)) {
    load_pack(row + first, v);
    return;
  }
#pragma unroll
  for (int e = 0; e < kPack; ++e)
    if (e < count) v[e] = convert<T>(row[first + e]);
}

// The first `count` values stored to columns [first, first + count) of row, rounded to Y once.
template <typename Y, typename T>
__device__ void store_chunk(Y* row, std::int64_t first, int count, const T (&v)[kPack]) {
  if (count == kPack && aligned16(row)) {
    store_pack(row + first, v);
    return;
  }
#pragma unroll
  for (int e = 0; e < kPack; ++e)
    if (e < count) row[first + e] = convert<Y>(v[e]);
}

// Chunks per thread for rows of `cols` columns owned by groups of `group` threads: kCachedChunks
// where the row fits the registers, else 0 (read from memory on every pass).
constexpr int chunks_for(std::int64_t cols, int group) {
  return cols <= std::int64_t{kCachedChunks} * kPack * group ? kCachedChunks : 0;
}

// Calls launch(group, grid) with the row group for rows of `cols` columns and its grid.
template <typename Launch>
void launch_rows(std::int64_t rows, std::int64_t cols, Launch&& launch) {
  if (rows == 0) return;
  if (cols <= kWarpRowMax) {
    launch(std::integral_constant<int, kWarp>{}, blocks_for(rows, kThreads / kWarp));
  } else {
    launch(std::integral_constant<int, kThreads>{}, blocks_for(rows, 1));
  }
  KILN_CUDA_CHECK_LAUNCH();
}

// As launch_rows, with the chunks per thread (a std::integral_constant, chunks_for) as well.
template <typename Launch>
void launch_cached_rows(std::int64_t rows, std::int64_t cols, Launch&& launch) {
  launch_rows(rows, cols, [&](auto group, unsigned grid) {
    constexpr int kGroup = decltype(group)::value;
    if (chunks_for(cols, kGroup) > 0) {
      launch(group, std::integral_constant<int, kCachedChunks>{}, grid);
    } else {
      launch(group, std::integral_constant<int, 0>{}, grid);
    }
  });
}

template <typename T>
__device__ T infinity() {
  return ::cuda::std::numeric_limits<T>::infinity();
}

// The number of leading columns row r may see (all of them unless causal).
__device__ std::int64_t visible_cols(const SoftmaxArgs& a, std::int64_t row) {
  if (!a.causal) return a.cols;
  const std::int64_t n = row % a.query_len + a.query_offset + 1;
  return n < 0 ? 0 : (n > a.cols ? a.cols : n);
}

// y = softmax(x) (or log_softmax) over the visible columns; 0 (or -inf) beyond them. x and y are
// stored as X, computed in T. A cached row (kChunks > 0) is read once, into registers, for the
// max, the sum and the output.
template <typename T, typename X, int kGroup, int kChunks>
__global__ void __launch_bounds__(kThreads)
    softmax_forward_kernel(SoftmaxArgs a, const X* x, X* y) {
  using G = RowGroup<kGroup>;
  __shared__ T shared_max[kWarp];
  __shared__ double shared_sum[kWarp];
  constexpr int kHeld = kChunks > 0 ? kChunks : 1;
  for (std::int64_t r = G::first_row(); r < a.rows; r += G::row_step()) {
    const X* xr = x + r * a.cols;
    X* yr = y + r * a.cols;
    const std::int64_t n = visible_cols(a, r);
    T held[kHeld][kPack] = {};
    // Chunk k of this thread's part of the row: from the registers, or read again.
    const auto values = [&](int k, std::int64_t first, int count, T(&v)[kPack]) {
      if constexpr (kChunks > 0) {
#pragma unroll
        for (int e = 0; e < kPack; ++e) v[e] = held[k][e];
      } else {
        load_chunk(xr, first, count, v);
      }
    };
    T m = -infinity<T>();
    for_each_chunk<kGroup, kChunks>(n, [&](int k, std::int64_t first, int count) {
      T v[kPack] = {};
      load_chunk(xr, first, count, v);
#pragma unroll
      for (int e = 0; e < kPack; ++e)
        if (e < count) m = MaxOp{}(m, v[e]);
      if constexpr (kChunks > 0) {
#pragma unroll
        for (int e = 0; e < kPack; ++e) held[k][e] = v[e];
      }
    });
    m = G::reduce(m, MaxOp{}, -infinity<T>(), shared_max);
    double s = 0.0;
    for_each_chunk<kGroup, kChunks>(n, [&](int k, std::int64_t first, int count) {
      T v[kPack] = {};
      values(k, first, count, v);
#pragma unroll
      for (int e = 0; e < kPack; ++e)
        if (e < count) s += math::exp(v[e] - m);
    });
    s = G::reduce(s, SumOp{}, 0.0, shared_sum);
    const T lse = m + static_cast<T>(::log(s)), inv = static_cast<T>(1.0 / s);
    for_each_chunk<kGroup, kChunks>(n, [&](int k, std::int64_t first, int count) {
      T v[kPack] = {};
      values(k, first, count, v);
#pragma unroll
      for (int e = 0; e < kPack; ++e)
        if (e < count) v[e] = a.log ? v[e] - lse : math::exp(v[e] - m) * inv;
      store_chunk(yr, first, count, v);
    });
    const X beyond = convert<X>(a.log ? -infinity<T>() : T(0));
    for (std::int64_t j = n + G::lane(); j < a.cols; j += kGroup) yr[j] = beyond;
  }
}

// softmax: dx = y * (dy - sum(dy * y)); log_softmax: dx = dy - exp(y) * sum(dy); 0 beyond the
// visible columns. y is stored as Y (the forward's X), dy and dx as T.
template <typename T, typename Y, int kGroup>
__global__ void __launch_bounds__(kThreads)
    softmax_backward_kernel(SoftmaxArgs a, const Y* y, const T* dy, T* dx) {
  using G = RowGroup<kGroup>;
  __shared__ double shared_sum[kWarp];
  for (std::int64_t r = G::first_row(); r < a.rows; r += G::row_step()) {
    const Y* yr = y + r * a.cols;
    const T* gr = dy + r * a.cols;
    T* out = dx + r * a.cols;
    const std::int64_t n = visible_cols(a, r);
    double acc = 0.0;
    for_each_chunk<kGroup, 0>(n, [&](int, std::int64_t first, int count) {
      T g[kPack] = {}, v[kPack] = {};
      load_chunk(gr, first, count, g);
      if (a.log) {
#pragma unroll
        for (int e = 0; e < kPack; ++e)
          if (e < count) acc += static_cast<double>(g[e]);
      } else {
        load_chunk(yr, first, count, v);
#pragma unroll
        for (int e = 0; e < kPack; ++e)
          if (e < count) acc += static_cast<double>(g[e]) * v[e];
      }
    });
    const T s = static_cast<T>(G::reduce(acc, SumOp{}, 0.0, shared_sum));
    for_each_chunk<kGroup, 0>(n, [&](int, std::int64_t first, int count) {
      T g[kPack] = {}, v[kPack] = {};
      load_chunk(gr, first, count, g);
      load_chunk(yr, first, count, v);
#pragma unroll
      for (int e = 0; e < kPack; ++e)
        if (e < count) g[e] = a.log ? g[e] - math::exp(v[e]) * s : v[e] * (g[e] - s);
      store_chunk(out, first, count, g);
    });
    for (std::int64_t j = n + G::lane(); j < a.cols; j += kGroup) out[j] = T(0);
  }
}

// y = (x - mean) * rstd * gamma + beta, rstd = 1 / sqrt(var + eps) (biased variance), x stored
// as X. A cached row (kChunks > 0) is read once, into registers, for the mean, the variance
// (about the mean, two passes' accuracy) and the output.
template <typename T, typename X, int kGroup, int kChunks>
__global__ void __launch_bounds__(kThreads)
    layer_norm_forward_kernel(std::int64_t rows, std::int64_t cols, double eps, const X* x,
                              const T* gamma, const T* beta, T* y, T* mean, T* rstd) {
  using G = RowGroup<kGroup>;
  __shared__ double shared_sum[kWarp];
  constexpr int kHeld = kChunks > 0 ? kChunks : 1;
  for (std::int64_t r = G::first_row(); r < rows; r += G::row_step()) {
    const X* xr = x + r * cols;
    T held[kHeld][kPack] = {};
    const auto values = [&](int k, std::int64_t first, int count, T(&v)[kPack]) {
      if constexpr (kChunks > 0) {
#pragma unroll
        for (int e = 0; e < kPack; ++e) v[e] = held[k][e];
      } else {
        load_chunk(xr, first, count, v);
      }
    };
    double sum = 0.0;
    for_each_chunk<kGroup, kChunks>(cols, [&](int k, std::int64_t first, int count) {
      T v[kPack] = {};
      load_chunk(xr, first, count, v);
#pragma unroll
      for (int e = 0; e < kPack; ++e)
        if (e < count) sum += v[e];
      if constexpr (kChunks > 0) {
#pragma unroll
        for (int e = 0; e < kPack; ++e) held[k][e] = v[e];
      }
    });
    const double mu = G::reduce(sum, SumOp{}, 0.0, shared_sum) / static_cast<double>(cols);
    double sq = 0.0;
    for_each_chunk<kGroup, kChunks>(cols, [&](int k, std::int64_t first, int count) {
      T v[kPack] = {};
      values(k, first, count, v);
#pragma unroll
      for (int e = 0; e < kPack; ++e)
        if (e < count) {
          const double d = v[e] - mu;
          sq += d * d;
        }
    });
    sq = G::reduce(sq, SumOp{}, 0.0, shared_sum);
    const double inv = 1.0 / ::sqrt(sq / static_cast<double>(cols) + eps);
    const T m = static_cast<T>(mu), s = static_cast<T>(inv);
    T* yr = y + r * cols;
    for_each_chunk<kGroup, kChunks>(cols, [&](int k, std::int64_t first, int count) {
      T v[kPack] = {}, g[kPack] = {}, b[kPack] = {};
      values(k, first, count, v);
      load_chunk(gamma, first, count, g);
      load_chunk(beta, first, count, b);
#pragma unroll
      for (int e = 0; e < kPack; ++e)
        if (e < count) v[e] = (v[e] - m) * s * g[e] + b[e];
      store_chunk(yr, first, count, v);
    });
    if (G::lane() == 0) {
      mean[r] = m;
      rstd[r] = s;
    }
  }
}

// With xhat = (x - mean) * rstd and g = dy * gamma: dx = rstd * (g - mean(g) - xhat * mean(g
// xhat)). x stored as X.
template <typename T, typename X, int kGroup>
__global__ void __launch_bounds__(kThreads)
    layer_norm_backward_kernel(std::int64_t rows, std::int64_t cols, const X* x, const T* gamma,
                               const T* mean, const T* rstd, const T* dy, T* dx) {
  using G = RowGroup<kGroup>;
  __shared__ double shared_sum[kWarp];
  for (std::int64_t r = G::first_row(); r < rows; r += G::row_step()) {
    const X* xr = x + r * cols;
    const T* gr = dy + r * cols;
    const T m = mean[r], s = rstd[r];
    double sum_g = 0.0, sum_gx = 0.0;
    for_each_chunk<kGroup, 0>(cols, [&](int, std::int64_t first, int count) {
      T v[kPack] = {}, d[kPack] = {}, w[kPack] = {};
      load_chunk(xr, first, count, v);
      load_chunk(gr, first, count, d);
      load_chunk(gamma, first, count, w);
#pragma unroll
      for (int e = 0; e < kPack; ++e)
        if (e < count) {
          const double g = static_cast<double>(d[e]) * w[e];
          sum_g += g;
          sum_gx += g * ((v[e] - m) * s);
        }
    });
    sum_g = G::reduce(sum_g, SumOp{}, 0.0, shared_sum);
    sum_gx = G::reduce(sum_gx, SumOp{}, 0.0, shared_sum);
    const T mean_g = static_cast<T>(sum_g / cols), mean_gx = static_cast<T>(sum_gx / cols);
    T* out = dx + r * cols;
    for_each_chunk<kGroup, 0>(cols, [&](int, std::int64_t first, int count) {
      T v[kPack] = {}, d[kPack] = {}, w[kPack] = {};
      load_chunk(xr, first, count, v);
      load_chunk(gr, first, count, d);
      load_chunk(gamma, first, count, w);
#pragma unroll
      for (int e = 0; e < kPack; ++e)
        if (e < count) {
          const T xhat = (v[e] - m) * s;
          v[e] = s * (d[e] * w[e] - mean_g - xhat * mean_gx);
        }
      store_chunk(out, first, count, v);
    });
  }
}

// partial_gamma/partial_beta (blocks, cols): sums of dy * xhat and dy over each block of
// kNormRowBlock rows, one thread per (block, column), rows in order. x stored as X.
template <typename T, typename X>
__global__ void __launch_bounds__(kThreads)
    layer_norm_param_partials(std::int64_t rows, std::int64_t cols, const X* x, const T* mean,
                              const T* rstd, const T* dy, double* partial_gamma,
                              double* partial_beta) {
  const std::int64_t blocks = (rows + kNormRowBlock - 1) / kNormRowBlock;
  for (std::int64_t t = thread_index(); t < blocks * cols; t += thread_count()) {
    const std::int64_t j = t % cols, b = t / cols;
    const std::int64_t end = (b + 1) * kNormRowBlock < rows ? (b + 1) * kNormRowBlock : rows;
    double g = 0.0, be = 0.0;
    for (std::int64_t r = b * kNormRowBlock; r < end; ++r) {
      const T grad = dy[r * cols + j];
      g += static_cast<double>(grad) * ((convert<T>(x[r * cols + j]) - mean[r]) * rstd[r]);
      be += grad;
    }
    partial_gamma[t] = g;
    partial_beta[t] = be;
  }
}

// dgamma/dbeta (cols) = the partials (blocks, cols) summed over blocks in order.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    layer_norm_param_sums(std::int64_t blocks, std::int64_t cols, const double* partial_gamma,
                          const double* partial_beta, T* dgamma, T* dbeta) {
  for (std::int64_t j = thread_index(); j < cols; j += thread_count()) {
    double g = 0.0, be = 0.0;
    for (std::int64_t b = 0; b < blocks; ++b) {
      g += partial_gamma[b * cols + j];
      be += partial_beta[b * cols + j];
    }
    dgamma[j] = static_cast<T>(g);
    dbeta[j] = static_cast<T>(be);
  }
}

// The max m of row xr (stored as X) and sum exp(x - m), in every thread of the group, from one
// pass over the row: each thread keeps a running max and sum (MaxSum), and the group combines
// them.
template <typename T, int kGroup, typename X>
__device__ MaxSum<T> row_max_sum(const X* xr, std::int64_t cols, MaxSum<T>* shared) {
  using G = RowGroup<kGroup>;
  const MaxSum<T> empty{-infinity<T>(), 0.0};
  MaxSum<T> part = empty;
  for_each_chunk<kGroup, 0>(cols, [&](int, std::int64_t first, int count) {
    T v[kPack] = {};
    load_chunk(xr, first, count, v);
#pragma unroll
    for (int e = 0; e < kPack; ++e)
      if (e < count) part = add_element(part, v[e]);
  });
  return G::reduce(part, MaxSumOp{}, empty, shared);
}

// loss = logsumexp(x) - x[target] (0 where target == ignore_index); the row's max and
// log-sum saved (saved[2 r], saved[2 r + 1]). The logits are stored as X.
template <typename T, typename X, int kGroup>
__global__ void __launch_bounds__(kThreads)
    cross_entropy_forward_kernel(std::int64_t rows, std::int64_t cols, const X* logits,
                                 const std::int64_t* targets, std::int64_t ignore_index, T* loss,
                                 T* saved) {
  using G = RowGroup<kGroup>;
  __shared__ MaxSum<T> shared[kWarp];
  for (std::int64_t r = G::first_row(); r < rows; r += G::row_step()) {
    const X* xr = logits + r * cols;
    const MaxSum<T> stats = row_max_sum<T, kGroup>(xr, cols, shared);
    if (G::lane() == 0) {
      const std::int64_t target = targets[r];
      const T log_sum = static_cast<T>(::log(stats.sum));
      saved[2 * r] = stats.max;
      saved[2 * r + 1] = log_sum;
      loss[r] = target == ignore_index ? T(0) : (stats.max - convert<T>(xr[target])) + log_sum;
    }
  }
}

// As cross_entropy_forward_kernel, then the row overwritten with exp(x - max) and row_scale set
// to 1 / sum (0 on ignored rows, whose row becomes 0): two passes over the row, one read and one
// read-write. Shifting by the max, not the logsumexp rounded to T, keeps the softmax accurate
// however large the logits.
template <typename T, int kGroup>
__global__ void __launch_bounds__(kThreads)
    cross_entropy_exp_kernel(std::int64_t rows, std::int64_t cols, std::int64_t ld, T* logits,
                             const std::int64_t* targets, std::int64_t ignore_index, T* loss,
                             T* logsumexp, T* row_scale) {
  using G = RowGroup<kGroup>;
  __shared__ MaxSum<T> shared[kWarp];
  for (std::int64_t r = G::first_row(); r < rows; r += G::row_step()) {
    T* xr = logits + r * ld;
    const std::int64_t target = targets[r];
    const bool ignored = target == ignore_index;
    const MaxSum<T> stats = row_max_sum<T, kGroup>(xr, cols, shared);
    const T log_sum = static_cast<T>(::log(stats.sum));
    if (G::lane() == 0) {
      logsumexp[r] = stats.max + log_sum;
      loss[r] = ignored ? T(0) : (stats.max - xr[target]) + log_sum;
      row_scale[r] = ignored ? T(0) : static_cast<T>(1.0 / stats.sum);
    }
    // xr[target] is read above before any thread of the group overwrites it below.
    G::sync();
    for_each_chunk<kGroup, 0>(cols, [&](int, std::int64_t first, int count) {
      T v[kPack] = {};
      load_chunk(xr, first, count, v);
#pragma unroll
      for (int e = 0; e < kPack; ++e)
        if (e < count) v[e] = ignored ? T(0) : math::exp(v[e] - stats.max);
      store_chunk(xr, first, count, v);
    });
  }
}

// dlogits = (softmax(logits) - onehot(target)) * grad_loss * scale; 0 on ignored rows. The
// upstream gradient is read on the device, so the host never waits for it. The logits are
// stored as X.
template <typename T, typename X, int kGroup>
__global__ void __launch_bounds__(kThreads)
    cross_entropy_backward_kernel(std::int64_t rows, std::int64_t cols, const X* logits,
                                  const std::int64_t* targets, std::int64_t ignore_index,
                                  const T* saved, const T* grad_loss, double scale, T* dlogits) {
  using G = RowGroup<kGroup>;
  const T grad_scale = static_cast<T>(static_cast<double>(*grad_loss) * scale);
  for (std::int64_t r = G::first_row(); r < rows; r += G::row_step()) {
    const X* xr = logits + r * cols;
    T* out = dlogits + r * cols;
    const std::int64_t target = targets[r];
    const bool ignored = target == ignore_index;
    const T max = ignored ? T(0) : saved[2 * r], log_sum = ignored ? T(0) : saved[2 * r + 1];
    for_each_chunk<kGroup, 0>(cols, [&](int, std::int64_t first, int count) {
      T v[kPack] = {};  // an ignored row's gradient is 0
      if (!ignored) {
        load_chunk(xr, first, count, v);
#pragma unroll
        for (int e = 0; e < kPack; ++e)
          if (e < count) {
            const T p = math::exp((v[e] - max) - log_sum) * grad_scale;
            v[e] = first + e == target ? p - grad_scale : p;
          }
      }
      store_chunk(out, first, count, v);
    });
  }
}

}  // namespace
}  // namespace gpu

using gpu::launch_cached_rows;
using gpu::launch_rows;

namespace {

// Calls f(compute, storage) with a value of the arithmetic's type and of the bf16-able operand's
// storage type: (float, bf16) where the row kernel reads bf16, else the dtype's type twice.
template <typename F>
void dispatch_rows(DType dtype, bool bf16_operand, F&& f) {
  if (bf16_operand) {
    KILN_CHECK(dtype == DType::f32, "row kernel: bf16 operands compute in float32, not {}",
               dtype_name(dtype));
    f(float{}, bf16{});
    return;
  }
  dispatch_floating(dtype, [&](auto tag) { f(tag, tag); });
}

}  // namespace

void CudaBackend::softmax_forward(const SoftmaxArgs& args, const void* x, void* y) {
  activate();
  dispatch_rows(args.dtype, args.bf16_values, [&](auto tag, auto storage) {
    using T = decltype(tag);
    using X = decltype(storage);
    launch_cached_rows(args.rows, args.cols, [&](auto group, auto chunks, unsigned grid) {
      KILN_LAUNCH(
          grid, gpu::kThreads, stream_,
          gpu::softmax_forward_kernel<T, X, decltype(group)::value, decltype(chunks)::value>)
      (args, static_cast<const X*>(x), static_cast<X*>(y));
    });
  });
}

void CudaBackend::softmax_backward(const SoftmaxArgs& args, const void* y, const void* dy,
                                   void* dx) {
  activate();
  dispatch_rows(args.dtype, args.bf16_values, [&](auto tag, auto storage) {
    using T = decltype(tag);
    using Y = decltype(storage);
    launch_rows(args.rows, args.cols, [&](auto group, unsigned grid) {
      KILN_LAUNCH(grid, gpu::kThreads, stream_,
                  gpu::softmax_backward_kernel<T, Y, decltype(group)::value>)
      (args, static_cast<const Y*>(y), static_cast<const T*>(dy), static_cast<T*>(dx));
    });
  });
}

void CudaBackend::layer_norm_forward(const LayerNormArgs& args, const void* x, const void* gamma,
                                     const void* beta, void* y, void* mean, void* rstd) {
  const std::int64_t rows = args.rows, cols = args.cols;
  const double eps = args.eps;
  activate();
  dispatch_rows(args.dtype, args.bf16_input, [&](auto tag, auto storage) {
    using T = decltype(tag);
    using X = decltype(storage);
    launch_cached_rows(rows, cols, [&](auto group, auto chunks, unsigned grid) {
      KILN_LAUNCH(
          grid, gpu::kThreads, stream_,
          gpu::layer_norm_forward_kernel<T, X, decltype(group)::value, decltype(chunks)::value>)
      (rows, cols, eps, static_cast<const X*>(x), static_cast<const T*>(gamma),
       static_cast<const T*>(beta), static_cast<T*>(y), static_cast<T*>(mean),
       static_cast<T*>(rstd));
    });
  });
}

void CudaBackend::layer_norm_backward(const LayerNormArgs& args, const void* x, const void* gamma,
                                      const void* mean, const void* rstd, const void* dy, void* dx,
                                      void* dgamma, void* dbeta) {
  const std::int64_t rows = args.rows, cols = args.cols;
  if (cols == 0) return;
  activate();
  dispatch_rows(args.dtype, args.bf16_input, [&](auto tag, auto storage) {
    using T = decltype(tag);
    using X = decltype(storage);
    const X* xs = static_cast<const X*>(x);
    const T* ms = static_cast<const T*>(mean);
    const T* ss = static_cast<const T*>(rstd);
    const T* gs = static_cast<const T*>(dy);
    launch_rows(rows, cols, [&](auto group, unsigned grid) {
      KILN_LAUNCH(grid, gpu::kThreads, stream_,
                  gpu::layer_norm_backward_kernel<T, X, decltype(group)::value>)
      (rows, cols, xs, static_cast<const T*>(gamma), ms, ss, gs, static_cast<T*>(dx));
    });
    const std::int64_t blocks = (rows + gpu::kNormRowBlock - 1) / gpu::kNormRowBlock;
    Scratch<double> partial_gamma(*allocator_, blocks * cols),
        partial_beta(*allocator_, blocks * cols);
    if (blocks > 0) {
      KILN_LAUNCH(gpu::blocks_for(blocks * cols), gpu::kThreads, stream_,
                  gpu::layer_norm_param_partials<T, X>)
      (rows, cols, xs, ms, ss, gs, partial_gamma.get(), partial_beta.get());
      KILN_CUDA_CHECK_LAUNCH();
    }
    KILN_LAUNCH(gpu::blocks_for(cols), gpu::kThreads, stream_, gpu::layer_norm_param_sums<T>)
    (blocks, cols, partial_gamma.get(), partial_beta.get(), static_cast<T*>(dgamma),
     static_cast<T*>(dbeta));
    KILN_CUDA_CHECK_LAUNCH();
  });
}

void CudaBackend::cross_entropy_forward(const CrossEntropyArgs& args, const void* logits,
                                        const std::int64_t* targets, void* loss, void* row_stats) {
  const std::int64_t rows = args.rows, cols = args.cols, ignore_index = args.ignore_index;
  activate();
  dispatch_rows(args.dtype, args.bf16_logits, [&](auto tag, auto storage) {
    using T = decltype(tag);
    using X = decltype(storage);
    launch_rows(rows, cols, [&](auto group, unsigned grid) {
      KILN_LAUNCH(grid, gpu::kThreads, stream_,
                  gpu::cross_entropy_forward_kernel<T, X, decltype(group)::value>)
      (rows, cols, static_cast<const X*>(logits), targets, ignore_index, static_cast<T*>(loss),
       static_cast<T*>(row_stats));
    });
  });
}

void CudaBackend::cross_entropy_forward_exp(const CrossEntropyArgs& args, void* logits,
                                            const std::int64_t* targets, void* loss,
                                            void* logsumexp, void* row_scale) {
  const DType dtype = args.dtype;
  const std::int64_t rows = args.rows, cols = args.cols, ignore_index = args.ignore_index;
  activate();
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    launch_rows(rows, cols, [&](auto group, unsigned grid) {
      KILN_LAUNCH(grid, gpu::kThreads, stream_,
                  gpu::cross_entropy_exp_kernel<T, decltype(group)::value>)
      (rows, cols, args.row_stride > 0 ? args.row_stride : cols, static_cast<T*>(logits), targets,
       ignore_index, static_cast<T*>(loss), static_cast<T*>(logsumexp), static_cast<T*>(row_scale));
    });
  });
}

void CudaBackend::cross_entropy_backward(const CrossEntropyArgs& args, const void* logits,
                                         const std::int64_t* targets, const void* row_stats,
                                         const void* grad_loss, void* dlogits) {
  const std::int64_t rows = args.rows, cols = args.cols, ignore_index = args.ignore_index;
  const double scale = args.scale;
  activate();
  dispatch_rows(args.dtype, args.bf16_logits, [&](auto tag, auto storage) {
    using T = decltype(tag);
    using X = decltype(storage);
    launch_rows(rows, cols, [&](auto group, unsigned grid) {
      KILN_LAUNCH(grid, gpu::kThreads, stream_,
                  gpu::cross_entropy_backward_kernel<T, X, decltype(group)::value>)
      (rows, cols, static_cast<const X*>(logits), targets, ignore_index,
       static_cast<const T*>(row_stats), static_cast<const T*>(grad_loss), scale,
       static_cast<T*>(dlogits));
    });
  });
}

}  // namespace kiln
