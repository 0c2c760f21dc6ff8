// Adam's and AdamW's fused update (the equations are in optim/adam.h).
#include "optim/adam.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "core/ops/optimizer_update.h"

namespace kiln {

namespace {

AdamOptions as_adam(const AdamWOptions& o) {
  return {
      .lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps, .weight_decay = o.weight_decay};
}

std::vector<ParamGroup> one_group(NamedTensors params) {
  return {
      ParamGroup{.params = std::move(params), .lr = std::nullopt, .weight_decay = std::nullopt}};
}

}  // namespace

Adam::Adam(NamedTensors params, AdamOptions options)
    : Adam("Adam", one_group(std::move(params)), options, false) {}

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions options)
    : Adam("Adam", std::move(groups), options, false) {}

Adam::Adam(std::string name, std::vector<ParamGroup> groups, AdamOptions options, bool decoupled)
    : Optimizer(name, std::move(groups), options.lr, options.weight_decay,
                {"exp_avg", "exp_avg_sq"}),
      options_(options),
      decoupled_(decoupled) {
  check_range(name, "beta1", options.beta1, 0.0, 1.0, /*hi_open=*/true);
  check_range(name, "beta2", options.beta2, 0.0, 1.0, /*hi_open=*/true);
  check_range(name, "eps", options.eps, 0.0, std::numeric_limits<double>::infinity());
}

AdamW::AdamW(NamedTensors params, AdamWOptions options)
    : Adam("AdamW", one_group(std::move(params)), as_adam(options), true) {}

AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions options)
    : Adam("AdamW", std::move(groups), as_adam(options), true) {}

// One multi-tensor update per (device, dtype) of the parameters, in order of first appearance:
// on CUDA a fixed number of launches however many parameters.
void Adam::update(std::span<const Pending> pending, double grad_scale, const Tensor& guard) {
  std::vector<std::vector<AdamParamUpdate>> buckets;
  for (const Pending& u : pending) {
    const Param& p = *u.param;
    const AdamArgs args{.lr = u.group->lr,
                        .beta1 = options_.beta1,
                        .beta2 = options_.beta2,
                        .eps = options_.eps,
                        .weight_decay = u.group->weight_decay,
                        .decoupled_weight_decay = decoupled_,
                        .step = step_count(),
                        .grad_scale = grad_scale};
    const auto same = [&](const std::vector<AdamParamUpdate>& b) {
      return b[0].param.device() == p.tensor.device() && b[0].param.dtype() == p.tensor.dtype();
    };
    auto bucket = std::find_if(buckets.begin(), buckets.end(), same);
    if (bucket == buckets.end()) bucket = buckets.emplace(buckets.end());
    bucket->push_back({.param = p.tensor,
                       .grad = u.grad,
                       .exp_avg = p.state[0],
                       .exp_avg_sq = p.state[1],
                       .args = args});
  }
  for (const std::vector<AdamParamUpdate>& bucket : buckets) adam_update_many_(bucket, guard);
}

}  // namespace kiln
