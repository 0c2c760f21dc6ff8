// Matrix products with bf16 operands (matmul, linear, linear_cross_entropy) and Autocast on the
// CPU. Two kinds of check:
//   - exact: autocast equals casting by hand, in the forward and in the backward (a float32
//     weight that the GEMM rounds as it reads it gives the bits of its bf16 copy); a bf16 product
//     equals the float32 product of the operands widened to float32, bit for bit, on the
//     widening path (a bf16 x bf16 product is exact in float32, and that path sums it with the
//     float32 GEMM), and within float32 summation's bound of it on the native path, which sums
//     the same exact products in another order (core/cpu/blas_library.h, bf16_gemm);
//   - against float32: with u = 2^-8, bf16's unit roundoff (8 significant bits, rounding to
//     nearest), each rounded operand is x (1 + d) with |d| <= u, so each product term is off by
//     at most (2u + u^2) |a_ik b_kj| and an entry of C by at most
//       (2u + u^2) (|A| |B|)_ij + k 2^-24 (|A| |B|)_ij        (the second term: float32 sums).
//     The tests check that bound entry by entry, with |A| |B| computed in float64.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "core/cpu/blas_library.h"
#include "core/kiln.h"
#include "tests/harness/near.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

constexpr double kUnitRoundoff = 1.0 / 256.0;  // 2^-8
constexpr double kProductError = 2 * kUnitRoundoff + kUnitRoundoff * kUnitRoundoff;

// Checks |actual - exact| <= (2u + u^2 + k 2^-24) (|A| |B|) entry by entry, where `magnitude` is
// |A| |B| (float64) and k the inner dim.
void require_within_bf16_bound(const Tensor& actual, const Tensor& exact, const Tensor& magnitude,
                               std::int64_t k) {
  REQUIRE(actual.shape() == exact.shape());
  const std::vector<double> a = actual.to(DType::f64).reshape({-1}).to_vector<double>();
  const std::vector<double> e = exact.to(DType::f64).reshape({-1}).to_vector<double>();
  const std::vector<double> m = magnitude.reshape({-1}).to_vector<double>();
  const double factor = kProductError + static_cast<double>(k) * std::ldexp(1.0, -24);
  double worst = 0;  // the largest |error| / bound, reported on failure
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double bound = factor * m[i] + 1e-30;
    worst = std::max(worst, std::abs(a[i] - e[i]) / bound);
  }
  INFO("largest error / bound: " << worst);
  REQUIRE(worst <= 1.0);
}

Tensor abs64(const Tensor& t) {
  const Tensor d = t.to(DType::f64);
  return where(lt(d, zeros({}, {DType::f64})), neg(d), d);
}

bool widening_path() { return bf16_gemm() == Bf16Gemm::widened; }

// The product `actual` of bf16 operands a and b against `reference`, the float32 product of their
// widened values (the same views): bit for bit on the widening path; on the native path within
// 2 k 2^-24 (|A| |B|), both being float32 sums of the same exact products (k of them, each sum
// within k 2^-24 (|A| |B|) of the exact one).
void require_bf16_product(const Tensor& actual, const Tensor& reference, const Tensor& a,
                          const Tensor& b) {
  INFO((widening_path() ? "widening path" : "native path"));
  if (widening_path()) {
    REQUIRE_EXACT(actual, reference);
    return;
  }
  REQUIRE(actual.shape() == reference.shape());
  const std::int64_t k = a.size(-1);
  const std::vector<double> got = actual.to(DType::f64).reshape({-1}).to_vector<double>();
  const std::vector<double> want = reference.to(DType::f64).reshape({-1}).to_vector<double>();
  const std::vector<double> magnitude =
      matmul(abs64(a), abs64(b)).reshape({-1}).to_vector<double>();
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": " << got[i] << " vs " << want[i]);
    REQUIRE(std::abs(got[i] - want[i]) <= 2.0 * k * std::ldexp(magnitude[i], -24));
  }
}

}  // namespace

TEST_CASE("bf16 matmul is the product of the widened operands: bit for bit when widened",
          "[bf16][gemm]") {
  Generator gen(3);
  const Tensor a = rounded(randn({2, 3, 17, 40}, {}, &gen));
  const Tensor b = rounded(randn({3, 40, 23}, {}, &gen));
  SECTION("batched, with a broadcast batch dim") {
    const Tensor c = matmul(a, b);
    REQUIRE(c.dtype() == DType::f32);
    require_bf16_product(c, matmul(widened(a), widened(b)), a, b);
  }
  SECTION("transposed views of either operand") {
    const Tensor at = rounded(randn({40, 17}, {}, &gen)), bt = rounded(randn({23, 40}, {}, &gen));
    require_bf16_product(matmul(at.t(), bt.t()), matmul(widened(at).t(), widened(bt).t()), at.t(),
                         bt.t());
    require_bf16_product(matmul(at.t(), b.select(0, 0)),
                         matmul(widened(at).t(), widened(b.select(0, 0))), at.t(), b.select(0, 0));
  }
  SECTION("a large op(A), widened a block of rows at a time") {
    // k = 70000: blocks of 2^23 / k = 119 rows of op(A), so 250 rows take three blocks.
    const Tensor big = rounded(randn({250, 70000}, {}, &gen));
    const Tensor right = rounded(randn({70000, 3}, {}, &gen));
    require_bf16_product(matmul(big, right), matmul(widened(big), widened(right)), big, right);
    const Tensor big_t = rounded(randn({70000, 250}, {}, &gen));
    require_bf16_product(matmul(big_t.t(), right), matmul(widened(big_t).t(), widened(right)),
                         big_t.t(), right);
  }
  SECTION("vectors") {
    const Tensor v = rounded(randn({40}, {}, &gen));
    require_bf16_product(matmul(a, v), matmul(widened(a), widened(v)), a, v.unsqueeze(1));
    require_bf16_product(matmul(v, b), matmul(widened(v), widened(b)), v.unsqueeze(0), b);
  }
}

TEST_CASE("autocast to bf16: matmul rounds its float32 operands and result, within bf16's bound",
          "[bf16][gemm][autocast]") {
  Generator gen(4);
  const Tensor a = randn({4, 33, 64}, {}, &gen), b = randn({64, 19}, {}, &gen);
  Tensor mixed;
  {
    const Autocast bf16(Precision::bf16);
    REQUIRE(autocast_precision() == Precision::bf16);
    mixed = matmul(a, b);
  }
  REQUIRE(autocast_precision() == Precision::f32);
  // The float32 sums of the rounded operands' products, rounded once more.
  const Tensor sums = matmul(rounded(a), rounded(b));
  REQUIRE(mixed.dtype() == DType::bf16);
  REQUIRE_EXACT(mixed, rounded(sums));
  require_within_bf16_bound(sums, matmul(a, b), matmul(abs64(a), abs64(b)), 64);
  // float64 operands are left alone: autocast only rounds float32.
  const Tensor a64 = a.to(DType::f64), b64 = b.to(DType::f64);
  const Autocast bf16(Precision::bf16);
  REQUIRE(matmul(a64, b64).dtype() == DType::f64);
}

TEST_CASE("linear with bf16 operands: forward and backward are the bf16 products, float32 sums",
          "[bf16][gemm][autograd]") {
  Generator gen(5);
  const Tensor x = randn({37, 48}, {}, &gen).requires_grad_();
  const Tensor w = (randn({29, 48}, {}, &gen) * 0.2).detach().requires_grad_();
  const Tensor bias = randn({29}, {}, &gen).requires_grad_();
  const Tensor dy = randn({37, 29}, {}, &gen);
  Tensor y;
  {
    const Autocast bf16(Precision::bf16);
    y = linear(x, w, bias);
  }
  REQUIRE(y.dtype() == DType::bf16);
  y.backward(dy);
  REQUIRE(x.grad().dtype() == DType::f32);
  REQUIRE(w.grad().dtype() == DType::f32);

  // Exactly: the products of the operands rounded by hand (dy rounded too in the backward), the
  // forward's float32 result rounded to bf16 (its gradient passes unrounded). Autocast leaves
  // the float32 weight to the GEMM, which rounds it as it reads it: the same bits.
  const Tensor xb = rounded(x.detach()), wb = rounded(w.detach()), dyb = rounded(dy);
  const Tensor sums = linear(xb, wb, bias.detach());
  REQUIRE_EXACT(y.detach(), rounded(sums));
  REQUIRE_EXACT(x.grad(), matmul(dyb, wb));
  REQUIRE_EXACT(w.grad(), matmul(dyb.t(), xb));
  REQUIRE_EXACT(bias.grad(), sum(dy, {0}));
  require_bf16_product(x.grad(), matmul(widened(dyb), widened(wb)), dyb, wb);

  // Against float32: within the bound of the products' rounding.
  require_within_bf16_bound(sums - bias.detach(), linear(x.detach(), w.detach()),
                            matmul(abs64(x), abs64(w).t()), 48);
  require_within_bf16_bound(x.grad(), matmul(dy, w.detach()), matmul(abs64(dy), abs64(w)), 29);
  require_within_bf16_bound(w.grad(), matmul(dy.t(), x.detach()), matmul(abs64(dy).t(), abs64(x)),
                            37);
}

TEST_CASE("a bf16 tensor used twice gets one float32 gradient, the sum of both uses",
          "[bf16][autograd]") {
  Generator gen(6);
  const Tensor x = randn({8, 16}, {}, &gen).requires_grad_();
  const Tensor w1 = rounded(randn({16, 5}, {}, &gen)), w2 = rounded(randn({16, 5}, {}, &gen));
  const Tensor xb = x.to(DType::bf16);
  const Tensor y = matmul(xb, w1) + matmul(xb, w2);
  const Tensor dy = randn({8, 5}, {}, &gen);
  y.backward(dy);
  REQUIRE(x.grad().dtype() == DType::f32);
  const Tensor dyb = rounded(dy);
  REQUIRE_EXACT(x.grad(), matmul(dyb, w1.t()) + matmul(dyb, w2.t()));
  // backward() on a bf16 product's float32 output seeds float32; a bf16 root needs a float32 seed.
  const Tensor root = x.to(DType::bf16);
  REQUIRE_THROWS_WITH(root.backward(ones({8, 16}, {.dtype = DType::bf16})),
                      Catch::Contains("does not match the tensor") && Catch::Contains("float32"));
}

TEST_CASE("linear_cross_entropy with bf16 operands: exact forward, backward within bf16's bound",
          "[bf16][gemm][autograd]") {
  Generator gen(7);
  const std::int64_t rows = 24, d = 32, vocab = 300;
  const Tensor x = randn({rows, d}, {}, &gen).requires_grad_();
  const Tensor w = (randn({vocab, d}, {}, &gen) * 0.3).detach().requires_grad_();
  std::vector<std::int64_t> ids;
  for (std::int64_t r = 0; r < rows; ++r) ids.push_back(r % 5 == 3 ? -100 : (r * 37) % vocab);
  const Tensor targets = from_vector<std::int64_t>(ids, {rows});

  Tensor loss;
  {
    const Autocast bf16(Precision::bf16);
    loss = linear_cross_entropy(x, w, targets);
  }
  REQUIRE(loss.dtype() == DType::f32);
  loss.backward();
  // The forward is the float32 loss of the rounded operands' logits, exactly: the same as the
  // operands rounded by hand (autocast rounds W in the GEMM), and on the widening path the same
  // as the float32 loss of their widened values.
  const Tensor xb = rounded(x.detach()), wb = rounded(w.detach());
  REQUIRE_EXACT(loss.detach(), linear_cross_entropy(xb, wb, targets));
  if (widening_path())
    REQUIRE_EXACT(loss.detach(), linear_cross_entropy(widened(xb), widened(wb), targets));

  // Against float32. The logits are within z_bound = max (2u + u^2 + d 2^-24) (|X| |W|^T) of
  // float32's, so the loss (logsumexp(z) - z_t, each term moving by at most z_bound) within
  // 2 z_bound. The gradients' GEMMs read P', W and diag(s) X rounded to bf16 once each, and P'
  // carries the logits' error (relative exp(2 z_bound) - 1): in norm within
  // 3 (2u + u^2) + exp(2 z_bound) - 1 of float32's.
  const Tensor x32 = x.detach().clone().requires_grad_();
  const Tensor w32 = w.detach().clone().requires_grad_();
  const Tensor loss32 = linear_cross_entropy(x32, w32, targets);
  loss32.backward();
  const double z_bound = (kProductError + d * std::ldexp(1.0, -24)) *
                         max(matmul(abs64(x), abs64(w).t()).reshape({-1}), 0).values.item<double>();
  REQUIRE(std::abs(loss.item<double>() - loss32.item<double>()) <= 2 * z_bound);
  const double gradient_bound = 3 * kProductError + std::expm1(2 * z_bound);
  INFO("logit bound " << z_bound << ", gradient bound " << gradient_bound);
  CHECK(relative_error(x.grad(), x32.grad()) <= gradient_bound);
  CHECK(relative_error(w.grad(), w32.grad()) <= gradient_bound);
}

TEST_CASE("linear_cross_entropy with bf16 operands and a large vocabulary works a block at a time",
          "[bf16][gemm][autograd]") {
  // 300 rows x 70000 classes: at most 2^24 / 70000 = 239 rows a block, so two of 150.
  Generator gen(9);
  const std::int64_t rows = 300, d = 8, vocab = 70000;
  const Tensor x = rounded(randn({rows, d}, {}, &gen)).to(DType::f32).requires_grad_();
  const Tensor w = rounded(randn({vocab, d}, {}, &gen) * 0.5).to(DType::f32).requires_grad_();
  std::vector<std::int64_t> ids;
  for (std::int64_t r = 0; r < rows; ++r) ids.push_back((r * 7919) % vocab);
  const Tensor targets = from_vector<std::int64_t>(ids, {rows});
  Tensor loss;
  {
    const Autocast bf16(Precision::bf16);
    loss = linear_cross_entropy(x, w, targets);
  }
  // x and w hold bf16 values: the float32 loss is the same computation, row for row (on the
  // native path the logits are the same products summed in another order: within d 2^-24 of
  // |X| |W|^T each, and the loss, a mean of logsumexp(z) - z_t, within twice the largest).
  const Tensor x32 = x.detach().clone().requires_grad_();
  const Tensor w32 = w.detach().clone().requires_grad_();
  const Tensor loss32 = linear_cross_entropy(x32, w32, targets);
  if (widening_path()) {
    REQUIRE_EXACT(loss.detach(), loss32.detach());
  } else {
    const double z_bound =
        2.0 * d * std::ldexp(1.0, -24) *
        max(matmul(abs64(x), abs64(w).t()).reshape({-1}), 0).values.item<double>();
    REQUIRE(std::abs(loss.item<double>() - loss32.item<double>()) <= 2 * z_bound);
  }
  loss.backward();
  loss32.backward();
  // The backward differs only by P' rounded to bf16 (and diag(s) X): 2u + u^2 per product.
  CHECK(relative_error(x.grad(), x32.grad()) <= 3 * kProductError);
  CHECK(relative_error(w.grad(), w32.grad()) <= 3 * kProductError);
}

TEST_CASE("bf16 products are deterministic with 3 threads", "[bf16][gemm][determinism]") {
  const int threads = num_threads();
  set_num_threads(3);
  Generator gen(8);
  const Tensor a = rounded(randn({300, 200}, {}, &gen)), b = rounded(randn({200, 260}, {}, &gen));
  const Tensor first = matmul(a, b), second = matmul(a, b);
  set_num_threads(threads);
  REQUIRE_EXACT(first, second);
}

TEST_CASE("bf16 products reject mixed dtypes and a bias that is not float32, by name",
          "[bf16][errors]") {
  const Tensor b = ones({2, 3}, {.dtype = DType::bf16}), f = ones({3, 2});
  REQUIRE_THROWS_WITH(matmul(b, f), Catch::Contains("matmul: dtypes bfloat16 and float32 differ"));
  const Tensor bias_bf16 = ones({2}, {.dtype = DType::bf16});
  REQUIRE_THROWS_WITH(linear(b, ones({2, 3}, {.dtype = DType::bf16}), bias_bf16),
                      Catch::Contains("linear: bias is bfloat16") && Catch::Contains("float32"));
  REQUIRE_THROWS_WITH(linear_cross_entropy(b, f.t(), from_vector<std::int64_t>({0, 1}, {2})),
                      Catch::Contains("linear_cross_entropy: dtypes bfloat16 and float32 differ"));
  REQUIRE_THROWS_WITH(parse_precision("fp16"), Catch::Contains("'fp16' is not one of f32, bf16"));
  REQUIRE(parse_precision("bf16") == Precision::bf16);
  REQUIRE(precision_name(Precision::f32) == "f32");
}
