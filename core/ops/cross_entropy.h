// Cross-entropy from logits, fused and numerically stable:
//   loss = mean over counted rows of (logsumexp(logits_row) - logits_row[target]).
// Rows whose target is ignore_index are not counted; if every row is ignored that is an error
// (the mean is undefined), not a NaN. bf16 logits are read in float32 (and saved in bf16); the
// loss and the gradient are float32.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace kiln {

// logits (.., C) float, targets (..) int64 with the same leading shape; returns a 0-dim tensor.
// Targets must be in [0, C) or equal ignore_index.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, std::int64_t ignore_index = -100);

}  // namespace kiln
