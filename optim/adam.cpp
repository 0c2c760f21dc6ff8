// Adam's and AdamW's fused update (the equations are in optim/adam.h).
#include "optim/adam.h"

#include <limits>

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

void Adam::update(Param& p, const Group& group, const Tensor& grad, double grad_scale,
                  const Tensor& guard) {
  const AdamArgs args{.lr = group.lr,
                      .beta1 = options_.beta1,
                      .beta2 = options_.beta2,
                      .eps = options_.eps,
                      .weight_decay = group.weight_decay,
                      .decoupled_weight_decay = decoupled_,
                      .step = step_count(),
                      .grad_scale = grad_scale};
  adam_update_(p.tensor, grad, p.state[0], p.state[1], args, guard);
}

}  // namespace kiln
