#include "nn/feed_forward.h"

#include "core/error.h"
#include "core/ops/elementwise.h"

namespace kiln::nn {

FeedForward::FeedForward(std::int64_t d_model, std::int64_t hidden, Activation act)
    : activation(act) {
  fc1 = register_module("fc1", std::make_shared<Linear>(d_model, hidden));
  fc2 = register_module("fc2", std::make_shared<Linear>(hidden, d_model));
}

Tensor FeedForward::forward(const Tensor& x) const {
  const Tensor h = fc1->forward(x);
  switch (activation) {
    case Activation::relu:
      return fc2->forward(relu(h));
    case Activation::gelu:
      return fc2->forward(gelu(h));
    case Activation::gelu_tanh:
      return fc2->forward(gelu(h, GeluApproximation::tanh));
  }
  fail("FeedForward: activation {} is not relu, gelu or gelu_tanh", static_cast<int>(activation));
}

}  // namespace kiln::nn
