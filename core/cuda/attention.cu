// Causal attention on CUDA for float32 and float64 (bf16 Q, K, V go to the tensor-core kernels of
// attention_mma.cu), tile by tile with an online softmax (FlashAttention-2, Dao 2023),
// with the semantics of core/cpu/attention.cpp: no (queries, keys) matrix in memory, the dropout
// mask of philox::attention_keep recomputed wherever it is needed, tiles above the diagonal
// skipped. Tiles live in static shared memory: R rows of Q, K, V (and dY) of up to D columns and
// an R x R tile of probabilities, R chosen per (dtype, D) to fit 48 KB (tile_rows). A block of
// kAttentionThreads threads gives each of the R rows of its tile `lanes` threads, one warp-aligned
// group; a row's statistics are combined by xor shuffles within the group, in a fixed order.
//
// Forward: a block per (batch, head, query tile), for each key tile the tile's queries see:
//   S = scale Q K^T,  m' = max(m, rowmax S),  P = exp(S - m'),  l = l e^(m - m') + rowsum P,
//   O = O e^(m - m') + (P * Z) V;  Y = O / l, L = m + log l.
// Backward, FlashAttention-2's split, with D = rowsum(dY * Y) from a first small kernel:
//   dQ: a block per (batch, head, query tile), over its key tiles: P = exp(S - L),
//       dS = P * (dY V^T * Z - D), dQ += scale dS K;
//   dK, dV: a block per (batch, kv head, key tile), over the group's query heads and the query
//       tiles that see it: dV += (P * Z)^T dY, dK += scale dS^T Q.
// Each output element has one owning thread that adds its terms in a fixed order: deterministic,
// no atomics.
#include <cstdint>
#include <type_traits>

#include <cuda/std/limits>

#include "core/cuda/attention_mma.h"
#include "core/cuda/block_reduce.cuh"
#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/launch.h"
#include "core/cuda/scratch.h"
#include "core/elementwise_math.h"
#include "core/philox.h"

namespace kiln {

namespace gpu {
namespace {

constexpr int kAttentionThreads = 128;
constexpr int kSharedBudget = 48000;  // bytes of static shared memory per block (limit 48 KB)

// Shared bytes of the largest kernel (dK/dV): four R x (D + 1) tiles, two R x (R + 1) tiles and
// two rows of R statistics. Rows are padded by one element so that the threads of a warp, which
// read different rows, hit different banks.
template <typename T>
constexpr int shared_bytes(int rows, int d) {
  return static_cast<int>(sizeof(T)) * (4 * rows * (d + 1) + 2 * rows * (rows + 1) + 2 * rows);
}

// The rows of a tile: the largest power of two up to 64 whose tiles fit, with at most a warp
// of threads per row.
template <typename T, int D>
constexpr int tile_rows() {
  int rows = 64;
  while (rows > 4 && (shared_bytes<T>(rows, D) > kSharedBudget || kAttentionThreads / rows > kWarp))
    rows /= 2;
  return rows;
}

// Threads and tiles of a kernel for dtype T and head size bound D.
template <typename T, int D>
struct Tiling {
  static constexpr int R = tile_rows<T, D>();              // rows (queries or keys) per tile
  static constexpr int kLanes = kAttentionThreads / R;     // threads per row
  static constexpr int kCols = (R + kLanes - 1) / kLanes;  // tile columns per thread
  static constexpr int kDims = (D + kLanes - 1) / kLanes;  // head columns per thread
  static_assert(shared_bytes<T>(R, D) <= kSharedBudget && kLanes <= kWarp && kWarp % kLanes == 0);
};

template <typename T>
__device__ T minus_infinity() {
  return -::cuda::std::numeric_limits<T>::infinity();
}

// The reduction of v over the kLanes threads of a row (consecutive lanes of one warp).
template <int kLanes, typename T, typename Op>
__device__ T row_reduce(T v, Op op) {
  for (int offset = kLanes / 2; offset > 0; offset /= 2)
    v = op(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

// sum_c a[c] b[c] over the first d columns.
template <typename T>
__device__ T dot(const T* a, const T* b, std::int64_t d) {
  T acc = T(0);
  for (std::int64_t c = 0; c < d; ++c) acc += a[c] * b[c];
  return acc;
}

// The `count` rows from `rows` (R at most) of one head into a shared tile, zeros in the rows
// beyond (so products with padding rows are finite, and masked to 0).
template <int R, int D, typename T>
__device__ void load_tile(T (*tile)[D + 1], const T* rows, std::int64_t row_stride,
                          std::int64_t count, std::int64_t d) {
  for (int e = threadIdx.x; e < R * D; e += kAttentionThreads) {
    const int r = e / D, c = e % D;
    if (c < d) tile[r][c] = r < count ? rows[r * row_stride + c] : T(0);
  }
}

// A head of a HeadsArg.
template <typename T>
__device__ T* head_of(const HeadsArg& h, std::int64_t b, std::int64_t head) {
  return static_cast<T*>(h.data) + b * h.batch_stride + head * h.head_stride;
}

// Z for query t and key j of batch-head bh: 1 / (1 - p) kept, 0 dropped, 1 without dropout.
template <typename T>
__device__ T dropout_factor(const AttentionArgs& a, std::uint32_t threshold, T keep,
                            std::int64_t bh, std::int64_t t, std::int64_t j) {
  if (a.dropout_p == 0.0) return T(1);
  const std::uint64_t index = philox::attention_dropout_index(bh, t, j, a.queries, a.keys);
  return philox::attention_keep(a.seed, a.offset, index, threshold) ? keep : T(0);
}

// Task `task` of the kernels over query tiles (forward, dQ): rows t0 .. t0 + R - 1 of query head
// `head` of batch b (flat index bh), which reads kv head g; this thread's row t (a real row when
// `valid`), and key_end, the end of the keys any row of the tile sees (causal, after the
// keys - queries cached ones).
struct QueryTile {
  std::int64_t bh, b, head, g, t0, t, key_end;
  bool valid;
};

template <int R>
__device__ QueryTile query_tile(const AttentionArgs& a, std::int64_t task, std::int64_t tiles,
                                int row) {
  const std::int64_t bh = task / tiles, head = bh % a.heads, t0 = (task % tiles) * R;
  const std::int64_t last = (t0 + R < a.queries ? t0 + R : a.queries) + a.keys - a.queries;
  return {bh,
          bh / a.heads,
          head,
          head * a.kv_heads / a.heads,
          t0,
          t0 + row,
          last < a.keys ? last : a.keys,
          t0 + row < a.queries};
}

template <typename T, int D>
__global__ void __launch_bounds__(kAttentionThreads)
    attention_forward_kernel(AttentionArgs a, std::uint32_t threshold, T keep, T* logsumexp) {
  using G = Tiling<T, D>;
  constexpr int R = G::R;
  __shared__ T qs[R][D + 1], ks[R][D + 1], vs[R][D + 1], ps[R][R + 1];
  const int row = threadIdx.x / G::kLanes, lane = threadIdx.x % G::kLanes;
  const std::int64_t past = a.keys - a.queries, tiles = (a.queries + R - 1) / R;
  const T scale = static_cast<T>(a.scale);
  for (std::int64_t task = blockIdx.x; task < a.batch * a.heads * tiles; task += gridDim.x) {
    const auto [bh, b, head, g, t0, t, key_end, valid] = query_tile<R>(a, task, tiles, row);
    const T* k = head_of<T>(a.k, b, g);
    const T* v = head_of<T>(a.v, b, g);
    __syncthreads();  // the previous task's reads of qs are done
    load_tile<R, D>(qs, head_of<T>(a.q, b, head) + t0 * a.q.row_stride, a.q.row_stride,
                    a.queries - t0, a.d);
    T m = minus_infinity<T>(), l = T(0), o[G::kDims] = {};
    for (std::int64_t j0 = 0; j0 < key_end; j0 += R) {
      __syncthreads();  // the previous tile's reads of ks, vs, ps are done
      load_tile<R, D>(ks, k + j0 * a.k.row_stride, a.k.row_stride, a.keys - j0, a.d);
      load_tile<R, D>(vs, v + j0 * a.v.row_stride, a.v.row_stride, a.keys - j0, a.d);
      __syncthreads();
      T s[G::kCols];
      T tile_max = minus_infinity<T>();
#pragma unroll
      for (int n = 0; n < G::kCols; ++n) {
        const int c = lane + n * G::kLanes;
        const std::int64_t j = j0 + c;
        const bool visible = c < R && valid && j < a.keys && j <= t + past;
        s[n] = visible ? dot(qs[row], ks[c], a.d) * scale : minus_infinity<T>();
        tile_max = MaxOp{}(tile_max, s[n]);
      }
      tile_max = row_reduce<G::kLanes>(tile_max, MaxOp{});
      const T m_new = MaxOp{}(m, tile_max);
      // A row that has seen nothing yet (a padding row) keeps shift 0: exp(-inf) = 0, no NaN.
      const T shift = m_new == minus_infinity<T>() ? T(0) : m_new;
      const T alpha = math::exp(m - shift);
      T sum = T(0);
#pragma unroll
      for (int n = 0; n < G::kCols; ++n) {
        const int c = lane + n * G::kLanes;
        const T p = math::exp(s[n] - shift);
        sum += p;
        if (c < R) ps[row][c] = p * dropout_factor(a, threshold, keep, bh, t, j0 + c);
      }
      l = l * alpha + row_reduce<G::kLanes>(sum, SumOp{});
      m = m_new;
      __syncthreads();
#pragma unroll
      for (int n = 0; n < G::kDims; ++n) {
        const int c = lane + n * G::kLanes;
        if (c >= a.d) continue;
        T acc = o[n] * alpha;
        for (int j = 0; j < R; ++j) acc += ps[row][j] * vs[j][c];
        o[n] = acc;
      }
    }
    if (valid) {
      T* y = head_of<T>(a.out, b, head) + t * a.out.row_stride;
      const T inv = T(1) / l;
#pragma unroll
      for (int n = 0; n < G::kDims; ++n) {
        const int c = lane + n * G::kLanes;
        if (c < a.d) y[c] = o[n] * inv;
      }
      if (lane == 0) logsumexp[bh * a.queries + t] = m + math::log(l);
    }
  }
}

// D (B, heads, queries) = rowsum(dY * Y), one warp per row.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    attention_delta_kernel(AttentionArgs a, HeadsArg dout, T* delta) {
  const std::int64_t rows = a.batch * a.heads * a.queries;
  const int lane = threadIdx.x % kWarp;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (kThreads / kWarp);
  for (std::int64_t r = thread_index() / kWarp; r < rows; r += warps) {
    const std::int64_t t = r % a.queries, bh = r / a.queries;
    const std::int64_t b = bh / a.heads, head = bh % a.heads;
    const T* y = head_of<T>(a.out, b, head) + t * a.out.row_stride;
    const T* dy = head_of<T>(dout, b, head) + t * dout.row_stride;
    T acc = T(0);
    for (std::int64_t c = lane; c < a.d; c += kWarp) acc += dy[c] * y[c];
    acc = warp_reduce(acc, SumOp{});
    if (lane == 0) delta[r] = acc;
  }
}

template <typename T, int D>
__global__ void __launch_bounds__(kAttentionThreads)
    attention_dq_kernel(AttentionArgs a, std::uint32_t threshold, T keep, const T* logsumexp,
                        const T* delta, HeadsArg dout, HeadsArg dq) {
  using G = Tiling<T, D>;
  constexpr int R = G::R;
  __shared__ T qs[R][D + 1], dys[R][D + 1], ks[R][D + 1], vs[R][D + 1], dss[R][R + 1];
  const int row = threadIdx.x / G::kLanes, lane = threadIdx.x % G::kLanes;
  const std::int64_t past = a.keys - a.queries, tiles = (a.queries + R - 1) / R;
  const T scale = static_cast<T>(a.scale);
  for (std::int64_t task = blockIdx.x; task < a.batch * a.heads * tiles; task += gridDim.x) {
    const auto [bh, b, head, g, t0, t, key_end, valid] = query_tile<R>(a, task, tiles, row);
    const T lse = valid ? logsumexp[bh * a.queries + t] : T(0);
    const T delta_t = valid ? delta[bh * a.queries + t] : T(0);
    const T* k = head_of<T>(a.k, b, g);
    const T* v = head_of<T>(a.v, b, g);
    __syncthreads();
    load_tile<R, D>(qs, head_of<T>(a.q, b, head) + t0 * a.q.row_stride, a.q.row_stride,
                    a.queries - t0, a.d);
    load_tile<R, D>(dys, head_of<T>(dout, b, head) + t0 * dout.row_stride, dout.row_stride,
                    a.queries - t0, a.d);
    T acc[G::kDims] = {};
    for (std::int64_t j0 = 0; j0 < key_end; j0 += R) {
      __syncthreads();
      load_tile<R, D>(ks, k + j0 * a.k.row_stride, a.k.row_stride, a.keys - j0, a.d);
      load_tile<R, D>(vs, v + j0 * a.v.row_stride, a.v.row_stride, a.keys - j0, a.d);
      __syncthreads();
#pragma unroll
      for (int n = 0; n < G::kCols; ++n) {
        const int c = lane + n * G::kLanes;
        if (c >= R) continue;
        const std::int64_t j = j0 + c;
        const bool visible = valid && j < a.keys && j <= t + past;
        T ds = T(0);
        if (visible) {
          const T p = math::exp(dot(qs[row], ks[c], a.d) * scale - lse);
          const T dp = dot(dys[row], vs[c], a.d) * dropout_factor(a, threshold, keep, bh, t, j);
          ds = p * (dp - delta_t);
        }
        dss[row][c] = ds;
      }
      __syncthreads();
#pragma unroll
      for (int n = 0; n < G::kDims; ++n) {
        const int c = lane + n * G::kLanes;
        if (c >= a.d) continue;
        T sum = acc[n];
        for (int j = 0; j < R; ++j) sum += dss[row][j] * ks[j][c];
        acc[n] = sum;
      }
    }
    if (valid) {
      T* out = head_of<T>(dq, b, head) + t * dq.row_stride;
#pragma unroll
      for (int n = 0; n < G::kDims; ++n) {
        const int c = lane + n * G::kLanes;
        if (c < a.d) out[c] = acc[n] * scale;
      }
    }
  }
}

template <typename T, int D>
__global__ void __launch_bounds__(kAttentionThreads)
    attention_dkdv_kernel(AttentionArgs a, std::uint32_t threshold, T keep, const T* logsumexp,
                          const T* delta, HeadsArg dout, HeadsArg dk, HeadsArg dv) {
  using G = Tiling<T, D>;
  constexpr int R = G::R;
  __shared__ T ks[R][D + 1], vs[R][D + 1], qs[R][D + 1], dys[R][D + 1];
  __shared__ T pts[R][R + 1], dsts[R][R + 1];  // (P * Z)^T and dS^T: [key][query]
  __shared__ T lses[R], deltas[R];
  const int key_row = threadIdx.x / G::kLanes, lane = threadIdx.x % G::kLanes;
  const std::int64_t past = a.keys - a.queries, tiles = (a.keys + R - 1) / R;
  const std::int64_t group = a.heads / a.kv_heads;
  const T scale = static_cast<T>(a.scale);
  for (std::int64_t task = blockIdx.x; task < a.batch * a.kv_heads * tiles; task += gridDim.x) {
    const std::int64_t bg = task / tiles, b = bg / a.kv_heads, g = bg % a.kv_heads;
    const std::int64_t j0 = (task % tiles) * R, j = j0 + key_row;
    const std::int64_t first_query = j0 - past > 0 ? j0 - past : 0;
    __syncthreads();
    load_tile<R, D>(ks, head_of<T>(a.k, b, g) + j0 * a.k.row_stride, a.k.row_stride, a.keys - j0,
                    a.d);
    load_tile<R, D>(vs, head_of<T>(a.v, b, g) + j0 * a.v.row_stride, a.v.row_stride, a.keys - j0,
                    a.d);
    T dk_acc[G::kDims] = {}, dv_acc[G::kDims] = {};
    for (std::int64_t head = g * group; head < (g + 1) * group; ++head) {
      const std::int64_t bh = b * a.heads + head;
      const T* q = head_of<T>(a.q, b, head);
      const T* dy = head_of<T>(dout, b, head);
      for (std::int64_t t0 = first_query; t0 < a.queries; t0 += R) {
        __syncthreads();
        load_tile<R, D>(qs, q + t0 * a.q.row_stride, a.q.row_stride, a.queries - t0, a.d);
        load_tile<R, D>(dys, dy + t0 * dout.row_stride, dout.row_stride, a.queries - t0, a.d);
        for (int r = threadIdx.x; r < R; r += kAttentionThreads) {
          const bool valid = t0 + r < a.queries;
          lses[r] = valid ? logsumexp[bh * a.queries + t0 + r] : T(0);
          deltas[r] = valid ? delta[bh * a.queries + t0 + r] : T(0);
        }
        __syncthreads();
#pragma unroll
        for (int n = 0; n < G::kCols; ++n) {
          const int r = lane + n * G::kLanes;  // the query row of this entry
          if (r >= R) continue;
          const std::int64_t t = t0 + r;
          const bool visible = t < a.queries && j < a.keys && j <= t + past;
          T pz = T(0), ds = T(0);
          if (visible) {
            const T p = math::exp(dot(qs[r], ks[key_row], a.d) * scale - lses[r]);
            const T z = dropout_factor(a, threshold, keep, bh, t, j);
            pz = p * z;
            ds = p * (dot(dys[r], vs[key_row], a.d) * z - deltas[r]);
          }
          pts[key_row][r] = pz;
          dsts[key_row][r] = ds;
        }
        __syncthreads();
#pragma unroll
        for (int n = 0; n < G::kDims; ++n) {
          const int c = lane + n * G::kLanes;
          if (c >= a.d) continue;
          T sum_v = dv_acc[n], sum_k = dk_acc[n];
          for (int r = 0; r < R; ++r) {
            sum_v += pts[key_row][r] * dys[r][c];
            sum_k += dsts[key_row][r] * qs[r][c];
          }
          dv_acc[n] = sum_v;
          dk_acc[n] = sum_k;
        }
      }
    }
    if (j < a.keys) {
      T* dk_row = head_of<T>(dk, b, g) + j * dk.row_stride;
      T* dv_row = head_of<T>(dv, b, g) + j * dv.row_stride;
#pragma unroll
      for (int n = 0; n < G::kDims; ++n) {
        const int c = lane + n * G::kLanes;
        if (c >= a.d) continue;
        dk_row[c] = dk_acc[n] * scale;
        dv_row[c] = dv_acc[n];
      }
    }
  }
}

// Calls launch(std::integral_constant<int, D>) for the smallest head size bound D >= d.
template <typename Launch>
void with_head_bound(std::int64_t d, Launch&& launch) {
  if (d <= 32) {
    launch(std::integral_constant<int, 32>{});
  } else if (d <= 64) {
    launch(std::integral_constant<int, 64>{});
  } else if (d <= 128) {
    launch(std::integral_constant<int, 128>{});
  } else {
    launch(std::integral_constant<int, kMaxAttentionHeadDim>{});
  }
}

}  // namespace
}  // namespace gpu

void CudaBackend::attention_forward(const AttentionArgs& args) {
  check_attention(args);
  if (args.batch * args.heads * args.queries == 0) return;
  activate();
  if (args.dtype == DType::bf16) return gpu::attention_forward_mma(args, stream_);
  const std::uint32_t threshold = philox::dropout_threshold(args.dropout_p);
  dispatch_floating(args.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T keep = static_cast<T>(1.0 / (1.0 - args.dropout_p));
    gpu::with_head_bound(args.d, [&](auto bound) {
      constexpr int D = decltype(bound)::value;
      const std::int64_t tiles = (args.queries + gpu::Tiling<T, D>::R - 1) / gpu::Tiling<T, D>::R;
      KILN_LAUNCH(gpu::blocks_for(args.batch * args.heads * tiles, 1), gpu::kAttentionThreads,
                  stream_, gpu::attention_forward_kernel<T, D>)
      (args, threshold, keep, static_cast<T*>(args.logsumexp));
      KILN_CUDA_CHECK_LAUNCH();
    });
  });
}

void CudaBackend::attention_backward(const AttentionArgs& args, const AttentionGradArgs& grads) {
  check_attention(args, &grads);
  const HeadsArg &dout = grads.dout, &dq = grads.dq, &dk = grads.dk, &dv = grads.dv;
  if (args.batch * args.heads * args.queries == 0) return;
  activate();
  if (args.dtype == DType::bf16)
    return gpu::attention_backward_mma(args, grads, stream_, *allocator_);
  const std::uint32_t threshold = philox::dropout_threshold(args.dropout_p);
  dispatch_floating(args.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T keep = static_cast<T>(1.0 / (1.0 - args.dropout_p));
    const T* lse = static_cast<const T*>(args.logsumexp);
    const std::int64_t rows = args.batch * args.heads * args.queries;
    Scratch<T> delta(*allocator_, rows);
    KILN_LAUNCH(gpu::blocks_for(rows, gpu::kThreads / gpu::kWarp), gpu::kThreads, stream_,
                gpu::attention_delta_kernel<T>)
    (args, dout, delta.get());
    KILN_CUDA_CHECK_LAUNCH();
    gpu::with_head_bound(args.d, [&](auto bound) {
      constexpr int D = decltype(bound)::value;
      constexpr int R = gpu::Tiling<T, D>::R;
      const std::int64_t query_tiles = (args.queries + R - 1) / R;
      const std::int64_t key_tiles = (args.keys + R - 1) / R;
      KILN_LAUNCH(gpu::blocks_for(args.batch * args.heads * query_tiles, 1), gpu::kAttentionThreads,
                  stream_, gpu::attention_dq_kernel<T, D>)
      (args, threshold, keep, lse, delta.get(), dout, dq);
      KILN_CUDA_CHECK_LAUNCH();
      KILN_LAUNCH(gpu::blocks_for(args.batch * args.kv_heads * key_tiles, 1),
                  gpu::kAttentionThreads, stream_, gpu::attention_dkdv_kernel<T, D>)
      (args, threshold, keep, lse, delta.get(), dout, dk, dv);
      KILN_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace kiln
