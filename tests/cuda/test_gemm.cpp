// cuBLAS GEMM behind the row-major GemmArgs: every transpose combination, padded leading dims,
// batches with real and zero strides, alpha and beta, against a float64 reference (relative
// error <= 1e-4 in float32); and matmul on GPU tensors against the CPU.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <vector>

#include "tests/cuda/cuda_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

struct GemmCase {
  bool trans_a, trans_b;
  std::int64_t m, n, k;
  std::int64_t batch = 1;
  bool share_b = false;  // batch stride 0 for B: every product uses the same B
  double alpha = 1.0, beta = 0.0;
  std::int64_t pad = 0;  // extra elements per row of every operand (leading dim > width)
};

// ||gpu - reference|| / ||reference|| for one case, float32 on the GPU, float64 on the host.
double gemm_error(const GemmCase& c) {
  Generator gen(17);
  // Row-major storage: op(A) (m x k) is A (m x k) or A^T with A stored (k x m).
  const std::int64_t a_rows = c.trans_a ? c.k : c.m, a_cols = c.trans_a ? c.m : c.k;
  const std::int64_t b_rows = c.trans_b ? c.n : c.k, b_cols = c.trans_b ? c.k : c.n;
  const std::int64_t lda = a_cols + c.pad, ldb = b_cols + c.pad, ldc = c.n + c.pad;
  const std::int64_t stride_a = a_rows * lda, stride_b = c.share_b ? 0 : b_rows * ldb;
  const std::int64_t stride_c = c.m * ldc;
  const std::int64_t b_count = c.share_b ? 1 : c.batch;
  const Tensor a = uniform({c.batch * stride_a}, -1.0, 1.0, {}, &gen);
  const Tensor b = uniform({b_count * b_rows * ldb}, -1.0, 1.0, {}, &gen);
  const Tensor c0 = uniform({c.batch * stride_c}, -1.0, 1.0, {}, &gen);
  const Tensor c_gpu = c0.to(Device::cuda());
  const Tensor a_gpu = a.to(Device::cuda()), b_gpu = b.to(Device::cuda());

  GemmArgs args;
  args.trans_a = c.trans_a;
  args.trans_b = c.trans_b;
  args.m = c.m;
  args.n = c.n;
  args.k = c.k;
  args.a = a_gpu.raw_data();
  args.lda = lda;
  args.b = b_gpu.raw_data();
  args.ldb = ldb;
  args.c = c_gpu.raw_data();
  args.ldc = ldc;
  args.alpha = c.alpha;
  args.beta = c.beta;
  args.batch = c.batch;
  args.stride_a = stride_a;
  args.stride_b = stride_b;
  args.stride_c = stride_c;
  gpu_backend().gemm(args);

  const std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
  const std::vector<double> cv = c0.to_vector<double>(), out = c_gpu.to_vector<double>();
  double diff = 0.0, norm = 0.0;
  for (std::int64_t i = 0; i < c.batch; ++i) {
    for (std::int64_t r = 0; r < c.m; ++r) {
      for (std::int64_t col = 0; col < ldc; ++col) {
        const std::int64_t at = i * stride_c + r * ldc + col;
        double expected = cv[at];  // padding columns stay untouched
        if (col < c.n) {
          double dot = 0.0;
          for (std::int64_t p = 0; p < c.k; ++p) {
            const double x = av[i * stride_a + (c.trans_a ? p * lda + r : r * lda + p)];
            const double y = bv[i * stride_b + (c.trans_b ? col * ldb + p : p * ldb + col)];
            dot += x * y;
          }
          expected = c.alpha * dot + c.beta * cv[at];
        }
        diff += (out[at] - expected) * (out[at] - expected);
        norm += expected * expected;
      }
    }
  }
  return std::sqrt(diff / norm);
}

}  // namespace

TEST_CASE("cuda/gemm matches a float64 reference for every transpose and shape", "[cuda][gemm]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  for (bool trans_a : {false, true}) {
    for (bool trans_b : {false, true}) {
      for (auto [m, n, k] : {std::array<std::int64_t, 3>{1, 1, 1},
                             {67, 45, 33},
                             {128, 256, 512},
                             {1, 300, 70},
                             {300, 1, 70}}) {
        INFO("trans_a " << trans_a << " trans_b " << trans_b << " m " << m << " n " << n << " k "
                        << k);
        REQUIRE(gemm_error({trans_a, trans_b, m, n, k}) <= 1e-4);
        REQUIRE(gemm_error({trans_a, trans_b, m, n, k, 1, false, 1.0, 0.0, 5}) <= 1e-4);
      }
    }
  }
}

TEST_CASE("cuda/gemm honours alpha, beta and batch strides (including 0)", "[cuda][gemm]") {
  if (!cuda_available_or_skip()) return;
  for (bool trans_a : {false, true}) {
    for (bool trans_b : {false, true}) {
      INFO("trans_a " << trans_a << " trans_b " << trans_b);
      REQUIRE(gemm_error({trans_a, trans_b, 33, 17, 29, 5}) <= 1e-4);
      REQUIRE(gemm_error({trans_a, trans_b, 33, 17, 29, 4, true}) <= 1e-4);
      REQUIRE(gemm_error({trans_a, trans_b, 33, 17, 29, 3, false, 0.5, 0.25, 3}) <= 1e-4);
      REQUIRE(gemm_error({trans_a, trans_b, 20, 30, 40, 1, false, -2.0, 1.0}) <= 1e-4);
    }
  }
}

TEST_CASE("cuda/gemm with k = 0 scales C by beta", "[cuda][gemm]") {
  if (!cuda_available_or_skip()) return;
  const Tensor c = full({2, 3, 4}, 2.0, {DType::f32, Device::cuda()});
  GemmArgs args;
  args.m = 3;
  args.n = 4;
  args.k = 0;
  args.lda = 1;
  args.ldb = 4;
  args.c = c.raw_data();
  args.ldc = 4;
  args.beta = 0.5;
  args.batch = 2;
  args.stride_c = 12;
  gpu_backend().gemm(args);
  REQUIRE_EXACT(c.to(Device::cpu()), full({2, 3, 4}, 1.0));
}

TEST_CASE("cuda/matmul on GPU tensors matches the CPU, batched and transposed", "[cuda][gemm]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  Generator gen(21);
  const Mirrored x = uniform_mirrored({5, 64, 48}, gen), w = uniform_mirrored({48, 32}, gen);
  REQUIRE(relative_error(matmul(x.gpu, w.gpu), matmul(x.cpu, w.cpu)) <= 1e-4);
  const Mirrored y = uniform_mirrored({5, 32, 64}, gen);
  REQUIRE(relative_error(matmul(x.gpu.transpose(-1, -2), y.gpu.transpose(-1, -2)),
                         matmul(x.cpu.transpose(-1, -2), y.cpu.transpose(-1, -2))) <= 1e-4);
  const Mirrored v = uniform_mirrored({48}, gen);
  REQUIRE(relative_error(matmul(x.gpu, v.gpu), matmul(x.cpu, v.cpu)) <= 1e-4);
}
