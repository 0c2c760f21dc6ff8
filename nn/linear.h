// Linear: y = x W^T + b, with W stored (out, in) as in PyTorch.
#pragma once

#include "nn/module.h"

namespace kiln::nn {

class Linear : public Module {
 public:
  Linear(std::int64_t in_features, std::int64_t out_features, bool bias = true);
  // x (.., in) -> (.., out)
  Tensor forward(const Tensor& x) const;

  Tensor weight;  // (out, in)
  Tensor bias;    // (out), undefined without bias
};

}  // namespace kiln::nn
