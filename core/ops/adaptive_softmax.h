// The adaptive softmax (Grave et al. 2017; PyTorch's nn.AdaptiveLogSoftmaxWithLoss): an exact,
// normalized distribution over V classes in which frequent classes pay for a small head and rare
// ones for a reduced-width cluster. Classes are ranks (0 the most frequent); the cutoffs
// c_0 < c_1 < ... < c_n = V split them into the shortlist [0, c_0) and clusters [c_i, c_{i+1}):
//   h         = x H^T                  H (c_0 + n, d): the shortlist rows, then one per cluster
//   log p(r)  = log_softmax(h)_r                                              r < c_0
//   log p(r)  = log_softmax(h)_{c_0+i} + log_softmax((x P_i^T) O_i^T)_{r-c_i}  r in cluster i
// with P_i (d_i, d) and O_i (s_i, d_i). The loss computes the head for every row but a cluster
// only for the rows whose target is in it: with N' counted rows, n_i of them in cluster i,
//   loss = mean_rows(-log_softmax(h)_{head target})
//          + sum_i (n_i / N') mean_{rows of i}(-log_softmax(x P_i^T O_i^T)_{local target}),
// each term linear_cross_entropy (core/ops/linear_cross_entropy.h), so no logits tensor is kept
// beside its fused backward and no (N, V) buffer exists. The rows of each cluster are found on the
// host (a read of the targets, as PyTorch's module does). Gradients are those of the composition.
// The cost per token is d (c_0 + n) for the head plus, for a row in cluster i, d_i (d + s_i)
// (docs/adaptive-softmax.md).
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace kiln {

// The weights of an adaptive softmax over ranks. The cutoffs follow from the shapes:
// c_0 = head.size(0) - clusters, c_{i+1} = c_i + outputs[i].size(0).
struct AdaptiveSoftmaxWeights {
  Tensor head;                      // (c_0 + n, d)
  std::vector<Tensor> projections;  // P_i (d_i, d)
  std::vector<Tensor> outputs;      // O_i (s_i, d_i)

  std::int64_t classes() const;  // V = c_0 + sum_i s_i
};

// Mean negative log-probability of the targets (N) int64 ranks in [0, V) or ignore_index, x (N,
// d) -> 0-dim. bf16 x (or float32 under an Autocast to bf16) gives a float32 loss.
Tensor adaptive_softmax_loss(const Tensor& x, const AdaptiveSoftmaxWeights& weights,
                             const Tensor& targets, std::int64_t ignore_index = -100);

// log p of every rank: x (N, d) -> (N, V) in rank order, float32 for bf16 or autocast operands.
Tensor adaptive_log_softmax(const Tensor& x, const AdaptiveSoftmaxWeights& weights);

}  // namespace kiln
