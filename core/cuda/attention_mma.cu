// Causal attention on tensor cores for bf16 Q, K and V: FlashAttention-2 (Dao 2023) with
// mma.sync.m16n8k16 (bf16 operands, float32 accumulators) fed by ldmatrix from dynamic shared
// memory (core/cuda/warp_matrix.cuh). The semantics are core/cpu/attention.cpp's: the queries are
// the last `queries` of the `keys` positions, query head i reads kv head i kv_heads / heads (no
// repeated K or V), the dropout mask is philox::attention_keep's, and the softmax statistics
// (running max m, running sum l, L = m + log l) are float32.
//
// A block has 4 warps; each warp owns 16 rows of the block's 64 and streams tiles of 64 rows of
// the other operand through shared memory. Rows of a shared tile are d_head rounded up to 16
// columns (zeros past d_head, so any d_head up to the bound D takes the same path) plus 8 bf16
// of padding, which keeps them 16-byte aligned and puts the 8 rows of an ldmatrix in different
// banks. Rows past the end of Q, K, V or dY are zeros (finite: they are masked, and 0 * 0 adds
// nothing). Every output element has one owning thread that adds its terms in a fixed order: no
// atomics, the same bits every run.
//
// Forward (a block per (batch, head, 64 queries), over the key tiles its queries see; tiles
// wholly above the causal diagonal are skipped):
//   S = Q K^T (mma: A = Q by ldmatrix.x4, B = K by ldmatrix.x4),  in the log2 domain
//   S' = S scale log2(e);  m' = max(m, rowmax S');  P = 2^(S' - m');  l = l 2^(m - m') + rowsum P
//   O = O 2^(m - m') + bf16(P * Z) V  (the accumulators of S are the A fragments of P V, P
//       rounded to bf16 as FlashAttention-2 does; B = V by ldmatrix.x4.trans)
//   Y = O / l,  L = m ln 2 + ln l.
// Backward, with D = rowsum(dY * Y) from a small kernel first, and dY rounded to bf16 in shared
// memory (autocast's rule for a product's backward):
//   dQ: a block per (batch, head, 64 queries), over its key tiles: S = Q K^T, dP = dY V^T,
//       P = 2^(S' - L log2 e), dS = P * (dP * Z - D), dQ += scale bf16(dS) K.
//   dK, dV: a block per (batch, kv head, 64 keys), over the group's query heads and the query
//       tiles that see its keys: S^T = K Q^T, dP^T = V dY^T, dV += bf16(P * Z)^T dY,
//       dK += scale bf16(dS)^T Q.
// dQ in a kernel of its own recomputes S and dP (2 of the backward's 7 tile products) instead
// of adding into dQ from every key tile with float atomics, whose order varies from run to run
// (docs/attention.md has the cost).
#include <cmath>
#include <cstdint>
#include <string>

#include <cuda/std/limits>

#include "core/cuda/attention_mma.h"
#include "core/cuda/block_reduce.cuh"
#include "core/cuda/cuda_check.h"
#include "core/cuda/launch.h"
#include "core/cuda/scratch.h"
#include "core/cuda/warp_matrix.cuh"
#include "core/philox.h"

namespace kiln {

namespace gpu {
namespace {

constexpr int kMmaWarps = 4;
constexpr int kMmaThreads = kMmaWarps * kWarp;
constexpr int kWarpRows = 16;                      // rows of an mma's A and of each warp
constexpr int kBlockRows = kMmaWarps * kWarpRows;  // rows a block owns: 64
constexpr int kTileRows = 64;                      // rows of a streamed tile
constexpr int kPad = 8;                            // bf16 of padding per shared row
constexpr float kLog2e = 1.4426950408889634f;      // log2(e)
constexpr float kLn2 = 0.6931471805599453f;        // ln(2)

// What the kernels take beyond AttentionArgs.
struct MmaParams {
  float scale = 0;       // 1 / sqrt(d_head)
  float scale_log2 = 0;  // scale log2(e): S' = S scale_log2
  float keep = 1;        // 1 / (1 - p), a kept element's dropout factor
  std::uint32_t threshold = 0;
  bool vector_q = false, vector_k = false, vector_v = false;  // rows load 16 bytes at a time
};

// Shared memory of a kernel with `tiles` tiles of 64 rows of D + kPad bf16, plus `floats`.
constexpr std::size_t shared_bytes(int d_bound, int tiles, int floats) {
  return static_cast<std::size_t>(tiles) * kTileRows * (d_bound + kPad) * 2 +
         static_cast<std::size_t>(floats) * 4;
}

template <int D>
constexpr std::size_t forward_shared() {
  return shared_bytes(D, 3, 0);  // Q, K, V
}
template <int D>
constexpr std::size_t dq_shared() {
  return shared_bytes(D, 4, 0);  // Q, dY, K, V
}
template <int D>
constexpr std::size_t dkdv_shared() {
  return shared_bytes(D, 4, 2 * kTileRows);  // K, V, Q, dY and the tile's L and D
}

template <typename T>
__device__ T* head_of(const HeadsArg& h, std::int64_t b, std::int64_t head) {
  return static_cast<T*>(h.data) + b * h.batch_stride + head * h.head_stride;
}

__device__ inline float minus_infinity() { return -::cuda::std::numeric_limits<float>::infinity(); }

__device__ inline std::uint16_t bf16_bits(float x) { return to_bf16(x).bits; }
__device__ inline std::uint16_t bf16_bits(std::uint16_t x) { return x; }

// Rows [0, count) of a head's rows (row_stride elements apart) into a shared tile of 64 rows of
// stride S, columns [0, dk) with dk = d rounded up to 16: zeros past d and past count. float
// sources (dY) are rounded to bf16. With `vector`, bf16 rows move 8 elements (16 bytes) at a time.
template <int S, typename Src>
__device__ void load_tile(std::uint16_t* tile, const Src* rows, std::int64_t row_stride,
                          std::int64_t count, int d, int dk, bool vector) {
  if constexpr (sizeof(Src) == 2) {
    if (vector) {
      const int chunks = dk / 8;
      for (int e = threadIdx.x; e < kTileRows * chunks; e += kMmaThreads) {
        const int r = e / chunks, c = (e % chunks) * 8;
        uint4 v{0, 0, 0, 0};
        if (r < count && c < d) v = *reinterpret_cast<const uint4*>(rows + r * row_stride + c);
        *reinterpret_cast<uint4*>(tile + r * S + c) = v;
      }
      return;
    }
  }
  for (int e = threadIdx.x; e < kTileRows * dk; e += kMmaThreads) {
    const int r = e / dk, c = e % dk;
    tile[r * S + c] = r < count && c < d ? bf16_bits(rows[r * row_stride + c]) : std::uint16_t{0};
  }
}

// Z for query t and key j of batch-head bh: 1 / (1 - p) kept, 0 dropped, 1 without dropout.
__device__ inline float dropout_factor(const AttentionArgs& a, const MmaParams& p, std::int64_t bh,
                                       std::int64_t t, std::int64_t j) {
  if (a.dropout_p == 0.0) return 1.0f;
  const std::uint64_t index = philox::attention_dropout_index(bh, t, j, a.queries, a.keys);
  return philox::attention_keep(a.seed, a.offset, index, p.threshold) ? p.keep : 0.0f;
}

// acc[n] (n < 8: 8 columns each) += A B^T for this warp's 16 rows of `a_tile` (A) against the
// 64 rows of `b_tile` (B^T, row-major: B's columns are its rows), over the first dk columns of
// both: the product of a tile of S = Q K^T (or of its transpose, dP, dP^T).
template <int S>
__device__ void rows_times_tile(float (&acc)[kTileRows / 8][4], const std::uint16_t* a_tile,
                                const std::uint16_t* b_tile, int dk) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  for (int kk = 0; kk < dk; kk += 16) {
    // A's 16 x 16 block as 4 matrices (rows 0-7 | 8-15) x (columns 0-7 | 8-15): a0..a7.
    std::uint32_t a[4];
    ldmatrix_x4(a, a_tile + (warp * kWarpRows + lane % 16) * S + kk + (lane / 16) * 8);
#pragma unroll
    for (int n = 0; n < kTileRows / 16; ++n) {
      // B's 16 x 16 block (k = columns kk.., n = rows 16 n..): per 8 rows, columns 0-7 then 8-15.
      std::uint32_t b[4];
      ldmatrix_x4(b,
                  b_tile + (n * 16 + (lane / 16) * 8 + lane % 8) * S + kk + ((lane / 8) % 2) * 8);
      mma_bf16_16816(acc[2 * n], a, {b[0], b[1]});
      mma_bf16_16816(acc[2 * n + 1], a, {b[2], b[3]});
    }
  }
}

// out[n] (n < D / 8) += P B for P, this warp's 16 x 64 accumulators rounded to bf16 (the C
// fragments of one mma are half of the A fragments of the next: PTX ISA 9.7.14.5.8), and B the
// 64 rows of `b_tile` (row-major, k = its rows), over the first dk columns of B.
template <int D, int S>
__device__ void tile_times_rows(float (&out)[D / 8][4], const float (&p)[kTileRows / 8][4],
                                const std::uint16_t* b_tile, int dk) {
  const int lane = threadIdx.x % kWarp;
#pragma unroll
  for (int k = 0; k < kTileRows / 16; ++k) {
    const std::uint32_t a[4] = {pack_bf16x2(p[2 * k][0], p[2 * k][1]),
                                pack_bf16x2(p[2 * k][2], p[2 * k][3]),
                                pack_bf16x2(p[2 * k + 1][0], p[2 * k + 1][1]),
                                pack_bf16x2(p[2 * k + 1][2], p[2 * k + 1][3])};
#pragma unroll
    for (int n = 0; n < D / 16; ++n) {
      if (n * 16 >= dk) break;
      // B's 16 x 16 block (k = rows 16 k.., n = columns 16 n..), transposed on the way: rows
      // 0-7 | 8-15 of columns 0-7, then of columns 8-15.
      std::uint32_t b[4];
      ldmatrix_x4_trans(b, b_tile + (k * 16 + lane % 16) * S + n * 16 + (lane / 16) * 8);
      mma_bf16_16816(out[2 * n], a, {b[0], b[1]});
      mma_bf16_16816(out[2 * n + 1], a, {b[2], b[3]});
    }
  }
}

// The row and column of element i of this lane's accumulator fragment n (PTX ISA 9.7.14.5.8:
// row groupID (+ 8 for i >= 2), column 8 n + 2 threadID_in_group + (i & 1)).
__device__ inline int fragment_row(int i) {
  const int lane = static_cast<int>(threadIdx.x % kWarp),
            warp = static_cast<int>(threadIdx.x / kWarp);
  return warp * kWarpRows + lane / 4 + (i / 2) * 8;
}
__device__ inline int fragment_col(int n, int i) {
  return n * 8 + 2 * static_cast<int>(threadIdx.x % 4) + (i & 1);
}

// a + the value of lanes 1 and 2 apart: the sum or max over the 4 lanes of a fragment row.
template <typename Op>
__device__ float quad_reduce(float v, Op op) {
  v = op(v, __shfl_xor_sync(kFullMask, v, 1));
  return op(v, __shfl_xor_sync(kFullMask, v, 2));
}

template <int D, typename Out>
__global__ void __launch_bounds__(kMmaThreads)
    attention_forward_mma(AttentionArgs a, MmaParams p, float* logsumexp) {
  constexpr int S = D + kPad;
  std::uint16_t* qs = dynamic_shared<std::uint16_t>();
  std::uint16_t* ks = qs + kBlockRows * S;
  std::uint16_t* vs = ks + kTileRows * S;
  const int d = static_cast<int>(a.d), dk = (d + 15) / 16 * 16;
  const std::int64_t past = a.keys - a.queries;
  const std::int64_t tiles = (a.queries + kBlockRows - 1) / kBlockRows;
  for (std::int64_t task = blockIdx.x; task < a.batch * a.heads * tiles; task += gridDim.x) {
    const std::int64_t bh = task / tiles, b = bh / a.heads, head = bh % a.heads;
    const std::int64_t g = head * a.kv_heads / a.heads, t0 = (task % tiles) * kBlockRows;
    const std::int64_t last = (t0 + kBlockRows < a.queries ? t0 + kBlockRows : a.queries) + past;
    const std::int64_t key_end = last < a.keys ? last : a.keys;  // keys any query here sees
    const std::uint16_t* k = head_of<const std::uint16_t>(a.k, b, g);
    const std::uint16_t* v = head_of<const std::uint16_t>(a.v, b, g);
    __syncthreads();  // the previous task's reads of qs are done
    load_tile<S>(qs, head_of<const std::uint16_t>(a.q, b, head) + t0 * a.q.row_stride,
                 a.q.row_stride, a.queries - t0, d, dk, p.vector_q);
    float o[D / 8][4] = {}, m[2], l[2] = {0, 0};
    m[0] = m[1] = minus_infinity();
    for (std::int64_t j0 = 0; j0 < key_end; j0 += kTileRows) {
      __syncthreads();  // the previous tile's reads of ks and vs are done
      load_tile<S>(ks, k + j0 * a.k.row_stride, a.k.row_stride, a.keys - j0, d, dk, p.vector_k);
      load_tile<S>(vs, v + j0 * a.v.row_stride, a.v.row_stride, a.keys - j0, d, dk, p.vector_v);
      __syncthreads();
      float s[kTileRows / 8][4] = {};
      rows_times_tile<S>(s, qs, ks, dk);
#pragma unroll
      for (int half = 0; half < 2; ++half) {  // this lane's rows groupID and groupID + 8
        const std::int64_t t = t0 + fragment_row(2 * half);
        float tile_max = minus_infinity();
#pragma unroll
        for (int n = 0; n < kTileRows / 8; ++n)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const std::int64_t j = j0 + fragment_col(n, e);
            float& x = s[n][2 * half + e];
            x = j < a.keys && j <= t + past ? x * p.scale_log2 : minus_infinity();
            tile_max = MaxOp{}(tile_max, x);
          }
        const float m_new = MaxOp{}(m[half], quad_reduce(tile_max, MaxOp{}));
        // A row that has seen nothing yet keeps shift 0: 2^-inf = 0, no NaN.
        const float shift = m_new == minus_infinity() ? 0.0f : m_new;
        const float alpha = exp2f(m[half] - shift);
        float sum = 0;
#pragma unroll
        for (int n = 0; n < kTileRows / 8; ++n)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& x = s[n][2 * half + e];
            x = exp2f(x - shift);
            sum += x;
            if (a.dropout_p > 0.0 && t < a.queries)
              x *= dropout_factor(a, p, bh, t, j0 + fragment_col(n, e));
          }
        l[half] = l[half] * alpha + sum;  // this lane's part; alpha is the same in its quad
        m[half] = m_new;
#pragma unroll
        for (int n = 0; n < D / 8; ++n) {
          o[n][2 * half] *= alpha;
          o[n][2 * half + 1] *= alpha;
        }
      }
      tile_times_rows<D, S>(o, s, vs, dk);
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float row_sum = quad_reduce(l[half], SumOp{});
      const std::int64_t t = t0 + fragment_row(2 * half);
      if (t >= a.queries) continue;
      Out* y = head_of<Out>(a.out, b, head) + t * a.out.row_stride;
      const float inv = 1.0f / row_sum;
#pragma unroll
      for (int n = 0; n < D / 8; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int c = fragment_col(n, e);
          if (c >= d) continue;
          const float value = o[n][2 * half + e] * inv;
          if constexpr (sizeof(Out) == 2) {
            y[c] = to_bf16(value);
          } else {
            y[c] = value;
          }
        }
      if (threadIdx.x % 4 == 0) logsumexp[bh * a.queries + t] = m[half] * kLn2 + logf(row_sum);
    }
  }
}

// D (B, heads, queries) = rowsum(dY * Y) in float32, one warp per row.
template <typename Out>
__global__ void __launch_bounds__(kThreads)
    attention_delta_mma(AttentionArgs a, HeadsArg dout, float* delta) {
  const std::int64_t rows = a.batch * a.heads * a.queries;
  const int lane = threadIdx.x % kWarp;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (kThreads / kWarp);
  for (std::int64_t r = thread_index() / kWarp; r < rows; r += warps) {
    const std::int64_t t = r % a.queries, bh = r / a.queries;
    const std::int64_t b = bh / a.heads, head = bh % a.heads;
    const Out* y = head_of<const Out>(a.out, b, head) + t * a.out.row_stride;
    const float* dy = head_of<const float>(dout, b, head) + t * dout.row_stride;
    float acc = 0;
    for (std::int64_t c = lane; c < a.d; c += kWarp) {
      if constexpr (sizeof(Out) == 2) {
        acc += dy[c] * to_float(y[c]);
      } else {
        acc += dy[c] * y[c];
      }
    }
    acc = warp_reduce(acc, SumOp{});
    if (lane == 0) delta[r] = acc;
  }
}

template <int D>
__global__ void __launch_bounds__(kMmaThreads)
    attention_dq_mma(AttentionArgs a, MmaParams p, const float* logsumexp, const float* delta,
                     HeadsArg dout, HeadsArg dq) {
  constexpr int S = D + kPad;
  std::uint16_t* qs = dynamic_shared<std::uint16_t>();
  std::uint16_t* dys = qs + kBlockRows * S;
  std::uint16_t* ks = dys + kBlockRows * S;
  std::uint16_t* vs = ks + kTileRows * S;
  const int d = static_cast<int>(a.d), dk = (d + 15) / 16 * 16;
  const std::int64_t past = a.keys - a.queries;
  const std::int64_t tiles = (a.queries + kBlockRows - 1) / kBlockRows;
  for (std::int64_t task = blockIdx.x; task < a.batch * a.heads * tiles; task += gridDim.x) {
    const std::int64_t bh = task / tiles, b = bh / a.heads, head = bh % a.heads;
    const std::int64_t g = head * a.kv_heads / a.heads, t0 = (task % tiles) * kBlockRows;
    const std::int64_t last = (t0 + kBlockRows < a.queries ? t0 + kBlockRows : a.queries) + past;
    const std::int64_t key_end = last < a.keys ? last : a.keys;
    const std::uint16_t* k = head_of<const std::uint16_t>(a.k, b, g);
    const std::uint16_t* v = head_of<const std::uint16_t>(a.v, b, g);
    float lse[2], delta_t[2];  // L log2(e) and D of this lane's two rows
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const std::int64_t t = t0 + fragment_row(2 * half);
      lse[half] = t < a.queries ? logsumexp[bh * a.queries + t] * kLog2e : 0.0f;
      delta_t[half] = t < a.queries ? delta[bh * a.queries + t] : 0.0f;
    }
    __syncthreads();
    load_tile<S>(qs, head_of<const std::uint16_t>(a.q, b, head) + t0 * a.q.row_stride,
                 a.q.row_stride, a.queries - t0, d, dk, p.vector_q);
    load_tile<S>(dys, head_of<const float>(dout, b, head) + t0 * dout.row_stride, dout.row_stride,
                 a.queries - t0, d, dk, false);
    float acc[D / 8][4] = {};
    for (std::int64_t j0 = 0; j0 < key_end; j0 += kTileRows) {
      __syncthreads();
      load_tile<S>(ks, k + j0 * a.k.row_stride, a.k.row_stride, a.keys - j0, d, dk, p.vector_k);
      load_tile<S>(vs, v + j0 * a.v.row_stride, a.v.row_stride, a.keys - j0, d, dk, p.vector_v);
      __syncthreads();
      float s[kTileRows / 8][4] = {}, dp[kTileRows / 8][4] = {};
      rows_times_tile<S>(s, qs, ks, dk);
      rows_times_tile<S>(dp, dys, vs, dk);
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const std::int64_t t = t0 + fragment_row(2 * half);
#pragma unroll
        for (int n = 0; n < kTileRows / 8; ++n)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const std::int64_t j = j0 + fragment_col(n, e);
            float& x = s[n][2 * half + e];
            if (t < a.queries && j < a.keys && j <= t + past) {
              const float prob = exp2f(x * p.scale_log2 - lse[half]);
              x = prob * (dp[n][2 * half + e] * dropout_factor(a, p, bh, t, j) - delta_t[half]);
            } else {
              x = 0.0f;
            }
          }
      }
      tile_times_rows<D, S>(acc, s, ks, dk);  // dQ += dS K
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const std::int64_t t = t0 + fragment_row(2 * half);
      if (t >= a.queries) continue;
      float* out = head_of<float>(dq, b, head) + t * dq.row_stride;
#pragma unroll
      for (int n = 0; n < D / 8; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int c = fragment_col(n, e);
          if (c < d) out[c] = acc[n][2 * half + e] * p.scale;
        }
    }
  }
}

template <int D>
__global__ void __launch_bounds__(kMmaThreads)
    attention_dkdv_mma(AttentionArgs a, MmaParams p, const float* logsumexp, const float* delta,
                       HeadsArg dout, HeadsArg dk_out, HeadsArg dv_out) {
  constexpr int S = D + kPad;
  std::uint16_t* ks = dynamic_shared<std::uint16_t>();
  std::uint16_t* vs = ks + kBlockRows * S;
  std::uint16_t* qs = vs + kBlockRows * S;
  std::uint16_t* dys = qs + kTileRows * S;
  float* lses = reinterpret_cast<float*>(dys + kTileRows * S);  // L log2(e) of the tile's queries
  float* deltas = lses + kTileRows;
  const int d = static_cast<int>(a.d), dk = (d + 15) / 16 * 16;
  const std::int64_t past = a.keys - a.queries;
  const std::int64_t tiles = (a.keys + kBlockRows - 1) / kBlockRows;
  const std::int64_t group = a.heads / a.kv_heads;
  for (std::int64_t task = blockIdx.x; task < a.batch * a.kv_heads * tiles; task += gridDim.x) {
    const std::int64_t bg = task / tiles, b = bg / a.kv_heads, g = bg % a.kv_heads;
    const std::int64_t j0 = (task % tiles) * kBlockRows;
    const std::int64_t first_query = j0 - past > 0 ? j0 - past : 0;  // the first that sees j0
    __syncthreads();
    load_tile<S>(ks, head_of<const std::uint16_t>(a.k, b, g) + j0 * a.k.row_stride, a.k.row_stride,
                 a.keys - j0, d, dk, p.vector_k);
    load_tile<S>(vs, head_of<const std::uint16_t>(a.v, b, g) + j0 * a.v.row_stride, a.v.row_stride,
                 a.keys - j0, d, dk, p.vector_v);
    float dk_acc[D / 8][4] = {}, dv_acc[D / 8][4] = {};
    for (std::int64_t head = g * group; head < (g + 1) * group; ++head) {
      const std::int64_t bh = b * a.heads + head;
      const std::uint16_t* q = head_of<const std::uint16_t>(a.q, b, head);
      const float* dy = head_of<const float>(dout, b, head);
      for (std::int64_t t0 = first_query; t0 < a.queries; t0 += kTileRows) {
        __syncthreads();
        load_tile<S>(qs, q + t0 * a.q.row_stride, a.q.row_stride, a.queries - t0, d, dk,
                     p.vector_q);
        load_tile<S>(dys, dy + t0 * dout.row_stride, dout.row_stride, a.queries - t0, d, dk, false);
        for (int r = threadIdx.x; r < kTileRows; r += kMmaThreads) {
          const bool valid = t0 + r < a.queries;
          lses[r] = valid ? logsumexp[bh * a.queries + t0 + r] * kLog2e : 0.0f;
          deltas[r] = valid ? delta[bh * a.queries + t0 + r] : 0.0f;
        }
        __syncthreads();
        float st[kTileRows / 8][4] = {}, dpt[kTileRows / 8][4] = {};  // S^T, dP^T: [key][query]
        rows_times_tile<S>(st, ks, qs, dk);
        rows_times_tile<S>(dpt, vs, dys, dk);
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const std::int64_t j = j0 + fragment_row(2 * half);
#pragma unroll
          for (int n = 0; n < kTileRows / 8; ++n)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int c = fragment_col(n, e);
              const std::int64_t t = t0 + c;
              float& pz = st[n][2 * half + e];
              float& ds = dpt[n][2 * half + e];
              if (t < a.queries && j < a.keys && j <= t + past) {
                const float prob = exp2f(pz * p.scale_log2 - lses[c]);
                const float z = dropout_factor(a, p, bh, t, j);
                ds = prob * (ds * z - deltas[c]);
                pz = prob * z;
              } else {
                pz = ds = 0.0f;
              }
            }
        }
        tile_times_rows<D, S>(dv_acc, st, dys, dk);  // dV += (P * Z)^T dY
        tile_times_rows<D, S>(dk_acc, dpt, qs, dk);  // dK += dS^T Q
      }
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const std::int64_t j = j0 + fragment_row(2 * half);
      if (j >= a.keys) continue;
      float* dk_row = head_of<float>(dk_out, b, g) + j * dk_out.row_stride;
      float* dv_row = head_of<float>(dv_out, b, g) + j * dv_out.row_stride;
#pragma unroll
      for (int n = 0; n < D / 8; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int c = fragment_col(n, e);
          if (c >= d) continue;
          dk_row[c] = dk_acc[n][2 * half + e] * p.scale;
          dv_row[c] = dv_acc[n][2 * half + e];
        }
    }
  }
}

// True when every row of h starts on a 16-byte boundary and holds whole 16-byte chunks of d bf16.
bool rows_vectorizable(const HeadsArg& h, std::int64_t d) {
  return reinterpret_cast<std::uintptr_t>(h.data) % 16 == 0 && h.batch_stride % 8 == 0 &&
         h.head_stride % 8 == 0 && h.row_stride % 8 == 0 && d % 8 == 0;
}

MmaParams params_of(const AttentionArgs& args) {
  MmaParams p;
  p.scale = static_cast<float>(args.scale);
  p.scale_log2 = static_cast<float>(args.scale) * kLog2e;
  p.keep = static_cast<float>(1.0 / (1.0 - args.dropout_p));
  p.threshold = philox::dropout_threshold(args.dropout_p);
  p.vector_q = rows_vectorizable(args.q, args.d);
  p.vector_k = rows_vectorizable(args.k, args.d);
  p.vector_v = rows_vectorizable(args.v, args.d);
  return p;
}

// Lets `kernel` launch with `bytes` of dynamic shared memory, and checks that the code the device
// runs was compiled with the bf16 tensor-core instructions (PTX for sm_80 or later).
template <typename Kernel>
void prepare(Kernel* kernel, std::size_t bytes) {
  cudaFuncAttributes attributes{};
  KILN_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
  if (attributes.ptxVersion < 80)
    throw_error(
        "attention: the bf16 tensor-core kernels need code for compute capability 8.0 or "
        "later, and this device runs code compiled for " +
        std::to_string(attributes.ptxVersion / 10) + "." +
        std::to_string(attributes.ptxVersion % 10) +
        " (add its architecture to CMAKE_CUDA_ARCHITECTURES)");
  if (bytes > 48 * 1024)
    KILN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(bytes)));
}

// Calls launch(std::integral_constant<int, D>) for the smallest head size bound D >= d.
template <typename Launch>
void with_mma_head_bound(std::int64_t d, Launch&& launch) {
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

void attention_forward_mma(const AttentionArgs& args, cudaStream_t stream) {
  const MmaParams p = params_of(args);
  const std::int64_t tiles = (args.queries + kBlockRows - 1) / kBlockRows;
  with_mma_head_bound(args.d, [&](auto bound) {
    constexpr int D = decltype(bound)::value;
    constexpr std::size_t bytes = forward_shared<D>();
    const unsigned grid = blocks_for(args.batch * args.heads * tiles, 1);
    float* lse = static_cast<float*>(args.logsumexp);
    if (args.out_dtype == DType::bf16) {
      prepare(&attention_forward_mma<D, bf16>, bytes);
      KILN_LAUNCH_SHARED(grid, kMmaThreads, bytes, stream, attention_forward_mma<D, bf16>)
      (args, p, lse);
    } else {
      prepare(&attention_forward_mma<D, float>, bytes);
      KILN_LAUNCH_SHARED(grid, kMmaThreads, bytes, stream, attention_forward_mma<D, float>)
      (args, p, lse);
    }
    KILN_CUDA_CHECK_LAUNCH();
  });
}

void attention_backward_mma(const AttentionArgs& args, const AttentionGradArgs& grads,
                            cudaStream_t stream, CachingAllocator& allocator) {
  const MmaParams p = params_of(args);
  const float* lse = static_cast<const float*>(args.logsumexp);
  const std::int64_t rows = args.batch * args.heads * args.queries;
  Scratch<float> delta(allocator, rows);
  if (args.out_dtype == DType::bf16) {
    KILN_LAUNCH(blocks_for(rows, kThreads / kWarp), kThreads, stream, attention_delta_mma<bf16>)
    (args, grads.dout, delta.get());
  } else {
    KILN_LAUNCH(blocks_for(rows, kThreads / kWarp), kThreads, stream, attention_delta_mma<float>)
    (args, grads.dout, delta.get());
  }
  KILN_CUDA_CHECK_LAUNCH();
  with_mma_head_bound(args.d, [&](auto bound) {
    constexpr int D = decltype(bound)::value;
    const std::int64_t query_tiles = (args.queries + kBlockRows - 1) / kBlockRows;
    const std::int64_t key_tiles = (args.keys + kBlockRows - 1) / kBlockRows;
    prepare(&attention_dq_mma<D>, dq_shared<D>());
    KILN_LAUNCH_SHARED(blocks_for(args.batch * args.heads * query_tiles, 1), kMmaThreads,
                       dq_shared<D>(), stream, attention_dq_mma<D>)
    (args, p, lse, delta.get(), grads.dout, grads.dq);
    KILN_CUDA_CHECK_LAUNCH();
    prepare(&attention_dkdv_mma<D>, dkdv_shared<D>());
    KILN_LAUNCH_SHARED(blocks_for(args.batch * args.kv_heads * key_tiles, 1), kMmaThreads,
                       dkdv_shared<D>(), stream, attention_dkdv_mma<D>)
    (args, p, lse, delta.get(), grads.dout, grads.dk, grads.dv);
    KILN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace gpu

}  // namespace kiln
