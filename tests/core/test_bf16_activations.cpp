// The ops that read bf16 activations (docs/mixed-precision.md's table): elementwise ops,
// reductions, dropout, softmax, layer_norm, cross-entropy and attention, on the CPU. Two kinds of
// check, as tests/core/test_bf16_products.cpp:
//   - exact: each op computes in float32 on the bf16 values (widened exactly) and rounds its
//     result to bf16 where it returns bf16, so it equals the float32 op on the widened input,
//     rounded, bit for bit; its backward equals the float32 backward on the same values;
//   - against float32 on the unrounded input: rounding to bf16 moves an input x by at most u|x|
//     and a result y by at most u|y|, u = 2^-8 (8 significant bits), and each test states the
//     bound that follows for its op.
// And a model: a transformer's forward under autocast keeps about half the bytes alive for its
// backward that float32 keeps.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/kiln.h"
#include "nn/transformer_lm.h"
#include "tests/harness/near.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

constexpr double kRoundoff = 1.0 / 256.0;  // u: bf16's unit roundoff, 2^-8
constexpr double kFloat32Slop = 1e-6;      // float32 arithmetic around the bound, relative

Tensor leaf(const Tensor& t) { return widened(t).detach().clone().requires_grad_(); }
std::vector<double> values(const Tensor& t) {
  return t.to(DType::f64).contiguous().reshape({-1}).to_vector<double>();
}

// The largest |actual - expected| / bound over the elements (<= 1: within the bound).
double worst_ratio(const Tensor& actual, const Tensor& expected, const std::vector<double>& bound) {
  const std::vector<double> a = values(actual), e = values(expected);
  REQUIRE(a.size() == bound.size());
  REQUIRE(e.size() == bound.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(a[i] - e[i]) / (bound[i] + 1e-30));
  return worst;
}

#define REQUIRE_WITHIN(actual, expected, bound)                            \
  do {                                                                     \
    const double kiln_ratio_ = worst_ratio((actual), (expected), (bound)); \
    INFO("largest error / bound: " << kiln_ratio_);                        \
    REQUIRE(kiln_ratio_ <= 1.0);                                           \
  } while (0)

double max_abs(const Tensor& t) {
  double m = 0;
  for (const double v : values(t)) m = std::max(m, std::abs(v));
  return m;
}

struct UnaryCase {
  std::string name;
  std::function<Tensor(const Tensor&)> f;
  bool positive_inputs;
  // The backward reads the rounded output (exp, sqrt, tanh, sigmoid, rdiv): its gradient is
  // within grad_rtol |g| + grad_atol max|dy| of float32's at the same input; 0, 0: exact.
  double grad_rtol, grad_atol;
  // Lipschitz constant over the inputs (0: not compared with float32 on unrounded inputs).
  double lipschitz;
};

}  // namespace

TEST_CASE("bf16 unary ops compute in float32 and return bf16, and backward as float32 does",
          "[bf16][elementwise]") {
  Generator gen(11);
  const Tensor inputs = randn({6, 37}, {}, &gen) * 2.0;
  const Tensor positives = uniform({6, 37}, 0.25, 4.0, {}, &gen);
  const Tensor dy = randn({6, 37}, {}, &gen);
  const std::vector<UnaryCase> cases = {
      {"neg", [](const Tensor& x) { return neg(x); }, false, 0, 0, 1},
      {"exp", [](const Tensor& x) { return exp(x); }, false, kRoundoff, 0, 0},
      {"log", [](const Tensor& x) { return log(x); }, true, 0, 0, 0},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, true, 1.01 * kRoundoff, 0, 0},
      // tanh' = 1 - y^2 off by (2u + u^2) y^2 <= 3u; sigmoid' = y (1 - y) by at most 1.01 u.
      {"tanh", [](const Tensor& x) { return tanh(x); }, false, 0, 3 * kRoundoff, 1},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, false, 0, 1.01 * kRoundoff, 0.25},
      {"relu", [](const Tensor& x) { return relu(x); }, false, 0, 0, 1},
      {"gelu (tanh)", [](const Tensor& x) { return gelu(x, GeluApproximation::tanh); }, false, 0, 0,
       1.13},
      {"gelu (erf)", [](const Tensor& x) { return gelu(x, GeluApproximation::none); }, false, 0, 0,
       1.13},
      {"pow", [](const Tensor& x) { return pow(x, 3.0); }, true, 0, 0, 0},
      {"add scalar", [](const Tensor& x) { return x + 2.5; }, false, 0, 0, 0},
      {"mul scalar", [](const Tensor& x) { return x * 0.3; }, false, 0, 0, 0.3},
      {"div scalar", [](const Tensor& x) { return x / 7.0; }, false, 0, 0, 0},
      {"rsub", [](const Tensor& x) { return rsub(1.5, x); }, false, 0, 0, 0},
      {"rdiv", [](const Tensor& x) { return rdiv(2.0, x); }, true, 1.01 * kRoundoff, 0, 0},
  };
  for (const UnaryCase& c : cases) {
    INFO(c.name);
    const Tensor x = c.positive_inputs ? positives : inputs;
    const Tensor xb = rounded(x);
    const Tensor y = c.f(xb);
    REQUIRE(y.dtype() == DType::bf16);
    REQUIRE_EXACT(y, rounded(c.f(widened(xb))));

    const Tensor through_bf16 = leaf(xb), reference = leaf(xb);
    c.f(through_bf16.to(DType::bf16)).backward(dy);
    c.f(reference).backward(dy);
    REQUIRE(through_bf16.grad().dtype() == DType::f32);
    if (c.grad_rtol == 0 && c.grad_atol == 0) {
      REQUIRE_EXACT(through_bf16.grad(), reference.grad());
    } else {
      REQUIRE_NEAR(through_bf16.grad(), reference.grad(), c.grad_rtol + kFloat32Slop,
                   c.grad_atol * max_abs(dy));
    }
    if (c.lipschitz > 0) {
      // |y(x(1 + d)) - y(x)| <= L u |x|, then the result's rounding u |y|.
      const Tensor exact = c.f(x);
      std::vector<double> bound = values(exact);
      const std::vector<double> xs = values(x);
      for (std::size_t i = 0; i < bound.size(); ++i)
        bound[i] = c.lipschitz * kRoundoff * std::abs(xs[i]) +
                   (kRoundoff + kFloat32Slop) * std::abs(bound[i]) * (1 + c.lipschitz * kRoundoff);
      REQUIRE_WITHIN(y, exact, bound);
    }
  }
}

TEST_CASE("bf16 binary ops: bf16 with bf16 gives bf16, bf16 with float32 gives float32",
          "[bf16][elementwise]") {
  Generator gen(12);
  const Tensor a = rounded(randn({5, 1, 7}, {}, &gen));  // broadcast along dim 1
  const Tensor b32 = randn({5, 4, 7}, {}, &gen) + 3.0;
  const Tensor bb = rounded(b32);
  const Tensor dy = randn({5, 4, 7}, {}, &gen);
  using Binary = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::vector<std::pair<std::string, Binary>> ops = {
      {"add", [](const Tensor& p, const Tensor& q) { return add(p, q); }},
      {"sub", [](const Tensor& p, const Tensor& q) { return sub(p, q); }},
      {"mul", [](const Tensor& p, const Tensor& q) { return mul(p, q); }},
      {"div", [](const Tensor& p, const Tensor& q) { return div(p, q); }},
  };
  for (const auto& [name, f] : ops) {
    INFO(name);
    const Tensor mixed = f(a, b32), both = f(a, bb), reversed = f(b32, a);
    REQUIRE(mixed.dtype() == DType::f32);
    REQUIRE(reversed.dtype() == DType::f32);
    REQUIRE(both.dtype() == DType::bf16);
    REQUIRE_EXACT(mixed, f(widened(a), b32));
    REQUIRE_EXACT(reversed, f(b32, widened(a)));
    REQUIRE_EXACT(both, rounded(f(widened(a), widened(bb))));
    // Gradients: float32, as float32's at the same values (a bf16 input's gradient is float32).
    const Tensor la = leaf(a), lb = b32.detach().clone().requires_grad_();
    const Tensor ra = leaf(a), rb = b32.detach().clone().requires_grad_();
    f(la.to(DType::bf16), lb).backward(dy);
    f(ra, rb).backward(dy);
    REQUIRE_EXACT(la.grad(), ra.grad());
    REQUIRE_EXACT(lb.grad(), rb.grad());
  }
  // Against float32 on unrounded inputs: a + b moves by at most u |a| (b is float32 already).
  const Tensor a32 = randn({5, 1, 7}, {}, &gen);
  std::vector<double> bound = values(a32.expand({5, 4, 7}));
  const std::vector<double> sums = values(a32 + b32);
  for (std::size_t i = 0; i < bound.size(); ++i)
    bound[i] = kRoundoff * std::abs(bound[i]) + kFloat32Slop * std::abs(sums[i]);
  REQUIRE_WITHIN(rounded(a32) + b32, a32 + b32, bound);
  // Comparisons of bf16 give bf16 ones and zeros.
  const Tensor equal = eq(bb, bb);
  REQUIRE(equal.dtype() == DType::bf16);
  REQUIRE(values(equal) == std::vector<double>(equal.numel(), 1.0));
  // Other mixtures stay errors.
  REQUIRE_THROWS_WITH(add(a, a.to(DType::f64)),
                      Catch::Contains("add: dtypes bfloat16 and float64 differ"));
}

TEST_CASE("bf16 reductions sum in float32 and return float32", "[bf16][reduction]") {
  Generator gen(13);
  const Tensor x = rounded(randn({4, 50, 3}, {}, &gen));
  REQUIRE(sum(x, {1}).dtype() == DType::f32);
  REQUIRE_EXACT(sum(x, {1}), sum(widened(x), {1}));
  REQUIRE_EXACT(mean(x), mean(widened(x)));
  const MaxResult m = max(x, 1), reference = max(widened(x), 1);
  REQUIRE_EXACT(m.values, reference.values);
  REQUIRE_EXACT(m.indices, reference.indices);
  // Against float32 on unrounded inputs: a sum moves by at most u sum |x|.
  const Tensor x32 = randn({4, 50, 3}, {}, &gen);
  std::vector<double> bound = values(sum(where(lt(x32, zeros({})), neg(x32), x32), {1}));
  for (double& b : bound) b = (kRoundoff + kFloat32Slop) * b;
  REQUIRE_WITHIN(sum(rounded(x32), {1}), sum(x32, {1}), bound);
  const Tensor l = leaf(x), r = leaf(x);
  (sum(l.to(DType::bf16) * 2.0, {0, 2}) * 3.0).sum().backward();
  (sum(r * 2.0, {0, 2}) * 3.0).sum().backward();
  REQUIRE_EXACT(l.grad(), r.grad());
}

TEST_CASE("bf16 dropout: the float32 mask on the bf16 values, drawn again for the backward",
          "[bf16][dropout]") {
  Generator gen(14);
  const Tensor x = rounded(randn({8, 65}, {}, &gen));
  const Tensor dy = randn({8, 65}, {}, &gen);
  const Tensor l = leaf(x), r = leaf(x);
  Generator first(99), second(99), third(99);
  const Tensor y = dropout(l.to(DType::bf16), 0.3, true, &first);
  const Tensor reference = dropout(r, 0.3, true, &second);
  REQUIRE(y.dtype() == DType::bf16);
  REQUIRE_EXACT(y, rounded(reference));
  // The mask D (1/(1-p) or 0) drawn from the same counters: dx = dy * D, with no mask kept.
  const Tensor mask = dropout(ones({8, 65}), 0.3, true, &third);
  y.backward(dy);
  reference.backward(dy);
  REQUIRE_EXACT(l.grad(), dy * mask);
  REQUIRE_EXACT(r.grad(), dy * mask);
  // Against float32 on unrounded inputs: x moves by u|x|, the result's rounding adds u|y|.
  const Tensor x32 = randn({8, 65}, {}, &gen);
  Generator fourth(99), fifth(99);
  const Tensor exact = dropout(x32, 0.3, true, &fourth);
  std::vector<double> bound = values(exact);
  for (double& b : bound) b = (2 * kRoundoff + kRoundoff * kRoundoff + kFloat32Slop) * std::abs(b);
  REQUIRE_WITHIN(dropout(rounded(x32), 0.3, true, &fifth), exact, bound);
  REQUIRE(first.offset() == second.offset());
}

TEST_CASE("bf16 softmax: float32 arithmetic, a bf16 result, within bf16's bound of float32's",
          "[bf16][softmax]") {
  Generator gen(15);
  const std::int64_t rows = 6, cols = 45;
  const Tensor x32 = randn({rows, cols}, {}, &gen) * 3.0;
  const Tensor x = rounded(x32);
  const Tensor dy = randn({rows, cols}, {}, &gen);
  const Tensor y = softmax(x, -1);
  REQUIRE(y.dtype() == DType::bf16);
  REQUIRE_EXACT(y, rounded(softmax(widened(x), -1)));
  REQUIRE_EXACT(log_softmax(x, 0), rounded(log_softmax(widened(x), 0)));
  const Tensor scores = rounded(randn({2, 3, 7, 9}, {}, &gen));
  REQUIRE_EXACT(causal_softmax(scores, 2), rounded(causal_softmax(widened(scores), 2)));

  // Backward reads the saved bf16 y: dx = y (dy - sum(dy y)), with y as saved.
  const Tensor l = leaf(x);
  softmax(l.to(DType::bf16), -1).backward(dy);
  const Tensor ys = y.to(DType::f64), g = dy.to(DType::f64);
  const Tensor expected = ys * (g - sum(g * ys, {-1}, true));
  REQUIRE_NEAR(l.grad().to(DType::f64), expected, 1e-5, 1e-6);

  // Against float32 on unrounded inputs. Rounding moves x_i by at most e = u max|x| (per row),
  // so y_i moves by a factor in [e^-2e, e^2e], and the result's rounding adds u: |y' - y| <=
  // eta y, eta = (e^2e - 1)(1 + u) + u. The gradient y (dy - <dy, y>) then moves by at most
  // eta y_i (|dy_i| + 2 <|dy|, y>)(1 + eta).
  const Tensor exact = softmax(x32, -1);
  const std::vector<double> xs = values(x32), ye = values(exact), gs = values(dy);
  std::vector<double> bound(xs.size()), grad_bound(xs.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    double m = 0, weighted = 0;
    for (std::int64_t c = 0; c < cols; ++c) {
      m = std::max(m, std::abs(xs[r * cols + c]));
      weighted += std::abs(gs[r * cols + c]) * ye[r * cols + c];
    }
    const double eta = (std::exp(2 * kRoundoff * m) - 1) * (1 + kRoundoff) + kRoundoff;
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::int64_t i = r * cols + c;
      bound[i] = (eta + kFloat32Slop) * ye[i];
      grad_bound[i] = eta * ye[i] * (std::abs(gs[i]) + 2 * weighted) * (1 + eta) + 1e-7;
    }
  }
  REQUIRE_WITHIN(y, exact, bound);
  const Tensor f = leaf(x32);
  softmax(f, -1).backward(dy);
  REQUIRE_WITHIN(l.grad(), f.grad(), grad_bound);
}

TEST_CASE("bf16 layer_norm: float32 statistics and result, x saved in bf16", "[bf16][layer_norm]") {
  Generator gen(16);
  const std::int64_t rows = 9, cols = 40;
  const Tensor x32 = randn({3, 3, cols}, {}, &gen) * 2.0 + 0.5;
  const Tensor x = rounded(x32);
  const Tensor gamma = randn({cols}, {}, &gen), beta = randn({cols}, {}, &gen);
  const Tensor dy = randn({3, 3, cols}, {}, &gen);
  const Tensor y = layer_norm(x, gamma, beta);
  REQUIRE(y.dtype() == DType::f32);
  REQUIRE_EXACT(y, layer_norm(widened(x), gamma, beta));

  const Tensor l = leaf(x), r = leaf(x);
  const Tensor lg = leaf(gamma), lb = leaf(beta), rg = leaf(gamma), rb = leaf(beta);
  layer_norm(l.to(DType::bf16), lg, lb).backward(dy);
  layer_norm(r, rg, rb).backward(dy);
  REQUIRE_EXACT(l.grad(), r.grad());
  REQUIRE_EXACT(lg.grad(), rg.grad());
  REQUIRE_EXACT(lb.grad(), rb.grad());

  // Against float32 on unrounded inputs. With |e_j| <= u|x_j| <= u M, the mean moves by at most
  // uM and sigma by at most rms(e - mean(e)) <= 2uM, so xhat_i = (x_i - mean)/sigma moves by at
  // most 2uM (1 + |xhat_i|) / (sigma - 2uM), and y_i by |gamma_i| times that.
  const Tensor exact = layer_norm(x32, gamma, beta);
  const std::vector<double> xs = values(x32), gs = values(gamma), ys = values(exact);
  std::vector<double> bound(xs.size());
  for (std::int64_t r0 = 0; r0 < rows; ++r0) {
    double m = 0, mu = 0, var = 0;
    for (std::int64_t c = 0; c < cols; ++c) {
      m = std::max(m, std::abs(xs[r0 * cols + c]));
      mu += xs[r0 * cols + c] / cols;
    }
    for (std::int64_t c = 0; c < cols; ++c)
      var += (xs[r0 * cols + c] - mu) * (xs[r0 * cols + c] - mu) / cols;
    const double sigma = std::sqrt(var + 1e-5);
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::int64_t i = r0 * cols + c;
      const double xhat = (xs[i] - mu) / sigma;
      bound[i] =
          std::abs(gs[c]) * 2 * kRoundoff * m * (1 + std::abs(xhat)) / (sigma - 2 * kRoundoff * m) +
          kFloat32Slop * (std::abs(ys[i]) + 1);
    }
  }
  REQUIRE_WITHIN(y, exact, bound);
  // gamma and beta are the float32 parameters: bf16 ones are refused.
  REQUIRE_THROWS_WITH(
      layer_norm(x, rounded(gamma), rounded(beta)),
      Catch::Contains(
          "layer_norm: x is bfloat16, so gamma and beta must be float32, got bfloat16"));
  REQUIRE_THROWS_WITH(layer_norm(x, gamma.to(DType::f64), beta.to(DType::f64)),
                      Catch::Contains("layer_norm: x is bfloat16") &&
                          Catch::Contains("gamma and beta must be float32"));
}

TEST_CASE("bf16 cross_entropy: float32 loss and gradient, logits saved in bf16",
          "[bf16][cross_entropy]") {
  Generator gen(17);
  const Tensor logits32 = randn({12, 31}, {}, &gen) * 4.0;
  const Tensor logits = rounded(logits32);
  const Tensor targets =
      from_vector<std::int64_t>({0, 5, 30, 7, -100, 2, 2, 9, 11, 30, 1, 0}, {12});
  const Tensor loss = cross_entropy(logits, targets);
  REQUIRE(loss.dtype() == DType::f32);
  REQUIRE_EXACT(loss, cross_entropy(widened(logits), targets));
  const Tensor l = leaf(logits), r = leaf(logits);
  (cross_entropy(l.to(DType::bf16), targets) * 2.0).backward();
  (cross_entropy(r, targets) * 2.0).backward();
  REQUIRE_EXACT(l.grad(), r.grad());
  // Against float32: logsumexp and the target's logit each move by at most u max|x|.
  const double bound = 2 * kRoundoff * max_abs(logits32) + kFloat32Slop;
  REQUIRE(std::abs(loss.item<float>() - cross_entropy(logits32, targets).item<float>()) <= bound);
}

TEST_CASE(
    "bf16 attention: float32 arithmetic on the bf16 operands, bf16 saved and returned "
    "under autocast",
    "[bf16][attention]") {
  Generator gen(18);
  const std::int64_t B = 2, T = 11, heads = 4, kv_heads = 2, d = 8;
  const Tensor projected32 = randn({B, T, (heads + 2 * kv_heads) * d}, {}, &gen);
  const Tensor projected = rounded(projected32);
  const Tensor dy = randn({B, T, heads * d}, {}, &gen);

  SECTION("bf16 operands give float32, as float32 attention on the widened operands") {
    const Tensor out = causal_attention(projected, heads, kv_heads);
    REQUIRE(out.dtype() == DType::f32);
    REQUIRE_EXACT(out, causal_attention(widened(projected), heads, kv_heads));
    const Tensor l = leaf(projected), r = leaf(projected);
    causal_attention(l.to(DType::bf16), heads, kv_heads).backward(dy);
    causal_attention(r, heads, kv_heads).backward(dy);
    REQUIRE(l.grad().dtype() == DType::f32);
    REQUIRE_EXACT(l.grad(), r.grad());
  }
  SECTION("under autocast: the result is rounded to bf16 and saved so") {
    const Tensor l = leaf(projected32);
    Tensor out, materialized, probabilities;
    {
      const Autocast bf16(Precision::bf16);
      out = causal_attention(l, heads, kv_heads);
      materialized = causal_attention(l, heads, kv_heads, 0.0, false, nullptr, &probabilities);
    }
    REQUIRE(out.dtype() == DType::bf16);
    const Tensor sums = causal_attention(widened(projected), heads, kv_heads);
    REQUIRE_EXACT(out, rounded(sums));
    // The materializing path (attention maps) computes the same in float32 with other sums.
    REQUIRE(materialized.dtype() == DType::bf16);
    REQUIRE(relative_error(widened(materialized), widened(out)) <= 2 * kRoundoff);
    out.backward(dy);
    REQUIRE(l.grad().dtype() == DType::f32);
    const Tensor r = leaf(projected);
    causal_attention(r, heads, kv_heads).backward(dy);
    // Its backward reads the rounded Y where float32's reads Y (in D = rowsum(dY * Y)).
    REQUIRE(relative_error(l.grad(), r.grad()) <= 4 * kRoundoff);

    // Against float32 on unrounded operands, per query i of a head (scale s = 1/sqrt(d)):
    // S_ij moves by at most delta_ij = s (2u + u^2) (|q_i| . |k_j|), so the probabilities A_ij
    // by a factor within e^(+-2 delta_i), delta_i = max_j delta_ij: alpha_i = e^(2 delta_i) - 1;
    // V moves by u|V|; and the result's rounding adds u |Y|:
    //   |Y' - Y|_ic <= (alpha_i (1 + u) + u) (A |V|)_ic + u |Y|_ic.
    const Tensor exact = causal_attention(projected32, heads, kv_heads);
    const std::vector<double> p = values(projected32), y = values(exact);
    const std::vector<double> a = values(probabilities);  // (B, heads, T, T), of rounded inputs
    const std::int64_t width = (heads + 2 * kv_heads) * d;
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    std::vector<double> bound(y.size());
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t g = h * kv_heads / heads;
        const auto at = [&](std::int64_t t, std::int64_t column) {
          return std::abs(p[(b * T + t) * width + column]);
        };
        for (std::int64_t i = 0; i < T; ++i) {
          double delta = 0;
          for (std::int64_t j = 0; j <= i; ++j) {
            double qk = 0;
            for (std::int64_t c = 0; c < d; ++c)
              qk += at(i, h * d + c) * at(j, (heads + g) * d + c);
            delta = std::max(delta, scale * (2 * kRoundoff + kRoundoff * kRoundoff) * qk);
          }
          const double alpha = std::exp(2 * delta) - 1;
          for (std::int64_t c = 0; c < d; ++c) {
            double av = 0;
            for (std::int64_t j = 0; j <= i; ++j)
              av += a[((b * heads + h) * T + i) * T + j] * at(j, (heads + kv_heads + g) * d + c);
            const std::size_t o = (b * T + i) * heads * d + h * d + c;
            // A of the rounded inputs is within (1 + alpha) of float32's, hence the extra factor.
            bound[o] = ((alpha * (1 + kRoundoff) + kRoundoff) * av * (1 + alpha) +
                        (kRoundoff + kFloat32Slop) * std::abs(y[o])) *
                           1.001 +
                       1e-7;
          }
        }
      }
    REQUIRE_WITHIN(out, exact, bound);
  }
  SECTION("separate heads under autocast: float32 q and k (after RoPE) are rounded too") {
    const Tensor q = randn({B, heads, T, d}, {}, &gen), k = randn({B, kv_heads, T, d}, {}, &gen);
    const Tensor v = rounded(randn({B, kv_heads, T, d}, {}, &gen));
    const Tensor lq = leaf(q);
    Tensor out;
    {
      const Autocast bf16(Precision::bf16);
      out = causal_attention_heads(lq, k, v);
    }
    REQUIRE(out.dtype() == DType::bf16);
    REQUIRE_EXACT(
        out, rounded(causal_attention_heads(widened(rounded(q)), widened(rounded(k)), widened(v))));
    out.backward(dy);
    REQUIRE(lq.grad().dtype() == DType::f32);
    // Outside autocast the operands must agree.
    REQUIRE_THROWS_WITH(
        causal_attention_heads(q, k, v),
        Catch::Contains("causal_attention_heads: dtypes float32 and bfloat16 differ"));
  }
}

TEST_CASE("a transformer under autocast keeps about half the activation bytes for backward",
          "[bf16][autocast][nn]") {
  nn::TransformerConfig config;
  config.vocab = 97, config.d_model = 64, config.heads = 4, config.layers = 2, config.ff = 256;
  config.max_seq_len = 64, config.dropout = 0.1;
  manual_seed(5);
  nn::TransformerLM model(config);
  Generator data(6);
  const Tensor ids = uniform({16, 64}, 0, 97, {}, &data).to(DType::i64);
  const Tensor targets = uniform({16, 64}, 0, 97, {}, &data).to(DType::i64);
  Backend& cpu = backend_for(Device::cpu());
  struct Run {
    double loss;
    std::size_t kept_bytes;
    std::vector<Tensor> grads;
  };
  const auto run = [&](Precision precision) {
    model.zero_grad();
    model.dropout_generator().set_state(7, 0);  // the same dropout masks
    const std::size_t before = cpu.bytes_in_use();
    Tensor loss;
    {
      const Autocast mixed(precision);
      loss = model.loss(ids, targets);
    }
    Run r{loss.item<float>(), cpu.bytes_in_use() - before, {}};
    loss.backward();
    for (const Tensor& p : model.parameters()) r.grads.push_back(p.grad().clone());
    return r;
  };
  const Run f32 = run(Precision::f32), bf16 = run(Precision::bf16);
  INFO("bytes kept for backward: float32 " << f32.kept_bytes << ", bf16 " << bf16.kept_bytes);
  // Per block and token float32 keeps 48 d bytes, bf16 28 d (the layer norms' inputs, on the
  // residual stream, stay float32: docs/mixed-precision.md); the LM head's P' halves as well.
  REQUIRE(static_cast<double>(bf16.kept_bytes) <= 0.65 * static_cast<double>(f32.kept_bytes));
  REQUIRE(std::abs(bf16.loss - f32.loss) <= 0.02);
  const auto named = model.named_parameters();
  for (std::size_t i = 0; i < f32.grads.size(); ++i) {
    INFO(named[i].first);
    REQUIRE(bf16.grads[i].dtype() == DType::f32);
    REQUIRE(relative_error(bf16.grads[i], f32.grads[i]) <= 0.05);
  }
}

TEST_CASE("decoding under autocast: the KV cache holds bf16, and matches the uncached forward",
          "[bf16][autocast][nn][cache]") {
  for (const nn::PositionKind position : {nn::PositionKind::sinusoidal, nn::PositionKind::rope}) {
    INFO(nn::name_of(position));
    nn::TransformerConfig config;
    config.vocab = 50, config.d_model = 32, config.heads = 4, config.kv_heads = 2;
    config.layers = 2, config.ff = 64, config.max_seq_len = 16, config.position = position;
    manual_seed(8);
    nn::TransformerLM model(config);
    model.eval();
    NoGradGuard no_grad;
    const Tensor ids = from_vector<std::int64_t>({3, 17, 42, 8, 0, 25, 11}, {1, 7});
    const Autocast bf16(Precision::bf16);
    const Tensor whole = model.forward(ids);  // (1, 7, vocab): float32 logits
    REQUIRE(whole.dtype() == DType::f32);
    std::vector<nn::KVCache> caches = model.new_caches();
    Tensor stepped = model.forward(ids.narrow(1, 0, 4), &caches);
    for (std::int64_t t = 4; t < 7; ++t)
      stepped = cat({stepped, model.forward(ids.narrow(1, t, 1), &caches)}, 1);
    for (const nn::KVCache& cache : caches) {
      REQUIRE(cache.keys.dtype() == DType::bf16);
      REQUIRE(cache.values.dtype() == DType::bf16);
    }
    // The same bf16 roundings of the same values, summed in other orders: the logits agree to
    // a few bf16 steps of the hidden states.
    REQUIRE(relative_error(stepped, whole) <= 4 * kRoundoff);
    // A rewound cache (length 0) is made again at another precision; a filled one refuses it.
    const Autocast float32(Precision::f32);
    REQUIRE_THROWS_WITH(model.forward(ids.narrow(1, 0, 1), &caches),
                        Catch::Contains("the KV cache holds bfloat16 keys and values, but this "
                                        "step's are float32"));
    for (nn::KVCache& cache : caches) cache.length = 0;
    const Tensor again = model.forward(ids, &caches);
    REQUIRE(caches[0].keys.dtype() == DType::f32);
    REQUIRE(relative_error(again, model.forward(ids)) <= 1e-5);
  }
}
