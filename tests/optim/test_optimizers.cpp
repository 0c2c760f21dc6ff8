// SGD, Adam and AdamW against closed-form updates computed in double for a known gradient
// sequence; parameter groups, the AdamW grouping rule, zero_grad, parameters without gradients,
// invalid hyper-parameters and thread-count independence.
#include <memory>

#include <catch2/catch.hpp>

#include "core/kiln.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "tests/harness/near.h"
#include "tests/harness/op_table.h"
#include "tests/optim/reference.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

const Shape kShape{2, 3};
constexpr std::int64_t kNumel = 6;

// A fresh leaf parameter of dtype T holding initial_values().
template <typename T>
Tensor make_param() {
  return tensor_of<T>(initial_values(kNumel), kShape).requires_grad_();
}

// Steps `opt` (over the single parameter p) `steps` times with gradient_at(t) (rounded to T), and
// `reference` alongside in double; after every step p must match the reference within the
// tolerance of T.
template <typename T, typename Reference>
void require_matches_reference(Optimizer& opt, const Tensor& p, Reference reference, int steps,
                               double grad_scale = 1.0) {
  std::vector<double> expected = initial_values(kNumel);
  for (int t = 1; t <= steps; ++t) {
    const std::vector<double> g = rounded<T>(gradient_at(t, kNumel));
    p.set_grad(tensor_of<T>(g, kShape));
    opt.step(grad_scale);
    std::vector<double> scaled = g;
    for (double& x : scaled) x *= grad_scale;
    reference.step(expected, scaled, t);
    INFO("step " << t);
    REQUIRE_NEAR(p, tensor_of<double>(expected, kShape), optim_rtol<T>, optim_atol<T>);
  }
}

}  // namespace

TEMPLATE_TEST_CASE("optim: SGD steps p -= lr·(g + λp)", "[optim][sgd]", float, double) {
  const Tensor p = make_param<TestType>();
  Sgd opt({{"w", p}}, {.lr = 0.1, .weight_decay = 0.01});
  require_matches_reference<TestType>(opt, p, SgdReference{.lr = 0.1, .weight_decay = 0.01}, 5);
  REQUIRE(opt.state_dict().tensors.empty());  // no momentum, no state
}

TEMPLATE_TEST_CASE("optim: SGD momentum starts the buffer at the first gradient, then damps",
                   "[optim][sgd]", float, double) {
  const Tensor p = make_param<TestType>();
  Sgd opt({{"w", p}}, {.lr = 0.05, .momentum = 0.9, .dampening = 0.3});
  require_matches_reference<TestType>(
      opt, p, SgdReference{.lr = 0.05, .momentum = 0.9, .dampening = 0.3}, 6);
}

TEMPLATE_TEST_CASE("optim: SGD Nesterov with weight decay follows PyTorch's update", "[optim][sgd]",
                   float, double) {
  const Tensor p = make_param<TestType>();
  Sgd opt({{"w", p}}, {.lr = 0.05, .momentum = 0.8, .weight_decay = 0.1, .nesterov = true});
  require_matches_reference<TestType>(
      opt, p, SgdReference{.lr = 0.05, .momentum = 0.8, .weight_decay = 0.1, .nesterov = true}, 6);
}

TEMPLATE_TEST_CASE("optim: Adam's first two steps are the bias-corrected closed forms",
                   "[optim][adam]", float, double) {
  // Step 1: m̂ = g₁, v̂ = g₁², so p₁ = p₀ − lr·g₁/(|g₁| + ε).
  // Step 2: m̂ = (β₁g₁ + g₂)/(1 + β₁), v̂ = (β₂g₁² + g₂²)/(1 + β₂), p₂ = p₁ − lr·m̂/(√v̂ + ε).
  const double lr = 0.01, b1 = 0.8, b2 = 0.9, eps = 1e-6;
  const Tensor p = make_param<TestType>();
  Adam opt({{"w", p}}, {.lr = lr, .beta1 = b1, .beta2 = b2, .eps = eps});
  const std::vector<double> g1 = rounded<TestType>(gradient_at(1, kNumel));
  const std::vector<double> g2 = rounded<TestType>(gradient_at(2, kNumel));
  std::vector<double> p1 = initial_values(kNumel), p2(kNumel);
  for (std::int64_t i = 0; i < kNumel; ++i) {
    p1[i] -= lr * g1[i] / (std::fabs(g1[i]) + eps);
    const double m_hat = (b1 * g1[i] + g2[i]) / (1 + b1);
    const double v_hat = (b2 * g1[i] * g1[i] + g2[i] * g2[i]) / (1 + b2);
    p2[i] = p1[i] - lr * m_hat / (std::sqrt(v_hat) + eps);
  }
  p.set_grad(tensor_of<TestType>(g1, kShape));
  opt.step();
  REQUIRE_NEAR(p, tensor_of<double>(p1, kShape), optim_rtol<TestType>, optim_atol<TestType>);
  p.set_grad(tensor_of<TestType>(g2, kShape));
  opt.step();
  REQUIRE_NEAR(p, tensor_of<double>(p2, kShape), optim_rtol<TestType>, optim_atol<TestType>);
}

TEMPLATE_TEST_CASE("optim: Adam with L2 weight decay matches the reference over ten steps",
                   "[optim][adam]", float, double) {
  const Tensor p = make_param<TestType>();
  Adam opt({{"w", p}},
           {.lr = 0.02, .beta1 = 0.85, .beta2 = 0.99, .eps = 1e-7, .weight_decay = 0.05});
  require_matches_reference<TestType>(
      opt, p,
      AdamReference{.lr = 0.02, .beta1 = 0.85, .beta2 = 0.99, .eps = 1e-7, .weight_decay = 0.05},
      10);
  REQUIRE(opt.name() == "Adam");
  REQUIRE_FALSE(opt.decoupled_weight_decay());
}

TEMPLATE_TEST_CASE("optim: AdamW decays the parameter outside the moments", "[optim][adam]", float,
                   double) {
  const Tensor p = make_param<TestType>();
  AdamW opt({{"w", p}}, {.lr = 0.02, .weight_decay = 0.1});
  require_matches_reference<TestType>(
      opt, p, AdamReference{.lr = 0.02, .weight_decay = 0.1, .decoupled = true}, 10);
  REQUIRE(opt.name() == "AdamW");
  REQUIRE(opt.decoupled_weight_decay());
}

TEST_CASE("optim: AdamW's default weight decay is PyTorch's 0.01", "[optim][adam]") {
  AdamW opt({{"w", make_param<float>()}});
  REQUIRE(opt.group_weight_decay(0) == 0.01);
  REQUIRE(opt.lr() == 1e-3);
}

TEMPLATE_TEST_CASE("optim: step(grad_scale) updates as if the gradient were scaled first",
                   "[optim]", float, double) {
  const Tensor p = make_param<TestType>();
  SECTION("Adam") {
    AdamW opt({{"w", p}}, {.lr = 0.01, .weight_decay = 0.1});
    require_matches_reference<TestType>(
        opt, p, AdamReference{.lr = 0.01, .weight_decay = 0.1, .decoupled = true}, 4, 0.25);
  }
  SECTION("SGD") {
    Sgd opt({{"w", p}}, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
    require_matches_reference<TestType>(
        opt, p, SgdReference{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01}, 4, 0.25);
  }
}

TEST_CASE("optim: parameter groups use their own lr and weight decay", "[optim][groups]") {
  const Tensor a = make_param<double>(), b = make_param<double>(), c = make_param<double>();
  Sgd opt(
      std::vector<ParamGroup>{{.params = {{"a", a}}, .lr = std::nullopt, .weight_decay = 0.0},
                              {.params = {{"b", b}, {"c", c}}, .lr = 0.05, .weight_decay = 0.2}},
      {.lr = 0.1, .weight_decay = 0.01});
  REQUIRE(opt.num_groups() == 2);
  REQUIRE(opt.group_lr(0) == 0.1);
  REQUIRE(opt.group_weight_decay(0) == 0.0);
  REQUIRE(opt.group_lr(1) == 0.05);
  REQUIRE(opt.group_weight_decay(1) == 0.2);

  SgdReference ref_a{.lr = 0.1, .weight_decay = 0.0}, ref_bc{.lr = 0.05, .weight_decay = 0.2};
  std::vector<double> pa = initial_values(kNumel), pbc = pa;
  const std::vector<double> g = gradient_at(1, kNumel);
  for (const Tensor& t : {a, b, c}) t.set_grad(tensor_of<double>(g, kShape));
  opt.step();
  ref_a.step(pa, g, 1);
  ref_bc.step(pbc, g, 1);
  REQUIRE_NEAR(a, tensor_of<double>(pa, kShape), 1e-12, 1e-12);
  REQUIRE_NEAR(b, tensor_of<double>(pbc, kShape), 1e-12, 1e-12);
  REQUIRE_NEAR(c, tensor_of<double>(pbc, kShape), 1e-12, 1e-12);

  // A schedule's set_lr moves both groups, keeping their 1 : 0.5 ratio.
  opt.set_lr(0.02);
  REQUIRE(opt.lr() == 0.02);
  REQUIRE(opt.group_lr(0) == 0.02);
  REQUIRE(near(opt.group_lr(1), 0.01, 1e-15, 0));
  opt.set_lr(0.0);
  REQUIRE(opt.group_lr(1) == 0.0);
}

TEST_CASE("optim: weight_decay_groups decays weight matrices only", "[optim][groups]") {
  // Distinct tensors: a matrix unless the name says otherwise.
  const auto matrix = [] { return zeros({4, 4}); };
  const NamedTensors params{{"blocks.0.attn.qkv.weight", matrix()},
                            {"blocks.0.attn.qkv.bias", zeros({4})},
                            {"blocks.0.ln1.weight", matrix()},
                            {"blocks.0.ln_2.weight", matrix()},
                            {"ln_f.weight", matrix()},
                            {"blocks.1.layernorm.gain", matrix()},
                            {"final_norm.weight", matrix()},
                            {"embedding.weight", matrix()},
                            {"tok_emb.weight", matrix()},
                            {"kiln.gain", matrix()},
                            {"lnx.weight", matrix()},
                            {"logit_scale", zeros({})},
                            {"ffn.linear2.weight", zeros({4, 2, 2})}};
  const std::vector<ParamGroup> groups = weight_decay_groups(params, 0.1);
  REQUIRE(groups.size() == 2);
  REQUIRE(groups[0].weight_decay == 0.1);
  REQUIRE(groups[1].weight_decay == 0.0);
  const auto names = [](const ParamGroup& g) {
    std::vector<std::string> out;
    for (const auto& [name, t] : g.params) out.push_back(name);
    return out;
  };
  REQUIRE(names(groups[0]) == std::vector<std::string>{"blocks.0.attn.qkv.weight", "kiln.gain",
                                                       "lnx.weight", "ffn.linear2.weight"});
  REQUIRE(names(groups[1]) ==
          std::vector<std::string>{"blocks.0.attn.qkv.bias", "blocks.0.ln1.weight",
                                   "blocks.0.ln_2.weight", "ln_f.weight", "blocks.1.layernorm.gain",
                                   "final_norm.weight", "embedding.weight", "tok_emb.weight",
                                   "logit_scale"});
  AdamW opt(groups, {.lr = 1e-3});
  REQUIRE(opt.group_weight_decay(0) == 0.1);
  REQUIRE(opt.group_weight_decay(1) == 0.0);
}

TEST_CASE("optim: zero_grad leaves every gradient undefined", "[optim]") {
  const Tensor a = make_param<float>(), b = make_param<float>();
  Sgd opt({{"a", a}, {"b", b}});
  a.set_grad(ones(kShape));
  opt.zero_grad();
  REQUIRE_FALSE(a.grad().defined());
  REQUIRE_FALSE(b.grad().defined());
}

TEST_CASE("optim: parameters without a gradient are skipped, state and all", "[optim]") {
  const Tensor with = make_param<double>(), without = make_param<double>();
  const Tensor before = without.detach().clone();
  Adam opt({{"with", with}, {"without", without}}, {.lr = 0.1, .weight_decay = 0.5});
  with.set_grad(tensor_of<double>(gradient_at(1, kNumel), kShape));
  const std::uint64_t version = without.version();
  opt.step();
  REQUIRE_EXACT(without, before);
  REQUIRE(without.version() == version);
  for (const auto& [name, state] : opt.state_dict().tensors) {
    INFO(name);
    const bool zero = state.to_vector<double>() == std::vector<double>(kNumel, 0.0);
    REQUIRE(zero == (name.rfind("without.", 0) == 0));
  }
  REQUIRE_FALSE(with.to_vector<double>() == initial_values(kNumel));
}

TEST_CASE("optim: an update bumps the parameter's version so stale saved tensors are caught",
          "[optim]") {
  const Tensor p = make_param<float>();
  Sgd opt({{"w", p}});
  const std::uint64_t version = p.version();
  p.set_grad(ones(kShape));
  opt.step();
  REQUIRE(p.version() > version);
}

TEST_CASE("optim: non-contiguous gradients are used as their dense copy", "[optim]") {
  const Tensor p = make_param<double>();
  const Tensor q = make_param<double>();
  Sgd opt({{"p", p}, {"q", q}}, {.lr = 0.1});
  const Tensor g = tensor_of<double>(gradient_at(1, kNumel), {3, 2});
  p.set_grad(g.t());  // non-contiguous
  q.set_grad(g.t().contiguous());
  opt.step();
  REQUIRE_EXACT(p, q);
}

TEST_CASE("optim: invalid hyper-parameters are errors naming the optimizer and the value",
          "[optim][errors]") {
  const NamedTensors params{{"w", make_param<float>()}};
  REQUIRE_THROWS_WITH(Sgd(params, {.lr = -0.1}),
                      Catch::Contains("SGD") && Catch::Contains("lr -0.1"));
  REQUIRE_THROWS_WITH(Sgd(params, {.momentum = -1}),
                      Catch::Contains("SGD") && Catch::Contains("momentum -1"));
  REQUIRE_THROWS_WITH(Sgd(params, {.dampening = 1.5}),
                      Catch::Contains("SGD") && Catch::Contains("dampening 1.5"));
  REQUIRE_THROWS_WITH(Sgd(params, {.nesterov = true}),
                      Catch::Contains("SGD") && Catch::Contains("nesterov"));
  REQUIRE_THROWS_WITH(Sgd(params, {.momentum = 0.9, .dampening = 0.1, .nesterov = true}),
                      Catch::Contains("dampening 0.1"));
  REQUIRE_THROWS_WITH(Adam(params, {.beta1 = 1.0}),
                      Catch::Contains("Adam") && Catch::Contains("beta1 1"));
  REQUIRE_THROWS_WITH(Adam(params, {.beta2 = -0.5}),
                      Catch::Contains("Adam") && Catch::Contains("beta2 -0.5"));
  REQUIRE_THROWS_WITH(AdamW(params, {.beta2 = 1.5}),
                      Catch::Contains("AdamW") && Catch::Contains("beta2 1.5"));
  REQUIRE_THROWS_WITH(AdamW(params, {.eps = -1e-8}),
                      Catch::Contains("AdamW") && Catch::Contains("eps -1e-08"));
  REQUIRE_THROWS_WITH(AdamW(params, {.weight_decay = -0.1}),
                      Catch::Contains("AdamW") && Catch::Contains("weight_decay -0.1"));
  REQUIRE_THROWS_WITH(Adam(params, {.lr = std::nan("")}), Catch::Contains("lr nan"));
  REQUIRE_THROWS_WITH(
      Sgd(std::vector<ParamGroup>{{.params = params, .lr = -1.0, .weight_decay = std::nullopt}}),
      Catch::Contains("SGD") && Catch::Contains("lr of group 0 -1"));
  Sgd opt(params);
  REQUIRE_THROWS_WITH(opt.set_lr(-2.0), Catch::Contains("SGD") && Catch::Contains("lr -2"));
  REQUIRE_THROWS_WITH(opt.step(std::nan("")),
                      Catch::Contains("SGD") && Catch::Contains("grad_scale nan"));
  REQUIRE_THROWS_WITH(opt.group_lr(3), Catch::Contains("no group 3"));
}

TEST_CASE("optim: invalid parameter lists are errors naming the parameter", "[optim][errors]") {
  const Tensor w = make_param<float>();
  REQUIRE_THROWS_WITH(Adam(NamedTensors{}),
                      Catch::Contains("Adam") && Catch::Contains("no parameters"));
  REQUIRE_THROWS_WITH(Adam({{"w", w}, {"w", make_param<float>()}}),
                      Catch::Contains("'w' appears twice"));
  REQUIRE_THROWS_WITH(Adam({{"w", w}, {"v", w}}), Catch::Contains("share storage") &&
                                                      Catch::Contains("'w'") &&
                                                      Catch::Contains("'v'"));
  const Tensor flat = zeros({6});
  REQUIRE_THROWS_WITH(Adam({{"a", flat.narrow(0, 0, 3)}, {"b", flat.narrow(0, 3, 3)}}),
                      Catch::Contains("'a' and 'b' share storage"));
  REQUIRE_THROWS_WITH(Adam({{"ids", zeros({3}, {.dtype = DType::i64})}}),
                      Catch::Contains("'ids'") && Catch::Contains("int64"));
  REQUIRE_THROWS_WITH(Adam({{"wt", zeros({2, 3}).t()}}),
                      Catch::Contains("'wt'") && Catch::Contains("contiguous"));
  REQUIRE_THROWS_WITH(Adam({{"", w}}), Catch::Contains("empty name"));
  REQUIRE_THROWS_WITH(Adam({{"u", Tensor()}}), Catch::Contains("'u' is undefined"));
  REQUIRE_THROWS_WITH(
      Adam(std::vector<ParamGroup>{{.params = {{"w", w}}, .lr = 0.1, .weight_decay = std::nullopt}},
           {.lr = 0.0}),
      Catch::Contains("base lr is 0"));
}

TEST_CASE("optim: an update gives the same bits with 1 and 3 threads", "[optim][determinism]") {
  // 100 000 elements: above the kernels' parallel grain, so 3 threads really split the work.
  const std::int64_t n = 100000;
  const auto run = [&](int threads, bool adam) {
    set_num_threads(threads);
    const Tensor p = tensor_of<float>(initial_values(n), {n}).requires_grad_();
    std::unique_ptr<Optimizer> opt;
    if (adam)
      opt = std::make_unique<AdamW>(NamedTensors{{"w", p}}, AdamWOptions{.lr = 0.01});
    else
      opt = std::make_unique<Sgd>(NamedTensors{{"w", p}},
                                  SgdOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
    for (int t = 1; t <= 3; ++t) {
      p.set_grad(tensor_of<float>(gradient_at(t, n), {n}));
      opt->step(0.5);
    }
    set_num_threads(2);
    return p.detach();
  };
  for (bool adam : {true, false}) {
    INFO((adam ? "AdamW" : "SGD"));
    REQUIRE_EXACT(run(3, adam), run(1, adam));
  }
}

TEMPLATE_TEST_CASE("optim: updates on CUDA equal the CPU's", "[optim][cuda]", float, double) {
  if (!cuda_available_or_skip()) return;
  const Device cuda = Device::cuda();
  const auto run = [](Device device, bool adam) {
    const Tensor p =
        tensor_of<TestType>(initial_values(kNumel), kShape).to(device).requires_grad_();
    std::unique_ptr<Optimizer> opt;
    if (adam)
      opt = std::make_unique<AdamW>(NamedTensors{{"w", p}}, AdamWOptions{.lr = 0.01});
    else
      opt = std::make_unique<Sgd>(NamedTensors{{"w", p}},
                                  SgdOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
    for (int t = 1; t <= 3; ++t) {
      p.set_grad(tensor_of<TestType>(gradient_at(t, kNumel), kShape).to(device));
      opt->step(0.5);
    }
    return p.detach().to(Device::cpu());
  };
  for (bool adam : {true, false}) {
    INFO((adam ? "AdamW" : "SGD"));
    REQUIRE(run(cuda, adam).device() == Device::cpu());
    REQUIRE_NEAR(run(cuda, adam), run(Device::cpu(), adam), optim_rtol<TestType>,
                 optim_atol<TestType>);
  }
}
