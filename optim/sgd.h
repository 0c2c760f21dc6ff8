// SGD: stochastic gradient descent with optional momentum, dampening, Nesterov momentum and
// (coupled, L2) weight decay, as PyTorch's torch.optim.SGD. For each parameter p with gradient g
// at step t (learning rate lr, momentum μ, dampening τ, weight decay λ, grad_scale c):
//
//   d = c·g + λ·p
//   b = d                        at the parameter's first step (momentum buffer starts as d)
//   b = μ·b + (1 − τ)·d          afterwards                          (when μ ≠ 0)
//   d = d + μ·b  (Nesterov)  or  d = b                                (when μ ≠ 0)
//   p = p − lr·d
//
// One fused sgd_update_ (core/ops/optimizer_update.h) per parameter. State:
// "<name>.momentum_buffer" (only when μ ≠ 0). "First step" is the optimizer's first step (see
// optim/optimizer.h on parameters without a gradient; with τ = 0 a late first gradient gives the
// same buffer either way).
//
//   Sgd opt(model.named_parameters(), {.lr = 0.1, .momentum = 0.9, .nesterov = true});
//   opt.zero_grad(); loss.backward(); opt.step();
#pragma once

#include <vector>

#include "optim/optimizer.h"

namespace kiln {

struct SgdOptions {
  double lr = 0.1;            // >= 0
  double momentum = 0.0;      // >= 0
  double dampening = 0.0;     // in [0, 1]
  double weight_decay = 0.0;  // >= 0 (groups may override)
  bool nesterov = false;      // needs momentum > 0 and dampening = 0
};

class Sgd : public Optimizer {
 public:
  // All parameters in one group.
  Sgd(NamedTensors params, SgdOptions options = {});
  Sgd(std::vector<ParamGroup> groups, SgdOptions options = {});

  const SgdOptions& options() const { return options_; }

 private:
  void update(std::span<const Pending> pending, double grad_scale, const Tensor& guard) override;

  SgdOptions options_;
};

}  // namespace kiln
