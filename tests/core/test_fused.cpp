// Each fused op equals its composition from core ops, in value and in gradient (float64,
// 1e-10 relative), and the softmax family stays finite for logits of +-1e4.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/kiln.h"
#include "tests/harness/gradcheck.h"
#include "tests/harness/near.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

constexpr double kRtol = 1e-10;
constexpr double kAtol = 1e-13;

// Checks fused(inputs) == composed(inputs) and their gradients of sum(out * v).
void require_same_function(const OpFunction& fused, const OpFunction& composed,
                           const std::vector<Tensor>& inputs, const std::vector<bool>& perturb) {
  std::vector<Tensor> a = fresh_leaves(inputs, perturb), b = fresh_leaves(inputs, perturb);
  const Tensor out_fused = fused(a), out_composed = composed(b);
  REQUIRE_NEAR(out_fused, out_composed, kRtol, kAtol);
  Generator gen(3);
  const Tensor v = uniform(out_fused.shape(), -1.0, 1.0, {DType::f64}, &gen);
  out_fused.backward(v);
  out_composed.backward(v);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!perturb[i]) continue;
    INFO("gradient of input " << i);
    REQUIRE_NEAR(a[i].grad(), b[i].grad(), kRtol, kAtol);
  }
}

Tensor composed_softmax(const Tensor& x, std::int64_t dim) {
  const Tensor e = exp(x - max(x, dim, true).values);
  return e / sum(e, {dim}, true);
}

Tensor composed_log_softmax(const Tensor& x, std::int64_t dim) {
  const Tensor shifted = x - max(x, dim, true).values;
  return shifted - log(sum(exp(shifted), {dim}, true));
}

// 1 where key j is visible from query i (j <= i + offset), as float64 (T_q, T_k).
Tensor causal_mask(std::int64_t queries, std::int64_t keys, std::int64_t offset) {
  std::vector<double> m(queries * keys);
  for (std::int64_t i = 0; i < queries; ++i)
    for (std::int64_t j = 0; j < keys; ++j) m[i * keys + j] = j <= i + offset ? 1.0 : 0.0;
  return from_vector(m, {queries, keys});
}

Tensor one_hot(const Tensor& ids, std::int64_t classes) {
  const Tensor positions = arange(classes, {.dtype = DType::i64}).view({1, classes});
  return eq(ids.view({-1, 1}), positions).to(DType::f64);
}

Tensor u(const Shape& shape, Generator& gen, double lo = -2.0, double hi = 2.0) {
  return uniform(shape, lo, hi, {.dtype = DType::f64}, &gen);
}

}  // namespace

TEST_CASE("softmax and log_softmax equal exp(x - max) / sum and its log", "[fused]") {
  Generator gen(1);
  const Tensor x = u({4, 7}, gen, -5, 5);
  require_same_function([](const auto& in) { return softmax(in[0], -1); },
                        [](const auto& in) { return composed_softmax(in[0], -1); }, {x}, {true});
  require_same_function([](const auto& in) { return softmax(in[0], 0); },
                        [](const auto& in) { return composed_softmax(in[0], 0); }, {x}, {true});
  require_same_function([](const auto& in) { return log_softmax(in[0], -1); },
                        [](const auto& in) { return composed_log_softmax(in[0], -1); }, {x},
                        {true});
}

TEST_CASE("causal softmax equals softmax with future keys masked to -inf", "[fused]") {
  Generator gen(2);
  for (std::int64_t offset : {0, 1, 2}) {
    INFO("offset " << offset);
    const Tensor scores = u({2, 3, 3 + offset}, gen, -4, 4);
    const Tensor hidden = eq(causal_mask(3, 3 + offset, offset), zeros({}, {.dtype = DType::f64}));
    require_same_function([offset](const auto& in) { return causal_softmax(in[0], offset); },
                          [hidden](const auto& in) {
                            return composed_softmax(masked_fill(in[0], hidden, -INFINITY), -1);
                          },
                          {scores}, {true});
  }
}

TEST_CASE("float32 wide rows: -inf entries get probability 0 and a NaN logit gives a NaN loss",
          "[fused]") {
  // Vectorised exponentials must not turn -inf into NaN nor swallow a NaN.
  std::vector<float> row(3000);
  for (std::size_t j = 0; j < row.size(); ++j) row[j] = std::sin(0.1f * j) * 5;
  for (std::size_t j = 0; j < row.size(); j += 7) row[j] = -INFINITY;
  const std::vector<float> p = softmax(from_vector(row, {1, 3000})).to_vector<float>();
  double total = 0;
  for (std::size_t j = 0; j < row.size(); ++j) {
    REQUIRE(std::isfinite(p[j]));
    if (j % 7 == 0) REQUIRE(p[j] == 0.0f);
    total += p[j];
  }
  REQUIRE(near(total, 1.0, 1e-5, 0));
  row[1234] = NAN;
  const Tensor logits = from_vector(row, {1, 3000});
  REQUIRE(std::isnan(cross_entropy(logits, from_vector<std::int64_t>({5}, {1})).item<double>()));
  const Tensor x = from_vector<float>({1.0f}, {1, 1}).requires_grad_();
  const Tensor weight = logits.t().contiguous();  // (3000, 1): logits = x W^T = the row
  REQUIRE(std::isnan(
      linear_cross_entropy(x, weight, from_vector<std::int64_t>({5}, {1})).item<double>()));
}

TEST_CASE("causal_attention equals the composed heads, matmuls, causal softmax and dropout",
          "[fused]") {
  Generator gen(12);
  struct Config {
    std::int64_t heads, kv;
    double p;
  };
  for (const Config c : {Config{2, 2, 0.0}, Config{4, 2, 0.0}, Config{4, 1, 0.25}}) {
    INFO("heads " << c.heads << " kv " << c.kv << " dropout " << c.p);
    const std::int64_t B = 2, T = 5, d = 3, group = c.heads / c.kv;
    const Tensor projected = u({B, T, (c.heads + 2 * c.kv) * d}, gen);
    Tensor fused_probs;
    require_same_function(
        [&](const auto& in) {
          Generator dropout_gen(99);
          return causal_attention(in[0], c.heads, c.kv, c.p, true, &dropout_gen, &fused_probs);
        },
        [&](const auto& in) {
          // The unfused path of nn::MultiHeadAttention: heads as views, grouped query heads.
          const auto heads_of = [&](std::int64_t first, std::int64_t count) {
            return in[0]
                .narrow(2, first * d, count * d)
                .view({B, T, count, d})
                .permute({0, 2, 1, 3});
          };
          const Tensor q = heads_of(0, c.heads).reshape({B, c.kv, group * T, d});
          const Tensor k = heads_of(c.heads, c.kv), v = heads_of(c.heads + c.kv, c.kv);
          const Tensor s = matmul(q, k.transpose(2, 3)) * (1.0 / std::sqrt(double(d)));
          const Tensor a = causal_softmax(s.view({B, c.kv, group, T, T}));
          REQUIRE_NEAR(fused_probs, a.detach().view({B, c.heads, T, T}), kRtol, kAtol);
          Generator dropout_gen(99);
          const Tensor y =
              matmul(dropout(a, c.p, true, &dropout_gen).view({B, c.kv, group * T, T}), v);
          return y.view({B, c.heads, T, d}).permute({0, 2, 1, 3}).reshape({B, T, c.heads * d});
        },
        {projected}, {true});
  }
}

TEST_CASE("causal_attention of an empty batch or sequence has a zero gradient", "[fused]") {
  for (const Shape& shape : {Shape{0, 3, 12}, Shape{2, 0, 12}}) {
    const Tensor projected = zeros(shape, {.dtype = DType::f64}).requires_grad_();
    const Tensor out = causal_attention(projected, 2, 2);
    REQUIRE(out.shape() == Shape{shape[0], shape[1], 4});
    out.sum().backward();
    REQUIRE(projected.grad().shape() == shape);
  }
}

TEST_CASE("layer_norm equals (x - mean) / sqrt(var + eps) * gamma + beta", "[fused]") {
  Generator gen(3);
  const Tensor x = u({5, 8}, gen, -3, 3), gamma = u({8}, gen), beta = u({8}, gen);
  require_same_function([](const auto& in) { return layer_norm(in[0], in[1], in[2], 1e-5); },
                        [](const auto& in) {
                          const Tensor centered = in[0] - mean(in[0], {-1}, true);
                          const Tensor var = mean(centered * centered, {-1}, true);
                          return centered / sqrt(var + 1e-5) * in[1] + in[2];
                        },
                        {x, gamma, beta}, {true, true, true});
}

TEST_CASE("cross_entropy equals the mean of -log_softmax at the targets", "[fused]") {
  Generator gen(4);
  const Tensor logits = u({6, 9}, gen, -4, 4);
  const Tensor targets = from_vector<std::int64_t>({3, -100, 0, 8, 8, -100}, {6});
  const Tensor counted = from_vector<double>({1, 0, 1, 1, 1, 0}, {6, 1});
  require_same_function([](const auto& in) { return cross_entropy(in[0], in[1]); },
                        [counted](const auto& in) {
                          const Tensor picked =
                              composed_log_softmax(in[0], -1) * one_hot(in[1], 9) * counted;
                          return neg(sum(picked)) / 4.0;
                        },
                        {logits, targets}, {true, false});
}

TEST_CASE("embedding equals a one-hot matrix times the table", "[fused]") {
  Generator gen(5);
  const Tensor table = u({7, 3}, gen);
  const Tensor ids = from_vector<std::int64_t>({6, 0, 6, 2, 6, 6}, {2, 3});
  require_same_function([](const auto& in) { return embedding(in[0], in[1]); },
                        [](const auto& in) {
                          return matmul(one_hot(in[1], 7), in[0]).view({2, 3, 3});
                        },
                        {table, ids}, {true, false});
}

TEST_CASE("dropout equals x times its Philox keep mask scaled by 1/(1-p)", "[fused]") {
  Generator gen(6);
  const Tensor x = u({5, 6}, gen);
  // The float32 uniform draw reads the same words as the mask: keep where u >= p.
  Generator mask_gen(77);
  const Tensor keep = ge(rand({5, 6}, {}, &mask_gen), full({}, 0.25)).to(DType::f64);
  require_same_function(
      [](const auto& in) {
        Generator g(77);
        return dropout(in[0], 0.25, true, &g);
      },
      [keep](const auto& in) { return in[0] * keep / 0.75; }, {x}, {true});
  REQUIRE(dropout(x, 0.25, false).is_same(x));
  const std::vector<double> kept = keep.to_vector<double>();
  const double fraction = std::accumulate(kept.begin(), kept.end(), 0.0) / kept.size();
  REQUIRE(fraction > 0.4);  // 30 draws at P(keep) = 0.75
}

TEST_CASE("softmax and cross_entropy stay finite for logits of +-1e4", "[fused]") {
  for (DType dtype : {DType::f32, DType::f64}) {
    INFO("dtype " << dtype_name(dtype));
    const Tensor logits = from_vector<double>({1e4, -1e4, 0.0, -1e4, 1e4, 1e4}, {2, 3}).to(dtype);
    const std::vector<double> p = softmax(logits).to_vector<double>();
    REQUIRE(p == std::vector<double>{1, 0, 0, 0, 0.5, 0.5});
    const std::vector<double> lp = log_softmax(logits).to_vector<double>();
    for (double v : lp) REQUIRE(std::isfinite(v));
    REQUIRE(lp[1] == -2e4);
    const Tensor leaf = logits.detach().requires_grad_();
    const Tensor loss = cross_entropy(leaf, from_vector<std::int64_t>({1, 2}, {2}));
    REQUIRE(near(loss.item<double>(), (2e4 + std::log(2.0)) / 2, 1e-6, 0));
    loss.backward();
    for (double g : leaf.grad().to_vector<double>()) REQUIRE(std::isfinite(g));
  }
}

TEST_CASE("linear_cross_entropy equals cross_entropy(matmul(x, W^T))", "[fused]") {
  Generator gen(8);
  const Tensor x = u({6, 5}, gen), weight = u({9, 5}, gen);
  const Tensor targets = from_vector<std::int64_t>({3, -100, 0, 8, 8, 2}, {6});
  require_same_function(
      [](const auto& in) { return linear_cross_entropy(in[0], in[1], in[2]); },
      [](const auto& in) { return cross_entropy(matmul(in[0], in[1].t()), in[2]); },
      {x, weight, targets}, {true, true, false});
}

TEST_CASE("linear_cross_entropy's backward needs neither the targets nor a small ignore_index",
          "[fused]") {
  Generator gen(13);
  const Tensor x = u({4, 3}, gen), weight = u({6, 3}, gen);
  const std::int64_t ignore = std::numeric_limits<std::int64_t>::max();  // not exact in a double
  const Tensor targets = from_vector<std::int64_t>({5, ignore, 0, 2}, {4});
  const Tensor w1 = weight.detach().requires_grad_(), w2 = weight.detach().requires_grad_();
  const Tensor loss = linear_cross_entropy(x, w1, targets, ignore);
  targets.fill_(1.0);  // refilled before backward, as a training loop may do with its buffer
  loss.backward();
  const Tensor reference =
      linear_cross_entropy(x, w2, from_vector<std::int64_t>({5, -100, 0, 2}, {4}), -100);
  reference.backward();
  REQUIRE_NEAR(loss, reference, kRtol, kAtol);
  REQUIRE_NEAR(w1.grad(), w2.grad(), kRtol, kAtol);
}

TEST_CASE("linear equals matmul(x, W^T) + b, with and without bias", "[fused]") {
  Generator gen(9);
  const Tensor x = u({5, 4}, gen), weight = u({3, 4}, gen), bias = u({3}, gen);
  require_same_function([](const auto& in) { return linear(in[0], in[1], in[2]); },
                        [](const auto& in) { return matmul(in[0], in[1].t()) + in[2]; },
                        {x, weight, bias}, {true, true, true});
  require_same_function([](const auto& in) { return linear(in[0], in[1]); },
                        [](const auto& in) { return matmul(in[0], in[1].t()); }, {x, weight},
                        {true, true});
}

TEST_CASE("linear_cross_entropy without a gradient gives the same loss, block by block",
          "[fused]") {
  Generator gen(10);
  const Tensor x = u({600, 8}, gen), weight = u({50, 8}, gen);  // 600 rows: three blocks
  std::vector<std::int64_t> ids(600);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = i % 7 == 0 ? -100 : (i * 13) % 50;
  const Tensor targets = from_vector(ids, {600});
  const Tensor with_grad = linear_cross_entropy(x.detach().requires_grad_(), weight, targets);
  NoGradGuard no_grad;
  const Tensor without = linear_cross_entropy(x, weight, targets);
  REQUIRE_NEAR(without, with_grad.detach(), 1e-12, 0);
  REQUIRE_NEAR(without, cross_entropy(matmul(x, weight.t()), targets), 1e-12, 0);
}

TEST_CASE("float32 softmax and cross-entropy over a wide vocabulary agree with float64",
          "[fused]") {
  // 3,000 classes: several 512-element blocks of exponentials, a tail shorter than a vector, and
  // rows prefetched while the previous one is exponentiated. The reference is composed from core
  // ops in float64.
  Generator gen(11);
  const Tensor x = u({6, 16}, gen), weight = u({3000, 16}, gen, -1.0, 1.0);
  const Tensor targets = from_vector<std::int64_t>({2999, 0, -100, 1234, 17, 512}, {6});
  const auto reference_loss = [&](const Tensor& input, const Tensor& w) {
    const Tensor log_p = composed_log_softmax(matmul(input, w.t()), 1);
    return -sum(log_p * one_hot(targets, 3000)) / 5.0;  // five targets are counted
  };
  // Values to float32 accuracy; gradients of x also carry the float32 GEMM's rounding over 3,000
  // terms of both signs, hence the absolute term.
  const auto agree = [](const Tensor& single, const Tensor& reference) {
    REQUIRE_NEAR(single.to(DType::f64), reference, 2e-5, 1e-6);
  };
  const Tensor logits = matmul(x, weight.t()), logits32 = logits.to(DType::f32);
  agree(softmax(logits32), composed_softmax(logits, 1));
  agree(log_softmax(logits32), composed_log_softmax(logits, 1));
  agree(cross_entropy(logits32, targets), reference_loss(x, weight));

  const Tensor x32 = x.to(DType::f32).requires_grad_(),
               w32 = weight.to(DType::f32).requires_grad_();
  const Tensor x64 = x.detach().requires_grad_(), w64 = weight.detach().requires_grad_();
  const Tensor loss32 = linear_cross_entropy(x32, w32, targets);
  const Tensor loss64 = reference_loss(x64, w64);
  agree(loss32, loss64);
  loss32.backward();
  loss64.backward();
  agree(x32.grad(), x64.grad());
  agree(w32.grad(), w64.grad());
}

TEST_CASE("float32 row statistics hold when a later block raises the max or earlier ones are -inf",
          "[fused]") {
  // Rows of 2,000: more than three 512-element blocks, whose running max and sum are rescaled
  // whenever a block raises the max (row 0 rises at every block) or replaces -inf (rows 1, 2).
  constexpr std::int64_t kCols = 2000;
  constexpr double kMinusInf = -std::numeric_limits<double>::infinity();
  std::vector<double> values(3 * kCols);
  for (std::int64_t j = 0; j < kCols; ++j) {
    values[j] = -30.0 + 60.0 * j / (kCols - 1);
    values[kCols + j] = j < 1100 ? kMinusInf : std::sin(0.1 * j);
    values[2 * kCols + j] = j == kCols - 1 ? 7.0 : kMinusInf;
  }
  const Tensor logits = from_vector(values, {3, kCols});
  const std::vector<std::int64_t> target_ids{kCols - 2, 1500, kCols - 1};
  // log sum_j exp(x_j) - x_target per row, in float64 on the host; the mean over the rows.
  double reference_loss = 0.0;
  for (std::int64_t r = 0; r < 3; ++r) {
    const double* row = values.data() + r * kCols;
    const double m = *std::max_element(row, row + kCols);
    double s = 0.0;
    for (std::int64_t j = 0; j < kCols; ++j) s += std::exp(row[j] - m);
    reference_loss += (m + std::log(s) - row[target_ids[r]]) / 3.0;
  }
  const Tensor logits32 = logits.to(DType::f32);
  REQUIRE_NEAR(softmax(logits32).to(DType::f64), composed_softmax(logits, 1), 2e-6, 1e-7);
  const double loss = cross_entropy(logits32, from_vector(target_ids, {3})).item<double>();
  CHECK(loss == Approx(reference_loss).epsilon(2e-6));
  const std::vector<double> log_p = log_softmax(logits32).to(DType::f64).to_vector<double>();
  const std::vector<double> p = softmax(logits).to_vector<double>();
  for (std::int64_t i = 0; i < 3 * kCols; ++i) {
    INFO("element " << i);
    if (values[i] == kMinusInf) {
      REQUIRE(log_p[i] == kMinusInf);
    } else {
      REQUIRE(log_p[i] == Approx(std::log(p[i])).epsilon(2e-6).margin(1e-5));
    }
  }
}
