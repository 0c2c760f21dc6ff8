// Selection by a condition: where and masked_fill. Conditions may have any dtype (nonzero is
// true) and broadcast with the values.
#pragma once

#include "core/tensor.h"

namespace kiln {

// cond ? a : b elementwise; the three broadcast together. Gradients flow to the chosen side.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// x with `value` where mask is nonzero (mask broadcasts to x). No gradient where filled.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

}  // namespace kiln
