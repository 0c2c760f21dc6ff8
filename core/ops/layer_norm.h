// Layer normalisation over the last dim, fused (Ba et al. 2016):
//   y = (x - mean) / sqrt(var + eps) * gamma + beta,  var the biased variance of each row.
#pragma once

#include "core/tensor.h"

namespace kiln {

// x (.., C), gamma and beta (C). Per-row mean and 1/sqrt(var + eps) are saved for backward.
// x may be bf16 (mixed precision): it is normalised in float32 with float32 gamma and beta, the
// result is float32, and x is saved in bf16.
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps = 1e-5);

}  // namespace kiln
