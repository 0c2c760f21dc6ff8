// Adam and AdamW, as PyTorch's torch.optim.Adam and torch.optim.AdamW (amsgrad and maximize not
// supported). For each parameter p with gradient g at step t = 1, 2, … (learning rate lr, betas
// β₁ β₂, eps ε, weight decay λ, grad_scale c):
//
//   g = c·g
//   Adam:  g = g + λ·p                      (L2 penalty, coupled into the moments)
//   AdamW: p = p·(1 − lr·λ)                 (decoupled weight decay)
//   m = β₁·m + (1 − β₁)·g                   exp_avg
//   v = β₂·v + (1 − β₂)·g²                  exp_avg_sq
//   p = p − (lr / (1 − β₁ᵗ)) · m / (√v / √(1 − β₂ᵗ) + ε)
//
// t is the optimizer's step count (see optim/optimizer.h). One fused adam_update_
// (core/ops/optimizer_update.h) per parameter. State: "<name>.exp_avg" and "<name>.exp_avg_sq",
// zeros at the start.
//
//   AdamW opt(weight_decay_groups(model.named_parameters(), 0.1),
//             {.lr = 3e-4, .beta2 = 0.95});
//   opt.zero_grad(); loss.backward(); opt.step();
#pragma once

#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace kiln {

struct AdamOptions {
  double lr = 1e-3;           // >= 0
  double beta1 = 0.9;         // in [0, 1)
  double beta2 = 0.999;       // in [0, 1)
  double eps = 1e-8;          // >= 0
  double weight_decay = 0.0;  // >= 0 (groups may override)
};

// As AdamOptions; weight decay defaults to PyTorch's AdamW default.
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

class Adam : public Optimizer {
 public:
  // All parameters in one group.
  Adam(NamedTensors params, AdamOptions options = {});
  Adam(std::vector<ParamGroup> groups, AdamOptions options = {});

  const AdamOptions& options() const { return options_; }
  bool decoupled_weight_decay() const { return decoupled_; }

 protected:
  Adam(std::string name, std::vector<ParamGroup> groups, AdamOptions options, bool decoupled);

 private:
  void update(std::span<const Pending> pending, double grad_scale, const Tensor& guard) override;

  AdamOptions options_;
  bool decoupled_;
};

class AdamW : public Adam {
 public:
  AdamW(NamedTensors params, AdamWOptions options = {});
  AdamW(std::vector<ParamGroup> groups, AdamWOptions options = {});
};

}  // namespace kiln
