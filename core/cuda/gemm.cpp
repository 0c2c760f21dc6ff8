// CUDA GEMM through cuBLAS, in full FP32/FP64 (the handle's math mode is CUBLAS_DEFAULT_MATH: no
// TF32), on the backend's stream. cuBLAS is column-major and kiln row-major: a row-major matrix
// is its transpose read column-major, so the row-major product C = op(A) op(B) is computed as the
// column-major C^T = op(B)^T op(A)^T, swapping the operands and m with n, without copies.
// A batch is one strided-batched call (a batch stride of 0 repeats a matrix). bf16 operands go
// through cublasGemmStridedBatchedEx with CUDA_R_16BF A and B, CUDA_R_32F C and 32-bit compute:
// the tensor cores' bf16 rate, float32 sums; a float32 operand of a bf16 product (a weight under
// autocast) is rounded into a bf16 copy first.
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include <cublas_v2.h>

#include "core/bf16.h"
#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/scratch.h"
#include "core/error.h"

namespace kiln {

namespace {

int checked_int(std::int64_t value, const char* what) {
  KILN_CHECK(value >= 0 && value <= std::numeric_limits<int>::max(),
             "gemm: {} = {} does not fit cuBLAS's 32-bit int", what, value);
  return static_cast<int>(value);
}

cublasOperation_t op_of(bool transposed) { return transposed ? CUBLAS_OP_T : CUBLAS_OP_N; }

// The column-major call for the row-major GemmArgs (see the top of the file).
template <typename T>
void gemm_typed(cublasHandle_t handle, const GemmArgs& g) {
  const int m = checked_int(g.m, "m"), n = checked_int(g.n, "n"), k = checked_int(g.k, "k");
  const int lda = checked_int(g.lda, "lda"), ldb = checked_int(g.ldb, "ldb");
  const int ldc = checked_int(g.ldc, "ldc"), batch = checked_int(g.batch, "batch");
  const T alpha = static_cast<T>(g.alpha), beta = static_cast<T>(g.beta);
  const T* a = static_cast<const T*>(g.a);
  const T* b = static_cast<const T*>(g.b);
  T* c = static_cast<T*>(g.c);
  const cublasOperation_t op_a = op_of(g.trans_a), op_b = op_of(g.trans_b);
  if constexpr (std::is_same_v<T, float>) {
    if (batch == 1) {
      KILN_CUBLAS_CHECK(
          cublasSgemm(handle, op_b, op_a, n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc));
    } else {
      KILN_CUBLAS_CHECK(cublasSgemmStridedBatched(handle, op_b, op_a, n, m, k, &alpha, b, ldb,
                                                  g.stride_b, a, lda, g.stride_a, &beta, c, ldc,
                                                  g.stride_c, batch));
    }
  } else {
    if (batch == 1) {
      KILN_CUBLAS_CHECK(
          cublasDgemm(handle, op_b, op_a, n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc));
    } else {
      KILN_CUBLAS_CHECK(cublasDgemmStridedBatched(handle, op_b, op_a, n, m, k, &alpha, b, ldb,
                                                  g.stride_b, a, lda, g.stride_a, &beta, c, ldc,
                                                  g.stride_c, batch));
    }
  }
}

void gemm_bf16_operands(cublasHandle_t handle, const GemmArgs& g) {
  KILN_CHECK(!g.round_a && !g.round_b, "gemm: float32 operands reach cuBLAS unrounded");
  const int m = checked_int(g.m, "m"), n = checked_int(g.n, "n"), k = checked_int(g.k, "k");
  const int lda = checked_int(g.lda, "lda"), ldb = checked_int(g.ldb, "ldb");
  const int ldc = checked_int(g.ldc, "ldc"), batch = checked_int(g.batch, "batch");
  const float alpha = static_cast<float>(g.alpha), beta = static_cast<float>(g.beta);
  KILN_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      handle, op_of(g.trans_b), op_of(g.trans_a), n, m, k, &alpha, g.b, CUDA_R_16BF, ldb,
      g.stride_b, g.a, CUDA_R_16BF, lda, g.stride_a, &beta, g.c, CUDA_R_32F, ldc, g.stride_c, batch,
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// The stored rows and columns of A (or B) of a product: op(X) transposed when it is.
std::pair<std::int64_t, std::int64_t> stored_shape(const GemmArgs& g, bool a) {
  if (a) return g.trans_a ? std::pair{g.k, g.m} : std::pair{g.m, g.k};
  return g.trans_b ? std::pair{g.n, g.k} : std::pair{g.k, g.n};
}

// Elements of the contiguous bf16 copy of A (or B): every matrix of the batch, one when its
// batch stride is 0.
std::int64_t matrix_elements(const GemmArgs& g, bool a) {
  const auto [rows, cols] = stored_shape(g, a);
  return ((a ? g.stride_a : g.stride_b) == 0 ? 1 : g.batch) * rows * cols;
}

// A (or B) of g, float32, rounded into the contiguous bf16 buffer `to` by the backend's copy
// kernel; g then reads the copy.
void round_operand(Backend& backend, GemmArgs& g, bool a, bf16* to) {
  const auto [rows, cols] = stored_shape(g, a);
  const std::int64_t stride = a ? g.stride_a : g.stride_b;
  const std::int64_t count = stride == 0 ? 1 : g.batch;
  backend.copy(TensorArg{to, DType::bf16, {count, rows, cols}, {rows * cols, cols, 1}},
               TensorArg{const_cast<void*>(a ? g.a : g.b),
                         DType::f32,
                         {count, rows, cols},
                         {stride, a ? g.lda : g.ldb, 1}});
  if (a) {
    g.a = to, g.lda = std::max<std::int64_t>(cols, 1), g.round_a = false;
    g.stride_a = stride == 0 ? 0 : rows * cols;
  } else {
    g.b = to, g.ldb = std::max<std::int64_t>(cols, 1), g.round_b = false;
    g.stride_b = stride == 0 ? 0 : rows * cols;
  }
}

}  // namespace

void CudaBackend::gemm(const GemmArgs& args) {
  check_gemm(args);
  if (args.batch == 0 || args.m == 0 || args.n == 0) return;
  if (args.k == 0) {
    // op(A) op(B) is zero: C = beta * C, without cuBLAS.
    const TensorArg c{
        args.c, args.dtype, {args.batch, args.m, args.n}, {args.stride_c, args.ldc, 1}};
    if (args.beta == 0.0) {
      fill(c, 0.0);
    } else {
      unary(UnaryOp::mul_scalar, c, c, args.beta);
    }
    return;
  }
  activate();
  if (args.bf16_operands) {
    // A float32 operand of a bf16 product (GemmArgs::round_a, round_b) is rounded into a bf16
    // copy first: cuBLAS reads bf16 itself, but cannot round.
    GemmArgs g = args;
    const Scratch<bf16> a(*allocator_, g.round_a ? matrix_elements(g, true) : 0);
    const Scratch<bf16> b(*allocator_, g.round_b ? matrix_elements(g, false) : 0);
    if (g.round_a) round_operand(*this, g, true, a.get());
    if (g.round_b) round_operand(*this, g, false, b.get());
    gemm_bf16_operands(cublas_, g);
  } else {
    dispatch_floating(args.dtype, [&](auto tag) { gemm_typed<decltype(tag)>(cublas_, args); });
  }
}

}  // namespace kiln
