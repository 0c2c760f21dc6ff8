// kiln's own packed GEMM (core/cpu/packed_gemm.h) against a float64 product: every transpose,
// tiles cut by the edges of C, k in one block and in several, alpha and beta, leading dimensions
// wider than the rows; the same bits for any thread count; and the backend's GEMM takes it for
// the shapes the rule names.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "core/cpu/blas_library.h"
#include "core/cpu/packed_gemm.h"
#include "core/kiln.h"
#include "tests/core/gemm_operands.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

std::vector<float> packed(const GemmProduct& p, const GemmOperands& o) {
  std::vector<float> c = o.c;
  GemmArgs g;
  g.m = p.m, g.n = p.n, g.k = p.k;
  g.trans_a = p.trans_a, g.trans_b = p.trans_b;
  g.a = o.a.data(), g.lda = o.lda;
  g.b = o.b.data(), g.ldb = o.ldb;
  g.c = c.data(), g.ldc = o.ldc;
  g.alpha = p.alpha, g.beta = p.beta;
  packed_gemm(g);
  return c;
}

void check_against_float64(const GemmProduct& p, std::int64_t pad) {
  INFO("m " << p.m << " n " << p.n << " k " << p.k << " trans_a " << p.trans_a << " trans_b "
            << p.trans_b << " alpha " << p.alpha << " beta " << p.beta << " pad " << pad);
  const GemmOperands o =
      gemm_operands(p, pad, static_cast<std::uint64_t>(p.m * 131 + p.n * 7 + p.k));
  const std::vector<float> got = packed(p, o);
  for (std::int64_t i = 0; i < p.m; ++i)
    for (std::int64_t j = 0; j < p.n; ++j) {
      double sum = 0, magnitude = 0;
      for (std::int64_t q = 0; q < p.k; ++q) {
        const double x = o.a[p.trans_a ? q * o.lda + i : i * o.lda + q];
        const double y = o.b[p.trans_b ? j * o.ldb + q : q * o.ldb + j];
        sum += x * y;
        magnitude += std::abs(x * y);
      }
      const double c0 = p.beta == 0.0f ? 0.0 : o.c[i * o.ldc + j];
      const double want = p.alpha * sum + p.beta * c0;
      // float32 rounding of k products and sums, relative to the sum of their magnitudes.
      const double tolerance = 1e-6 * (1 + p.k) * (magnitude + std::abs(c0)) + 1e-6;
      INFO("C[" << i << "][" << j << "]");
      REQUIRE(std::abs(got[i * o.ldc + j] - want) <= tolerance);
    }
  // The padding after each row of C is left as it was.
  for (std::int64_t i = 0; i < p.m; ++i)
    for (std::int64_t j = p.n; j < o.ldc; ++j) {
      const float before = o.c[i * o.ldc + j], after = got[i * o.ldc + j];
      REQUIRE((after == before || (std::isnan(after) && std::isnan(before))));
    }
}

bool skip_unbuilt() {
  if (packed_gemm_built()) return false;
  std::puts("skipped: the packed GEMM is not built for this CPU (no AVX2 and FMA)");
  return true;
}

}  // namespace

TEST_CASE("the packed GEMM matches a float64 product for every transpose and edge", "[gemm]") {
  if (skip_unbuilt()) return;
  // Tiles cut by the bottom and right edges (6 and 12 rows, 16 and 32 columns a tile), k in one
  // block (<= 512) and in two or three, row and column blocks (240 rows, 512 columns) crossed.
  const std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> shapes = {
      {1, 1, 1},     {5, 7, 3},     {6, 16, 8},     {12, 32, 17},  {13, 37, 9},
      {25, 70, 513}, {7, 33, 1030}, {250, 600, 24}, {61, 1100, 40}};
  for (const auto& [m, n, k] : shapes)
    for (const bool trans_a : {false, true})
      for (const bool trans_b : {false, true})
        check_against_float64({m, n, k, trans_a, trans_b, 1.0f, 0.0f}, 0);
  // alpha and beta, with rows longer than the matrices.
  for (const auto& [alpha, beta] :
       {std::pair{0.5f, 0.0f}, std::pair{1.0f, 1.0f}, std::pair{-2.0f, -0.75f}})
    for (const bool trans_a : {false, true})
      for (const bool trans_b : {false, true}) {
        check_against_float64({29, 45, 21, trans_a, trans_b, alpha, beta}, 3);
        check_against_float64({13, 40, 600, trans_a, trans_b, alpha, beta}, 5);
      }
}

TEST_CASE("the packed GEMM with k 0 scales C by beta", "[gemm]") {
  if (skip_unbuilt()) return;
  std::vector<float> c = {1, 2, 3, 4, 5, 6};
  GemmArgs g;
  g.m = 2, g.n = 3, g.k = 0, g.lda = 1, g.ldb = 3, g.ldc = 3, g.beta = 0.5;  // BLAS's least lds
  g.c = c.data();
  packed_gemm(g);
  CHECK(c == std::vector<float>{0.5f, 1, 1.5f, 2, 2.5f, 3});
  g.beta = 0;
  std::fill(c.begin(), c.end(), std::numeric_limits<float>::quiet_NaN());
  packed_gemm(g);
  CHECK(c == std::vector<float>(6, 0.0f));
}

TEST_CASE("the packed GEMM gives the same bits for 1, 2 and 3 threads", "[gemm][determinism]") {
  if (skip_unbuilt()) return;
  // Wide enough for several column tasks per thread, and k in two blocks.
  const GemmProduct p{250, 5000, 700, false, true, 1.0f, 0.0f};
  const GemmOperands o = gemm_operands(p, 0, 11);
  set_num_threads(3);
  const std::vector<float> reference = packed(p, o);
  for (const int threads : {1, 2, 3}) {
    INFO(threads << " threads");
    set_num_threads(threads);
    REQUIRE(packed(p, o) == reference);
  }
  set_num_threads(2);
}

TEST_CASE("the backend's GEMM takes the packed kernel for the shapes its rule names", "[gemm]") {
  if (skip_unbuilt()) return;
  INFO("environment: " << environment_summary());
  // The rule: k in one block, C wide and tall (the logits); never a narrow or a deep product.
  CHECK_FALSE(packed_gemm_preferred(2048, 512, 33278));
  CHECK_FALSE(packed_gemm_preferred(33278, 512, 2048));
  CHECK_FALSE(packed_gemm_preferred(2048, 2048, 512));
  CHECK(packed_gemm_preferred(2048, 33278, 512));
  CHECK(packed_gemm_preferred(2048, 33278, 256));
  CHECK(packed_gemm_preferred(256, 33278, 512));  // an evaluation block of rows
  // matmul gives the packed kernel's bits exactly when the rule takes the shape.
  Generator gen(3);
  const Tensor h = uniform({256, 64}, -1, 1, {}, &gen), e = uniform({4096, 64}, -1, 1, {}, &gen);
  const Tensor product = matmul(h, e.t());
  const GemmProduct p{256, 4096, 64, false, true, 1.0f, 0.0f};
  GemmOperands o{64, 64, 4096, h.to_vector<float>(), e.to_vector<float>(), {}};
  o.c.assign(256 * 4096, 0.0f);
  // KILN_GEMM=bf16|widen leaves float32's sources to the rules; any other value forces one.
  const char* gemm = std::getenv("KILN_GEMM");
  const std::string value = gemm != nullptr ? gemm : "";
  const bool forced = !value.empty() && value != "bf16" && value != "widen";
  if (!forced) CHECK(use_packed_gemm(256, 4096, 64) == packed_gemm_preferred(256, 4096, 64));
  if (use_packed_gemm(256, 4096, 64)) CHECK(product.to_vector<float>() == packed(p, o));
}

TEST_CASE("the packed GEMM streams a large aligned C and gives the same bits as plain stores",
          "[gemm]") {
  if (skip_unbuilt()) return;
  // 520 x 32784 floats (68 MB, over the streaming threshold): written with non-temporal stores at
  // a 64-byte aligned C whose rows are whole cache lines, with plain stores one float further on.
  const std::int64_t m = 520, n = 32770, k = 24, ldc = 32784;
  const GemmProduct p{m, n, k, false, true, 1.0f, 0.0f};
  const GemmOperands o = gemm_operands(p, 0, 21);
  const Tensor storage = zeros({m * ldc + 16});
  auto run = [&](std::int64_t offset) {
    GemmArgs g;
    g.m = m, g.n = n, g.k = k, g.trans_b = true;
    g.a = o.a.data(), g.lda = o.lda, g.b = o.b.data(), g.ldb = o.ldb;
    g.c = storage.data<float>() + offset, g.ldc = ldc;
    packed_gemm(g);
    std::vector<float> c(static_cast<std::size_t>(m * n));
    for (std::int64_t i = 0; i < m; ++i)
      std::copy_n(storage.data<float>() + offset + i * ldc, n, c.begin() + i * n);
    return c;
  };
  const std::vector<float> streamed = run(0), plain = run(1);
  REQUIRE(streamed == plain);
  for (std::int64_t i = 0; i < m; i += 37)
    for (std::int64_t j = 0; j < n; j += 997) {
      double want = 0;
      for (std::int64_t q = 0; q < k; ++q)
        want += static_cast<double>(o.a[i * o.lda + q]) * o.b[j * o.ldb + q];
      REQUIRE(streamed[i * n + j] == Approx(want).margin(1e-4));
    }
}

TEST_CASE("the LM head's fused loss through the packed kernel matches the composed ops", "[gemm]") {
  if (skip_unbuilt()) return;
  // Wide and tall enough for the rule (V 4100 >= 4096, N 260 >= 256); the logits' rows padded.
  Generator gen(8);
  const Tensor x = uniform({260, 16}, -1, 1, {}, &gen).requires_grad_();
  const Tensor w = uniform({4100, 16}, -1, 1, {}, &gen).requires_grad_();
  std::vector<std::int64_t> ids(260);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = i % 9 == 4 ? -100 : (i * 7919) % 4100;
  const Tensor targets = from_vector(ids, {260});
  const Tensor fused = linear_cross_entropy(x, w, targets);
  fused.backward();
  const Tensor dx = x.grad(), dw = w.grad();
  x.set_grad(Tensor()), w.set_grad(Tensor());
  const Tensor composed = cross_entropy(matmul(x.to(DType::f64), w.to(DType::f64).t()), targets);
  composed.backward();
  REQUIRE(fused.item<double>() == Approx(composed.item<double>()).epsilon(1e-5));
  const std::vector<float> got_dx = dx.to_vector<float>(), got_dw = dw.to_vector<float>();
  const std::vector<float> want_dx = x.grad().to(DType::f32).to_vector<float>();
  const std::vector<float> want_dw = w.grad().to(DType::f32).to_vector<float>();
  for (std::size_t i = 0; i < got_dx.size(); ++i)
    REQUIRE(got_dx[i] == Approx(want_dx[i]).margin(1e-6));
  for (std::size_t i = 0; i < got_dw.size(); ++i)
    REQUIRE(got_dw[i] == Approx(want_dw[i]).margin(1e-6));
}
