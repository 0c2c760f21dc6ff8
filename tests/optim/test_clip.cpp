// Gradient clipping by global norm: the returned norm, the scaled gradients, the no-op under the
// limit, the fused path (step(clip_scale)) equal to clipping first, and thread independence.
#include <cmath>

#include <catch2/catch.hpp>

#include "core/kiln.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "tests/harness/near.h"
#include "tests/harness/op_table.h"
#include "tests/optim/reference.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// Leaves a (2) and b (1, 1) with gradients (3, 4) and (12): global norm 13. c has no gradient.
struct Params {
  Tensor a = zeros({2}, {.dtype = DType::f64}).requires_grad_();
  Tensor b = zeros({1, 1}, {.dtype = DType::f64}).requires_grad_();
  Tensor c = zeros({5}, {.dtype = DType::f64}).requires_grad_();
  Params() {
    a.set_grad(from_vector<double>({3, 4}, {2}));
    b.set_grad(from_vector<double>({12}, {1, 1}));
  }
  std::vector<Tensor> all() const { return {a, b, c}; }
};

}  // namespace

TEST_CASE("optim: clip_grad_norm returns the global norm and scales gradients above the limit",
          "[optim][clip]") {
  const Params p;
  REQUIRE(grad_norm(p.all()) == 13.0);
  REQUIRE(clip_grad_norm(p.all(), 6.5) == 13.0);
  const double scale = 6.5 / (13.0 + 1e-6);  // PyTorch's rule: max_norm / (norm + 1e-6)
  REQUIRE_NEAR(p.a.grad(), from_vector<double>({3 * scale, 4 * scale}, {2}), 1e-15, 0);
  REQUIRE_NEAR(p.b.grad(), from_vector<double>({12 * scale}, {1, 1}), 1e-15, 0);
  REQUIRE_FALSE(p.c.grad().defined());
  REQUIRE(near(grad_norm(p.all()), 6.5, 1e-6, 0));
}

TEST_CASE("optim: clip_grad_norm leaves gradients under the limit untouched", "[optim][clip]") {
  const Params p;
  const Tensor a_before = p.a.grad().clone();
  const std::uint64_t version = p.a.grad().version();
  REQUIRE(clip_grad_norm(p.all(), 20.0) == 13.0);
  REQUIRE_EXACT(p.a.grad(), a_before);
  REQUIRE(p.a.grad().version() == version);
  REQUIRE(clip_scale(13.0, 20.0) == 1.0);
  REQUIRE(clip_scale(13.0, 6.5) == 6.5 / (13.0 + 1e-6));
}

TEST_CASE("optim: the norm of no gradients is 0", "[optim][clip]") {
  const Tensor w = zeros({3}).requires_grad_();
  REQUIRE(grad_norm(std::vector<Tensor>{w}) == 0.0);
  REQUIRE(clip_grad_norm(std::vector<Tensor>{w}, 1.0) == 0.0);
}

TEST_CASE(
    "optim: clipping through step(clip_scale) equals clipping the gradients first, bit for bit",
    "[optim][clip]") {
  const auto make = [] {
    return NamedTensors{{"w", tensor_of<float>(initial_values(6), {2, 3}).requires_grad_()},
                        {"b", tensor_of<float>(initial_values(3), {3}).requires_grad_()}};
  };
  const NamedTensors separate = make(), fused = make();
  AdamW opt_separate(separate, {.lr = 0.01}), opt_fused(fused, {.lr = 0.01});
  for (int t = 1; t <= 3; ++t) {
    for (const NamedTensors* params : {&separate, &fused})
      for (const auto& [name, p] : *params)
        p.set_grad(tensor_of<float>(gradient_at(t, p.numel()), p.shape()).mul_(10.0));
    const double norm_separate = clip_grad_norm(opt_separate.parameters(), 1.0);
    opt_separate.step();
    const double norm_fused = grad_norm(opt_fused.parameters());
    opt_fused.step(clip_scale(norm_fused, 1.0));
    REQUIRE(norm_separate == norm_fused);
    REQUIRE(norm_fused > 1.0);  // clipping did happen
  }
  for (std::size_t i = 0; i < separate.size(); ++i) {
    INFO(separate[i].first);
    REQUIRE_EXACT(fused[i].second, separate[i].second);
  }
}

TEST_CASE("optim: the global norm gives the same bits with 1 and 3 threads", "[optim][clip]") {
  const std::int64_t n = 100000;
  std::vector<Tensor> params;
  double expected = 0.0;
  for (int k = 0; k < 3; ++k) {
    const std::vector<double> g = rounded<float>(gradient_at(k + 1, n));
    for (double x : g) expected += x * x;
    params.push_back(zeros({n}).requires_grad_());
    params.back().set_grad(tensor_of<float>(g, {n}));
  }
  set_num_threads(3);
  const double three = grad_norm(params);
  set_num_threads(1);
  const double one = grad_norm(params);
  set_num_threads(2);
  REQUIRE(three == one);
  REQUIRE(near(three, std::sqrt(expected), 1e-6, 0));  // float32 slots
}

TEST_CASE("optim: clipping errors name the problem", "[optim][clip][errors]") {
  const Tensor f = zeros({2}).requires_grad_();
  const Tensor d = zeros({2}, {.dtype = DType::f64}).requires_grad_();
  f.set_grad(ones({2}));
  d.set_grad(ones({2}, {.dtype = DType::f64}));
  REQUIRE_THROWS_WITH(grad_norm(std::vector<Tensor>{f, d}), Catch::Contains("grad_norm") &&
                                                                Catch::Contains("float32") &&
                                                                Catch::Contains("float64"));
  REQUIRE_THROWS_WITH(clip_grad_norm(std::vector<Tensor>{f}, 0.0), Catch::Contains("max_norm 0"));
  REQUIRE_THROWS_WITH(clip_grad_norm(std::vector<Tensor>{f}, -1.0), Catch::Contains("max_norm -1"));
}

TEST_CASE("optim: the global norm on CUDA equals the CPU's", "[optim][clip][cuda]") {
  if (!cuda_available_or_skip()) return;
  const std::int64_t n = 100000;
  std::vector<Tensor> cpu, cuda;
  for (int k = 0; k < 3; ++k) {
    const Tensor g = tensor_of<float>(gradient_at(k + 1, n), {n});
    cpu.push_back(zeros({n}).requires_grad_());
    cpu.back().set_grad(g);
    cuda.push_back(zeros({n}).to(Device::cuda()).requires_grad_());
    cuda.back().set_grad(g.to(Device::cuda()));
  }
  REQUIRE(near(grad_norm(cuda), grad_norm(cpu), 1e-6, 0));  // float32 slots, other partitions
  REQUIRE(near(clip_grad_norm(cuda, 1.0), grad_norm(cpu), 1e-6, 0));
  REQUIRE(near(grad_norm(cuda), 1.0, 1e-6, 0));
}
