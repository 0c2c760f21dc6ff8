// The emulator's stand-ins for cuBLAS and CUB: column-major products (float32, float64, and bf16
// operands with float32 C in cublasGemmStridedBatchedEx) with cuBLAS's argument checks and status
// codes, C not read when beta is 0 (so fresh NaN memory does not leak into the
// result), A and B not read when alpha is 0; an operand beyond its allocation stops the call.
// SortPairs: the size query, a stable sort by the key bits asked for, inputs untouched, and too
// little temporary storage refused.
#include <cublas_v2.h>
#include <cub/device/device_radix_sort.cuh>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <numeric>
#include <vector>

#include "tests/cuda_emulator/death.h"
#include "tests/cuda_emulator/device_buffer.h"

using namespace kiln::testing;

namespace {

// A cuBLAS handle for a test.
struct Handle {
  Handle() { REQUIRE(cublasCreate(&handle) == CUBLAS_STATUS_SUCCESS); }
  ~Handle() { cublasDestroy(handle); }
  cublasHandle_t handle = nullptr;
};

}  // namespace

TEST_CASE("emulator/cublasSgemm is column-major and ignores C when beta is 0", "[emulator]") {
  const Handle h;
  // A (2 x 3) and B (3 x 2), column-major: A = [1 2 3; 4 5 6], B = [1 0; 0 1; 1 1].
  const DeviceBuffer<float> a(std::vector<float>{1, 4, 2, 5, 3, 6});
  const DeviceBuffer<float> b(std::vector<float>{1, 0, 1, 0, 1, 1});
  const DeviceBuffer<float> c(4);  // fresh: NaN
  const float one = 1.0f, zero = 0.0f;
  REQUIRE(cublasSgemm(h.handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, a.get(), 2, b.get(), 3,
                      &zero, c.get(), 2) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(c.to_host() == std::vector<float>{4, 10, 5, 11});  // A B = [4 5; 10 11]
  // C = 2 A^T... with beta 1: (B^T A^T)^T = A B again, added to C.
  const float two = 2.0f;
  REQUIRE(cublasSgemm(h.handle, CUBLAS_OP_T, CUBLAS_OP_T, 2, 2, 3, &two, b.get(), 3, a.get(), 2,
                      &one, c.get(), 2) == CUBLAS_STATUS_SUCCESS);
  // B^T A^T = (A B)^T = [4 10; 5 11]; C = 2 (A B)^T + C.
  REQUIRE(c.to_host() == std::vector<float>{4 + 8, 10 + 10, 5 + 20, 11 + 22});
  // alpha 0: C = beta C, and A and B are not read (null here).
  const float half = 0.5f;
  REQUIRE(cublasSgemm(h.handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &zero, nullptr, 2, nullptr, 3,
                      &half, c.get(), 2) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(c.to_host() == std::vector<float>{6, 10, 12.5f, 16.5f});
}

TEST_CASE("emulator/cublasDgemmStridedBatched multiplies each matrix of a batch", "[emulator]") {
  const Handle h;
  // Two 1 x 1 products sharing B (stride 0): C_i = A_i * B.
  const DeviceBuffer<double> a(std::vector<double>{2, 3}), b(std::vector<double>{5}), c(2);
  const double one = 1.0, zero = 0.0;
  REQUIRE(cublasDgemmStridedBatched(h.handle, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, a.get(), 1,
                                    1, b.get(), 1, 0, &zero, c.get(), 1, 1,
                                    2) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(c.to_host() == std::vector<double>{10, 15});
}

TEST_CASE("emulator/cublasGemmStridedBatchedEx: bf16 A and B, float32 C, and no other mixture",
          "[emulator]") {
  const Handle h;
  // bf16 bits: 1.5 = 0x3fc0, 2 = 0x4000, -0.25 = 0xbe80, 3 = 0x4040 (exact in bf16).
  const DeviceBuffer<std::uint16_t> a(std::vector<std::uint16_t>{0x3fc0, 0x4000});  // 1 x 2
  const DeviceBuffer<std::uint16_t> b(std::vector<std::uint16_t>{0xbe80, 0x4040});  // 2 x 1
  const DeviceBuffer<float> c(1);
  const float one = 1.0f, zero = 0.0f;
  const auto ex = [&](cudaDataType_t ab, cudaDataType_t c_type, cublasComputeType_t compute) {
    return cublasGemmStridedBatchedEx(h.handle, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 2, &one, a.get(),
                                      ab, 1, 2, b.get(), ab, 2, 2, &zero, c.get(), c_type, 1, 1, 1,
                                      compute, CUBLAS_GEMM_DEFAULT);
  };
  REQUIRE(ex(CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(c.to_host() == std::vector<float>{1.5f * -0.25f + 2.0f * 3.0f});
  REQUIRE(ex(CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F) == CUBLAS_STATUS_NOT_SUPPORTED);
  REQUIRE(ex(CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_64F) == CUBLAS_STATUS_NOT_SUPPORTED);
}

TEST_CASE("emulator/cuBLAS's argument checks return its status codes", "[emulator]") {
  const Handle h;
  const DeviceBuffer<float> a(16), b(16), c(16);
  const float one = 1.0f;
  const auto sgemm = [&](cublasOperation_t ta, int m, int n, int k, int lda, int ldb, int ldc) {
    return cublasSgemm(h.handle, ta, CUBLAS_OP_N, m, n, k, &one, a.get(), lda, b.get(), ldb, &one,
                       c.get(), ldc);
  };
  REQUIRE(sgemm(CUBLAS_OP_N, 4, 4, 4, 4, 4, 4) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(sgemm(CUBLAS_OP_N, 4, 4, 4, 3, 4, 4) == CUBLAS_STATUS_INVALID_VALUE);  // lda < m
  REQUIRE(sgemm(CUBLAS_OP_T, 4, 4, 2, 1, 4, 4) == CUBLAS_STATUS_INVALID_VALUE);  // lda < k
  REQUIRE(sgemm(CUBLAS_OP_N, 4, 4, 4, 4, 3, 4) == CUBLAS_STATUS_INVALID_VALUE);  // ldb < k
  REQUIRE(sgemm(CUBLAS_OP_N, 4, 4, 4, 4, 4, 3) == CUBLAS_STATUS_INVALID_VALUE);  // ldc < m
  REQUIRE(sgemm(CUBLAS_OP_N, -1, 4, 4, 4, 4, 4) == CUBLAS_STATUS_INVALID_VALUE);
  REQUIRE(sgemm(static_cast<cublasOperation_t>(7), 4, 4, 4, 4, 4, 4) ==
          CUBLAS_STATUS_INVALID_VALUE);
  REQUIRE(sgemm(CUBLAS_OP_N, 0, 4, 4, 4, 4, 4) == CUBLAS_STATUS_SUCCESS);  // nothing to do
  REQUIRE(cublasSgemmStridedBatched(h.handle, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, a.get(), 1,
                                    1, b.get(), 1, 1, &one, c.get(), 1, 1,
                                    -1) == CUBLAS_STATUS_INVALID_VALUE);
  cublasHandle_t gone = nullptr;
  REQUIRE(cublasCreate(&gone) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasDestroy(gone) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasSgemm(gone, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, a.get(), 1, b.get(), 1, &one,
                      c.get(), 1) == CUBLAS_STATUS_NOT_INITIALIZED);
  REQUIRE(cublasSetMathMode(h.handle, CUBLAS_DEFAULT_MATH) == CUBLAS_STATUS_SUCCESS);
  REQUIRE_THAT(cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE), Catch::Contains("invalid"));
}

TEST_CASE("death: cublasSgemm reads beyond an operand", "[.death]") {
  const Handle h;
  const DeviceBuffer<float> a(16), b(15), c(16);
  const float one = 1.0f;
  cublasSgemm(h.handle, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, a.get(), 4, b.get(), 4, &one,
              c.get(), 4);
}

TEST_CASE("emulator/a cuBLAS operand beyond its allocation stops the call", "[emulator]") {
  REQUIRE_DIES_WITH("death: cublasSgemm reads beyond an operand", std::vector<std::string>{},
                    "cublasSgemm: B (4 x 4, ld 4", "is not in device memory",
                    "outside the 60 bytes in use");
}

TEST_CASE("emulator/SortPairs sorts stably by the key bits asked for, inputs untouched",
          "[emulator]") {
  const int n = 5000;
  std::vector<std::uint64_t> keys(n);
  for (int i = 0; i < n; ++i)
    keys[i] = (static_cast<std::uint64_t>(i) * 2654435761u) % 600 | (std::uint64_t{1} << 40);
  std::vector<std::int32_t> values(n);
  std::iota(values.begin(), values.end(), 0);
  const DeviceBuffer<std::uint64_t> keys_in(keys), keys_out(n);
  const DeviceBuffer<std::int32_t> values_in(values), values_out(n);
  std::size_t temp_bytes = 0;
  REQUIRE(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys_in.get(), keys_out.get(),
                                          values_in.get(), values_out.get(), n, 0,
                                          10) == cudaSuccess);
  REQUIRE(temp_bytes > 0);
  {
    const DeviceBuffer<unsigned char> too_small(temp_bytes - 1);
    std::size_t small_bytes = temp_bytes - 1;
    REQUIRE(cub::DeviceRadixSort::SortPairs(too_small.get(), small_bytes, keys_in.get(),
                                            keys_out.get(), values_in.get(), values_out.get(), n, 0,
                                            10) == cudaErrorInvalidValue);
  }
  const DeviceBuffer<unsigned char> temp(temp_bytes);
  // Bits [0, 10) only: bit 40, set in every key, takes no part.
  REQUIRE(cub::DeviceRadixSort::SortPairs(temp.get(), temp_bytes, keys_in.get(), keys_out.get(),
                                          values_in.get(), values_out.get(), n, 0,
                                          10) == cudaSuccess);
  std::vector<std::int32_t> expected = values;
  std::stable_sort(expected.begin(), expected.end(),
                   [&](int x, int y) { return (keys[x] & 1023) < (keys[y] & 1023); });
  REQUIRE(values_out.to_host() == expected);
  std::vector<std::uint64_t> sorted_keys;
  for (int i : expected) sorted_keys.push_back(keys[i]);
  REQUIRE(keys_out.to_host() == sorted_keys);
  REQUIRE(keys_in.to_host() == keys);
  REQUIRE(values_in.to_host() == values);
}
