// The hyperparameters of one fused optimizer update: what the public ops take
// (core/ops/optimizer_update.h) and what the backends' kernels receive (core/backend.h). In a
// header of their own so that the ops' users see no backend and the backends see no op.
#pragma once

#include <cstdint>

namespace kiln {

// Adam/AdamW on one contiguous parameter (update rule in optim/adam.h).
struct AdamArgs {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  bool decoupled_weight_decay = false;  // AdamW
  std::int64_t step = 1;                // 1-based, for bias correction
  double grad_scale = 1.0;              // multiplies the gradient first (gradient clipping)
};

// SGD with momentum/Nesterov on one contiguous parameter (update rule in optim/sgd.h).
struct SgdArgs {
  double lr = 0.1, momentum = 0.0, dampening = 0.0, weight_decay = 0.0;
  bool nesterov = false;
  bool first_step = true;  // the momentum buffer starts as the gradient
  double grad_scale = 1.0;
};

}  // namespace kiln
