// CPU GEMM: a BLAS library's cblas_?gemm when one is loaded (core/cpu/blas_library.h), else
// Eigen's matrix product, and kiln's own packed kernel for the float32 products it is faster on
// (core/cpu/packed_gemm.h: the logits). Row-major operands are used in place; a transposed
// operand is the same memory read column-major. Both libraries parallelise one large product over
// blocks of C, each block with one owner and the same order of additions (deterministic); a batch
// of small products runs one product per task instead, each single-threaded inside the parallel
// region.
//
// bf16 operands (mixed precision) go to kiln's bf16 kernel where the CPU has AVX512_BF16
// (core/cpu/packed_gemm_bf16.h), else they are widened to float32 (exactly) in scratch memory and
// go through the float32 GEMM: Debian's OpenBLAS is built without cblas_sbgemm, and a CPU without
// bf16 instructions has no bf16 arithmetic to gain from. The widening reads each operand once,
// O(mk + kn) beside the product's O(mnk); the scratch counts in the backend's bytes in use, and a
// large A is widened a block of rows at a time. bf16_gemm() (blas_library.h) picks the path.
#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <type_traits>
#include <vector>

#include "core/cpu/bf16_runs.h"
#include "core/cpu/blas_library.h"
#include "core/cpu/cpu_backend.h"
#include "core/cpu/packed_gemm.h"
#include "core/cpu/packed_gemm_bf16.h"
#include "core/cpu/parallel.h"
#include "core/cpu/tile_gemm.h"
#include "core/profiler.h"

namespace kiln {

namespace {

template <typename T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using ColMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
template <typename M>
using ConstMap = Eigen::Map<const M, 0, Eigen::OuterStride<>>;

// C (m x n) = alpha * op(A) (m x k) * op(B) (k x n) + beta * C, row-major with leading dims.
template <typename T, typename MatA, typename MatB>
void gemm_one(const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T* c, std::int64_t ldc,
              std::int64_t m, std::int64_t n, std::int64_t k, T alpha, T beta) {
  ConstMap<MatA> A(a, m, k, Eigen::OuterStride<>(lda));
  ConstMap<MatB> B(b, k, n, Eigen::OuterStride<>(ldb));
  Eigen::Map<RowMajor<T>, 0, Eigen::OuterStride<>> C(c, m, n, Eigen::OuterStride<>(ldc));
  if (beta == T(0)) {
    if (alpha == T(1)) {
      C.noalias() = A * B;
    } else {
      C.noalias() = alpha * (A * B);
    }
  } else {
    if (beta != T(1)) C *= beta;
    C.noalias() += alpha * (A * B);
  }
}

// One product through the library's CBLAS interface (row-major).
template <typename T>
void blas_one(const BlasLibrary& blas, const GemmArgs& g, const T* a, const T* b, T* c) {
  constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
  const int ta = g.trans_a ? kTrans : kNoTrans, tb = g.trans_b ? kTrans : kNoTrans;
  const auto m = static_cast<int>(g.m), n = static_cast<int>(g.n), k = static_cast<int>(g.k);
  const auto lda = static_cast<int>(g.lda), ldb = static_cast<int>(g.ldb);
  const auto ldc = static_cast<int>(g.ldc);
  if constexpr (std::is_same_v<T, float>) {
    blas.sgemm(kRowMajor, ta, tb, m, n, k, static_cast<float>(g.alpha), a, lda, b, ldb,
               static_cast<float>(g.beta), c, ldc);
  } else {
    blas.dgemm(kRowMajor, ta, tb, m, n, k, g.alpha, a, lda, b, ldb, g.beta, c, ldc);
  }
}

template <typename T, typename MatA, typename MatB>
void gemm_batched(const GemmArgs& g) {
  const T* a = static_cast<const T*>(g.a);
  const T* b = static_cast<const T*>(g.b);
  T* c = static_cast<T*>(g.c);
  const T alpha = static_cast<T>(g.alpha), beta = static_cast<T>(g.beta);
  if constexpr (std::is_same_v<T, float>) {
    if (use_packed_gemm(g.m, g.n, g.k)) {  // one product after the other, each on every thread
      for (std::int64_t i = 0; i < g.batch; ++i) {
        GemmArgs one = g;
        one.a = a + i * g.stride_a, one.b = b + i * g.stride_b, one.c = c + i * g.stride_c;
        packed_gemm(one);
      }
      return;
    }
  }
  const BlasLibrary* blas = gemm_library(g.m, g.n, g.k);
  auto one = [&](std::int64_t i) {
    if (blas != nullptr) {
      blas_one<T>(*blas, g, a + i * g.stride_a, b + i * g.stride_b, c + i * g.stride_c);
    } else {
      gemm_one<T, MatA, MatB>(a + i * g.stride_a, g.lda, b + i * g.stride_b, g.ldb,
                              c + i * g.stride_c, g.ldc, g.m, g.n, g.k, alpha, beta);
    }
  };
  // Small products in a batch: one per task (Eigen stays single-threaded inside a parallel
  // region). Large ones: one after the other, each parallelised by Eigen.
  const bool small = g.m * g.n * g.k < (1 << 21);
  if (g.batch > 1 && small) {
    parallel_tasks(g.batch, g.batch * g.m * g.n * g.k, one);
  } else {
    for (std::int64_t i = 0; i < g.batch; ++i) one(i);
  }
}

template <typename T>
void gemm_typed(const GemmArgs& g) {
  // op(A) is A (row-major, m x k) or A^T: the k x m row-major block read as m x k column-major.
  if (!g.trans_a && !g.trans_b) gemm_batched<T, RowMajor<T>, RowMajor<T>>(g);
  if (!g.trans_a && g.trans_b) gemm_batched<T, RowMajor<T>, ColMajor<T>>(g);
  if (g.trans_a && !g.trans_b) gemm_batched<T, ColMajor<T>, RowMajor<T>>(g);
  if (g.trans_a && g.trans_b) gemm_batched<T, ColMajor<T>, ColMajor<T>>(g);
}

// bf16 matrices widened to float32 (exactly) into scratch memory that lives as long as this
// object: `count` matrices `stride` elements apart, each `rows` x `cols` of a row-major matrix with
// leading dim ld, stored contiguously (ld = cols). With `rounded`, data holds float32 values that
// are rounded to bf16 first (GemmArgs::round_a, round_b).
class Widened {
 public:
  Widened(const void* data, bool rounded, std::int64_t rows, std::int64_t cols, std::int64_t ld,
          std::int64_t stride, std::int64_t count)
      : nbytes_(static_cast<std::size_t>(count * rows * cols) * sizeof(float)),
        cols_(cols),
        stride_(count == 1 ? 0 : rows * cols) {
    floats_ = static_cast<float*>(cpu_backend().allocate(nbytes_));
    parallel_tasks(count * rows, count * rows * cols, [&](std::int64_t row) {
      const std::int64_t offset = (row / rows) * stride + (row % rows) * ld;
      if (rounded) {
        round_through_bf16_run(static_cast<const float*>(data) + offset, floats_ + row * cols,
                               cols);
      } else {
        widen_bf16_run(static_cast<const bf16*>(data) + offset, floats_ + row * cols, cols);
      }
    });
  }
  ~Widened() { cpu_backend().deallocate(floats_, nbytes_); }
  Widened(const Widened&) = delete;
  Widened& operator=(const Widened&) = delete;

  const float* data() const { return floats_; }
  std::int64_t ld() const { return std::max<std::int64_t>(cols_, 1); }
  std::int64_t stride() const { return stride_; }

 private:
  std::size_t nbytes_;
  std::int64_t cols_, stride_;
  float* floats_ = nullptr;
};

// Rows of op(A) widened per block in a single bf16 product: a block of at most this many floats
// (32 MB; smaller blocks make the BLAS calls too thin to run at full speed),
// so that a large A (the (N, V) softmax of the LM head) is never held in float32 whole, which
// would undo the memory that keeping it in bf16 saves.
constexpr std::int64_t kWidenedBlockFloats = std::int64_t{1} << 23;

// Whether a stored operand (rows x cols per matrix, leading dimension ld, `matrices` of them
// `stride` apart) holds a value whose bf16 is subnormal: a bf16 below 2^-126 in magnitude, or
// with `rounded` a float32 below 2^-126 (those that round up to 2^-126 or down to 0 included).
// Rows are read in parallel, each row by one task; a row's answer is an OR, so any order agrees.
bool holds_subnormal(const void* data, bool rounded, std::int64_t rows, std::int64_t cols,
                     std::int64_t ld, std::int64_t stride, std::int64_t matrices) {
  std::atomic<bool> found = false;
  parallel_tasks(matrices * rows, matrices * rows * cols, [&](std::int64_t t) {
    if (found.load(std::memory_order_relaxed)) return;
    const std::int64_t offset = (t / rows) * stride + (t % rows) * ld;
    unsigned any = 0;
    if (rounded) {
      const auto* row = reinterpret_cast<const std::uint32_t*>(data) + offset;
      for (std::int64_t j = 0; j < cols; ++j) {
        const std::uint32_t magnitude = row[j] & 0x7fffffffu;
        any |=
            static_cast<unsigned>(magnitude != 0) & static_cast<unsigned>(magnitude < 0x00800000u);
      }
    } else {
      const auto* row = reinterpret_cast<const std::uint16_t*>(data) + offset;
      for (std::int64_t j = 0; j < cols; ++j)
        any |= static_cast<unsigned>((row[j] & 0x7f80u) == 0) &
               static_cast<unsigned>((row[j] & 0x007fu) != 0);
    }
    if (any != 0) found.store(true, std::memory_order_relaxed);
  });
  return found.load();
}

// Whether VDPBF16PS would read an operand of this product as other than its value: it counts a
// subnormal bf16 input as 0 (its product with 3e38 would lose 0.03, with an infinity give NaN).
bool bf16_operands_hold_subnormal(const GemmArgs& g) {
  const std::int64_t matrices_a = g.stride_a == 0 ? 1 : g.batch;
  const std::int64_t matrices_b = g.stride_b == 0 ? 1 : g.batch;
  return holds_subnormal(g.a, g.round_a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda,
                         g.stride_a, matrices_a) ||
         holds_subnormal(g.b, g.round_b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb,
                         g.stride_b, matrices_b);
}

}  // namespace

// C (float32) from bf16 A and B: the float32 GEMM of their exact float32 values. B is widened
// whole; A whole in a batch, else a block of rows of C at a time (each block's sums are those of
// the whole product: every element of C still sums over all of k).
void gemm_bf16_widened(const GemmArgs& g) {
  const std::int64_t matrices_a = g.stride_a == 0 ? 1 : g.batch;
  const std::int64_t matrices_b = g.stride_b == 0 ? 1 : g.batch;
  // op(B) is k x n: stored n x k when transposed.
  const Widened b(g.b, g.round_b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb, g.stride_b,
                  matrices_b);
  const std::int64_t block =
      g.batch == 1
          ? std::max<std::int64_t>(64, kWidenedBlockFloats / std::max<std::int64_t>(g.k, 1))
          : g.m;
  for (std::int64_t r0 = 0; r0 < g.m; r0 += block) {
    const std::int64_t rows = std::min(block, g.m - r0);
    // Rows [r0, r0 + rows) of op(A): rows of A, or columns of the stored k x m A^T.
    const std::int64_t first = g.trans_a ? r0 : r0 * g.lda;
    const void* a = g.round_a ? static_cast<const void*>(static_cast<const float*>(g.a) + first)
                              : static_cast<const void*>(static_cast<const bf16*>(g.a) + first);
    const Widened a_block(a, g.round_a, g.trans_a ? g.k : rows, g.trans_a ? rows : g.k, g.lda,
                          g.stride_a, matrices_a);
    GemmArgs widened = g;
    widened.bf16_operands = widened.round_a = widened.round_b = false;
    widened.m = rows;
    widened.a = a_block.data(), widened.lda = a_block.ld(), widened.stride_a = a_block.stride();
    widened.b = b.data(), widened.ldb = b.ld(), widened.stride_b = b.stride();
    widened.c = static_cast<float*>(g.c) + r0 * g.ldc;
    gemm_typed<float>(widened);
  }
}

template <typename T>
void tile_gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
               const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c,
               std::int64_t ldc) {
  GemmArgs g;
  g.op = "attention tile product";
  g.dtype = std::is_same_v<T, float> ? DType::f32 : DType::f64;
  g.trans_a = trans_a, g.trans_b = trans_b;
  g.m = m, g.n = n, g.k = k;
  g.a = a, g.lda = lda, g.b = b, g.ldb = ldb, g.c = c, g.ldc = ldc;
  g.alpha = alpha, g.beta = beta;
  check_gemm(g);
  if (const BlasLibrary* blas = gemm_library(m, n, k)) {
    blas_one<T>(*blas, g, a, b, c);
    return;
  }
  if (!trans_a && !trans_b)
    gemm_one<T, RowMajor<T>, RowMajor<T>>(a, lda, b, ldb, c, ldc, m, n, k, alpha, beta);
  if (!trans_a && trans_b)
    gemm_one<T, RowMajor<T>, ColMajor<T>>(a, lda, b, ldb, c, ldc, m, n, k, alpha, beta);
  if (trans_a && !trans_b)
    gemm_one<T, ColMajor<T>, RowMajor<T>>(a, lda, b, ldb, c, ldc, m, n, k, alpha, beta);
  if (trans_a && trans_b)
    gemm_one<T, ColMajor<T>, ColMajor<T>>(a, lda, b, ldb, c, ldc, m, n, k, alpha, beta);
}

template void tile_gemm<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, float,
                               const float*, std::int64_t, const float*, std::int64_t, float,
                               float*, std::int64_t);
template void tile_gemm<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, double,
                                const double*, std::int64_t, const double*, std::int64_t, double,
                                double*, std::int64_t);

void CpuBackend::gemm(const GemmArgs& args) {
  check_gemm(args);
  if (args.batch == 0 || args.m == 0 || args.n == 0) return;
  if (args.bias != nullptr || args.bf16_result) {
    // The epilogue as linear computed it before GemmArgs had one, bit for bit: the bias
    // broadcast into a float32 C (a scratch one for a bf16 result), the product added with beta
    // 1, the sums rounded into C by the copy kernel.
    const DType c_dtype = args.bf16_result ? DType::bf16 : args.dtype;
    std::vector<float> sums(args.bf16_result ? static_cast<std::size_t>(args.m * args.n) : 0);
    GemmArgs g = args;
    g.bias = nullptr, g.bf16_result = false;
    if (args.bf16_result) g.c = sums.data(), g.ldc = args.n;
    const TensorArg c{g.c, g.dtype, {g.m, g.n}, {g.ldc, 1}};
    if (args.bias != nullptr) {
      copy(c, TensorArg{const_cast<void*>(args.bias), c_dtype, {g.m, g.n}, {0, 1}});
      g.beta = 1.0;
    } else if (g.k == 0) {
      fill(c, 0.0);
    }
    if (g.k > 0) gemm(g);
    if (args.bf16_result) copy(TensorArg{args.c, DType::bf16, {g.m, g.n}, {args.ldc, 1}}, c);
    return;
  }
  const bool timed = profile::enabled();
  const auto start =
      timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  if (args.bf16_operands) {
    // A product with a subnormal operand is widened: exact where VDPBF16PS would read it as 0.
    if (bf16_gemm() == Bf16Gemm::native && !bf16_operands_hold_subnormal(args)) {
      packed_gemm_bf16(args);
    } else {
      gemm_bf16_widened(args);
    }
  } else {
    dispatch_floating(args.dtype, [&](auto tag) { gemm_typed<decltype(tag)>(args); });
  }
  if (timed) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    profile::add_gemm({args.m, args.n, args.k, args.batch, args.trans_a, args.trans_b}, seconds);
  }
}

}  // namespace kiln
