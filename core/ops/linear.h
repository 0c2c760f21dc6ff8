// The affine map of a Linear layer, fused: y = x W^T + b as one GEMM whose output starts as
// the broadcast bias (beta = 1), so the bias costs no extra pass over y. Backward:
//   dx = dy W,  dW = dy^T x,  db = sum over rows of dy.
#pragma once

#include "core/tensor.h"

namespace kiln {

// x (N, in), weight (out, in), bias (out) or undefined -> (N, out). With bf16 x and weight the
// output and the bias are float32, and x and weight are saved for backward in bf16. Under an
// Autocast to bf16 float32 x and weight are cast to bf16 and the output (the bias added in
// float32) is rounded to bf16.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace kiln
