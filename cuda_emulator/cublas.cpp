// cuBLAS's GEMM calls on the CPU, column-major as cuBLAS is (see include/cublas_api.h):
// C = alpha op(A) op(B) + beta C for each matrix of a batch, each dot product summed in the
// element type in increasing k, with cuBLAS's argument checks (CUBLAS_STATUS_INVALID_VALUE, and
// CUBLAS_STATUS_NOT_INITIALIZED for a handle that is not one). C is not read when beta is 0 (a
// NaN there does not survive) and A and B are not read when alpha is 0 or k is 0, as in cuBLAS.
// Every matrix must lie in the used bytes of one live device allocation: a range beyond it
// stops with the call and the operand, where a GPU would fault or corrupt memory.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "cuda_emulator/include/cublas_api.h"
#include "cuda_emulator/memory.h"
#include "cuda_emulator/report.h"
#include "cuda_emulator/runtime.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
  cublasAtomicsMode_t atomics = CUBLAS_ATOMICS_NOT_ALLOWED;
};

namespace kiln::emulator {

namespace {

using Lock = std::lock_guard<std::recursive_mutex>;

std::set<cublasHandle_t>& handles() {
  static auto* live = new std::set<cublasHandle_t>;
  return *live;
}

bool valid(cublasHandle_t handle) { return handle != nullptr && handles().count(handle) == 1; }

bool transposes(cublasOperation_t op) { return op == CUBLAS_OP_T || op == CUBLAS_OP_C; }

bool known(cublasOperation_t op) {
  return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

// Stops unless the `rows` x `cols` column-major matrices with leading dim ld, `count` of them
// `stride` elements apart, lie in device memory in use.
template <typename T>
void check_operand(const char* call, const char* name, const T* p, int rows, int cols, int ld,
                   long long stride, int count) {
  if (rows == 0 || cols == 0 || count == 0) return;
  const long long last_matrix = stride * (count - 1);
  const long long first = std::min(0LL, last_matrix);
  const long long end = std::max(0LL, last_matrix) + static_cast<long long>(ld) * (cols - 1) + rows;
  const auto* begin = p + first;
  if (const auto problem =
          check_device_range(begin, static_cast<std::size_t>(end - first) * sizeof(T)))
    fatal(fmt::format("{}: {} ({} x {}, ld {}, {} matrices {} apart) is not in device memory: {}",
                      call, name, rows, cols, ld, count, stride, *problem));
}

// A bfloat16 element as cuBLAS stores it (CUDA_R_16BF): the upper 16 bits of a float32. The
// emulator has its own, as the real library does: it sits under kiln, not on top of core/.
struct Bfloat16 {
  std::uint16_t bits;
};

// An element of A or B as the arithmetic type T: bf16 widened exactly, float and double as they
// are.
template <typename T, typename Operand>
T operand_value(Operand x) {
  if constexpr (std::is_same_v<Operand, Bfloat16>) {
    const std::uint32_t bits = static_cast<std::uint32_t>(x.bits) << 16;
    float value;
    std::memcpy(&value, &bits, sizeof(value));
    return value;
  } else {
    return x;
  }
}

// A and B hold Operand, C and the arithmetic are T (cublasGemmEx's types: float32 or float64 for
// all, or bf16 A and B with float32 C and compute).
template <typename Operand, typename T>
cublasStatus_t gemm(const char* call, cublasHandle_t handle, cublasOperation_t transa,
                    cublasOperation_t transb, int m, int n, int k, const T* alpha, const Operand* A,
                    int lda, long long stride_a, const Operand* B, int ldb, long long stride_b,
                    const T* beta, T* C, int ldc, long long stride_c, int batch) {
  const Lock lock(runtime_lock());
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  const bool ta = transposes(transa), tb = transposes(transb);
  if (!known(transa) || !known(transb) || m < 0 || n < 0 || k < 0 || batch < 0 ||
      lda < std::max(1, ta ? k : m) || ldb < std::max(1, tb ? n : k) || ldc < std::max(1, m) ||
      alpha == nullptr || beta == nullptr)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0 || n == 0 || batch == 0) return CUBLAS_STATUS_SUCCESS;
  if (is_device_address(alpha) || is_device_address(beta))
    fatal(
        fmt::format("{}: alpha and beta are read on the host (CUBLAS_POINTER_MODE_HOST), but one "
                    "is a device pointer",
                    call));
  const T a_scale = *alpha, c_scale = *beta;
  const bool reads_ab = k > 0 && a_scale != T(0);
  if (reads_ab) {
    check_operand(call, "A", A, ta ? k : m, ta ? m : k, lda, stride_a, batch);
    check_operand(call, "B", B, tb ? n : k, tb ? k : n, ldb, stride_b, batch);
  }
  check_operand(call, "C", C, m, n, ldc, stride_c, batch);
  const DeviceAccess access;
  std::vector<T> a_rows(static_cast<std::size_t>(m) * k), b_column(k);
  for (int i = 0; i < batch; ++i) {
    const Operand* a = A + stride_a * i;
    const Operand* b = B + stride_b * i;
    T* c = C + stride_c * i;
    // op(A) row by row, so each dot product reads contiguous memory.
    if (reads_ab)
      for (int r = 0; r < m; ++r)
        for (int p = 0; p < k; ++p)
          a_rows[static_cast<std::size_t>(r) * k + p] = operand_value<T>(
              ta ? a[static_cast<long long>(r) * lda + p] : a[static_cast<long long>(p) * lda + r]);
    for (int col = 0; col < n; ++col) {
      if (reads_ab)
        for (int p = 0; p < k; ++p)
          b_column[p] = operand_value<T>(tb ? b[static_cast<long long>(p) * ldb + col]
                                            : b[static_cast<long long>(col) * ldb + p]);
      T* c_column = c + static_cast<long long>(col) * ldc;
      for (int r = 0; r < m; ++r) {
        T dot = T(0);
        if (reads_ab) {
          const T* row = a_rows.data() + static_cast<std::size_t>(r) * k;
          for (int p = 0; p < k; ++p) dot += row[p] * b_column[p];
        }
        const T product = a_scale * dot;
        c_column[r] = c_scale == T(0) ? product : product + c_scale * c_column[r];
      }
    }
  }
  (void)call;
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

}  // namespace kiln::emulator

using namespace kiln::emulator;

extern "C" {

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  const Lock lock(runtime_lock());
  *handle = new cublasContext;
  handles().insert(*handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  const Lock lock(runtime_lock());
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  handles().erase(handle);
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  const Lock lock(runtime_lock());
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!is_valid_stream(stream)) return CUBLAS_STATUS_INVALID_VALUE;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  const Lock lock(runtime_lock());
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode < CUBLAS_DEFAULT_MATH || mode > CUBLAS_TF32_TENSOR_OP_MATH)
    return CUBLAS_STATUS_INVALID_VALUE;
  handle->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetAtomicsMode(cublasHandle_t handle, cublasAtomicsMode_t mode) {
  const Lock lock(runtime_lock());
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode != CUBLAS_ATOMICS_NOT_ALLOWED && mode != CUBLAS_ATOMICS_ALLOWED)
    return CUBLAS_STATUS_INVALID_VALUE;
  handle->atomics = mode;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "the functionality requested is not supported";
  }
  return "unknown error";
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float* alpha,
                           const float* A, int lda, const float* B, int ldb, const float* beta,
                           float* C, int ldc) {
  return gemm("cublasSgemm", handle, transa, transb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C,
              ldc, 0, 1);
}

cublasStatus_t cublasDgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const double* alpha,
                           const double* A, int lda, const double* B, int ldb, const double* beta,
                           double* C, int ldc) {
  return gemm("cublasDgemm", handle, transa, transb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C,
              ldc, 0, 1);
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float* alpha, const float* A, int lda,
                                         long long strideA, const float* B, int ldb,
                                         long long strideB, const float* beta, float* C, int ldc,
                                         long long strideC, int batchCount) {
  return gemm("cublasSgemmStridedBatched", handle, transa, transb, m, n, k, alpha, A, lda, strideA,
              B, ldb, strideB, beta, C, ldc, strideC, batchCount);
}

cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const double* alpha, const double* A, int lda,
                                         long long strideA, const double* B, int ldb,
                                         long long strideB, const double* beta, double* C, int ldc,
                                         long long strideC, int batchCount) {
  return gemm("cublasDgemmStridedBatched", handle, transa, transb, m, n, k, alpha, A, lda, strideA,
              B, ldb, strideB, beta, C, ldc, strideC, batchCount);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void* alpha, const void* A, cudaDataType_t Atype,
                                          int lda, long long strideA, const void* B,
                                          cudaDataType_t Btype, int ldb, long long strideB,
                                          const void* beta, void* C, cudaDataType_t Ctype, int ldc,
                                          long long strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  constexpr const char* call = "cublasGemmStridedBatchedEx";
  (void)algo;  // a hint to cuBLAS; the emulator has one algorithm
  const auto types = [&](cudaDataType_t ab, cudaDataType_t c, cublasComputeType_t compute) {
    return Atype == ab && Btype == ab && Ctype == c && computeType == compute;
  };
  if (types(CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F))
    return gemm(call, handle, transa, transb, m, n, k, static_cast<const float*>(alpha),
                static_cast<const Bfloat16*>(A), lda, strideA, static_cast<const Bfloat16*>(B), ldb,
                strideB, static_cast<const float*>(beta), static_cast<float*>(C), ldc, strideC,
                batchCount);
  if (types(CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F))
    return gemm(call, handle, transa, transb, m, n, k, static_cast<const float*>(alpha),
                static_cast<const float*>(A), lda, strideA, static_cast<const float*>(B), ldb,
                strideB, static_cast<const float*>(beta), static_cast<float*>(C), ldc, strideC,
                batchCount);
  if (types(CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F))
    return gemm(call, handle, transa, transb, m, n, k, static_cast<const double*>(alpha),
                static_cast<const double*>(A), lda, strideA, static_cast<const double*>(B), ldb,
                strideB, static_cast<const double*>(beta), static_cast<double*>(C), ldc, strideC,
                batchCount);
  return CUBLAS_STATUS_NOT_SUPPORTED;  // a type combination the emulator does not compute
}

}  // extern "C"
