#include "nn/layer_norm.h"

#include "core/ops/factories.h"
#include "core/ops/layer_norm.h"

namespace kiln::nn {

LayerNorm::LayerNorm(std::int64_t dim, double eps_in) : eps(eps_in) {
  KILN_CHECK(dim > 0, "LayerNorm: dim must be positive, got {}", dim);
  weight = register_parameter("weight", ones({dim}));
  bias = register_parameter("bias", zeros({dim}));
}

Tensor LayerNorm::forward(const Tensor& x) const { return layer_norm(x, weight, bias, eps); }

}  // namespace kiln::nn
