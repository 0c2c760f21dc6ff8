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
  // A step ledger on the parameter's device (StepLedger below), or null: when set, grad_scale is
  // read from guard[StepLedger::scale] and the update is skipped when guard[StepLedger::apply] is
  // 0, so the clip and the non-finite rule need no trip to the host.
  const double* guard = nullptr;
};

// SGD with momentum/Nesterov on one contiguous parameter (update rule in optim/sgd.h).
struct SgdArgs {
  double lr = 0.1, momentum = 0.0, dampening = 0.0, weight_decay = 0.0;
  bool nesterov = false;
  bool first_step = true;  // the momentum buffer starts as the gradient
  double grad_scale = 1.0;
  const double* guard = nullptr;  // as AdamArgs::guard
};

// The float64 slots of a step ledger (core/ops/optimizer_update.h step_guard_), a small tensor on
// the parameters' device that a training step writes and the host reads only when it wants the
// numbers (lm/trainer.h).
namespace StepLedger {
enum Slot : int {
  interval_loss = 0,  // Σ of the finite steps' losses since the host last reset it
  interval_finite,    // how many finite steps that sum holds
  loss,               // this step's mean loss
  norm,               // this step's global gradient norm
  scale,              // this step's clip factor min(1, clip / (norm + 1e-6)), or 1 without clip
  apply,              // 1: the update goes ahead; 0: skipped
  first_bad,          // the first non-finite step (0: none yet)
  bad_loss,           // that step's loss and norm
  bad_norm,
  slots
};
}  // namespace StepLedger

// step_guard_'s settings.
struct StepGuardArgs {
  std::int64_t windows = 1;       // losses: one per window of the step
  std::int64_t sums = 0;          // sums of squares: one per gradient
  double clip = 0.0;              // max global norm; 0: no clipping
  bool stop_on_nonfinite = true;  // after a non-finite step, skip every later update too
  std::int64_t step = 1;          // this step's number (1-based), kept as first_bad
};

}  // namespace kiln
