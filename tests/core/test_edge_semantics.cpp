// kiln's answers at the edges, where PyTorch's could be another or the docs had to choose: relu
// at NaN and -0, sum_to's dtype, the C++ scalar's dtype with bf16, causal_softmax of a row with no
// finite visible score.
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
