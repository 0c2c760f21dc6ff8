// Optimizer state: the names state_dict() gives, a save/load halfway that continues bit for bit,
// and load_state_dict's errors for missing, unexpected and mismatched entries.
#include <memory>

#include <catch2/catch.hpp>

#include "core/kiln.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "tests/harness/near.h"
#include "tests/optim/reference.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// A small model's named parameters (fresh leaves with fixed values).
NamedTensors make_params() {
  return {{"emb.weight", tensor_of<float>(initial_values(12), {4, 3}).requires_grad_()},
          {"proj.weight", tensor_of<float>(initial_values(6), {3, 2}).requires_grad_()},
          {"proj.bias", tensor_of<float>(initial_values(2), {2}).requires_grad_()}};
}

// Copies of the parameters' values as new leaves (what loading a checkpoint gives).
NamedTensors copy_params(const NamedTensors& params) {
  NamedTensors out;
  for (const auto& [name, t] : params) out.emplace_back(name, t.detach().clone().requires_grad_());
  return out;
}

// Steps t = first..last with gradient_at(t) on every parameter.
void run_steps(Optimizer& opt, const NamedTensors& params, int first, int last) {
  for (int t = first; t <= last; ++t) {
    opt.zero_grad();
    for (const auto& [name, p] : params)
      p.set_grad(
          tensor_of<float>(gradient_at(t + static_cast<int>(name.size()), p.numel()), p.shape()));
    opt.step(0.75);
  }
}

std::unique_ptr<Optimizer> make(const std::string& kind, const NamedTensors& params) {
  if (kind == "AdamW")
    return std::make_unique<AdamW>(weight_decay_groups(params, 0.1),
                                   AdamWOptions{.lr = 0.01, .beta2 = 0.95});
  return std::make_unique<Sgd>(
      params, SgdOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
}

std::vector<std::string> names_of(const OptimizerState& state) {
  std::vector<std::string> out;
  for (const auto& [name, t] : state.tensors) out.push_back(name);
  return out;
}

}  // namespace

TEST_CASE("optim: state_dict names every state tensor after its parameter", "[optim][state]") {
  const NamedTensors params = make_params();
  Adam adam(params);
  REQUIRE(names_of(adam.state_dict()) ==
          std::vector<std::string>{"emb.weight.exp_avg", "emb.weight.exp_avg_sq",
                                   "proj.weight.exp_avg", "proj.weight.exp_avg_sq",
                                   "proj.bias.exp_avg", "proj.bias.exp_avg_sq"});
  REQUIRE(adam.state_dict().step == 0);
  Sgd momentum(params, {.momentum = 0.5});
  REQUIRE(names_of(momentum.state_dict()) == std::vector<std::string>{"emb.weight.momentum_buffer",
                                                                      "proj.weight.momentum_buffer",
                                                                      "proj.bias.momentum_buffer"});
  REQUIRE(Sgd(params).state_dict().tensors.empty());
  run_steps(adam, params, 1, 2);
  const OptimizerState state = adam.state_dict();
  REQUIRE(state.step == 2);
  REQUIRE(adam.step_count() == 2);
  REQUIRE(state.tensors[2].second.shape() == Shape{3, 2});
}

TEST_CASE("optim: a run reloaded halfway ends with the same parameters bit for bit",
          "[optim][state]") {
  for (const std::string kind : {"AdamW", "SGD"}) {
    INFO(kind);
    // Straight through: six steps.
    const NamedTensors straight = make_params();
    run_steps(*make(kind, straight), straight, 1, 6);

    // Three steps, a snapshot (cloned, as a checkpoint file would hold it), then a fresh
    // optimizer over restored parameters loads it and does the last three.
    const NamedTensors first = make_params();
    const std::unique_ptr<Optimizer> before = make(kind, first);
    run_steps(*before, first, 1, 3);
    OptimizerState saved = before->state_dict();
    for (auto& [name, t] : saved.tensors) t = t.clone();
    const NamedTensors resumed = copy_params(first);
    const std::unique_ptr<Optimizer> after = make(kind, resumed);
    after->load_state_dict(saved);
    REQUIRE(after->step_count() == 3);
    run_steps(*after, resumed, 4, 6);

    for (std::size_t i = 0; i < straight.size(); ++i) {
      INFO(straight[i].first);
      REQUIRE_EXACT(resumed[i].second, straight[i].second);
    }
  }
}

TEST_CASE("optim: load_state_dict names what is missing, unexpected or mismatched",
          "[optim][state]") {
  const NamedTensors params = make_params();
  AdamW opt(params);
  run_steps(opt, params, 1, 1);
  const OptimizerState good = opt.state_dict();
  const Tensor exp_avg_before = good.tensors[0].second.clone();

  OptimizerState missing = good;
  missing.tensors.erase(missing.tensors.begin() + 3);
  REQUIRE_THROWS_WITH(
      opt.load_state_dict(missing),
      Catch::Contains("AdamW") && Catch::Contains("missing: proj.weight.exp_avg_sq"));

  OptimizerState unexpected = good;
  unexpected.tensors.emplace_back("head.weight.exp_avg", zeros({2}));
  REQUIRE_THROWS_WITH(opt.load_state_dict(unexpected),
                      Catch::Contains("unexpected: head.weight.exp_avg"));

  OptimizerState wrong_shape = good;
  wrong_shape.tensors[4].second = zeros({3});
  REQUIRE_THROWS_WITH(opt.load_state_dict(wrong_shape),
                      Catch::Contains("mismatched: proj.bias.exp_avg (float32 [3], expected "
                                      "float32 [2])"));

  OptimizerState wrong_dtype = good;
  wrong_dtype.tensors[0].second = zeros({4, 3}, {.dtype = DType::f64});
  REQUIRE_THROWS_WITH(opt.load_state_dict(wrong_dtype),
                      Catch::Contains("mismatched: emb.weight.exp_avg (float64"));

  OptimizerState duplicated = good;
  duplicated.tensors.push_back(good.tensors[1]);
  REQUIRE_THROWS_WITH(opt.load_state_dict(duplicated),
                      Catch::Contains("duplicated: emb.weight.exp_avg_sq"));

  OptimizerState negative = good;
  negative.step = -1;
  REQUIRE_THROWS_WITH(opt.load_state_dict(negative), Catch::Contains("step -1"));

  // Every problem at once, and a failed load changes nothing.
  OptimizerState several = missing;
  several.tensors[0].second = zeros({4, 3}, {.dtype = DType::f64});
  several.tensors.emplace_back("stray", zeros({1}));
  several.step = 7;
  REQUIRE_THROWS_WITH(opt.load_state_dict(several),
                      Catch::Contains("missing: proj.weight.exp_avg_sq") &&
                          Catch::Contains("unexpected: stray") &&
                          Catch::Contains("mismatched: emb.weight.exp_avg"));
  REQUIRE(opt.step_count() == 1);
  REQUIRE_EXACT(opt.state_dict().tensors[0].second, exp_avg_before);
}
