// LayerNorm over the last dim with a learned scale (ones) and shift (zeros).
#pragma once

#include "nn/module.h"

namespace kiln::nn {

class LayerNorm : public Module {
 public:
  explicit LayerNorm(std::int64_t dim, double eps = 1e-5);
  // x (.., dim) -> (.., dim)
  Tensor forward(const Tensor& x) const;

  Tensor weight;  // (dim), gamma
  Tensor bias;    // (dim), beta
  double eps;
};

}  // namespace kiln::nn
