// One small row-major product on the calling thread, for kernels that run their own parallel
// loop over tiles (attention): C (m x n) = alpha op(A) op(B) + beta C, op(X) = X or X^T, with
// leading dimensions. Through CpuBackend::gemm's library (gemm_library: OpenBLAS or BLIS, else
// Eigen), without its profiler call (the profiler's GEMM table is not for concurrent use).
// beta 0 never reads C.
#pragma once

#include <cstdint>

namespace kiln {

template <typename T>
void tile_gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
               const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c,
               std::int64_t ldc);

}  // namespace kiln
