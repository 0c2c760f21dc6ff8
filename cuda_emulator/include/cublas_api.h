// kiln's CUDA emulator: the cuBLAS calls kiln makes, computed on the CPU (cuda_emulator/
// cublas.cpp). Column-major, with cuBLAS's argument checks and status codes; C is not read when
// beta is 0. The math mode is recorded but TF32 is not emulated: products are plain FP32/FP64.
// cublasGemmStridedBatchedEx takes float32 or float64 throughout, or bf16 A and B with float32
// C and compute: each bf16 product is exact in float32, so only the order of the sums (here
// increasing k) differs from a GPU's tensor cores.
#pragma once

#include "cuda_emulator/include/cuda_runtime_api.h"
#include "cuda_emulator/include/library_types.h"

typedef struct cublasContext* cublasHandle_t;

enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};

enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 };

enum cublasMath_t {
  CUBLAS_DEFAULT_MATH = 0,
  CUBLAS_TENSOR_OP_MATH = 1,
  CUBLAS_PEDANTIC_MATH = 2,
  CUBLAS_TF32_TENSOR_OP_MATH = 3,
};

enum cublasAtomicsMode_t { CUBLAS_ATOMICS_NOT_ALLOWED = 0, CUBLAS_ATOMICS_ALLOWED = 1 };

enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_64F = 70 };

enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1, CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99 };

extern "C" {

cublasStatus_t cublasCreate(cublasHandle_t* handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
cublasStatus_t cublasSetAtomicsMode(cublasHandle_t handle, cublasAtomicsMode_t mode);
const char* cublasGetStatusString(cublasStatus_t status);
const char* cublasGetStatusName(cublasStatus_t status);

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float* alpha,
                           const float* A, int lda, const float* B, int ldb, const float* beta,
                           float* C, int ldc);
cublasStatus_t cublasDgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const double* alpha,
                           const double* A, int lda, const double* B, int ldb, const double* beta,
                           double* C, int ldc);
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float* alpha, const float* A, int lda,
                                         long long strideA, const float* B, int ldb,
                                         long long strideB, const float* beta, float* C, int ldc,
                                         long long strideC, int batchCount);
cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const double* alpha, const double* A, int lda,
                                         long long strideA, const double* B, int ldb,
                                         long long strideB, const double* beta, double* C, int ldc,
                                         long long strideC, int batchCount);
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void* alpha, const void* A, cudaDataType_t Atype,
                                          int lda, long long strideA, const void* B,
                                          cudaDataType_t Btype, int ldb, long long strideB,
                                          const void* beta, void* C, cudaDataType_t Ctype, int ldc,
                                          long long strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo);

}  // extern "C"
