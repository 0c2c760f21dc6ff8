// Parameter initialisers (PyTorch's defaults), drawing from kiln's Philox generator.
#pragma once

#include "core/generator.h"
#include "core/tensor.h"

namespace kiln::nn {

// U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's Linear default for weights
// (kaiming_uniform with a = sqrt(5)) and for biases.
Tensor uniform_fan_in(const Shape& shape, std::int64_t fan_in, Generator* gen = nullptr);

}  // namespace kiln::nn
