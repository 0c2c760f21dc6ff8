#include "core/cpu/packed_gemm_bf16.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/bf16.h"
#include "core/cpu/cpu_backend.h"
#include "core/cpu/cpu_features.h"
#include "core/cpu/parallel.h"
#include "core/error.h"

#if defined(__x86_64__)
#define KILN_PACKED_GEMM_BF16 1
// GCC 12.2 warns inside its own AVX-512 headers (_mm512_undefined_epi32, GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif
#endif

namespace kiln {

#ifdef KILN_PACKED_GEMM_BF16

// The instructions of every function below that touches a vector: compiled for them whatever
// the build's -march, and called only where cpu_has_avx512_bf16() says the CPU has them.
#define KILN_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

namespace {

// Two bf16 values of consecutive k (the lower k in the low 16 bits): one lane of VDPBF16PS.
using Pair = std::uint32_t;

constexpr std::int64_t kLanes = 16;
constexpr std::int64_t kRows = 12;          // MR: 24 accumulators, 2 vectors of op(B), 1 broadcast
constexpr std::int64_t kCols = 2 * kLanes;  // NR
// KC: k up to 1024 is one block, so C is written once (the logits' k is 256 or 512); op(B)'s
// micro-panel (32 columns x 1024 k) is 64 KB of pairs, the float32 kernel's bytes at half its k,
// op(A)'s block of 240 rows (MC) 480 KB, both in L2. 1024 measured 5-7% faster than 512 on the
// deep products (dX's k = 33278, dE's 2048: C read and written half as often) and the same as
// 2048 with 120-row blocks. NC: columns of op(B) packed at a time by one thread (wide products).
constexpr std::int64_t kMaxDepth = 1024;
constexpr std::int64_t kRowBlock = 240;
constexpr std::int64_t kColBlock = 512;
constexpr std::int64_t kPanelsPerColBlock = kColBlock / kCols;
// C of at least this many bytes is written with non-temporal stores (aligned, beta 0), as the
// float32 kernel does.
constexpr std::int64_t kStreamedMinBytes = std::int64_t{64} << 20;
// A batch of products below this many multiply-adds each runs one product per thread.
constexpr std::int64_t kSmallProduct = std::int64_t{1} << 21;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Pair words from the CPU backend's allocator (64-byte aligned, counted, cached for reuse).
class Scratch {
 public:
  explicit Scratch(std::int64_t pairs)
      : bytes_(static_cast<std::size_t>(pairs) * sizeof(Pair)),
        data_(static_cast<Pair*>(cpu_backend().allocate(bytes_))) {}
  ~Scratch() { cpu_backend().deallocate(data_, bytes_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  Pair* data() const { return data_; }

 private:
  std::size_t bytes_;
  Pair* data_;
};

// One operand as its panels read it: element (line i, depth q) at data + i line_stride + q step
// (elements), bf16, or float32 to round. A line is a row of op(A) or a column of op(B); one of the
// two strides is 1 (a row-major matrix, read as it is or transposed).
struct Lines {
  const void* data = nullptr;
  bool float32 = false;
  std::int64_t line_stride = 0, step = 0;

  // The same lines from `elements` further on.
  Lines offset(std::int64_t elements) const {
    return {float32 ? static_cast<const void*>(static_cast<const float*>(data) + elements)
                    : static_cast<const void*>(static_cast<const bf16*>(data) + elements),
            float32, line_stride, step};
  }
  // The lines from line `line` and depth `depth` on.
  Lines at(std::int64_t line, std::int64_t depth) const {
    return offset(line * line_stride + depth * step);
  }
  // The bf16 bits of element (i, q): float32 rounded as to_bf16 rounds it.
  std::uint16_t bits(std::int64_t i, std::int64_t q) const {
    const std::int64_t offset = i * line_stride + q * step;
    return float32 ? to_bf16(static_cast<const float*>(data)[offset]).bits
                   : static_cast<const bf16*>(data)[offset].bits;
  }
};

// to_bf16 (core/bf16.h) of 16 floats, the 16 result bits in the low half of each 32-bit lane:
// round to nearest even by adding 0x7fff plus the kept part's lowest bit; NaN keeps its top bits
// with the quiet bit set. (VCVTNEPS2BF16 would flush subnormals to zero, which .to(bf16) does not.)
KILN_BF16_TARGET inline __m512i round_lanes(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i nearest =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), odd), 16);
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x0040));
  return _mm512_mask_blend_epi32(nan, nearest, quiet);
}

// The first `count` (at most 16) elements of a line from p, as bf16 bits in the low half of each
// 32-bit lane, zeros after them.
KILN_BF16_TARGET inline __m512i load_lanes(const Lines& s, std::int64_t count) {
  const auto mask = static_cast<__mmask16>((1u << count) - 1);
  if (s.float32) return round_lanes(_mm512_maskz_loadu_ps(mask, s.data));
  return _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, s.data));
}

// 32 consecutive elements from p as 16 pairs (element 2j in the low half of word j).
KILN_BF16_TARGET inline __m512i load_pairs(const Lines& s) {
  if (!s.float32) return _mm512_loadu_si512(s.data);
  const auto* p = static_cast<const float*>(s.data);
  const __m512i low = round_lanes(_mm512_loadu_ps(p)), high = round_lanes(_mm512_loadu_ps(p + 16));
  // The low 16 bits of every 32-bit lane of low, then of high: 32 bf16 in order.
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi32_epi16(low)),
                            _mm512_cvtepi32_epi16(high), 1);
}

// The 16 x 16 words of r transposed in place: word j of r[i] becomes word i of r[j].
KILN_BF16_TARGET inline void transpose_16x16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int h = 0; h < 16; h += 8)
    for (int i = 0; i < 4; ++i) {
      t[h + i] = _mm512_shuffle_i32x4(r[h + i], r[h + i + 4], 0x88);
      t[h + i + 4] = _mm512_shuffle_i32x4(r[h + i], r[h + i + 4], 0xdd);
    }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
  }
}

// A panel of `width` lines (kRows of op(A) or kCols of op(B)) over kc steps of depth, as pairs:
// out[p * width + i] = (line i at depth 2p, line i at depth 2p + 1), for lines [0, valid) of src,
// zeros for the rest and for the missing half of the last pair when kc is odd.
KILN_BF16_TARGET void pack_panel(const Lines& src, std::int64_t valid, std::int64_t width,
                                 std::int64_t kc, Pair* out) {
  const std::int64_t pairs = ceil_div(kc, 2);
  auto scalar_pair = [&](std::int64_t i, std::int64_t p) -> Pair {
    if (i >= valid) return 0;
    const Pair low = src.bits(i, 2 * p);
    return 2 * p + 1 < kc ? low | (Pair{src.bits(i, 2 * p + 1)} << 16) : low;
  };
  if (src.step != 1) {
    // The lines are contiguous (line_stride 1): depth 2p and 2p + 1 are two runs of lines,
    // interleaved 16 lines at a time.
    for (std::int64_t p = 0; p < pairs; ++p)
      for (std::int64_t first = 0; first < width; first += kLanes) {
        const std::int64_t count = std::clamp<std::int64_t>(valid - first, 0, kLanes);
        const __m512i low = load_lanes(src.at(first, 2 * p), count);
        const __m512i high =
            2 * p + 1 < kc ? load_lanes(src.at(first, 2 * p + 1), count) : _mm512_setzero_si512();
        const auto stored = static_cast<__mmask16>((1u << std::min(kLanes, width - first)) - 1);
        _mm512_mask_storeu_epi32(out + p * width + first, stored,
                                 _mm512_or_si512(low, _mm512_slli_epi32(high, 16)));
      }
    return;
  }
  // Each line's pairs are consecutive words (2 bf16 or 2 rounded floats): 16 lines x 16 pairs
  // are loaded as 16 vectors and transposed.
  std::int64_t p = 0;
  for (; p + kLanes <= kc / 2; p += kLanes)
    for (std::int64_t first = 0; first < width; first += kLanes) {
      __m512i r[16];
      for (std::int64_t i = 0; i < kLanes; ++i)
        r[i] = first + i < valid ? load_pairs(src.at(first + i, 2 * p)) : _mm512_setzero_si512();
      transpose_16x16(r);
      const auto stored = static_cast<__mmask16>((1u << std::min(kLanes, width - first)) - 1);
      for (std::int64_t j = 0; j < kLanes; ++j)
        _mm512_mask_storeu_epi32(out + (p + j) * width + first, stored, r[j]);
    }
  for (; p < pairs; ++p)
    for (std::int64_t i = 0; i < width; ++i) out[p * width + i] = scalar_pair(i, p);
}

// 16 pair words as VDPBF16PS's operand type.
KILN_BF16_TARGET inline __m512bh as_pairs(__m512i words) { return (__m512bh)words; }

// C tile (kRows x kCols at c, leading dim ldc) = alpha sum_k a_k b_k^T + beta C from `pairs`
// steps of packed panels: a holds kRows pairs of op(A) per step, b kCols pairs of op(B). beta 0
// never reads C; beta C + x is one rounding (fma), as in the edges. `streamed`: non-temporal
// stores (beta 0, every row of the tile whole aligned cache lines).
KILN_BF16_TARGET void micro_kernel(std::int64_t pairs, const Pair* a, const Pair* b, float* c,
                                   std::int64_t ldc, float alpha, float beta, bool streamed) {
  if (!streamed) {
#pragma GCC unroll 16
    for (std::int64_t r = 0; r < kRows; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + kCols - 1), _MM_HINT_T0);
    }
  }
  __m512 acc[kRows][2];
#pragma GCC unroll 16
  for (std::int64_t r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (std::int64_t p = 0; p < pairs; ++p) {
    const __m512bh b0 = as_pairs(_mm512_load_si512(b)),
                   b1 = as_pairs(_mm512_load_si512(b + kLanes));
#pragma GCC unroll 16
    for (std::int64_t r = 0; r < kRows; ++r) {
      const __m512bh ar = as_pairs(_mm512_set1_epi32(static_cast<int>(a[r])));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], ar, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], ar, b1);
    }
    a += kRows;
    b += kCols;
  }
  const __m512 scale = _mm512_set1_ps(alpha);
  if (streamed) {
#pragma GCC unroll 16
    for (std::int64_t r = 0; r < kRows; ++r) {
      _mm512_stream_ps(c + r * ldc, _mm512_mul_ps(acc[r][0], scale));
      _mm512_stream_ps(c + r * ldc + kLanes, _mm512_mul_ps(acc[r][1], scale));
    }
  } else if (beta == 0.0f) {
#pragma GCC unroll 16
    for (std::int64_t r = 0; r < kRows; ++r) {
      _mm512_storeu_ps(c + r * ldc, _mm512_mul_ps(acc[r][0], scale));
      _mm512_storeu_ps(c + r * ldc + kLanes, _mm512_mul_ps(acc[r][1], scale));
    }
  } else {
    const __m512 keep = _mm512_set1_ps(beta);
#pragma GCC unroll 16
    for (std::int64_t r = 0; r < kRows; ++r) {
      float* row = c + r * ldc;
      _mm512_storeu_ps(
          row, _mm512_fmadd_ps(keep, _mm512_loadu_ps(row), _mm512_mul_ps(acc[r][0], scale)));
      _mm512_storeu_ps(row + kLanes, _mm512_fmadd_ps(keep, _mm512_loadu_ps(row + kLanes),
                                                     _mm512_mul_ps(acc[r][1], scale)));
    }
  }
}

// A tile of `rows` x `cols` (at most kRows x kCols) at the bottom or right edge of C: the kernel
// writes a full tile into a buffer, and the valid part is merged as the kernel would.
KILN_BF16_TARGET void edge_tile(std::int64_t pairs, const Pair* a, const Pair* b, float* c,
                                std::int64_t ldc, std::int64_t rows, std::int64_t cols, float alpha,
                                float beta) {
  alignas(64) float tile[kRows * kCols];
  micro_kernel(pairs, a, b, tile, kCols, alpha, 0.0f, false);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < cols; ++j) {
      float& out = c[r * ldc + j];
      out = beta == 0.0f ? tile[r * kCols + j] : std::fma(beta, out, tile[r * kCols + j]);
    }
}

// Pairs of one block of depth (at most kMaxDepth, even except the last block of an odd k).
std::int64_t block_depth(std::int64_t k) {
  const std::int64_t depth = ceil_div(k, ceil_div(k, kMaxDepth));
  return depth + depth % 2;
}

// How threads share a product. Wide (the logits: n in the thousands): op(A)'s panels are packed
// once per block of k for all threads, and each thread takes its columns of C and packs their
// panels of op(B). Tall (n <= kTallMaxCols: dE, dX and the layers' input and weight gradients):
// op(B)'s panels are packed once per block of k, and each thread takes blocks of rows of C and
// packs their panels of op(A) just before it reads them, so that a tall op(A) never crosses
// memory packed (dE's, (V, 512 k) pairs, is 34 MB a block). Each element of C sums the same
// products in the same order either way: the bits do not depend on the schedule or the threads.
constexpr std::int64_t kTallMaxCols = 1024;

struct Schedule {
  bool tall = false;
  std::int64_t row_panels = 0, col_panels = 0;
  std::int64_t tasks = 0;         // row blocks (tall) or column blocks (wide), a multiple of
                                  // the threads so that each thread gets the same share
  std::int64_t shared_pairs = 0;  // the panels packed for every thread, per block of k
  std::int64_t own_pairs = 0;     // each thread's own panels, per block of k
};

// Pairs rounded up to whole cache lines, so that every region of panels starts 64-byte aligned
// (the micro-kernel's aligned loads of op(B)).
std::int64_t whole_lines(std::int64_t pairs) { return ceil_div(pairs, 16) * 16; }

Schedule schedule(std::int64_t m, std::int64_t n, std::int64_t k, int threads) {
  Schedule s;
  s.tall = n <= kTallMaxCols;
  s.row_panels = ceil_div(m, kRows), s.col_panels = ceil_div(n, kCols);
  const std::int64_t pairs = block_depth(k) / 2;
  constexpr std::int64_t kPanelsPerRowBlock = kRowBlock / kRows;
  if (s.tall) {
    s.tasks = std::min<std::int64_t>(
        s.row_panels, threads * ceil_div(s.row_panels, threads * kPanelsPerRowBlock));
    s.shared_pairs = whole_lines(s.col_panels * kCols * pairs);
    s.own_pairs = whole_lines(ceil_div(s.row_panels, s.tasks) * kRows * pairs);
  } else {
    s.tasks = std::min<std::int64_t>(
        s.col_panels, threads * ceil_div(s.col_panels, threads * kPanelsPerColBlock));
    s.shared_pairs = whole_lines(s.row_panels * kRows * pairs);
    s.own_pairs = whole_lines(kColBlock * pairs);
  }
  return s;
}

// The tiles of C in row panels [r0, r1) and column panels [q0, q1) from packed panels: row panel
// r's op(A) at a_panels + (r - r0) kRows pairs, column panel q's op(B) at b_panels + (q - q0)
// kCols pairs. Row panel by row panel: op(A)'s panel (12 rows, 24 KB at k 1024) stays in L1
// while op(B)'s stream from L2 (measured 4-10% faster on the LM head's products than the other
// order, whose 64 KB panel of op(B) cannot stay in a 32 KB L1).
void sweep(std::int64_t r0, std::int64_t r1, std::int64_t q0, std::int64_t q1, std::int64_t pairs,
           const Pair* a_panels, const Pair* b_panels, float* c, std::int64_t ldc, std::int64_t m,
           std::int64_t n, float alpha, float beta, bool streamed) {
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::int64_t i0 = r * kRows, rows = std::min(kRows, m - i0);
    const Pair* panel_a = a_panels + (r - r0) * kRows * pairs;
    for (std::int64_t q = q0; q < q1; ++q) {
      const std::int64_t j0 = q * kCols, cols = std::min(kCols, n - j0);
      const Pair* panel_b = b_panels + (q - q0) * kCols * pairs;
      float* tile = c + i0 * ldc + j0;
      if (rows == kRows && cols == kCols) {
        micro_kernel(pairs, panel_a, panel_b, tile, ldc, alpha, beta, streamed);
      } else {
        edge_tile(pairs, panel_a, panel_b, tile, ldc, rows, cols, alpha, beta);
      }
    }
  }
}

// One product C (m x n) = alpha op(A) op(B) + beta C with op(A), op(B) as lines (rows of op(A),
// columns of op(B)) on `threads` threads (1: the caller's thread alone), packing into `shared`
// and each thread's slice of `own` (Schedule's sizes).
void product(const Lines& a, const Lines& b, float* c, std::int64_t ldc, std::int64_t m,
             std::int64_t n, std::int64_t k, float alpha, float beta, int threads, Pair* shared,
             Pair* own) {
  const std::int64_t depth = block_depth(k);
  const Schedule s = schedule(m, n, k, threads);
  // A large C written in one pass bypasses the caches: it would only evict what the kernel reads.
  const bool streamed = depth >= k && beta == 0.0f &&
                        m * n * static_cast<std::int64_t>(sizeof(float)) >= kStreamedMinBytes &&
                        reinterpret_cast<std::uintptr_t>(c) % 64 == 0 &&
                        (ldc * static_cast<std::int64_t>(sizeof(float))) % 64 == 0;
  const std::int64_t parallel_work = threads > 1 ? m * n : 0;  // 0: never in parallel
  auto own_panels = [&] { return own + (threads > 1 ? omp_get_thread_num() : 0) * s.own_pairs; };
  for (std::int64_t p0 = 0; p0 < k; p0 += depth) {
    const std::int64_t kc = std::min(depth, k - p0), pairs = ceil_div(kc, 2);
    const float block_beta = p0 == 0 ? beta : 1.0f;
    auto pack_a = [&](std::int64_t r, Pair* out) {
      pack_panel(a.at(r * kRows, p0), std::min(kRows, m - r * kRows), kRows, kc, out);
    };
    auto pack_b = [&](std::int64_t q, Pair* out) {
      pack_panel(b.at(q * kCols, p0), std::min(kCols, n - q * kCols), kCols, kc, out);
    };
    if (s.tall) {
      parallel_tasks(s.col_panels, parallel_work,
                     [&](std::int64_t q) { pack_b(q, shared + q * kCols * pairs); });
      parallel_tasks(s.tasks, parallel_work, [&](std::int64_t task) {
        Pair* panels_a = own_panels();
        const std::int64_t r0 = s.row_panels * task / s.tasks;
        const std::int64_t r1 = s.row_panels * (task + 1) / s.tasks;
        for (std::int64_t r = r0; r < r1; ++r) pack_a(r, panels_a + (r - r0) * kRows * pairs);
        sweep(r0, r1, 0, s.col_panels, pairs, panels_a, shared, c, ldc, m, n, alpha, block_beta,
              streamed);
        if (streamed) _mm_sfence();  // the streamed stores are visible before the task ends
      });
      continue;
    }
    parallel_tasks(s.row_panels, parallel_work,
                   [&](std::int64_t r) { pack_a(r, shared + r * kRows * pairs); });
    parallel_tasks(s.tasks, parallel_work, [&](std::int64_t task) {
      Pair* panels_b = own_panels();
      const std::int64_t first = s.col_panels * task / s.tasks;
      const std::int64_t last = s.col_panels * (task + 1) / s.tasks;
      for (std::int64_t q0 = first; q0 < last; q0 += kPanelsPerColBlock) {
        const std::int64_t q1 = std::min(last, q0 + kPanelsPerColBlock);
        for (std::int64_t q = q0; q < q1; ++q) pack_b(q, panels_b + (q - q0) * kCols * pairs);
        for (std::int64_t r0 = 0; r0 < s.row_panels; r0 += kRowBlock / kRows) {
          const std::int64_t r1 = std::min(s.row_panels, r0 + kRowBlock / kRows);
          sweep(r0, r1, q0, q1, pairs, shared + r0 * kRows * pairs, panels_b, c, ldc, m, n, alpha,
                block_beta, streamed);
        }
      }
      if (streamed) _mm_sfence();
    });
  }
}

// C = beta C (k = 0: no products).
void scale_c(float* c, std::int64_t ldc, std::int64_t m, std::int64_t n, float beta) {
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
}

}  // namespace

bool packed_gemm_bf16_available() { return cpu_has_avx512_bf16(); }

std::string packed_gemm_bf16_kernel() { return "AVX512_BF16 12x32"; }

void packed_gemm_bf16(const GemmArgs& g) {
  KILN_CHECK(packed_gemm_bf16_available(),
             "packed_gemm_bf16: this CPU has no AVX512_BF16 (VDPBF16PS)");
  const std::int64_t m = g.m, n = g.n, k = g.k;
  if (m <= 0 || n <= 0 || g.batch <= 0) return;
  const auto alpha = static_cast<float>(g.alpha), beta = static_cast<float>(g.beta);
  auto* c = static_cast<float*>(g.c);
  if (k <= 0) {
    for (std::int64_t i = 0; i < g.batch; ++i) scale_c(c + i * g.stride_c, g.ldc, m, n, beta);
    return;
  }
  // Line i's element q of op(A) is at a + i a_row + q a_step, of op(B) at b + i b_col + q b_step.
  const Lines a{g.a, g.round_a, g.trans_a ? 1 : g.lda, g.trans_a ? g.lda : 1};
  const Lines b{g.b, g.round_b, g.trans_b ? g.ldb : 1, g.trans_b ? 1 : g.ldb};
  auto matrix = [](const Lines& lines, std::int64_t index, std::int64_t stride) {
    return lines.offset(index * stride);
  };
  const int threads = std::max(1, omp_get_max_threads());
  if (g.batch > 1 && m * n * k < kSmallProduct && threads > 1) {
    // A batch of small products: one per task, each on one thread with its own panels.
    const Schedule alone = schedule(m, n, k, 1);
    const std::int64_t per_thread = alone.shared_pairs + alone.own_pairs;
    const Scratch panels(threads * per_thread);
    parallel_tasks(g.batch, g.batch * m * n * k, [&](std::int64_t i) {
      Pair* mine = panels.data() + omp_get_thread_num() * per_thread;
      product(matrix(a, i, g.stride_a), matrix(b, i, g.stride_b), c + i * g.stride_c, g.ldc, m, n,
              k, alpha, beta, 1, mine, mine + alone.shared_pairs);
    });
    return;
  }
  const Schedule s = schedule(m, n, k, threads);
  const Scratch shared(s.shared_pairs), own(threads * s.own_pairs);
  for (std::int64_t i = 0; i < g.batch; ++i)
    product(matrix(a, i, g.stride_a), matrix(b, i, g.stride_b), c + i * g.stride_c, g.ldc, m, n, k,
            alpha, beta, threads, shared.data(), own.data());
}

#else  // not x86-64: the widening path only

bool packed_gemm_bf16_available() { return false; }

std::string packed_gemm_bf16_kernel() { return ""; }

void packed_gemm_bf16(const GemmArgs&) {
  KILN_CHECK(false, "packed_gemm_bf16: not built for this CPU (x86-64 only)");
}

#endif

}  // namespace kiln
