// Fused row kernels on the CPU: softmax (optionally causal, optionally log), layer norm and
// cross-entropy, forward and backward, one task per block of rows. Row statistics accumulate in
// float64; each row is owned by one task, so results do not depend on the thread count. bf16
// operands go through the float32 kernels a row at a time (row_values below).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/cpu/bf16_runs.h"
#include "core/cpu/cpu_backend.h"
#include "core/cpu/parallel.h"
#include "core/cpu/row_sum.h"
#include "core/cpu/vec_exp.h"

namespace kiln {

namespace {

// The number of leading columns row r may see.
std::int64_t visible_cols(const SoftmaxArgs& a, std::int64_t row) {
  if (!a.causal) return a.cols;
  return std::clamp<std::int64_t>(row % a.query_len + a.query_offset + 1, 0, a.cols);
}

// Row reductions in independent lanes, combined in a fixed order: `omp simd` lets the compiler
// vectorise them without -ffast-math, and the order of operations depends only on n
// (deterministic).
constexpr std::int64_t kLanes = 16;

template <typename T>
T row_max(const T* x, std::int64_t n) {
  // Two vectors of lanes: vmaxps has a latency of four cycles, one chain would stall on it.
  constexpr std::int64_t kMaxLanes = 2 * kLanes;
  T lane[kMaxLanes];
  for (T& m : lane) m = -std::numeric_limits<T>::infinity();
  std::int64_t j = 0;
  for (; j + kMaxLanes <= n; j += kMaxLanes)
#pragma omp simd
    for (std::int64_t k = 0; k < kMaxLanes; ++k) lane[k] = x[j + k] > lane[k] ? x[j + k] : lane[k];
  for (; j < n; ++j) lane[0] = x[j] > lane[0] ? x[j] : lane[0];
  T m = lane[0];
  for (std::int64_t k = 1; k < kMaxLanes; ++k) m = lane[k] > m ? lane[k] : m;
  return m;
}

// Asks for the cache lines of `next` that the loops below will want after this row: a row of the
// vocabulary (133 KB) comes from DRAM, and fetching the next one while this one is
// exponentiated overlaps the two instead of alternating them (43 -> 20 ms for 2048 x 33278).
// (Written without a loop over the lines: GCC 12 deleted the prefetches of a loop behind the
// null check, silently; the asm of this file has one prefetcht0 per line.)
template <typename T>
void prefetch_lanes(const T* next, std::int64_t j) {
  static_assert(kLanes * sizeof(T) <= 128, "one or two cache lines of lanes");
  if (next == nullptr) return;
  const char* line = reinterpret_cast<const char*>(next + j);
  __builtin_prefetch(line);
  if constexpr (kLanes * sizeof(T) > 64) __builtin_prefetch(line + 64);
}

// f(j) for j < n in vectorised blocks of kLanes, asking for the cache lines of the rows this
// task reads next (`next`, any of them null) at the same offsets: the pass that finishes a row
// from L2 brings the next one from DRAM meanwhile. Eight floats per vector (simdlen) even where
// AVX-512 has sixteen: layer-norm backward's pass touches nine streams, most of them rows that
// start off a 64-byte line, and with 512-bit vectors it ran at 8 GB/s against 10-12 with 256-bit
// ones (Xeon, 2048 x 33278, 2 threads; split loads are our likely cause, not a measured one).
template <typename T, typename F, typename... Next>
void for_each_prefetching(std::int64_t n, F&& f, const T* first_next, const Next*... next) {
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    prefetch_lanes(first_next, j);
    (prefetch_lanes(next, j), ...);
#pragma omp simd simdlen(8)
    for (std::int64_t k = 0; k < kLanes; ++k) f(j + k);
  }
  for (; j < n; ++j) f(j);
}

// Rows are exponentiated in blocks of 512 elements (2 KB of float32, in L1), summed in T lanes
// and merged in float64, so rows of thousands of float32 values keep float64 accuracy.
constexpr std::int64_t kExpBlock = 512;

// sum_{begin <= j < end} exp(x_j - shift) in T lanes; with `store`, e_j = exp(x_j - shift)
// written to e (which may be x).
template <typename T, bool store>
T block_sum_exp(const T* x, T* e, std::int64_t begin, std::int64_t end, T shift,
                const T* prefetch_row) {
  T lane[kLanes] = {};
  std::int64_t j = begin;
  for (; j + kLanes <= end; j += kLanes) {
    prefetch_lanes(prefetch_row, j);
#pragma omp simd
    for (std::int64_t k = 0; k < kLanes; ++k) {
      const T v = vec_exp(x[j + k] - shift);
      if constexpr (store) e[j + k] = v;
      lane[k] += v;
    }
  }
  for (; j < end; ++j) {
    const T v = vec_exp(x[j] - shift);
    if constexpr (store) e[j] = v;
    lane[0] += v;
  }
  T block = T(0);
  for (std::int64_t k = 0; k < kLanes; ++k) block += lane[k];
  return block;
}

// e_j = exp(x_j - shift) written to e (which may be x); returns sum_j e_j.
template <typename T>
double store_exp_sum(const T* x, T* e, std::int64_t n, T shift, const T* prefetch_row) {
  double total = 0.0;
  for (std::int64_t begin = 0; begin < n; begin += kExpBlock)
    total += static_cast<double>(
        block_sum_exp<T, true>(x, e, begin, std::min(n, begin + kExpBlock), shift, prefetch_row));
  return total;
}

// The max of a row and the sum of exp(x_j - max), in one read of the row ("online softmax",
// Milakov & Gimelshein 2018, by blocks): each block's max is taken and its exponentials summed
// while it is in L1, against the running max m; when a block raises m to m', the sum so far is
// rescaled by exp(m - m') (in float64). A separate max pass would wait on memory without
// computing, then exponentiate from L2 without reading memory. -inf entries (masked keys)
// contribute nothing; a row of -inf has sum 0. Consumers compute (max - x) + log(sum).
template <typename T>
struct RowStats {
  T max;
  double sum;
};

template <typename T>
RowStats<T> row_stats(const T* x, std::int64_t n) {
  // Fetches the data two blocks ahead (past the row's end: the next row's start) while a
  // block is exponentiated, so that memory and arithmetic overlap.
  constexpr std::int64_t kPrefetchAhead = 2 * kExpBlock;
  RowStats<T> stats{-std::numeric_limits<T>::infinity(), 0.0};
  for (std::int64_t begin = 0; begin < n; begin += kExpBlock) {
    const std::int64_t end = std::min(n, begin + kExpBlock);
    const T block_max = row_max(x + begin, end - begin);
    if (block_max > stats.max) {
      // (Nothing to rescale before the first finite block: skips a libm call per short row.)
      if (stats.sum != 0.0)
        stats.sum *= std::exp(static_cast<double>(stats.max) - static_cast<double>(block_max));
      stats.max = block_max;
    }
    if (stats.max == -std::numeric_limits<T>::infinity()) continue;
    stats.sum += static_cast<double>(
        block_sum_exp<T, false>(x, nullptr, begin, end, stats.max, x + kPrefetchAhead));
  }
  return stats;
}

// The row after r in the same task (tasks own contiguous rows under schedule(static)), or null.
template <typename T>
const T* next_row(const T* x, std::int64_t r, std::int64_t rows, std::int64_t cols) {
  return r + 1 < rows ? x + (r + 1) * cols : nullptr;
}

// ---- bf16 operands (Backend::kernels_read_bf16): the float32 kernels below on a row at a time,
// widened into a float32 buffer of the thread (a row of the vocabulary, 133 KB, stays in L2)
// and rounded out of one where the result is bf16: the float32 kernel's bits on the widened
// values, rounded once, without a float32 tensor of the operand's size.

// Buffer `which` (0 or 1) of this thread, at least cols floats.
float* row_buffer(int which, std::int64_t cols) {
  thread_local std::vector<float> buffers[2];
  std::vector<float>& buffer = buffers[which];
  if (static_cast<std::int64_t>(buffer.size()) < cols) buffer.resize(cols);
  return buffer.data();
}

// Row r of x as T values: the row itself, or a bf16 row widened into buffer `which`.
template <typename T, typename X>
const T* row_values(const X* x, std::int64_t r, std::int64_t cols, int which) {
  if constexpr (std::is_same_v<X, T>) {
    return x + r * cols;
  } else {
    float* values = row_buffer(which, cols);
    widen_bf16_run(x + r * cols, values, cols);
    return values;
  }
}

// log_softmax: y = (x - max) - log(sum); softmax: y = e / sum with e = exp(x - max) stored by
// the summing pass, so each element is exponentiated once.
template <typename T>
void softmax_forward_rows(const SoftmaxArgs& a, const T* x, T* y) {
  parallel_tasks(a.rows, a.rows * a.cols, [&](std::int64_t r) {
    const T* xr = x + r * a.cols;
    T* yr = y + r * a.cols;
    const std::int64_t n = visible_cols(a, r);
    if (a.log) {
      const RowStats<T> stats = row_stats(xr, n);
      const T log_sum = static_cast<T>(std::log(stats.sum));
      for (std::int64_t j = 0; j < n; ++j) yr[j] = (xr[j] - stats.max) - log_sum;
      for (std::int64_t j = n; j < a.cols; ++j) yr[j] = -std::numeric_limits<T>::infinity();
      return;
    }
    const T max = row_max(xr, n);
    const bool empty_row = max == -std::numeric_limits<T>::infinity();  // every key masked
    const double sum =
        empty_row ? 0.0 : store_exp_sum(xr, yr, n, max, next_row(x, r, a.rows, a.cols));
    const T inv = static_cast<T>(1.0 / sum);
    if (empty_row) std::fill(yr, yr + n, std::numeric_limits<T>::quiet_NaN());
    for (std::int64_t j = 0; j < n; ++j) yr[j] *= inv;
    for (std::int64_t j = n; j < a.cols; ++j) yr[j] = T(0);
  });
}

// softmax: dx = y * (dy - sum(dy * y)); log_softmax: dx = dy - exp(y) * sum(dy).
template <typename T>
void softmax_backward_rows(const SoftmaxArgs& a, const T* y, const T* dy, T* dx) {
  parallel_tasks(a.rows, a.rows * a.cols, [&](std::int64_t r) {
    const T* yr = y + r * a.cols;
    const T* gr = dy + r * a.cols;
    T* out = dx + r * a.cols;
    const std::int64_t n = visible_cols(a, r);
    const T s = static_cast<T>(a.log ? row_sum(gr, n) : lane_sum(n, [=](std::int64_t j) {
      return static_cast<double>(gr[j]) * yr[j];
    }));
    if (a.log) {
      for (std::int64_t j = 0; j < n; ++j) out[j] = gr[j] - vec_exp(yr[j]) * s;
    } else {
      for (std::int64_t j = 0; j < n; ++j) out[j] = yr[j] * (gr[j] - s);
    }
    for (std::int64_t j = n; j < a.cols; ++j) out[j] = T(0);
  });
}

// y = (x - mean) * rstd * gamma + beta, rstd = 1 / sqrt(var + eps) (biased variance).
template <typename T>
void layer_norm_forward_rows(std::int64_t rows, std::int64_t cols, double eps, const T* x,
                             const T* gamma, const T* beta, T* y, T* mean, T* rstd) {
  parallel_tasks(rows, rows * cols, [&](std::int64_t r) {
    const T* xr = x + r * cols;
    const double mu = row_sum(xr, cols) / static_cast<double>(cols);
    const double sq = lane_sum(cols, [=](std::int64_t j) {
      const double d = xr[j] - mu;
      return d * d;
    });
    const double inv = 1.0 / std::sqrt(sq / static_cast<double>(cols) + eps);
    const T m = static_cast<T>(mu), s = static_cast<T>(inv);
    T* yr = y + r * cols;
    for_each_prefetching(
        cols, [=](std::int64_t j) { yr[j] = (xr[j] - m) * s * gamma[j] + beta[j]; },
        next_row(x, r, rows, cols));
    mean[r] = m;
    rstd[r] = s;
  });
}

// With xhat = (x - mean) * rstd and g = dy * gamma:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  dgamma = sum_rows dy * xhat,
//   dbeta = sum_rows dy.
// A row of dx needs two means of the row first (one pass, lane_sum_pair), then a second pass.
template <typename T>
struct LayerNormRowGrad {
  const T* x;
  const T* dy;
  T* dx;
  T mean, rstd, mean_g, mean_gx;
};

// Row r of x's values, x_row: where x is float32 or float64 that is x + r cols itself.
template <typename T>
LayerNormRowGrad<T> layer_norm_row_means(std::int64_t r, std::int64_t cols, const T* x_row,
                                         const T* gamma, const T* mean, const T* rstd, const T* dy,
                                         T* dx) {
  LayerNormRowGrad<T> row{x_row, dy + r * cols, dx + r * cols, mean[r], rstd[r], 0, 0};
  const auto [sum_g, sum_gx] = lane_sum_pair(cols, [&](std::int64_t j) {
    const double g = static_cast<double>(row.dy[j]) * gamma[j];
    return std::pair{g, g * ((row.x[j] - row.mean) * row.rstd)};
  });
  row.mean_g = static_cast<T>(sum_g / cols);
  row.mean_gx = static_cast<T>(sum_gx / cols);
  return row;
}

// Row `row`'s dx at column c, and its terms added to the block's dgamma/dbeta partials.
template <typename T>
inline void layer_norm_dx_at(const LayerNormRowGrad<T>& row, std::int64_t c, T gamma_c, double& pg,
                             double& pb) {
  const T g = row.dy[c], xhat = (row.x[c] - row.mean) * row.rstd;
  row.dx[c] = row.rstd * (g * gamma_c - row.mean_g - xhat * row.mean_gx);
  pg += static_cast<double>(g) * xhat;
  pb += g;
}

// One task per block of rows, two rows at a time: both rows' means, then one pass that writes
// their dx and adds both to the block's dgamma/dbeta partials in row order (the additions of one
// row at a time), so x and dy are read from memory once and the float64 partials (532 KB at
// 33,278 columns, in L2) once per two rows: with one row per pass their traffic was a third of
// the kernel's time. The blocks' partials are then summed in block order. The block size depends
// on the row count only (deterministic for any thread count).
template <typename T, typename X>
void layer_norm_backward_rows(std::int64_t rows, std::int64_t cols, const X* x, const T* gamma,
                              const T* mean, const T* rstd, const T* dy, T* dx, T* dgamma,
                              T* dbeta) {
  const std::int64_t row_block = std::clamp<std::int64_t>(rows / 16, 1, 64);
  const std::int64_t blocks = (rows + row_block - 1) / row_block;
  std::vector<double> partial_gamma(blocks * cols), partial_beta(blocks * cols);
  parallel_tasks(blocks, rows * cols, [&](std::int64_t b) {
    double* pg = partial_gamma.data() + b * cols;
    double* pb = partial_beta.data() + b * cols;
    const std::int64_t end = std::min(rows, (b + 1) * row_block);
    std::int64_t r = b * row_block;
    for (; r + 1 < end; r += 2) {
      const auto first =
          layer_norm_row_means(r, cols, row_values<T>(x, r, cols, 0), gamma, mean, rstd, dy, dx);
      const auto second = layer_norm_row_means(r + 1, cols, row_values<T>(x, r + 1, cols, 1), gamma,
                                               mean, rstd, dy, dx);
      // The next pair's rows, two of x and two of dy, come from DRAM during this pass.
      for_each_prefetching(
          cols,
          [=](std::int64_t c) {
            layer_norm_dx_at(first, c, gamma[c], pg[c], pb[c]);
            layer_norm_dx_at(second, c, gamma[c], pg[c], pb[c]);
          },
          next_row(x, r + 1, rows, cols), next_row(x, r + 2, rows, cols),
          next_row(dy, r + 1, rows, cols), next_row(dy, r + 2, rows, cols));
    }
    if (r < end) {
      const auto last =
          layer_norm_row_means(r, cols, row_values<T>(x, r, cols, 0), gamma, mean, rstd, dy, dx);
      for_each_prefetching(
          cols, [=](std::int64_t c) { layer_norm_dx_at(last, c, gamma[c], pg[c], pb[c]); },
          next_row(x, r, rows, cols), next_row(dy, r, rows, cols));
    }
  });
  parallel_chunks(cols, 4096, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t j = begin; j < end; ++j) {
      double g = 0.0, b = 0.0;
      for (std::int64_t k = 0; k < blocks; ++k) {
        g += partial_gamma[k * cols + j];
        b += partial_beta[k * cols + j];
      }
      dgamma[j] = static_cast<T>(g);
      dbeta[j] = static_cast<T>(b);
    }
  });
}

// loss = logsumexp(x) - x[target]; the row's max and log-sum saved for backward.
template <typename T>
void cross_entropy_forward_rows(std::int64_t rows, std::int64_t cols, const T* logits,
                                const std::int64_t* targets, std::int64_t ignore_index, T* loss,
                                T* saved) {
  parallel_tasks(rows, rows * cols, [&](std::int64_t r) {
    const T* xr = logits + r * cols;
    const RowStats<T> stats = row_stats(xr, cols);
    const T log_sum = static_cast<T>(std::log(stats.sum));
    saved[2 * r] = stats.max;
    saved[2 * r + 1] = log_sum;
    loss[r] = targets[r] == ignore_index ? T(0) : (stats.max - xr[targets[r]]) + log_sum;
  });
}

template <typename T>
void cross_entropy_backward_rows(std::int64_t rows, std::int64_t cols, const T* logits,
                                 const std::int64_t* targets, std::int64_t ignore_index,
                                 const T* saved, T grad_scale, T* dlogits) {
  parallel_tasks(rows, rows * cols, [&](std::int64_t r) {
    const T* xr = logits + r * cols;
    T* out = dlogits + r * cols;
    if (targets[r] == ignore_index) {
      std::fill(out, out + cols, T(0));
      return;
    }
    const T max = saved[2 * r], log_sum = saved[2 * r + 1];
    for (std::int64_t j = 0; j < cols; ++j) out[j] = vec_exp((xr[j] - max) - log_sum) * grad_scale;
    out[targets[r]] -= grad_scale;
  });
}

// Per row (rows `ld` elements apart): the max (one read from memory), then the row overwritten
// with e = exp(x - max) and summed (in L2, one exp per element); softmax = e / sum, so
// row_scale = 1 / sum.
template <typename T>
void cross_entropy_exp_rows(std::int64_t rows, std::int64_t cols, std::int64_t ld, T* logits,
                            const std::int64_t* targets, std::int64_t ignore_index, T* loss,
                            T* logsumexp, T* row_scale) {
  parallel_tasks(rows, rows * cols, [&](std::int64_t r) {
    T* xr = logits + r * ld;
    const T max = row_max(xr, cols);
    const bool ignored = targets[r] == ignore_index;
    const bool all_minus_inf = max == -std::numeric_limits<T>::infinity();  // no softmax
    const T target_logit = ignored ? T(0) : xr[targets[r]];
    const double sum =
        all_minus_inf ? 0.0 : store_exp_sum(xr, xr, cols, max, next_row(logits, r, rows, ld));
    const T log_sum = static_cast<T>(std::log(sum));
    logsumexp[r] = max + log_sum;
    loss[r] = ignored ? T(0) : (max - target_logit) + log_sum;
    row_scale[r] = ignored ? T(0) : static_cast<T>(1.0 / sum);
    if (ignored || all_minus_inf)
      std::fill(xr, xr + cols, ignored ? T(0) : std::numeric_limits<T>::quiet_NaN());
  });
}

// The softmax arguments of row r alone (the causal mask's position kept).
SoftmaxArgs row_args(const SoftmaxArgs& a, std::int64_t r) {
  SoftmaxArgs one = a;
  one.rows = 1;
  if (a.causal) one.query_len = 1, one.query_offset = r % a.query_len + a.query_offset;
  return one;
}

void softmax_forward_bf16(const SoftmaxArgs& a, const bf16* x, bf16* y) {
  parallel_tasks(a.rows, a.rows * a.cols, [&](std::int64_t r) {
    float* yr = row_buffer(1, a.cols);
    softmax_forward_rows(row_args(a, r), row_values<float>(x, r, a.cols, 0), yr);
    round_to_bf16_run(yr, y + r * a.cols, a.cols);
  });
}

void softmax_backward_bf16(const SoftmaxArgs& a, const bf16* y, const float* dy, float* dx) {
  parallel_tasks(a.rows, a.rows * a.cols, [&](std::int64_t r) {
    softmax_backward_rows(row_args(a, r), row_values<float>(y, r, a.cols, 0), dy + r * a.cols,
                          dx + r * a.cols);
  });
}

}  // namespace

void CpuBackend::cross_entropy_forward_exp(const CrossEntropyArgs& args, void* logits,
                                           const std::int64_t* targets, void* loss, void* logsumexp,
                                           void* row_scale) {
  dispatch_floating(args.dtype, [&](auto tag) {
    using T = decltype(tag);
    cross_entropy_exp_rows(args.rows, args.cols, args.row_stride > 0 ? args.row_stride : args.cols,
                           static_cast<T*>(logits), targets, args.ignore_index,
                           static_cast<T*>(loss), static_cast<T*>(logsumexp),
                           static_cast<T*>(row_scale));
  });
}

void CpuBackend::softmax_forward(const SoftmaxArgs& args, const void* x, void* y) {
  if (args.bf16_values) {
    softmax_forward_bf16(args, static_cast<const bf16*>(x), static_cast<bf16*>(y));
    return;
  }
  dispatch_floating(args.dtype, [&](auto tag) {
    using T = decltype(tag);
    softmax_forward_rows(args, static_cast<const T*>(x), static_cast<T*>(y));
  });
}

void CpuBackend::softmax_backward(const SoftmaxArgs& args, const void* y, const void* dy,
                                  void* dx) {
  if (args.bf16_values) {
    softmax_backward_bf16(args, static_cast<const bf16*>(y), static_cast<const float*>(dy),
                          static_cast<float*>(dx));
    return;
  }
  dispatch_floating(args.dtype, [&](auto tag) {
    using T = decltype(tag);
    softmax_backward_rows(args, static_cast<const T*>(y), static_cast<const T*>(dy),
                          static_cast<T*>(dx));
  });
}

void CpuBackend::layer_norm_forward(const LayerNormArgs& args, const void* x, const void* gamma,
                                    const void* beta, void* y, void* mean, void* rstd) {
  if (args.bf16_input) {
    const auto* x16 = static_cast<const bf16*>(x);
    parallel_tasks(args.rows, args.rows * args.cols, [&](std::int64_t r) {
      layer_norm_forward_rows<float>(
          1, args.cols, args.eps, row_values<float>(x16, r, args.cols, 0),
          static_cast<const float*>(gamma), static_cast<const float*>(beta),
          static_cast<float*>(y) + r * args.cols, static_cast<float*>(mean) + r,
          static_cast<float*>(rstd) + r);
    });
    return;
  }
  dispatch_floating(args.dtype, [&](auto tag) {
    using T = decltype(tag);
    layer_norm_forward_rows(args.rows, args.cols, args.eps, static_cast<const T*>(x),
                            static_cast<const T*>(gamma), static_cast<const T*>(beta),
                            static_cast<T*>(y), static_cast<T*>(mean), static_cast<T*>(rstd));
  });
}

void CpuBackend::layer_norm_backward(const LayerNormArgs& args, const void* x, const void* gamma,
                                     const void* mean, const void* rstd, const void* dy, void* dx,
                                     void* dgamma, void* dbeta) {
  if (args.bf16_input) {
    layer_norm_backward_rows(args.rows, args.cols, static_cast<const bf16*>(x),
                             static_cast<const float*>(gamma), static_cast<const float*>(mean),
                             static_cast<const float*>(rstd), static_cast<const float*>(dy),
                             static_cast<float*>(dx), static_cast<float*>(dgamma),
                             static_cast<float*>(dbeta));
    return;
  }
  dispatch_floating(args.dtype, [&](auto tag) {
    using T = decltype(tag);
    layer_norm_backward_rows(args.rows, args.cols, static_cast<const T*>(x),
                             static_cast<const T*>(gamma), static_cast<const T*>(mean),
                             static_cast<const T*>(rstd), static_cast<const T*>(dy),
                             static_cast<T*>(dx), static_cast<T*>(dgamma), static_cast<T*>(dbeta));
  });
}

void CpuBackend::cross_entropy_forward(const CrossEntropyArgs& args, const void* logits,
                                       const std::int64_t* targets, void* loss, void* row_stats) {
  if (args.bf16_logits) {
    const auto* x16 = static_cast<const bf16*>(logits);
    parallel_tasks(args.rows, args.rows * args.cols, [&](std::int64_t r) {
      cross_entropy_forward_rows<float>(
          1, args.cols, row_values<float>(x16, r, args.cols, 0), targets + r, args.ignore_index,
          static_cast<float*>(loss) + r, static_cast<float*>(row_stats) + 2 * r);
    });
    return;
  }
  dispatch_floating(args.dtype, [&](auto tag) {
    using T = decltype(tag);
    cross_entropy_forward_rows(args.rows, args.cols, static_cast<const T*>(logits), targets,
                               args.ignore_index, static_cast<T*>(loss),
                               static_cast<T*>(row_stats));
  });
}

void CpuBackend::cross_entropy_backward(const CrossEntropyArgs& args, const void* logits,
                                        const std::int64_t* targets, const void* row_stats,
                                        const void* grad_loss, void* dlogits) {
  if (args.bf16_logits) {
    const auto* x16 = static_cast<const bf16*>(logits);
    const auto grad_scale = static_cast<float>(*static_cast<const float*>(grad_loss) * args.scale);
    parallel_tasks(args.rows, args.rows * args.cols, [&](std::int64_t r) {
      cross_entropy_backward_rows<float>(1, args.cols, row_values<float>(x16, r, args.cols, 0),
                                         targets + r, args.ignore_index,
                                         static_cast<const float*>(row_stats) + 2 * r, grad_scale,
                                         static_cast<float*>(dlogits) + r * args.cols);
    });
    return;
  }
  dispatch_floating(args.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T grad_scale = static_cast<T>(*static_cast<const T*>(grad_loss) * args.scale);
    cross_entropy_backward_rows(args.rows, args.cols, static_cast<const T*>(logits), targets,
                                args.ignore_index, static_cast<const T*>(row_stats), grad_scale,
                                static_cast<T*>(dlogits));
  });
}

}  // namespace kiln
