// SGD's fused update (the equations are in optim/sgd.h).
#include "optim/sgd.h"

#include <limits>

#include "core/error.h"
#include "core/ops/optimizer_update.h"

namespace kiln {

namespace {

std::vector<std::string> state_names(const SgdOptions& o) {
  if (o.momentum == 0.0) return {};
  return {"momentum_buffer"};
}

}  // namespace

Sgd::Sgd(NamedTensors params, SgdOptions options)
    : Sgd(std::vector<ParamGroup>{ParamGroup{
              .params = std::move(params), .lr = std::nullopt, .weight_decay = std::nullopt}},
          options) {}

Sgd::Sgd(std::vector<ParamGroup> groups, SgdOptions options)
    : Optimizer("SGD", std::move(groups), options.lr, options.weight_decay, state_names(options)),
      options_(options) {
  check_range("SGD", "momentum", options.momentum, 0.0, std::numeric_limits<double>::infinity());
  check_range("SGD", "dampening", options.dampening, 0.0, 1.0);
  KILN_CHECK(!options.nesterov || (options.momentum > 0.0 && options.dampening == 0.0),
             "SGD: nesterov needs momentum > 0 and dampening 0 (got momentum {}, dampening {})",
             options.momentum, options.dampening);
}

void Sgd::update(std::span<const Pending> pending, double grad_scale, const Tensor& guard) {
  for (const Pending& u : pending) {
    const SgdArgs args{.lr = u.group->lr,
                       .momentum = options_.momentum,
                       .dampening = options_.dampening,
                       .weight_decay = u.group->weight_decay,
                       .nesterov = options_.nesterov,
                       .first_step = step_count() == 1,
                       .grad_scale = grad_scale};
    const Param& p = *u.param;
    sgd_update_(p.tensor, u.grad, p.state.empty() ? Tensor() : p.state[0], args, guard);
  }
}

}  // namespace kiln
