// The output head of a language model, fused: logits = X W^T and their mean cross-entropy
//   loss = mean over counted rows of (logsumexp(logits_row) - logits_row[target]),
// without a separate logits tensor for backward. When a gradient is needed, the pass that
// computes the loss also turns the logits buffer in place into P' = exp(logits - shift) with a
// per-row scale s (softmax = diag(s) P', s = 0 on ignored rows), then subtracts 1 / s at each
// counted row's target: P'' = P' - diag(s)^-1 M (M the one-hot), so diag(s) P'' = softmax - M,
// formed before any product as PyTorch forms it. Backward is two GEMMs with alpha = g / count
// and the scale applied to (N, d) operands only:
//   dX = alpha diag(s) (P'' W),   dW = alpha P''^T (diag(s) X).
// The (N, V) logits are written once, rewritten once and read twice, and one (N, V) buffer
// suffices — versus more passes and two buffers for matmul followed by cross_entropy. Equal to
// cross_entropy(matmul(X, W^T), targets) in value and gradient (tests/core/test_fused.cpp).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace kiln {

// x (N, d), weight (V, d), targets (N) int64 in [0, V) or ignore_index -> 0-dim loss. With bf16
// x and weight (or float32 ones under an Autocast to bf16) the logits, the loss and the
// gradients are float32 and P' is saved in bf16, half the bytes of the step's largest tensor.
Tensor linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& targets,
                            std::int64_t ignore_index = -100);

}  // namespace kiln
