// cuBLASLt's matmul with a bias epilogue on the CPU (see include/cublasLt.h): the descriptors
// record what kiln sets, and cublasLtMatmul (and the heuristic query, which validates the same
// way) refuses loudly what the emulator does not compute: an epilogue other than DEFAULT and BIAS,
// an attribute it does not know, a type combination outside the table, a layout whose shape does
// not fit the product or whose ld is below its rows, a bias whose type is not D's. Sums are
// float32 in increasing k, as cublas.cpp sums them, then alpha, beta C and the bias are applied
// and D is rounded to its type (to nearest even for bf16), so that a product computed here and
// through cublasGemmStridedBatchedEx plus a separate bias and rounding pass agree bit for bit.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "cuda_emulator/include/cublasLt.h"
#include "cuda_emulator/memory.h"
#include "cuda_emulator/report.h"
#include "cuda_emulator/runtime.h"

struct cublasLtContext {};

struct cublasLtMatmulDescOpaque {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale = CUDA_R_32F;
  cublasOperation_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  int bias_type = -1;  // -1: D's type
};

struct cublasLtMatrixLayoutOpaque {
  cudaDataType_t type = CUDA_R_32F;
  std::uint64_t rows = 0, cols = 0;
  std::int64_t ld = 0;
};

struct cublasLtMatmulPreferenceOpaque {
  std::uint64_t max_workspace = 0;
};

namespace kiln::emulator {

namespace {

using Lock = std::lock_guard<std::recursive_mutex>;

std::set<cublasLtHandle_t>& lt_handles() {
  static auto* live = new std::set<cublasLtHandle_t>;
  return *live;
}

float widen(std::uint16_t bits) {
  const std::uint32_t word = static_cast<std::uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &word, sizeof(value));
  return value;
}

// float32 to bf16, to nearest even; a NaN stays a (quiet) NaN.
std::uint16_t round_bf16(float value) {
  std::uint32_t word;
  std::memcpy(&word, &value, sizeof(word));
  if ((word & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((word >> 16) | 0x40u);
  word += 0x7fffu + ((word >> 16) & 1u);
  return static_cast<std::uint16_t>(word >> 16);
}

float element(const void* p, cudaDataType_t type, std::int64_t i) {
  return type == CUDA_R_16BF ? widen(static_cast<const std::uint16_t*>(p)[i])
                             : static_cast<const float*>(p)[i];
}

std::size_t element_size(cudaDataType_t type) { return type == CUDA_R_16BF ? 2 : 4; }

bool transposes(cublasOperation_t op) { return op == CUBLAS_OP_T || op == CUBLAS_OP_C; }

// The product's sizes, or a status: NOT_SUPPORTED for what the emulator does not compute,
// INVALID_VALUE for layouts that do not describe op(A) (m x k), op(B) (k x n) and C, D (m x n).
struct Product {
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  std::int64_t m = 0, n = 0, k = 0;
};

Product validate(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                 cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d) {
  if (desc == nullptr || a == nullptr || b == nullptr || c == nullptr || d == nullptr)
    return {CUBLAS_STATUS_INVALID_VALUE};
  const bool types = desc->compute == CUBLAS_COMPUTE_32F && desc->scale == CUDA_R_32F &&
                     a->type == b->type && (a->type == CUDA_R_32F || a->type == CUDA_R_16BF) &&
                     c->type == d->type && (d->type == CUDA_R_32F || a->type == CUDA_R_16BF) &&
                     (d->type == CUDA_R_32F || d->type == CUDA_R_16BF);
  const bool epilogue = desc->epilogue == CUBLASLT_EPILOGUE_DEFAULT ||
                        (desc->epilogue == CUBLASLT_EPILOGUE_BIAS && desc->bias != nullptr);
  if (!types || !epilogue) return {CUBLAS_STATUS_NOT_SUPPORTED};
  if (desc->bias_type != -1 && desc->bias_type != d->type) return {CUBLAS_STATUS_INVALID_VALUE};
  const bool ta = transposes(desc->transa), tb = transposes(desc->transb);
  Product p;
  p.m = static_cast<std::int64_t>(d->rows), p.n = static_cast<std::int64_t>(d->cols);
  p.k = static_cast<std::int64_t>(ta ? a->rows : a->cols);
  const auto fits = [](cublasLtMatrixLayout_t l, std::int64_t rows, std::int64_t cols) {
    return static_cast<std::int64_t>(l->rows) == rows &&
           static_cast<std::int64_t>(l->cols) == cols && l->ld >= std::max<std::int64_t>(1, rows);
  };
  if (!fits(a, ta ? p.k : p.m, ta ? p.m : p.k) || !fits(b, tb ? p.n : p.k, tb ? p.k : p.n) ||
      !fits(c, p.m, p.n) || !fits(d, p.m, p.n))
    return {CUBLAS_STATUS_INVALID_VALUE};
  return p;
}

// Stops unless the column-major rows x cols matrix at p lies in device memory in use.
void check_matrix(const char* name, const void* p, cublasLtMatrixLayout_t l) {
  if (l->rows == 0 || l->cols == 0) return;
  const std::size_t bytes =
      (static_cast<std::size_t>(l->ld) * (l->cols - 1) + l->rows) * element_size(l->type);
  if (const auto problem = check_device_range(p, bytes))
    fatal(fmt::format("cublasLtMatmul: {} ({} x {}, ld {}) is not in device memory: {}", name,
                      l->rows, l->cols, l->ld, *problem));
}

}  // namespace

}  // namespace kiln::emulator

using namespace kiln::emulator;

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  const Lock lock(runtime_lock());
  *handle = new cublasLtContext;
  lt_handles().insert(*handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  const Lock lock(runtime_lock());
  if (lt_handles().erase(handle) == 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *desc = new cublasLtMatmulDescOpaque{.compute = compute, .scale = scale};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attribute,
                                              const void* buffer, std::size_t bytes) {
  if (desc == nullptr || buffer == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  const auto read = [&](auto& field, std::size_t size) {
    if (bytes != size) return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&field, buffer, size);
    return CUBLAS_STATUS_SUCCESS;
  };
  switch (attribute) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
      return read(desc->transa, sizeof(std::int32_t));
    case CUBLASLT_MATMUL_DESC_TRANSB:
      return read(desc->transb, sizeof(std::int32_t));
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
      return read(desc->epilogue, sizeof(std::uint32_t));
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      return read(desc->bias, sizeof(const void*));
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
      return read(desc->bias_type, sizeof(std::int32_t));
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;  // the GELU's aux matrix, and anything else
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type,
                                          std::uint64_t rows, std::uint64_t cols, std::int64_t ld) {
  if (layout == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *layout = new cublasLtMatrixLayoutOpaque{.type = type, .rows = rows, .cols = cols, .ld = ld};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* preference) {
  if (preference == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *preference = new cublasLtMatmulPreferenceOpaque;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t preference) {
  delete preference;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t preference,
                                                    cublasLtMatmulPreferenceAttributes_t attribute,
                                                    const void* buffer, std::size_t bytes) {
  if (preference == nullptr || buffer == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (attribute != CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (bytes != sizeof(std::uint64_t)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&preference->max_workspace, buffer, bytes);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requested, cublasLtMatmulHeuristicResult_t results[],
    int* returned) {
  const Lock lock(runtime_lock());
  if (lt_handles().count(handle) == 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (preference == nullptr || requested < 1 || results == nullptr || returned == nullptr)
    return CUBLAS_STATUS_INVALID_VALUE;
  *returned = 0;
  const Product p = validate(desc, Adesc, Bdesc, Cdesc, Ddesc);
  if (p.status != CUBLAS_STATUS_SUCCESS) return p.status;
  results[0] = {};
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t Adesc, const void* B,
                              cublasLtMatrixLayout_t Bdesc, const void* beta, const void* C,
                              cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                              const cublasLtMatmulAlgo_t* algo, void* workspace,
                              std::size_t workspace_bytes, cudaStream_t stream) {
  (void)algo, (void)workspace, (void)workspace_bytes;  // one algorithm, no workspace
  const Lock lock(runtime_lock());
  if (lt_handles().count(handle) == 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (alpha == nullptr || beta == nullptr || !is_valid_stream(stream))
    return CUBLAS_STATUS_INVALID_VALUE;
  const Product p = validate(desc, Adesc, Bdesc, Cdesc, Ddesc);
  if (p.status != CUBLAS_STATUS_SUCCESS) return p.status;
  if (p.m == 0 || p.n == 0) return CUBLAS_STATUS_SUCCESS;
  if (is_device_address(alpha) || is_device_address(beta))
    fatal("cublasLtMatmul: alpha and beta are read on the host, but one is a device pointer");
  const float a_scale = *static_cast<const float*>(alpha);
  const float c_scale = *static_cast<const float*>(beta);
  const bool reads_ab = p.k > 0 && a_scale != 0.0f;
  const bool ta = transposes(desc->transa), tb = transposes(desc->transb);
  const bool bias = desc->epilogue == CUBLASLT_EPILOGUE_BIAS;
  if (reads_ab) check_matrix("A", A, Adesc), check_matrix("B", B, Bdesc);
  if (c_scale != 0.0f) check_matrix("C", C, Cdesc);
  check_matrix("D", D, Ddesc);
  if (bias)
    if (const auto problem = check_device_range(
            desc->bias, static_cast<std::size_t>(p.m) * element_size(Ddesc->type)))
      fatal(fmt::format("cublasLtMatmul: the bias ({} values) is not in device memory: {}", p.m,
                        *problem));
  const DeviceAccess access;
  const cudaDataType_t ab = Adesc->type, out = Ddesc->type;
  std::vector<float> a_rows(static_cast<std::size_t>(p.m * p.k)), b_column(p.k);
  if (reads_ab)
    for (std::int64_t r = 0; r < p.m; ++r)
      for (std::int64_t q = 0; q < p.k; ++q)
        a_rows[r * p.k + q] = element(A, ab, ta ? r * Adesc->ld + q : q * Adesc->ld + r);
  for (std::int64_t col = 0; col < p.n; ++col) {
    if (reads_ab)
      for (std::int64_t q = 0; q < p.k; ++q)
        b_column[q] = element(B, ab, tb ? q * Bdesc->ld + col : col * Bdesc->ld + q);
    for (std::int64_t r = 0; r < p.m; ++r) {
      float dot = 0.0f;
      if (reads_ab)
        for (std::int64_t q = 0; q < p.k; ++q) dot += a_rows[r * p.k + q] * b_column[q];
      float value = a_scale * dot;
      if (c_scale != 0.0f) value += c_scale * element(C, Cdesc->type, col * Cdesc->ld + r);
      if (bias) value += element(desc->bias, out, r);
      const std::int64_t at = col * Ddesc->ld + r;
      if (out == CUDA_R_16BF) {
        static_cast<std::uint16_t*>(D)[at] = round_bf16(value);
      } else {
        static_cast<float*>(D)[at] = value;
      }
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
