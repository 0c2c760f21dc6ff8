// linear's bias fused into the GEMM's epilogue (cuBLASLt, core/cuda/gemm.cpp) and autocast's cast
// cache of bf16 weights (core/autocast.h), on the device: the fused product against the unfused
// one computed from the same operands (bit for bit where the math is the same, the bound where a
// bf16 bias replaces the float32 one), the emulator's cuBLASLt refusing what it does not compute,
// and one bf16 copy per weight per step, never a stale one.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "optim/sgd.h"
#include "tests/cuda/cuda_testing.h"

#if defined(KILN_CUDA_EMULATE)
#include <cublasLt.h>
#endif

using namespace kiln;
using namespace kiln::testing;

namespace {

struct LinearGrads {
  Tensor y, dx, dw, db;
};

// linear(x, w, b) on the device, under autocast or not, and its gradients for dy = r (the loss
// sum(y r) in float32).
LinearGrads fused_linear(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& r,
                         Precision precision) {
  const auto leaf = [](const Tensor& t) { return t.to(Device::cuda()).detach().requires_grad_(); };
  const Tensor xd = leaf(x), wd = leaf(w), bd = leaf(b);
  Tensor y;
  {
    const Autocast scope(precision);
    y = linear(xd, wd, bd);
  }
  sum(y.to(DType::f32) * r.to(Device::cuda())).backward();
  return {y.detach(), xd.grad(), wd.grad(), bd.grad()};
}

}  // namespace

TEST_CASE("cuda/linear's fused bias equals the unfused product bit for bit in float32",
          "[cuda][gemm][linear]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  Generator gen(61);
  // 13 x 37 by 37 -> 19: sizes no tile divides.
  const Tensor x = randn({13, 37}, {}, &gen), w = randn({19, 37}, {}, &gen);
  const Tensor b = randn({19}, {}, &gen), r = randn({13, 19}, {}, &gen);
  const LinearGrads fused = fused_linear(x, w, b, r, Precision::f32);
  // Unfused: the product (cuBLAS's sums in the same order), then the bias in its own pass, and
  // the gradients written out.
  const Tensor xg = x.to(Device::cuda()), wg = w.to(Device::cuda()), rg = r.to(Device::cuda());
  REQUIRE_EXACT(fused.y, matmul(xg, wg.t()) + b.to(Device::cuda()));
  REQUIRE_EXACT(fused.dx, matmul(rg, wg));
  REQUIRE_EXACT(fused.dw, matmul(rg.t(), xg));
  REQUIRE_EXACT(fused.db, sum(rg, {0}));
}

TEST_CASE("cuda/gemm's epilogue (bias, bf16 result) matches the CPU backend's bit for bit",
          "[cuda][gemm][linear]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  Generator gen(60);
  // Small integers: every product and sum is exact in float32, whatever order a backend sums in,
  // so the two backends' epilogues must agree to the bit; the sums (up to 8 * 8 * 40 = 2560,
  // beyond bf16's 256 integers) still round when stored as bf16.
  const auto integers = [&](const Shape& shape) {
    return uniform(shape, -9.0, 9.0, {}, &gen).to(DType::i64).to(DType::f32);
  };
  const Tensor a = integers({7, 40}).to(DType::bf16), b = integers({40, 12}).to(DType::bf16);
  const Tensor bias32 = integers({12}) * 0.5, bias16 = bias32.to(DType::bf16);
  for (const bool bf16_result : {false, true}) {
    INFO("bf16_result " << bf16_result);
    const Tensor& bias = bf16_result ? bias16 : bias32;
    const auto run = [&](Device device) {
      const Tensor ad = a.to(device), bd = b.to(device), biasd = bias.to(device);
      Tensor c = empty({7, 12}, {bf16_result ? DType::bf16 : DType::f32, device});
      GemmArgs g;
      g.bf16_operands = true;
      g.m = 7, g.n = 12, g.k = 40;
      g.a = ad.raw_data(), g.lda = 40, g.b = bd.raw_data(), g.ldb = 12;
      g.c = c.raw_data(), g.ldc = 12;
      g.bias = biasd.raw_data(), g.bf16_result = bf16_result;
      backend_for(device).gemm(g);
      return c.to(Device::cpu());
    };
    const Tensor expected = (matmul(a.to(DType::f32), b.to(DType::f32)) + bias.to(DType::f32))
                                .to(bf16_result ? DType::bf16 : DType::f32);
    REQUIRE_EXACT(run(Device::cpu()), expected);
    REQUIRE_EXACT(run(Device::cuda()), expected);
  }
}

TEST_CASE("cuda/linear under autocast writes bf16 with a bf16 bias, within the stated bound",
          "[cuda][gemm][linear][bf16]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  Generator gen(62);
  const Tensor x = randn({11, 40}, {}, &gen), w = randn({24, 40}, {}, &gen) * 0.3;
  const Tensor b = randn({24}, {}, &gen), r = randn({11, 24}, {}, &gen);
  const LinearGrads fused = fused_linear(x, w, b, r, Precision::bf16);
  REQUIRE(fused.y.dtype() == DType::bf16);
  const Tensor xb = x.to(Device::cuda()).to(DType::bf16), wb = w.to(Device::cuda()).to(DType::bf16);
  const Tensor sums = matmul(xb, wb.t());  // float32 sums of the exact bf16 products
  const Tensor bg = b.to(Device::cuda());
  // The same math unfused: the float32 sums plus the bias rounded to bf16, rounded once.
  REQUIRE_EXACT(fused.y, (sums + bg.to(DType::bf16).to(DType::f32)).to(DType::bf16));
  // Against a float32 bias (the CPU's math): with u = 2^-8, |y - y32| <= u |b| (the bias's
  // rounding) + u |s + b| + u |s + b'| (the two results' roundings) <= u (1 + u) |b| + 2.01 u |s +
  // b|.
  const auto exact = (sums + bg).to(Device::cpu()).to_vector<float>();
  const auto float32_bias = (sums + bg).to(DType::bf16).to(DType::f32).to_vector<float>();
  const auto y = fused.y.to(DType::f32).to_vector<float>();
  const auto bias = b.to_vector<float>();
  constexpr double u = 1.0 / 256;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double bound =
        u * (1 + u) * std::fabs(bias[i % bias.size()]) + 2.01 * u * std::fabs(exact[i]);
    INFO("element " << i << ": " << y[i] << " against " << float32_bias[i]);
    REQUIRE(std::fabs(static_cast<double>(y[i]) - float32_bias[i]) <= bound);
  }
  // The gradients are the unfused ones bit for bit: dy read in bf16 against the weight's bf16
  // copy and the saved bf16 x; db sums the float32 dy.
  const Tensor rg = r.to(Device::cuda()), rb = rg.to(DType::bf16);
  REQUIRE_EXACT(fused.dx, matmul(rb, wb));
  REQUIRE_EXACT(fused.dw, matmul(rb.t(), xb));
  REQUIRE_EXACT(fused.db, sum(rg, {0}));
  // k = 0: the bias alone, rounded.
  const Tensor empty_x = zeros({3, 0}, {DType::f32, Device::cuda()});
  const Tensor empty_w = zeros({24, 0}, {DType::f32, Device::cuda()});
  const Autocast scope(Precision::bf16);
  const Tensor bias_only = linear(empty_x, empty_w, bg);
  REQUIRE_EXACT(bias_only.select(0, 1), bg.to(DType::bf16));
}

TEST_CASE("cuda/autocast makes one bf16 copy per weight per step, never a stale one",
          "[cuda][linear][bf16][autocast]") {
  if (!cuda_available_or_skip()) return;
  Generator gen(63);
  const auto leaf = [](const Tensor& t) { return t.to(Device::cuda()).detach().requires_grad_(); };
  const Tensor w1 = leaf(randn({16, 8}, {}, &gen)), b1 = leaf(randn({16}, {}, &gen));
  const Tensor w2 = leaf(randn({8, 16}, {}, &gen));
  const Tensor x = randn({5, 8}, {}, &gen).to(Device::cuda());
  Sgd optimizer({{"w1", w1}, {"b1", b1}, {"w2", w2}}, {.lr = 0.1});
  // Two blocks sharing their weights, as a step of a weight-tied model reads them.
  const auto forward = [&] {
    Tensor h = x;
    for (int block = 0; block < 2; ++block) h = linear(relu(linear(h, w1, b1)), w2);
    return sum(h.to(DType::f32)) * 0.01;
  };
  for (int step = 0; step < 2; ++step) {
    const std::int64_t before = autocast_weight_casts();
    Tensor loss;
    {
      const Autocast scope(Precision::bf16);
      loss = forward();
    }
    loss.backward();  // replays the products on the copies the forward saved: no cast
    CHECK(autocast_weight_casts() - before == 3);  // w1, b1, w2: once each
    optimizer.step();
    optimizer.zero_grad();
  }

  // Two accumulation windows of one step, each forward in its own scope, as lm::Trainer runs
  // them: an AutocastWeightCache over the step keeps the copies between them; once it ends, the
  // cache is emptied and the next step casts again.
  for (int step = 0; step < 2; ++step) {
    const std::int64_t before = autocast_weight_casts();
    {
      const AutocastWeightCache step_casts;
      for (int window = 0; window < 2; ++window) {
        Tensor loss;
        {
          const Autocast scope(Precision::bf16);
          loss = forward();
        }
        loss.backward();
      }
    }
    CHECK(autocast_weight_casts() - before == 3);  // not 6: once per step
    optimizer.zero_grad();
  }

  // An optimizer step inside one autocast scope: the cached copies are stale (the weights'
  // versions moved) and the next product casts the new values.
  Tensor before_step, after_step;
  {
    const Autocast scope(Precision::bf16);
    before_step = linear(x, w1, b1);
    sum(before_step.to(DType::f32)).backward();
    const std::int64_t casts = autocast_weight_casts();
    optimizer.step();
    after_step = linear(x, w1, b1);
    CHECK(autocast_weight_casts() - casts == 2);
  }
  const Tensor fresh = (matmul(x.to(DType::bf16), w1.detach().to(DType::bf16).t()) +
                        b1.detach().to(DType::bf16).to(DType::f32))
                           .to(DType::bf16);
  REQUIRE_EXACT(after_step, fresh);
  REQUIRE_FALSE(compare_exact(after_step, before_step).ok);
}

TEST_CASE("cpu/linear under autocast makes no bf16 copy of its weight", "[linear][autocast]") {
  // The CPU's GEMM rounds the float32 weight as it reads it: autocast's cache stays unused.
  Generator gen(64);
  const Tensor x = randn({4, 8}, {}, &gen), w = randn({6, 8}, {}, &gen), b = randn({6}, {}, &gen);
  const std::int64_t before = autocast_weight_casts();
  const Autocast scope(Precision::bf16);
  const Tensor y = linear(x, w, b);
  CHECK(y.dtype() == DType::bf16);
  CHECK(autocast_weight_casts() == before);
}

#if defined(KILN_CUDA_EMULATE)
TEST_CASE("cuda/the emulator's cuBLASLt computes the bias epilogue and refuses what it does not",
          "[cuda][gemm][emulator]") {
  if (!cuda_available_or_skip()) return;
  cublasLtHandle_t handle = nullptr;
  REQUIRE(cublasLtCreate(&handle) == CUBLAS_STATUS_SUCCESS);
  // Column-major D (2 x 3) = A (2 x 2) B (2 x 3) + bias (2), in float32 and bf16.
  const Tensor a = from_vector<float>({1, 2, 3, 4}, {4}).to(Device::cuda());  // [[1 3] [2 4]]
  const Tensor b = from_vector<float>({1, 0, 0, 1, 1, 1}, {6}).to(Device::cuda());
  const Tensor bias = from_vector<float>({0.5f, -1.0f}, {2}).to(Device::cuda());
  const Tensor d = empty({6}, {DType::f32, Device::cuda()});
  cublasLtMatmulDesc_t desc = nullptr;
  REQUIRE(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
  const auto epilogue = [&](cublasLtEpilogue_t e) {
    const auto value = static_cast<std::uint32_t>(e);
    return cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &value,
                                          sizeof(value));
  };
  const void* bias_pointer = bias.raw_data();
  REQUIRE(epilogue(CUBLASLT_EPILOGUE_BIAS) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_pointer,
                                         sizeof(bias_pointer)) == CUBLAS_STATUS_SUCCESS);
  const auto layout = [](cudaDataType_t type, std::uint64_t rows, std::uint64_t cols,
                         std::int64_t ld) {
    cublasLtMatrixLayout_t l = nullptr;
    REQUIRE(cublasLtMatrixLayoutCreate(&l, type, rows, cols, ld) == CUBLAS_STATUS_SUCCESS);
    return l;
  };
  cublasLtMatrixLayout_t la = layout(CUDA_R_32F, 2, 2, 2), lb = layout(CUDA_R_32F, 2, 3, 2);
  cublasLtMatrixLayout_t ld = layout(CUDA_R_32F, 2, 3, 2);
  const float one = 1.0f, zero = 0.0f;
  const auto run = [&](cublasLtMatrixLayout_t a_layout, cublasLtMatrixLayout_t d_layout) {
    return cublasLtMatmul(handle, desc, &one, a.raw_data(), a_layout, b.raw_data(), lb, &zero,
                          d.raw_data(), d_layout, d.raw_data(), d_layout, nullptr, nullptr, 0,
                          gpu_backend().stream());
  };
  REQUIRE(run(la, ld) == CUBLAS_STATUS_SUCCESS);
  // Columns of B pick A's columns: [1 2], [3 4], [4 6]; plus the bias per row.
  REQUIRE_EXACT(d.to(Device::cpu()), from_vector<float>({1.5f, 1, 3.5f, 3, 4.5f, 5}, {6}));

  // A layout that does not fit the product, an ld below its rows, a bias not in D's type.
  cublasLtMatrixLayout_t wrong_shape = layout(CUDA_R_32F, 3, 2, 3);
  cublasLtMatrixLayout_t short_ld = layout(CUDA_R_32F, 2, 3, 1);
  CHECK(run(wrong_shape, ld) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(run(la, short_ld) == CUBLAS_STATUS_INVALID_VALUE);
  const auto bf16_type = static_cast<std::int32_t>(CUDA_R_16BF);
  REQUIRE(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bf16_type,
                                         sizeof(bf16_type)) == CUBLAS_STATUS_SUCCESS);
  CHECK(run(la, ld) == CUBLAS_STATUS_INVALID_VALUE);
  // Epilogues it does not compute, the GELU's aux matrix, a float64 product.
  REQUIRE(epilogue(CUBLASLT_EPILOGUE_GELU_BIAS) == CUBLAS_STATUS_SUCCESS);
  CHECK(run(la, ld) == CUBLAS_STATUS_NOT_SUPPORTED);
  void* aux = d.raw_data();
  CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
                                       sizeof(aux)) == CUBLAS_STATUS_NOT_SUPPORTED);
  cublasLtMatrixLayout_t double_a = layout(CUDA_R_64F, 2, 2, 2);
  REQUIRE(epilogue(CUBLASLT_EPILOGUE_DEFAULT) == CUBLAS_STATUS_SUCCESS);
  CHECK(run(double_a, ld) == CUBLAS_STATUS_NOT_SUPPORTED);
  for (cublasLtMatrixLayout_t l : {la, lb, ld, wrong_shape, short_ld, double_a})
    cublasLtMatrixLayoutDestroy(l);
  cublasLtMatmulDescDestroy(desc);
  REQUIRE(cublasLtDestroy(handle) == CUBLAS_STATUS_SUCCESS);
}
#endif
