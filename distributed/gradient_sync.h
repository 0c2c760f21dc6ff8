// GradientSync: the communication of a data-parallel training step.
//
// Each rank runs forward and backward on its own micro-batch of the global batch, with its loss
// scaled by 1/n for the n micro-batches of the step (as one process with --grad-accum n scales
// each one). allreduce() then sums the gradients over the ranks in rank order, through flat
// buckets of about bucket_bytes (few, large messages), so that every rank holds, bit for bit,
// the gradient one process accumulates over the same micro-batches in order:
//
//   GradientSync sync(*comm, optimizer.parameters());
//   optimizer.zero_grad();
//   (model.loss(inputs_r, targets_r) * (1.0 / n)).backward();   // rank r's micro-batch
//   sync.allreduce();                                            // Σ_r g_r, in rank order
//   optimizer.step(clip_scale(grad_norm(optimizer.parameters()), clip));   // same on every rank
//
// A rank without a micro-batch (a short last step of an epoch) passes contributes = false and
// adds nothing: its share is -0.0, the exact identity of float addition (x + -0.0 == x for every
// x, signed zeros included). A parameter that no rank has a gradient for stays without one, as
// in one process; one that some rank has gets the sum on every rank.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "distributed/communicator.h"

namespace kiln::dist {

class GradientSync {
 public:
  // params: the same tensors in the same order on every rank (an optimizer's parameters()).
  GradientSync(Communicator& comm, std::span<const Tensor> params,
               std::int64_t bucket_bytes = std::int64_t{25} << 20);

  // Sums every parameter's gradient over the ranks (in rank order); see the top of this file.
  void allreduce(bool contributes = true);

  std::size_t num_buckets() const { return buckets_.size(); }

 private:
  struct Bucket {
    std::vector<std::size_t> params;  // indices into params_, in order
    std::vector<std::int64_t> offsets;
    Tensor flat;  // (elements) in the parameters' dtype and device
  };

  Communicator& comm_;
  std::vector<Tensor> params_;
  std::vector<Bucket> buckets_;
};

}  // namespace kiln::dist
