// Position-wise feed-forward network: FFN(X) = act(X W_1 + b_1) W_2 + b_2, act ReLU or GELU.
#pragma once

#include <memory>

#include "nn/config.h"
#include "nn/linear.h"

namespace kiln::nn {

class FeedForward : public UnaryModule {
 public:
  FeedForward(std::int64_t d_model, std::int64_t hidden, Activation activation);
  // X (.., d) -> (.., d)
  Tensor forward(const Tensor& x) const override;

  std::shared_ptr<Linear> fc1;  // W_1 (hidden, d)
  std::shared_ptr<Linear> fc2;  // W_2 (d, hidden)
  Activation activation;
};

}  // namespace kiln::nn
