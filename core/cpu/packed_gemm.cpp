#include "core/cpu/packed_gemm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/cpu/cpu_backend.h"
#include "core/cpu/parallel.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#define KILN_PACKED_GEMM 1
#include <immintrin.h>
#endif

namespace kiln {

#ifdef KILN_PACKED_GEMM

namespace {

// The vector the micro-kernel accumulates in, and its operations.
#ifdef __AVX512F__
using Vector = __m512;
constexpr std::int64_t kLanes = 16;
constexpr std::int64_t kRows = 12;  // MR: 24 accumulators, 2 vectors of op(B), 1 broadcast
constexpr const char* kKernelName = "AVX-512 12x32";
inline Vector zero() { return _mm512_setzero_ps(); }
inline Vector splat(float x) { return _mm512_set1_ps(x); }
inline Vector load(const float* p) { return _mm512_load_ps(p); }
inline Vector load_unaligned(const float* p) { return _mm512_loadu_ps(p); }
inline void store(float* p, Vector v) { _mm512_storeu_ps(p, v); }
inline void stream(float* p, Vector v) { _mm512_stream_ps(p, v); }
inline Vector fma(Vector a, Vector b, Vector c) { return _mm512_fmadd_ps(a, b, c); }
inline Vector mul(Vector a, Vector b) { return _mm512_mul_ps(a, b); }
#else
using Vector = __m256;
constexpr std::int64_t kLanes = 8;
constexpr std::int64_t kRows = 6;  // MR: 12 accumulators, 2 vectors of op(B), 1 broadcast
constexpr const char* kKernelName = "AVX2 6x16";
inline Vector zero() { return _mm256_setzero_ps(); }
inline Vector splat(float x) { return _mm256_set1_ps(x); }
inline Vector load(const float* p) { return _mm256_load_ps(p); }
inline Vector load_unaligned(const float* p) { return _mm256_loadu_ps(p); }
inline void store(float* p, Vector v) { _mm256_storeu_ps(p, v); }
inline void stream(float* p, Vector v) { _mm256_stream_ps(p, v); }
inline Vector fma(Vector a, Vector b, Vector c) { return _mm256_fmadd_ps(a, b, c); }
inline Vector mul(Vector a, Vector b) { return _mm256_mul_ps(a, b); }
#endif

constexpr std::int64_t kCols = 2 * kLanes;  // NR
// KC: k up to this is one block, so C is written once. op(B)'s micro-panel (kCols x 512) is
// 32 KB with AVX2 (L1) and 64 KB with AVX-512 (L2); 256 measured slower on the logits (C is
// then read back once more).
constexpr std::int64_t kMaxDepth = 512;
// MC: rows of op(A) swept per panel of op(B) (a multiple of both kRows; 480 KB at k 512, in L2).
constexpr std::int64_t kRowBlock = 240;
// NC: columns of op(B) packed at a time by one thread (1 MB at k 512, in L2 beside op(A)'s block).
constexpr std::int64_t kColBlock = 512;
constexpr std::int64_t kPanelsPerColBlock = kColBlock / kCols;
// C of at least this many bytes is written with non-temporal stores (when aligned, beta 0).
// Measured on the logits (272 MB) in the large-cpu step with AVX2: 0.7-0.9% faster than plain
// stores; smaller products (an evaluation block of logits, 34 MB) are read back at once.
constexpr std::int64_t kStreamedMinBytes = std::int64_t{64} << 20;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Scratch floats from the CPU backend's allocator (64-byte aligned, counted, cached for reuse).
class Scratch {
 public:
  explicit Scratch(std::int64_t floats)
      : bytes_(static_cast<std::size_t>(floats) * sizeof(float)),
        data_(static_cast<float*>(cpu_backend().allocate(bytes_))) {}
  ~Scratch() { cpu_backend().deallocate(data_, bytes_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  float* data() const { return data_; }

 private:
  std::size_t bytes_;
  float* data_;
};

// C tile (kRows x kCols at c, leading dim ldc) = alpha sum_k a_k b_k^T + beta C, from kc steps
// of packed panels: a holds kRows floats of op(A) per k, b kCols floats of op(B). Every element
// sums its k in order. beta 0 never reads C; beta C + x is one rounding (fma), as in the edges.
// `streamed` (beta 0, each row of the tile whole aligned cache lines): non-temporal stores, which
// write C's lines without first reading them in.
void micro_kernel(std::int64_t kc, const float* a, const float* b, float* c, std::int64_t ldc,
                  float alpha, float beta, bool streamed = false) {
  // The tile of C is fetched while the products run (beta C reads it, and stores need its lines
  // too): without this the last loads and stores of every tile waited on memory.
  if (!streamed) {
#pragma GCC unroll 16
    for (std::int64_t r = 0; r < kRows; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + kCols - 1), _MM_HINT_T0);
    }
  }
  Vector acc[kRows][2];
#pragma GCC unroll 16
  for (std::int64_t r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = zero();
  for (std::int64_t k = 0; k < kc; ++k) {
    const Vector b0 = load(b), b1 = load(b + kLanes);
#pragma GCC unroll 16
    for (std::int64_t r = 0; r < kRows; ++r) {
      const Vector ar = splat(a[r]);
      acc[r][0] = fma(ar, b0, acc[r][0]);
      acc[r][1] = fma(ar, b1, acc[r][1]);
    }
    a += kRows;
    b += kCols;
  }
  const Vector scale = splat(alpha);
  if (streamed) {
#pragma GCC unroll 16
    for (std::int64_t r = 0; r < kRows; ++r) {
      stream(c + r * ldc, mul(acc[r][0], scale));
      stream(c + r * ldc + kLanes, mul(acc[r][1], scale));
    }
  } else if (beta == 0.0f) {
#pragma GCC unroll 16
    for (std::int64_t r = 0; r < kRows; ++r) {
      store(c + r * ldc, mul(acc[r][0], scale));
      store(c + r * ldc + kLanes, mul(acc[r][1], scale));
    }
  } else {
    const Vector keep = splat(beta);
#pragma GCC unroll 16
    for (std::int64_t r = 0; r < kRows; ++r) {
      float* row = c + r * ldc;
      store(row, fma(keep, load_unaligned(row), mul(acc[r][0], scale)));
      store(row + kLanes, fma(keep, load_unaligned(row + kLanes), mul(acc[r][1], scale)));
    }
  }
}

// A tile of `rows` x `cols` (at most kRows x kCols) at the bottom or right edge of C: the kernel
// writes a full tile into a buffer, and the valid part is merged as the kernel would.
void edge_tile(std::int64_t kc, const float* a, const float* b, float* c, std::int64_t ldc,
               std::int64_t rows, std::int64_t cols, float alpha, float beta) {
  alignas(64) float tile[kRows * kCols];
  micro_kernel(kc, a, b, tile, kCols, alpha, 0.0f);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < cols; ++j) {
      float& out = c[r * ldc + j];
      out = beta == 0.0f ? tile[r * kCols + j] : std::fma(beta, out, tile[r * kCols + j]);
    }
}

// The 8 x 8 block at src (rows `ld` apart) transposed: column j into out[j]. Rows from `valid`
// on are not read and count as zeros.
void transpose_8x8(const float* src, std::int64_t ld, std::int64_t valid, __m256 out[8]) {
  __m256 r[8];
  for (std::int64_t i = 0; i < 8; ++i)
    r[i] = i < valid ? _mm256_loadu_ps(src + i * ld) : _mm256_setzero_ps();
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  out[0] = _mm256_permute2f128_ps(u0, u4, 0x20), out[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  out[1] = _mm256_permute2f128_ps(u1, u5, 0x20), out[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  out[2] = _mm256_permute2f128_ps(u2, u6, 0x20), out[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  out[3] = _mm256_permute2f128_ps(u3, u7, 0x20), out[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// Stores the first `count` (at most 8) floats of v at p.
void store_first(float* p, __m256 v, std::int64_t count) {
  if (count == 8) {
    _mm256_storeu_ps(p, v);
  } else {
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    _mm256_maskstore_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), lanes),
                        v);
  }
}

// A row of `count` strided elements gathered into `width` floats, zeros after `count`.
void gather_row(const float* src, std::int64_t stride, std::int64_t count, std::int64_t width,
                float* out) {
  for (std::int64_t i = 0; i < width; ++i) out[i] = i < count ? src[i * stride] : 0.0f;
}

// A panel of `width` lines of a matrix, k-major: out[k * width + i] = line i's element p0 + k, for
// lines [0, valid) of `src` (line i at src + i * line_stride, its elements `step` apart), zeros for
// the rest. The packing of op(A)'s kRows rows and of op(B)'s kCols columns alike: when the
// elements are contiguous (step 1) the lines go through 8 x 8 transposes, else each k is a
// contiguous run of lines.
void pack_panel(const float* src, std::int64_t line_stride, std::int64_t step, std::int64_t valid,
                std::int64_t width, std::int64_t kc, float* out) {
  if (step != 1) {  // line i's element k at src + k * step + i: copy runs of `valid` floats
    for (std::int64_t k = 0; k < kc; ++k) {
      float* row = out + k * width;
      std::memcpy(row, src + k * step, static_cast<std::size_t>(valid) * sizeof(float));
      std::fill(row + valid, row + width, 0.0f);
    }
    return;
  }
  std::int64_t k = 0;
  for (; k + 8 <= kc; k += 8)
    for (std::int64_t first = 0; first < width; first += 8) {
      __m256 columns[8];
      transpose_8x8(src + first * line_stride + k, line_stride,
                    std::max<std::int64_t>(valid - first, 0), columns);
      for (std::int64_t j = 0; j < 8; ++j)
        store_first(out + (k + j) * width + first, columns[j],
                    std::min<std::int64_t>(8, width - first));
    }
  for (; k < kc; ++k) gather_row(src + k, line_stride, valid, width, out + k * width);
}

}  // namespace

bool packed_gemm_built() { return true; }

std::string packed_gemm_kernel() { return kKernelName; }

void packed_gemm(const GemmArgs& g) {
  check_gemm(g);
  const std::int64_t m = g.m, n = g.n, k = g.k;
  if (m <= 0 || n <= 0) return;
  const auto* a = static_cast<const float*>(g.a);
  const auto* b = static_cast<const float*>(g.b);
  auto* c = static_cast<float*>(g.c);
  const auto alpha = static_cast<float>(g.alpha), beta = static_cast<float>(g.beta);
  if (k <= 0) {  // C = beta C
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j)
        c[i * g.ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * g.ldc + j];
    return;
  }
  // Element (i, p) of op(A) is at a + i * a_row + p * a_step, element (p, j) of op(B) at
  // b + j * b_col + p * b_step.
  const std::int64_t a_row = g.trans_a ? 1 : g.lda, a_step = g.trans_a ? g.lda : 1;
  const std::int64_t b_col = g.trans_b ? g.ldb : 1, b_step = g.trans_b ? 1 : g.ldb;
  const std::int64_t depth = ceil_div(k, ceil_div(k, kMaxDepth));  // equal blocks of k
  const std::int64_t row_panels = ceil_div(m, kRows), col_panels = ceil_div(n, kCols);
  const int threads = std::max(1, omp_get_max_threads());
  // Column tasks: a multiple of the thread count, so that a static schedule gives every thread
  // the same share of columns (the results do not depend on it).
  const std::int64_t tasks = std::min<std::int64_t>(
      col_panels, threads * ceil_div(col_panels, threads * kPanelsPerColBlock));
  // A large C written in one pass bypasses the caches: it would only evict what the kernel reads.
  const bool streamed = depth == k && beta == 0.0f &&
                        m * n * static_cast<std::int64_t>(sizeof(float)) >= kStreamedMinBytes &&
                        reinterpret_cast<std::uintptr_t>(c) % 64 == 0 &&
                        (g.ldc * static_cast<std::int64_t>(sizeof(float))) % 64 == 0;
  const Scratch packed_a(row_panels * kRows * depth);
  const Scratch packed_b(threads * kColBlock * depth);
  for (std::int64_t p0 = 0; p0 < k; p0 += depth) {
    const std::int64_t kc = std::min(depth, k - p0);
    const float block_beta = p0 == 0 ? beta : 1.0f;
    parallel_tasks(row_panels, m * kc, [&](std::int64_t panel) {
      const std::int64_t i0 = panel * kRows;
      pack_panel(a + i0 * a_row + p0 * a_step, a_row, a_step, std::min(kRows, m - i0), kRows, kc,
                 packed_a.data() + panel * kRows * kc);
    });
    parallel_tasks(tasks, m * n * kc, [&](std::int64_t task) {
      float* panels_b = packed_b.data() + omp_get_thread_num() * kColBlock * depth;
      const std::int64_t first = col_panels * task / tasks, last = col_panels * (task + 1) / tasks;
      for (std::int64_t block = first; block < last; block += kPanelsPerColBlock) {
        const std::int64_t count = std::min(kPanelsPerColBlock, last - block);
        for (std::int64_t q = 0; q < count; ++q) {
          const std::int64_t j0 = (block + q) * kCols;
          pack_panel(b + j0 * b_col + p0 * b_step, b_col, b_step, std::min(kCols, n - j0), kCols,
                     kc, panels_b + q * kCols * kc);
        }
        for (std::int64_t i_block = 0; i_block < m; i_block += kRowBlock)
          for (std::int64_t q = 0; q < count; ++q) {
            const std::int64_t j0 = (block + q) * kCols, cols = std::min(kCols, n - j0);
            const float* panel_b = panels_b + q * kCols * kc;
            for (std::int64_t i0 = i_block; i0 < std::min(i_block + kRowBlock, m); i0 += kRows) {
              const float* panel_a = packed_a.data() + i0 * kc;
              float* tile = c + i0 * g.ldc + j0;
              const std::int64_t rows = std::min(kRows, m - i0);
              if (rows == kRows && cols == kCols) {
                micro_kernel(kc, panel_a, panel_b, tile, g.ldc, alpha, block_beta, streamed);
              } else {
                edge_tile(kc, panel_a, panel_b, tile, g.ldc, rows, cols, alpha, block_beta);
              }
            }
          }
      }
      if (streamed) _mm_sfence();  // the streamed stores are visible before the task ends
    });
  }
}

#else  // no AVX2 + FMA: the libraries only

bool packed_gemm_built() { return false; }

std::string packed_gemm_kernel() { return ""; }

void packed_gemm(const GemmArgs&) { KILN_CHECK(false, "packed_gemm: not built for this CPU"); }

#endif

namespace {
// The products packed_gemm_preferred takes (docs/performance.md has the measurements). The
// layers' products with k <= 512 and n >= 768 (QKV, FFN up, FFN down's input gradient) ran 0-6%
// faster alone but slower inside the large-cpu step, so the libraries keep them.
constexpr std::int64_t kPreferredMaxDepth = 512, kPreferredMinCols = 4096, kPreferredMinRows = 256;
}  // namespace

bool packed_gemm_preferred(std::int64_t m, std::int64_t n, std::int64_t k) {
  return packed_gemm_built() && k <= kPreferredMaxDepth && n >= kPreferredMinCols &&
         m >= kPreferredMinRows;
}

std::string packed_gemm_rule() {
  if (!packed_gemm_built()) return "";
  return "k <= " + std::to_string(kPreferredMaxDepth) +
         ", n >= " + std::to_string(kPreferredMinCols) +
         ", m >= " + std::to_string(kPreferredMinRows);
}

}  // namespace kiln
