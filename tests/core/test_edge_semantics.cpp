// kiln's answers at the edges, where PyTorch's could be another or the docs had to choose: relu
// at NaN and -0, sum_to's dtype, the C++ scalar's dtype with bf16, causal_softmax of a row with no
// finite visible score, ignored rows of a loss, gradients that meet infinities, empty dims. Most
// were found by the differential test against PyTorch (docs/differential-testing.md, which lists
// the semantic differences with their reasons).
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "core/kiln.h"
#include "tests/harness/near.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

TEST_CASE("relu keeps NaN and -0 and passes a NaN's gradient, as PyTorch", "[semantics]") {
  for (DType dtype : {DType::f32, DType::f64}) {
    INFO(dtype_name(dtype));
    const Tensor x = from_vector<double>({kNaN, -0.0, 0.0, -1.5, 2.0}, {5}).to(dtype);
    const Tensor leaf = x.detach().requires_grad_();
    const Tensor y = relu(leaf);
    const std::vector<double> v = y.to_vector<double>();
    REQUIRE(std::isnan(v[0]));
    REQUIRE((v[1] == 0.0 && std::signbit(v[1])));  // PyTorch's relu(-0.) is -0.
    REQUIRE((v[2] == 0.0 && !std::signbit(v[2])));
    REQUIRE(v[3] == 0.0);
    REQUIRE(v[4] == 2.0);
    y.backward(full({5}, 3.0, {dtype}));
    // threshold_backward: the gradient passes unless relu(x) <= 0.
    REQUIRE_EXACT(leaf.grad(), from_vector<double>({3, 0, 0, 0, 3}, {5}).to(dtype));
  }
  const std::vector<double> bf =
      relu(from_vector<double>({kNaN, -2}, {2}).to(DType::bf16)).to_vector<double>();
  REQUIRE(std::isnan(bf[0]));
  REQUIRE(bf[1] == 0.0);
}

TEST_CASE("sum_to of a bf16 tensor is float32, also when the shape already matches",
          "[semantics][bf16]") {
  const Tensor x = from_vector<double>({1.5, -2, 3, 0.25}, {2, 2}).to(DType::bf16);
  const Tensor same = sum_to(x, {2, 2});
  REQUIRE(same.dtype() == DType::f32);
  REQUIRE_EXACT(same, x.to(DType::f32));
  const Tensor reduced = sum_to(x, {1, 2});
  REQUIRE(reduced.dtype() == DType::f32);
  REQUIRE_EXACT(reduced, from_vector<double>({4.5, -1.75}, {1, 2}).to(DType::f32));
  REQUIRE(sum_to(x.to(DType::f64), {2, 2}).dtype() == DType::f64);
}

TEST_CASE("a C++ scalar with a bf16 tensor is a float32 scalar: x op s rounded to bf16 once",
          "[semantics][bf16]") {
  // s = 1 + 2^-8 is not a bf16 (its neighbours are 1 and 1 + 2^-7). In float32, 255 s =
  // 255.99609375 rounds to the bf16 256; PyTorch 1.13 rounds s to bf16 (1) first and gives 255.
  const Tensor x = full({1}, 255.0, {DType::bf16});
  const double s = 1.0 + std::ldexp(1.0, -8);
  REQUIRE(mul(x, s).dtype() == DType::bf16);
  REQUIRE(mul(x, s).item<double>() == 256.0);
  REQUIRE(div(x, 1.0 / s).item<double>() == 256.0);
  // 1 + (2^-8 + 2^-12) = 1.00415...: above the midpoint 1 + 2^-8, so the bf16 1 + 2^-7.
  REQUIRE(add(full({1}, 1.0, {DType::bf16}), std::ldexp(1.0, -8) + std::ldexp(1.0, -12))
              .item<double>() == 1.0 + std::ldexp(1.0, -7));
  // float32 keeps the tensor's dtype for the scalar: 1 + 2^-30 is 1 in float32.
  REQUIRE(add(full({1}, 1.0, {DType::f32}), std::ldexp(1.0, -30)).item<double>() == 1.0);
  REQUIRE(add(full({1}, 1.0, {DType::f64}), std::ldexp(1.0, -30)).item<double>() ==
          1.0 + std::ldexp(1.0, -30));
}

TEST_CASE("causal_softmax of a row whose visible scores are all -inf: NaN where visible, 0 after",
          "[semantics]") {
  for (DType dtype : {DType::f32, DType::f64}) {
    INFO(dtype_name(dtype));
    // Query 0 sees key 0 (score -inf); query 1 sees both.
    const Tensor scores = from_vector<double>({-kInf, 5, -kInf, 0}, {2, 2}).to(dtype);
    const std::vector<double> a = causal_softmax(scores).to_vector<double>();
    REQUIRE(std::isnan(a[0]));
    REQUIRE((a[1] == 0.0 && !std::signbit(a[1])));  // softmax(where(mask, S, -inf)) gives NaN
    REQUIRE(a[2] == 0.0);
    REQUIRE(a[3] == 1.0);
    // A row with a finite visible score is the formula's, masked keys 0.
    const std::vector<double> b =
        causal_softmax(from_vector<double>({1, kNaN, 2, 2}, {2, 2}).to(dtype)).to_vector<double>();
    REQUIRE(b[0] == 1.0);
    REQUIRE(b[1] == 0.0);
    REQUIRE(near(b[2], 0.5, 1e-7, 0));
    REQUIRE(near(b[3], 0.5, 1e-7, 0));
  }
}

TEST_CASE("max sends an infinite gradient to its index only, the rest exactly 0", "[semantics]") {
  const Tensor x = from_vector<double>({1, 3, 2}, {3}).requires_grad_();
  const Tensor y = max(x, 0).values;
  y.backward(full({}, kInf, {DType::f64}));
  REQUIRE_EXACT(x.grad(), from_vector<double>({0, kInf, 0}, {3}));  // 0 * inf would be NaN
}

TEST_CASE("pow(x, 0) has gradient 0 everywhere, also at x = 0 and inf", "[semantics]") {
  const Tensor x = from_vector<double>({0, kInf, -2, kNaN}, {4}).requires_grad_();
  const Tensor y = pow(x, 0.0);
  REQUIRE_EXACT(y, ones({4}, {DType::f64}));
  y.backward(ones({4}, {DType::f64}));
  REQUIRE_EXACT(x.grad(), zeros({4}, {DType::f64}));
}

TEST_CASE("index_select along a later dim of a tensor with an empty dim differentiates",
          "[semantics]") {
  const Tensor x = zeros({2, 0}).requires_grad_();
  const Tensor y = index_select(x, 1, from_vector<std::int64_t>({}, {0}));
  REQUIRE(y.shape() == Shape{2, 0});
  y.sum().backward();
  REQUIRE(x.grad().shape() == Shape{2, 0});
  const Tensor z = zeros({0, 3}).requires_grad_();
  index_select(z, 1, from_vector<std::int64_t>({2, 0}, {2})).sum().backward();
  REQUIRE(z.grad().shape() == Shape{0, 3});
}

TEST_CASE("split of an empty dim into pieces of a size gives one empty piece, as torch.split",
          "[semantics]") {
  const std::vector<Tensor> pieces = split(zeros({0, 4}), 1, 0);
  REQUIRE(pieces.size() == 1);
  REQUIRE(pieces[0].shape() == Shape{0, 4});
  REQUIRE(split(zeros({3, 4}), 2, 0).size() == 2);
}

TEST_CASE("matmul of a batch by a matrix with no columns, and with an empty inner dim",
          "[semantics]") {
  // (1, 2, 3) @ (3, 0) viewed its rows as -1 of 0 elements: "view: shape [-1, 0] is invalid".
  const Tensor a = ones({1, 2, 3}).requires_grad_(), b = ones({3, 0}).requires_grad_();
  const Tensor y = matmul(a, b);
  REQUIRE(y.shape() == Shape{1, 2, 0});
  y.sum().backward();
  REQUIRE_EXACT(a.grad(), zeros({1, 2, 3}));
  REQUIRE(b.grad().shape() == Shape{3, 0});
  // k = 0: the backward's (rows, k) view of a had the same -1.
  const Tensor c = ones({2, 2, 0}).requires_grad_(), d = ones({0, 3}).requires_grad_();
  matmul(c, d).sum().backward();
  REQUIRE(d.grad().shape() == Shape{0, 3});
}

TEST_CASE("a loss's ignored row gets exactly 0 gradient, also when its logits are not finite",
          "[semantics]") {
  // Row 1 is ignored and holds NaN and -inf: PyTorch multiplies its softmax by 0 (NaN there).
  const Tensor logits = from_vector<double>({0.5, -1, 2, kNaN, -kInf, 1}, {2, 3}).requires_grad_();
  const Tensor targets = from_vector<std::int64_t>({2, -100}, {2});
  const Tensor loss = cross_entropy(logits, targets);
  REQUIRE(std::isfinite(loss.item<double>()));
  loss.backward();
  const std::vector<double> g = logits.grad().to_vector<double>();
  REQUIRE((g[3] == 0.0 && g[4] == 0.0 && g[5] == 0.0));
  REQUIRE(std::isfinite(g[0]));
  // The same through the LM head: x W^T with an ignored row whose x is infinite.
  const Tensor x = from_vector<double>({1, 2, kInf, 0}, {2, 2}).requires_grad_();
  const Tensor w = from_vector<double>({1, 0, 0, 1, 1, 1}, {3, 2}).requires_grad_();
  const Tensor lce = linear_cross_entropy(x, w, targets);
  REQUIRE(std::isfinite(lce.item<double>()));
  lce.backward();
  const std::vector<double> gx = x.grad().to_vector<double>();
  REQUIRE((gx[2] == 0.0 && gx[3] == 0.0));
  for (double v : w.grad().to_vector<double>()) REQUIRE(std::isfinite(v));
}

TEST_CASE("linear_cross_entropy keeps float32's accuracy for a large, confidently right row",
          "[semantics]") {
  // Row 2 (|x| ~ 9e5) puts probability 1 on its target. Subtracting the one-hot after the
  // product cancelled two terms of size |x| in float32: dW[1][0] came out -0.0625 for -0.0576.
  const std::vector<double> xv = {0.5, 9.411061339947846e-12, 0.0, 0.5, 886687.125, 0.0};
  const std::vector<double> wv = {-0.22364459931850433,  0.003644762560725212,
                                  0.0005017418297939003, 21.9311466217041,
                                  6.037195703356701e-07, -1.3526523616747e-06};
  const Tensor targets = from_vector<std::int64_t>({0, 0, 1}, {3});
  const auto dw_of = [&](DType dtype) {
    const Tensor x = from_vector(xv, {3, 2}).to(dtype).requires_grad_();
    const Tensor w = from_vector(wv, {3, 2}).to(dtype).requires_grad_();
    linear_cross_entropy(x, w, targets).backward();
    return std::pair{x.grad().to(DType::f64), w.grad().to(DType::f64)};
  };
  const auto [dx32, dw32] = dw_of(DType::f32);
  const auto [dx64, dw64] = dw_of(DType::f64);
  REQUIRE_NEAR(dw32, dw64, 1e-5, 1e-7);
  REQUIRE_NEAR(dx32, dx64, 1e-5, 1e-7);
}

TEST_CASE("cross_entropy's gradient stays accurate for logits of any size", "[semantics]") {
  // Two equal logits of -4227072: the softmax is [0.5, 0.5]. exp(x - logsumexp) with the
  // logsumexp rounded to float32 (ulp 0.5 there) gave [0.61, 0.61].
  for (DType dtype : {DType::f32, DType::bf16}) {
    INFO(dtype_name(dtype));
    const Tensor base = full({2, 1}, -4227072.0);
    const Tensor logits = base.requires_grad_().expand({2, 2}).to(dtype);
    cross_entropy(logits, from_vector<std::int64_t>({0, 1}, {2})).backward();
    REQUIRE_NEAR(base.grad(), zeros({2, 1}), 0, 1e-6);  // (0.5 - 1) + 0.5 in each row
    const Tensor single = full({1, 3}, 1e7).requires_grad_();
    cross_entropy(single, from_vector<std::int64_t>({2}, {1})).backward();
    REQUIRE_NEAR(single.grad(), from_vector<double>({1, 1, -2}, {1, 3}).to(DType::f32) / 3.0, 1e-6,
                 1e-7);
  }
}

TEST_CASE("attention never reads a masked key: a NaN query row leaves later keys' dV finite",
          "[semantics][attention]") {
  // Query 0 (NaN) sees key 0 only; keys 1 and 2 are read by queries 1 and 2. PyTorch's
  // composition multiplies the NaN row's masked probabilities by dY (NaN there); kiln skips them.
  Tensor q = from_vector<double>({kNaN, 1, 0.5, -1, 2, 0.25}, {1, 1, 3, 2});
  const Tensor k = from_vector<double>({1, 0, 0, 1, 1, 1}, {1, 1, 3, 2});
  const Tensor v = from_vector<double>({1, 2, 3, 4, 5, 6}, {1, 1, 3, 2}).requires_grad_();
  causal_attention_heads(q, k, v).sum().backward();
  const std::vector<double> dv = v.grad().to_vector<double>();
  REQUIRE(std::isnan(dv[0]));
  for (std::size_t i = 2; i < dv.size(); ++i) REQUIRE(std::isfinite(dv[i]));
}

TEST_CASE("a product whose partial sums overflow is not finite, in kiln's own order",
          "[semantics][bf16]") {
  // [-3e38, 1.78, 0.67] . [-1.45, -3e38, -1.73] is -9.9e37 exactly; in float32 the first product
  // overflows and FMA keeps the second exact: +inf (PyTorch: NaN). Either way not finite.
  const double huge = -3.00405527047391e+38;
  const Tensor a = from_vector<double>({huge, 1.78125, 0.671875}, {1, 3}).to(DType::bf16);
  const Tensor b = from_vector<double>({-1.453125, huge, -1.734375}, {3, 1}).to(DType::bf16);
  REQUIRE(!std::isfinite(matmul(a, b).item<double>()));
}

TEST_CASE("attention's unnormalised running sum overflows within T_k of the range",
          "[semantics][attention]") {
  // One query, two keys of equal score with V = 3e38: the output is 3e38 in exact arithmetic,
  // but the running sum O = exp(S - m) V summed over the keys is 6e38 before O / l: float32 inf.
  const Tensor q = zeros({1, 1, 1, 1}), k = zeros({1, 1, 2, 1});
  REQUIRE(std::isinf(causal_attention_heads(q, k, full({1, 1, 2, 1}, 3e38)).item<double>()));
  const Tensor v64 = full({1, 1, 2, 1}, 3e38, {DType::f64});  // float64 has the range
  REQUIRE(causal_attention_heads(q.to(DType::f64), k.to(DType::f64), v64).item<double>() == 3e38);
}

TEST_CASE("a gradient term past float32's range is inf where float64's answer is finite",
          "[semantics][bf16]") {
  // The differential test's seed 20261206 case 2532: dropout's backward scales a gradient of
  // -3e38 by 1 / (1 - p) = 1 / 0.7, -4.3e38, past float32's largest value; a later factor (a
  // sigmoid's derivative) would bring the float64 answer back to -8.8e37. float32 arithmetic
  // overflows first, as PyTorch's float32 does: -inf, never a wrong finite value.
  for (DType dtype : {DType::f32, DType::bf16}) {
    INFO(dtype_name(dtype));
    const Tensor leaf = from_vector<double>({1.0}, {1}).to(DType::f32).requires_grad_();
    // Backward meets the factors last first: -3e38, then 1 / 0.7, then 0.2.
    mul(mul(mul(leaf.to(dtype), 0.2), 1.0 / 0.7), -3e38).sum().backward();
    REQUIRE(leaf.grad().item<double>() == -kInf);
    const Tensor x64 = from_vector<double>({1.0}, {1}).requires_grad_();
    mul(mul(mul(x64, 0.2), 1.0 / 0.7), -3e38).sum().backward();
    REQUIRE(std::isfinite(x64.grad().item<double>()));
  }
}
