// The autograd engine: closed-form gradients, accumulation, graph freeing, in-place detection,
// grad mode, and that nothing leaks.
#include <catch2/catch.hpp>

#include "core/autograd.h"
#include "core/kiln.h"
#include "tests/harness/near.h"

using namespace kiln;

TEST_CASE("gradients match hand-computed values", "[autograd]") {
  // f(a, b) = sum(a * b + exp(a)),  df/da = b + exp(a),  df/db = a.
  const Tensor a = from_vector<double>({0.5, -1.0, 2.0}, {3}).requires_grad_();
  const Tensor b = from_vector<double>({3.0, 4.0, -5.0}, {3}).requires_grad_();
  const Tensor f = (a * b + exp(a)).sum();
  REQUIRE(testing::near(f.item<double>(),
                        1.5 - 4.0 - 10.0 + std::exp(0.5) + std::exp(-1.0) + std::exp(2.0), 1e-15,
                        0));
  f.backward();
  REQUIRE_NEAR(
      a.grad(),
      from_vector<double>({3.0 + std::exp(0.5), 4.0 + std::exp(-1.0), -5.0 + std::exp(2.0)}, {3}),
      1e-15, 0);
  REQUIRE_NEAR(b.grad(), from_vector<double>({0.5, -1.0, 2.0}, {3}), 0, 0);
}

TEST_CASE("a tensor used twice receives the sum of both gradients", "[autograd]") {
  const Tensor x = full({2}, 3.0, {.dtype = DType::f64}).requires_grad_();
  (x * x).sum().backward();  // d(x^2)/dx = 2x
  REQUIRE(x.grad().to_vector<double>() == std::vector<double>{6.0, 6.0});
}

TEST_CASE("an embedding adds its rows into a table gradient that another use already gave",
          "[autograd]") {
  // A tied table: looked up by ids and multiplied densely. Backward reaches the two uses in
  // either order; when the dense gradient arrives first the lookup adds its rows into it in
  // place (record_sparse). Both must equal the one-hot formulation, and .grad must accumulate.
  Generator gen(4);
  const Tensor table = uniform({5, 3}, -1, 1, {.dtype = DType::f64}, &gen);
  const Tensor x = uniform({2, 3}, -1, 1, {.dtype = DType::f64}, &gen);
  const Tensor ids = from_vector<std::int64_t>({1, 3, 1, 4}, {4});
  const Tensor weights = uniform({4, 3}, -1, 1, {.dtype = DType::f64}, &gen);
  const Tensor one_hot =
      eq(ids.view({4, 1}), arange(5, {.dtype = DType::i64}).view({1, 5})).to(DType::f64);
  for (bool lookup_first : {true, false}) {
    INFO("lookup first in the forward: " << lookup_first);
    const auto loss = [&](const Tensor& t, bool dense_lookup) {
      const Tensor looked_up = dense_lookup ? matmul(one_hot, t) : embedding(t, ids);
      const Tensor lookup_term = (looked_up * weights).sum();
      const Tensor dense_term = (matmul(x, t.t()) * matmul(x, t.t())).sum();
      return lookup_first ? lookup_term + dense_term : dense_term + lookup_term;
    };
    const Tensor fused = table.detach().requires_grad_(),
                 composed = table.detach().requires_grad_();
    loss(fused, false).backward();
    loss(composed, true).backward();
    REQUIRE_NEAR(fused.grad(), composed.grad(), 1e-12, 1e-14);
    loss(fused, false).backward();  // accumulates into the existing .grad
    REQUIRE_NEAR(fused.grad(), composed.grad() * 2.0, 1e-12, 1e-14);
  }
}

TEST_CASE("gradient accumulates over two backward calls until reset", "[autograd]") {
  const Tensor w = from_vector<double>({1, 2}, {2}).requires_grad_();
  const Tensor x = from_vector<double>({3, 4}, {2});
  (w * x).sum().backward();
  const std::vector<double> once = w.grad().to_vector<double>();
  (w * x).sum().backward();
  const std::vector<double> twice = w.grad().to_vector<double>();
  REQUIRE(twice == std::vector<double>{2 * once[0], 2 * once[1]});
  w.set_grad(Tensor());
  (w * x).sum().backward();
  REQUIRE(w.grad().to_vector<double>() == once);
}

TEST_CASE("backward needs a scalar unless a gradient is given", "[autograd]") {
  const Tensor x = ones({2, 2}).requires_grad_();
  const Tensor y = x * 2.0;
  REQUIRE_THROWS_WITH(y.backward(), Catch::Contains("backward") && Catch::Contains("[2, 2]"));
  y.backward(full({2, 2}, 0.5));
  REQUIRE(x.grad().to_vector<float>() == std::vector<float>(4, 1.0f));
  REQUIRE_THROWS_WITH(ones({2}).sum().backward(), Catch::Contains("does not require grad"));
}

TEST_CASE("the graph is freed after backward unless retain_graph", "[autograd]") {
  const Tensor x = ones({3}).requires_grad_();
  const Tensor y = (exp(x) * 2.0).sum();
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();  // the graph was kept once
  REQUIRE(testing::near(x.grad().to_vector<float>()[0], 4 * std::exp(1.0), 1e-6, 0));
  REQUIRE_THROWS_WITH(y.backward(),
                      Catch::Contains("already freed") && Catch::Contains("retain_graph"));
}

TEST_CASE("a saved tensor modified in place is reported at backward, naming the op", "[autograd]") {
  const Tensor x = ones({3}).requires_grad_();
  const Tensor y = exp(x);  // exp saves its output
  const Tensor z = y.sum();
  {
    NoGradGuard no_grad;
    y.detach().mul_(2.0);
  }
  REQUIRE_THROWS_WITH(z.backward(), Catch::Contains("exp") && Catch::Contains("modified in place"));
}

TEST_CASE("requires_grad propagates and NoGradGuard stops recording", "[autograd]") {
  const Tensor w = ones({2}).requires_grad_();
  const Tensor c = ones({2});
  REQUIRE((w + c).requires_grad());
  REQUIRE_FALSE((c + c).requires_grad());
  REQUIRE_FALSE((w + c).is_leaf());
  {
    NoGradGuard no_grad;
    REQUIRE_FALSE((w * 3.0).requires_grad());
  }
  REQUIRE(grad_mode_enabled());
  REQUIRE_FALSE(w.detach().requires_grad());
  REQUIRE_THROWS_WITH(arange(3, {.dtype = DType::i64}).requires_grad_(),
                      Catch::Contains("requires_grad_") && Catch::Contains("int64"));
  REQUIRE_THROWS_WITH((w * 2.0).requires_grad_(), Catch::Contains("leaves"));
}

TEST_CASE("gradients flow through views back to the base shape", "[autograd]") {
  const Tensor x = arange(0.0, 6.0, 1.0, {.dtype = DType::f64}).view({2, 3}).detach();
  x.requires_grad_();
  const Tensor y = x.t().slice(0, 0, 3, 2).reshape({-1});  // x[0,0], x[1,0], x[0,2], x[1,2]
  (y * from_vector<double>({1, 2, 3, 4}, {4})).sum().backward();
  REQUIRE(x.grad().to_vector<double>() == std::vector<double>{1, 0, 3, 2, 0, 4});
}

TEST_CASE("a deep graph backpropagates without recursion limits", "[autograd]") {
  const Tensor x = ones({1}, {.dtype = DType::f64}).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < 20000; ++i) y = y * 1.0001;
  y.sum().backward();
  REQUIRE(testing::near(x.grad().item<double>(), std::pow(1.0001, 20000), 1e-9, 0));
}

TEST_CASE("10,000 forward/backward steps leave no tensors, storages or nodes behind",
          "[autograd][leaks]") {
  const Tensor w = randn({4, 3}).requires_grad_();
  const Tensor x = randn({5, 4});
  auto step = [&] {
    const Tensor loss = relu(matmul(x, w)).sum() + (w * w).mean();
    loss.backward();
  };
  step();  // creates w.grad and the accumulator
  const std::int64_t tensors = live_tensor_count(), storages = Storage::live_count(),
                     nodes = Node::live_count();
  for (int i = 0; i < 10000; ++i) step();
  REQUIRE(live_tensor_count() == tensors);
  REQUIRE(Storage::live_count() == storages);
  REQUIRE(Node::live_count() == nodes);
}

TEST_CASE("a backward that returns too few or too many gradients is an error naming the op",
          "[autograd]") {
  const Tensor a = from_vector<double>({1.0, 2.0}, {2}).requires_grad_();
  const Tensor b = from_vector<double>({3.0, 4.0}, {2}).requires_grad_();
  for (const std::size_t returned : {std::size_t{1}, std::size_t{3}}) {
    INFO(returned << " gradients for 2 inputs");
    Tensor out = empty({2}, {DType::f64});
    out.copy_(a.detach() * b.detach());
    record("user_product", out, {a, b}, {a, b}, [returned](const Tensor& g, const Saved& s) {
      Grads grads{g * s[1]};
      while (grads.size() < returned) grads.push_back(g * s[0]);
      return grads;
    });
    REQUIRE_THROWS_WITH(out.sum().backward(),
                        Catch::Contains("user_product") &&
                            Catch::Contains(std::to_string(returned) + " gradients for 2 inputs"));
  }
}
