// Gradient clipping by global L2 norm, PyTorch's rule (torch.nn.utils.clip_grad_norm_):
//
//   norm  = √(Σ over parameters Σ over elements g²)     (parameters without a gradient skipped)
//   scale = min(1, max_norm / (norm + 1e-6))
//   g     = scale · g
//
// The norm is deterministic: each parameter's Σ g² (sums_of_squares, on its device) goes to
// its own slot (in the gradients' dtype), the slots come to the host in one read, and are added
// there in parameter order in double precision.
//
// Two ways to clip; the trainer should use the second:
//
//   clip_grad_norm(opt.parameters(), 1.0);              // scales the gradients in place
//   opt.step();
//
//   const double norm = grad_norm(opt.parameters());    // same result, bit for bit, without the
//   opt.step(clip_scale(norm, 1.0));                    // extra pass over every gradient
#pragma once

#include <span>

#include "core/tensor.h"

namespace kiln {

// The global L2 norm of the gradients of `params` (0 when none has a gradient). All gradients
// must share one dtype and device.
double grad_norm(std::span<const Tensor> params);

// What grad_norm adds up, left on the gradients' device: Σ g² of each gradient, in parameter
// order (1-D; empty, on `device`, when none has a gradient). A training step hands it to
// step_guard_ (core/ops/optimizer_update.h), which takes the norm and the clip scale on the device.
Tensor grad_sums_of_squares(std::span<const Tensor> params, Device device);

// min(1, max_norm / (norm + 1e-6)): the factor clip_grad_norm multiplies the gradients by. An
// infinite norm gives 0, a NaN norm gives 1: check the returned norm to skip such a step.
double clip_scale(double norm, double max_norm);

// Scales the gradients of `params` in place so that their global norm is at most max_norm
// (when it exceeds it); returns the norm before clipping.
double clip_grad_norm(std::span<const Tensor> params, double max_norm);

}  // namespace kiln
