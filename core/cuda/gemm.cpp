// CUDA GEMM through cuBLAS, in full FP32/FP64 (the handle's math mode is CUBLAS_DEFAULT_MATH: no
// TF32), on the backend's stream. cuBLAS is column-major and kiln row-major: a row-major matrix
// is its transpose read column-major, so the row-major product C = op(A) op(B) is computed as the
// column-major C^T = op(B)^T op(A)^T, swapping the operands and m with n, without copies.
// A batch is one strided-batched call (a batch stride of 0 repeats a matrix). bf16 operands go
// through cublasGemmStridedBatchedEx with CUDA_R_16BF A and B, CUDA_R_32F C and 32-bit compute:
// the tensor cores' bf16 rate, float32 sums; a float32 operand of a bf16 product (a weight under
// autocast) is rounded into a bf16 copy first.
//
// A product with an epilogue (GemmArgs::bias, bf16_result: a linear layer's) goes through
// cuBLASLt instead: CUBLASLT_EPILOGUE_BIAS adds the bias to the float32 sums in registers and D
// is written once, in bf16 when bf16_result. Bytes moved for a (m x n) output, against the path
// it replaces (the bias copied into a float32 C, the GEMM with beta 1 reading C back, a pass
// rounding C into the bf16 output): 4mn written + 4mn read + 4mn written + 4mn read + 2mn written
// = 18 mn bytes, now 2 mn (bf16) or 4 mn (float32), and two launches fewer. For d 768, T 1024,
// batch 8 (gpt2-small's fc1: m = 8192, n = 3072) that is 403 MB of traffic per call avoided,
// ~0.12 ms at an H100's 3.35 TB/s, more than the GEMM itself needs at the bf16 peak (38.7 GFLOP,
// 0.04 ms at 989 TFLOP/s). A fused kernel of kiln's own would
// move the same 2 mn but give up cuBLAS's tuned tiles, so cuBLASLt it is. No GPU measured this.
// cuBLASLt's rule puts the bias in D's type: a bf16 output takes a bf16 bias (autocast's cached
// copy, core/autocast.h). Its GELU epilogues compute the tanh form, and kiln's FeedForward uses
// the erf form (gelu's default, as PyTorch's nn.GELU), so no GELU is fused: the math would change.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include <cublasLt.h>
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

// A cuBLASLt descriptor, destroyed at the end of the scope.
template <typename T, cublasStatus_t (*destroy)(T)>
struct LtObject {
  T value = nullptr;
  LtObject() = default;
  LtObject(const LtObject&) = delete;
  LtObject& operator=(const LtObject&) = delete;
  ~LtObject() {
    if (value != nullptr) (void)destroy(value);
  }
};

template <typename Value>
void set_attribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
                   const Value& value) {
  KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)));
}

// The most workspace a cuBLASLt algorithm may ask for (llm.c's and PyTorch's figure for Hopper);
// only what the chosen one needs is taken from the allocator.
constexpr std::uint64_t kLtWorkspaceLimit = std::uint64_t{32} << 20;

// C (1 x m x n, row-major) = op(A) op(B) + bias, rounded to bf16 when bf16_result, through
// cublasLtMatmul on the column-major C^T = op(B)^T op(A)^T (the top of the file), float32 or bf16
// operands, float32 sums.
void gemm_epilogue(cublasLtHandle_t handle, CachingAllocator& allocator, cudaStream_t stream,
                   const GemmArgs& g) {
  KILN_CHECK(!g.round_a && !g.round_b, "gemm: float32 operands reach cuBLASLt unrounded");
  const cudaDataType_t operand = g.bf16_operands ? CUDA_R_16BF : CUDA_R_32F;
  const cudaDataType_t result = g.bf16_result ? CUDA_R_16BF : CUDA_R_32F;
  LtObject<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy> desc;
  KILN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc.value, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set_attribute(desc.value, CUBLASLT_MATMUL_DESC_TRANSA,
                static_cast<std::int32_t>(op_of(g.trans_b)));
  set_attribute(desc.value, CUBLASLT_MATMUL_DESC_TRANSB,
                static_cast<std::int32_t>(op_of(g.trans_a)));
  if (g.bias != nullptr) {
    set_attribute(desc.value, CUBLASLT_MATMUL_DESC_EPILOGUE,
                  static_cast<std::uint32_t>(CUBLASLT_EPILOGUE_BIAS));
    set_attribute(desc.value, CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias);
    set_attribute(desc.value, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                  static_cast<std::int32_t>(result));
  }
  // Column-major: op(B)^T is the first operand (n x k), op(A)^T the second (k x m), D is n x m.
  using Layout = LtObject<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
  Layout a, b, d;
  KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a.value, operand, g.trans_b ? g.k : g.n,
                                               g.trans_b ? g.n : g.k, g.ldb));
  KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b.value, operand, g.trans_a ? g.m : g.k,
                                               g.trans_a ? g.k : g.m, g.lda));
  KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.value, result, g.n, g.m, g.ldc));
  LtObject<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy> preference;
  KILN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference.value));
  KILN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      preference.value, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kLtWorkspaceLimit,
      sizeof(kLtWorkspaceLimit)));
  cublasLtMatmulHeuristicResult_t chosen{};
  int found = 0;
  KILN_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle, desc.value, a.value, b.value, d.value,
                                                   d.value, preference.value, 1, &chosen, &found));
  KILN_CHECK(found == 1, "{}: cuBLASLt has no algorithm for this product (m {}, n {}, k {})", g.op,
             g.m, g.n, g.k);
  const Scratch<std::byte> workspace(allocator, static_cast<std::int64_t>(chosen.workspaceSize));
  const float alpha = static_cast<float>(g.alpha), beta = 0.0f;
  KILN_CUBLAS_CHECK(cublasLtMatmul(handle, desc.value, &alpha, g.b, a.value, g.a, b.value, &beta,
                                   g.c, d.value, g.c, d.value, &chosen.algo, workspace.get(),
                                   chosen.workspaceSize, stream));
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
  const DType c_dtype = args.bf16_result ? DType::bf16 : args.dtype;
  const TensorArg c{args.c, c_dtype, {args.batch, args.m, args.n}, {args.stride_c, args.ldc, 1}};
  // The bias broadcast over C's rows (a bias comes with batch 1).
  const TensorArg bias{
      const_cast<void*>(args.bias), c_dtype, {args.batch, args.m, args.n}, {0, 0, 1}};
  if (args.k == 0) {
    // op(A) op(B) is zero: C = beta * C (+ bias), without cuBLAS.
    if (args.bias != nullptr) {
      copy(c, bias);
    } else if (args.beta == 0.0) {
      fill(c, 0.0);
    } else {
      unary(UnaryOp::mul_scalar, c, c, args.beta);
    }
    return;
  }
  activate();
  GemmArgs g = args;
  // A float32 operand of a bf16 product (GemmArgs::round_a, round_b) is rounded into a bf16
  // copy first: cuBLAS reads bf16 itself, but cannot round. (Autocast's weights come as cached
  // bf16 copies instead: gemm_rounds_operands is false.)
  const Scratch<bf16> a(*allocator_, g.round_a ? matrix_elements(g, true) : 0);
  const Scratch<bf16> b(*allocator_, g.round_b ? matrix_elements(g, false) : 0);
  if (g.round_a) round_operand(*this, g, true, a.get());
  if (g.round_b) round_operand(*this, g, false, b.get());
  if (g.dtype == DType::f64 && g.bias != nullptr) {
    // cuBLASLt's epilogues are for the float32 path; float64 adds its bias the BLAS way.
    copy(c, bias);
    g.bias = nullptr, g.beta = 1.0;
    gemm_typed<double>(cublas_, g);
  } else if (g.bias != nullptr || g.bf16_result) {
    gemm_epilogue(cublas_lt_, *allocator_, stream_, g);
  } else if (g.bf16_operands) {
    gemm_bf16_operands(cublas_, g);
  } else {
    dispatch_floating(g.dtype, [&](auto tag) { gemm_typed<decltype(tag)>(cublas_, g); });
  }
}

}  // namespace kiln
