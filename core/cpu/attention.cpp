// Causal attention on the CPU, tile by tile with an online softmax (FlashAttention-2, Dao 2023):
// no (queries, keys) matrix is ever stored, only tiles of kQueryTile x kKeyTile scores, so
// memory grows linearly with the context. The tiles' products go through tile_gemm (the GEMM
// library or Eigen, one thread each); the row work between them (max, exp, sums, dropout masks)
// is vectorised loops. Row statistics (running max m and sum l) are kept in the input's dtype.
//
// Forward, one task per (batch, head, tile of queries), for each tile of keys the queries see:
//   S = scale Q_i K_j^T,  m' = max(m, rowmax S),  P = exp(S - m'),  l = l e^(m - m') + rowsum P,
//   O = O e^(m - m') + (P * Z) V_j;  finally Y = O / l and L = m + log l (the logsumexp).
// Backward, one task per (batch, head), key tiles outer and query tiles inner (only the tiles on
// or below the diagonal, and of each only the keys its last query sees), with D = rowsum(dY * Y):
//   P = exp(S - L),  dP = (dY V_j^T) * Z,  dV_j += (P * Z)^T dY_i,  dS = P * (dP - D),
//   dK_j += scale dS^T Q_i,  dQ_i += scale dS K_j.
// A task owns its head's dQ, and its dK and dV (for GQA a per-query-head buffer, summed over the
// group in head order afterwards), so no two tasks write the same element: the bits do not
// depend on the number of threads.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/cpu/cpu_backend.h"
#include "core/cpu/parallel.h"
#include "core/cpu/philox_block.h"
#include "core/cpu/row_sum.h"
#include "core/cpu/tile_gemm.h"
#include "core/cpu/vec_exp.h"
#include "core/philox.h"

namespace kiln {

namespace {

// 64 queries x 128 keys: the score tile (32 KB in float32) and a K and V tile (32 KB each at
// d_head 64) stay in L2 while the tile's products and exponentials run. Measured against
// 128 x 128, 64 x 256 and 32 x 128 (forward + backward at T 1024, Eigen GEMM, one thread: 355 ms
// against 364, 392 and 424).
constexpr std::int64_t kQueryTile = 64;
constexpr std::int64_t kKeyTile = 128;
constexpr std::int64_t kLanes = 16;  // independent accumulators of the row loops

// A typed view of a HeadsArg.
template <typename T>
struct Heads {
  T* data;
  std::int64_t batch_stride, head_stride, row_stride;

  explicit Heads(const HeadsArg& h)
      : data(static_cast<T*>(h.data)),
        batch_stride(h.batch_stride),
        head_stride(h.head_stride),
        row_stride(h.row_stride) {}
  Heads(T* d, std::int64_t bs, std::int64_t hs, std::int64_t rs)
      : data(d), batch_stride(bs), head_stride(hs), row_stride(rs) {}
  T* at(std::int64_t b, std::int64_t head, std::int64_t t) const {
    return data + b * batch_stride + head * head_stride + t * row_stride;
  }
};

// How many of the `count` keys from `first` query t sees: keys j <= t + past.
std::int64_t visible_keys(std::int64_t t, std::int64_t past, std::int64_t first,
                          std::int64_t count) {
  return std::clamp<std::int64_t>(t + past + 1 - first, 0, count);
}

// The max of x[0 .. n), n >= 1, in lanes (vectorises without -ffast-math).
template <typename T>
T row_max(const T* x, std::int64_t n) {
  T lane[kLanes];
  std::fill(lane, lane + kLanes, -std::numeric_limits<T>::infinity());
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
#pragma omp simd
    for (std::int64_t k = 0; k < kLanes; ++k) lane[k] = x[j + k] > lane[k] ? x[j + k] : lane[k];
  for (; j < n; ++j) lane[0] = x[j] > lane[0] ? x[j] : lane[0];
  T m = lane[0];
  for (std::int64_t k = 1; k < kLanes; ++k) m = lane[k] > m ? lane[k] : m;
  return m;
}

// x[j] = exp(x[j] - shift) for j < n; returns their sum (lanes combined in a fixed order).
template <typename T>
T exp_in_place(T* x, std::int64_t n, T shift) {
  T lane[kLanes] = {};
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
#pragma omp simd
    for (std::int64_t k = 0; k < kLanes; ++k) {
      const T e = vec_exp(x[j + k] - shift);
      x[j + k] = e;
      lane[k] += e;
    }
  for (; j < n; ++j) {
    x[j] = vec_exp(x[j] - shift);
    lane[0] += x[j];
  }
  T sum = T(0);
  for (std::int64_t k = 0; k < kLanes; ++k) sum += lane[k];
  return sum;
}

// The dropout mask of one row of a tile: z[c] = Z for key first + c of query t of batch-head bh,
// c < n <= kKeyTile (1 / (1 - p) where kept, 0 where dropped), as philox::attention_keep gives
// it. Element index i reads word i % 4 of counter offset + i / 4: the row's counters are drawn
// kPhiloxBlock at a time (vectorised), then the keep test runs over the words.
template <typename T>
struct DropoutRow {
  const AttentionArgs& args;
  std::uint32_t threshold;
  T keep;

  explicit DropoutRow(const AttentionArgs& a)
      : args(a),
        threshold(philox::dropout_threshold(a.dropout_p)),
        keep(static_cast<T>(1.0 / (1.0 - a.dropout_p))) {}

  void operator()(std::int64_t bh, std::int64_t t, std::int64_t first, std::int64_t n, T* z) const {
    constexpr std::int64_t kBlocks = (kKeyTile + 3 + 4 * kPhiloxBlock - 1) / (4 * kPhiloxBlock);
    alignas(64) std::uint32_t words[kBlocks * 4 * kPhiloxBlock];
    const std::uint64_t base =
        philox::attention_dropout_index(bh, t, first, args.queries, args.keys);
    const std::int64_t skip = static_cast<std::int64_t>(base % 4);  // words before element 0
    for (std::int64_t w = 0; w < skip + n; w += 4 * kPhiloxBlock)
      philox_block(args.seed, args.offset + base / 4 + static_cast<std::uint64_t>(w / 4),
                   words + w);
    const std::uint32_t* row = words + skip;
    const std::uint32_t limit = threshold;
    const T kept = keep;
#pragma omp simd
    for (std::int64_t c = 0; c < n; ++c) z[c] = philox::dropout_keep(row[c], limit) ? kept : T(0);
  }
};

template <typename T>
void forward(const AttentionArgs& a, T* logsumexp) {
  const Heads<const T> q(a.q), k(a.k), v(a.v);
  const Heads<T> out(a.out);
  const std::int64_t d = a.d, past = a.keys - a.queries;
  const std::int64_t tiles = (a.queries + kQueryTile - 1) / kQueryTile;
  const T scale = static_cast<T>(a.scale);
  const bool dropout = a.dropout_p > 0.0;
  const DropoutRow<T> dropout_row(a);
  parallel_tasks(
      a.batch * a.heads * tiles, a.batch * a.heads * a.queries * a.keys * d,
      [&](std::int64_t task) {
        const std::int64_t bh = task / tiles, b = bh / a.heads, head = bh % a.heads;
        const std::int64_t g = head * a.kv_heads / a.heads;
        const std::int64_t t0 = (task % tiles) * kQueryTile;
        const std::int64_t rows = std::min(kQueryTile, a.queries - t0);
        const std::int64_t key_end = std::min(a.keys, t0 + rows + past);  // the last row's keys
        std::vector<T> buffer(rows * kKeyTile + rows * d + kKeyTile);
        T* s = buffer.data();        // (rows, kKeyTile): S, then P * Z
        T* o = s + rows * kKeyTile;  // (rows, d): O
        T* z = o + rows * d;         // (kKeyTile): one row's dropout mask
        std::vector<T> m(rows, -std::numeric_limits<T>::infinity()), l(rows, T(0));
        for (std::int64_t j0 = 0; j0 < key_end; j0 += kKeyTile) {
          const std::int64_t cols = std::min(kKeyTile, key_end - j0);
          tile_gemm<T>(false, true, rows, cols, d, scale, q.at(b, head, t0), q.row_stride,
                       k.at(b, g, j0), k.row_stride, T(0), s, kKeyTile);
          for (std::int64_t r = 0; r < rows; ++r) {
            T* sr = s + r * kKeyTile;
            const std::int64_t n = visible_keys(t0 + r, past, j0, cols);  // >= 1 in the first tile
            std::fill(sr + n, sr + cols, T(0));
            if (n == 0) continue;
            const T m_new = std::max(m[r], row_max(sr, n));
            const T alpha = vec_exp(m[r] - m_new);  // 0 in the first tile (m = -inf)
            l[r] = l[r] * alpha + exp_in_place(sr, n, m_new);
            m[r] = m_new;
            if (j0 > 0) {
              T* orow = o + r * d;
#pragma omp simd
              for (std::int64_t c = 0; c < d; ++c) orow[c] *= alpha;
            }
            if (dropout) {
              dropout_row(bh, t0 + r, j0, n, z);
#pragma omp simd
              for (std::int64_t c = 0; c < n; ++c) sr[c] *= z[c];
            }
          }
          tile_gemm<T>(false, false, rows, d, cols, T(1), s, kKeyTile, v.at(b, g, j0), v.row_stride,
                       j0 == 0 ? T(0) : T(1), o, d);
        }
        for (std::int64_t r = 0; r < rows; ++r) {
          const T inv = T(1) / l[r];
          T* y = out.at(b, head, t0 + r);
          const T* orow = o + r * d;
#pragma omp simd
          for (std::int64_t c = 0; c < d; ++c) y[c] = orow[c] * inv;
          logsumexp[bh * a.queries + t0 + r] = m[r] + std::log(l[r]);
        }
      });
}

template <typename T>
void backward(const AttentionArgs& a, const T* logsumexp, const HeadsArg& dout_arg,
              const HeadsArg& dq_arg, const HeadsArg& dk_arg, const HeadsArg& dv_arg,
              T* group_scratch) {
  const Heads<const T> q(a.q), k(a.k), v(a.v), out(a.out), dout(dout_arg);
  const Heads<T> dq(dq_arg);
  const std::int64_t d = a.d, past = a.keys - a.queries, group = a.heads / a.kv_heads;
  // Where each query head's dK and dV go: the kv head's gradient itself when it has one query
  // head, else that head's slot of the (B, heads, keys, d) scratch buffers.
  const Heads<T> dk_own =
      group == 1 ? Heads<T>(dk_arg) : Heads<T>(group_scratch, a.heads * a.keys * d, a.keys * d, d);
  const Heads<T> dv_own = group == 1 ? Heads<T>(dv_arg)
                                     : Heads<T>(group_scratch + a.batch * a.heads * a.keys * d,
                                                a.heads * a.keys * d, a.keys * d, d);
  const T scale = static_cast<T>(a.scale);
  const bool dropout = a.dropout_p > 0.0;
  const DropoutRow<T> dropout_row(a);
  parallel_tasks(
      a.batch * a.heads, a.batch * a.heads * a.queries * a.keys * d, [&](std::int64_t bh) {
        const std::int64_t b = bh / a.heads, head = bh % a.heads;
        const std::int64_t g = head * a.kv_heads / a.heads;
        const std::int64_t own = group == 1 ? g : head;  // the head index into dk_own / dv_own
        const T* lse = logsumexp + bh * a.queries;
        std::vector<T> delta(a.queries);  // D = rowsum(dY * Y)
        for (std::int64_t t = 0; t < a.queries; ++t) {
          const T* gy = dout.at(b, head, t);
          const T* y = out.at(b, head, t);
          delta[t] = static_cast<T>(
              lane_sum(d, [=](std::int64_t c) { return static_cast<double>(gy[c]) * y[c]; }));
        }
        const std::int64_t tile = kQueryTile * kKeyTile;
        std::vector<T> buffer((dropout ? 3 : 2) * tile + kKeyTile);
        T* p = buffer.data();  // (rows, kKeyTile): P
        T* ds = p + tile;      // dP, then dS
        T* z = ds + tile;      // one row's dropout mask
        T* pz = z + kKeyTile;  // P * Z (with dropout)
        for (std::int64_t j0 = 0; j0 < a.keys; j0 += kKeyTile) {
          const std::int64_t cols = std::min(kKeyTile, a.keys - j0);
          const std::int64_t first_query = std::max<std::int64_t>(0, j0 - past);
          T* dk_j = dk_own.at(b, own, j0);
          T* dv_j = dv_own.at(b, own, j0);
          for (std::int64_t t0 = first_query; t0 < a.queries; t0 += kQueryTile) {
            const std::int64_t rows = std::min(kQueryTile, a.queries - t0);
            // The tile's keys that its last query sees (>= 1): the products skip the columns
            // the causal mask zeroes for every row, as the forward's key_end does.
            const std::int64_t seen = std::min(cols, t0 + rows + past - j0);
            const bool first_tile = t0 == first_query;
            const T beta_kv = first_tile ? T(0) : T(1);
            if (first_tile) {
              // Rows of dK_j and dV_j that only later query tiles reach start at zero.
              for (std::int64_t c = seen; c < cols; ++c) {
                std::fill(dk_j + c * dk_own.row_stride, dk_j + c * dk_own.row_stride + d, T(0));
                std::fill(dv_j + c * dv_own.row_stride, dv_j + c * dv_own.row_stride + d, T(0));
              }
            }
            const T* q_i = q.at(b, head, t0);
            const T* dy_i = dout.at(b, head, t0);
            tile_gemm<T>(false, true, rows, seen, d, scale, q_i, q.row_stride, k.at(b, g, j0),
                         k.row_stride, T(0), p, kKeyTile);
            tile_gemm<T>(false, true, rows, seen, d, T(1), dy_i, dout.row_stride, v.at(b, g, j0),
                         v.row_stride, T(0), ds, kKeyTile);
            for (std::int64_t r = 0; r < rows; ++r) {
              T* pr = p + r * kKeyTile;
              T* dr = ds + r * kKeyTile;
              const std::int64_t n = visible_keys(t0 + r, past, j0, seen);
              const T shift = lse[t0 + r];
#pragma omp simd
              for (std::int64_t c = 0; c < n; ++c) pr[c] = vec_exp(pr[c] - shift);
              std::fill(pr + n, pr + seen, T(0));
              if (dropout) {
                T* pzr = pz + r * kKeyTile;
                dropout_row(bh, t0 + r, j0, n, z);
#pragma omp simd
                for (std::int64_t c = 0; c < n; ++c) {
                  pzr[c] = pr[c] * z[c];
                  dr[c] *= z[c];
                }
                std::fill(pzr + n, pzr + seen, T(0));
              }
              const T delta_r = delta[t0 + r];
#pragma omp simd
              for (std::int64_t c = 0; c < seen; ++c) dr[c] = pr[c] * (dr[c] - delta_r);
            }
            tile_gemm<T>(true, false, seen, d, rows, T(1), dropout ? pz : p, kKeyTile, dy_i,
                         dout.row_stride, beta_kv, dv_j, dv_own.row_stride);
            tile_gemm<T>(true, false, seen, d, rows, scale, ds, kKeyTile, q_i, q.row_stride,
                         beta_kv, dk_j, dk_own.row_stride);
            // Key tile 0 is seen by every query: it starts each row of dQ.
            tile_gemm<T>(false, false, rows, d, seen, scale, ds, kKeyTile, k.at(b, g, j0),
                         k.row_stride, j0 == 0 ? T(0) : T(1), dq.at(b, head, t0), dq.row_stride);
          }
        }
      });
  if (group == 1) return;
  // dK_g, dV_g = the sums of their query heads' slots, in head order.
  const Heads<T> dk(dk_arg), dv(dv_arg);
  parallel_tasks(a.batch * a.kv_heads, a.batch * a.heads * a.keys * d, [&](std::int64_t bg) {
    const std::int64_t b = bg / a.kv_heads, g = bg % a.kv_heads;
    for (std::int64_t j = 0; j < a.keys; ++j) {
      for (const auto& [own, total] : {std::pair{dk_own, dk}, std::pair{dv_own, dv}}) {
        T* sum = total.at(b, g, j);
        const T* first = own.at(b, g * group, j);
        std::copy(first, first + d, sum);
        for (std::int64_t i = 1; i < group; ++i) {
          const T* part = own.at(b, g * group + i, j);
#pragma omp simd
          for (std::int64_t c = 0; c < d; ++c) sum[c] += part[c];
        }
      }
    }
  });
}

}  // namespace

void CpuBackend::attention_forward(const AttentionArgs& args) {
  check_attention(args);
  dispatch_floating(args.dtype, [&](auto tag) {
    using T = decltype(tag);
    forward<T>(args, static_cast<T*>(args.logsumexp));
  });
}

void CpuBackend::attention_backward(const AttentionArgs& args, const AttentionGradArgs& grads) {
  check_attention(args, &grads);
  dispatch_floating(args.dtype, [&](auto tag) {
    using T = decltype(tag);
    const std::int64_t group = args.heads / args.kv_heads;
    // GQA: per-query-head dK and dV, (B, heads, keys, d) each, from the backend's allocator (so
    // they count in its peak memory).
    const std::size_t scratch_bytes =
        group == 1 ? 0 : 2 * sizeof(T) * args.batch * args.heads * args.keys * args.d;
    void* scratch = scratch_bytes > 0 ? allocate(scratch_bytes) : nullptr;
    backward<T>(args, static_cast<const T*>(args.logsumexp), grads.dout, grads.dq, grads.dk,
                grads.dv, static_cast<T*>(scratch));
    if (scratch != nullptr) deallocate(scratch, scratch_bytes);
  });
}

}  // namespace kiln
