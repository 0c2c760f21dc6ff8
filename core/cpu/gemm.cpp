// CPU GEMM: a BLAS library's cblas_?gemm when one is loaded (core/cpu/blas_library.h), else
// Eigen's matrix product. Row-major operands are used in place; a transposed operand is the same
// memory read column-major. Both libraries parallelise one large product over blocks of C, each
// block with one owner and the same order of additions (deterministic); a batch of small products
// runs one product per task instead, each single-threaded inside the parallel region.
#include <Eigen/Core>
#include <chrono>
#include <type_traits>

#include "core/cpu/blas_library.h"
#include "core/cpu/cpu_backend.h"
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

}  // namespace

template <typename T>
void tile_gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
               const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c,
               std::int64_t ldc) {
  if (const BlasLibrary* blas = gemm_library(m, n, k)) {
    GemmArgs g;
    g.trans_a = trans_a, g.trans_b = trans_b;
    g.m = m, g.n = n, g.k = k;
    g.lda = lda, g.ldb = ldb, g.ldc = ldc;
    g.alpha = alpha, g.beta = beta;
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
  const bool timed = profile::enabled();
  const auto start =
      timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  dispatch_floating(args.dtype, [&](auto tag) { gemm_typed<decltype(tag)>(args); });
  if (timed) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    profile::add_gemm({args.m, args.n, args.k, args.batch, args.trans_a, args.trans_b}, seconds);
  }
}

}  // namespace kiln
