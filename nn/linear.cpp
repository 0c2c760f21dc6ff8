#include "nn/linear.h"

#include "core/ops/linear.h"
#include "nn/init.h"

namespace kiln::nn {

Linear::Linear(std::int64_t in_features, std::int64_t out_features, bool has_bias) {
  KILN_CHECK(in_features > 0 && out_features > 0, "Linear: sizes must be positive, got {} -> {}",
             in_features, out_features);
  weight = register_parameter("weight", uniform_fan_in({out_features, in_features}, in_features));
  if (has_bias) bias = register_parameter("bias", uniform_fan_in({out_features}, in_features));
}

Tensor Linear::forward(const Tensor& x) const {
  KILN_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1),
             "Linear: input of shape {} does not end in {} features", x.shape(), weight.size(1));
  // One GEMM over all leading dims: (N, in) @ (in, out), the bias folded into it.
  Shape out_shape = x.shape();
  out_shape.back() = weight.size(0);
  return kiln::linear(x.reshape({-1, weight.size(1)}), weight, bias).view(out_shape);
}

}  // namespace kiln::nn
