// The ops optimizers are made of (optim/): the fused in-place updates, one backend kernel per
// parameter, and the per-tensor sums of squares a gradient norm is built from. optim knows only
// tensors; these ops check the tensors they are given and hand them to their device's backend.
//
//   NoGradGuard no_grad;  // the parameter requires grad: in-place writes need the guard
//   adam_update_(param, grad, exp_avg, exp_avg_sq, {.lr = 1e-3, .step = t});
//
// The hyperparameters are AdamArgs and SgdArgs (core/optimizer_args.h); the update rules are
// written out in optim/adam.h and optim/sgd.h.
#pragma once

#include <span>

#include "core/optimizer_args.h"
#include "core/tensor.h"

namespace kiln {

// Adam/AdamW on one parameter: param, exp_avg (m) and exp_avg_sq (v) are updated in place from
// grad. All four share one floating dtype, one device and one shape, and are contiguous. The
// three written tensors follow the in-place rules (core/tensor.h) and have their versions bumped.
// A defined `guard` (a step ledger written by step_guard_, on param's device) replaces
// args.grad_scale with its scale and skips the update when it says so, on the device.
void adam_update_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                  const Tensor& exp_avg_sq, const AdamArgs& args, const Tensor& guard = Tensor());

// One parameter of adam_update_many_: its four tensors (as adam_update_'s) and its own arguments.
struct AdamParamUpdate {
  Tensor param, grad, exp_avg, exp_avg_sq;
  AdamArgs args;
};

// adam_update_ on every entry of `updates` (all of one dtype and device; each checked as
// adam_update_ checks its tensors; empty ones allowed), with one guard for all: the results are
// adam_update_'s on each, bit for bit. On CUDA it is one launch however many parameters (a
// device table of chunks, core/cuda/optim.cu); on the CPU one update after the other.
void adam_update_many_(std::span<const AdamParamUpdate> updates, const Tensor& guard = Tensor());

// SGD on one parameter, in place, as adam_update_. momentum_buffer is defined exactly when
// args.momentum != 0 (without momentum there is no buffer to read or write).
void sgd_update_(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                 const SgdArgs& args, const Tensor& guard = Tensor());

// A step ledger: float64 zeros of StepLedger::slots (core/optimizer_args.h) on `device`.
Tensor step_ledger(Device device);

// Writes this step's figures into `ledger` (step_ledger's layout) on its device, without a trip
// to the host: the mean of window_losses (1-D, one per window of the step), the global norm from
// sums (1-D, one Σg² per gradient: sums_of_squares; may be empty), the clip scale, whether the
// update may go ahead, the interval's running loss sum, and the first non-finite step
// (core/step_guard_math.h). Both inputs are read as float64. args.windows and args.sums are set
// from the tensors.
void step_guard_(const Tensor& ledger, const Tensor& window_losses, const Tensor& sums,
                 StepGuardArgs args);

// (tensors.size()): Σ x² over each tensor's elements, in the tensors' common floating dtype and on
// their common device; a non-contiguous tensor is read through contiguous(). Each sum is taken in
// float64 and rounded once, deterministically, in its own element, so that a caller can bring
// every sum to the host in one read and add them in its own order (optim/clip.h). On CUDA two
// launches however many tensors (backend sum_squares_many); the sums are the CPU's within one
// rounding of the dtype (both add in float64, in different orders).
Tensor sums_of_squares(std::span<const Tensor> tensors);

}  // namespace kiln
