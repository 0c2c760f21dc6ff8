#include "nn/init.h"

#include <cmath>

#include "core/ops/factories.h"

namespace kiln::nn {

Tensor uniform_fan_in(const Shape& shape, std::int64_t fan_in, Generator* gen) {
  const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
  return uniform(shape, -bound, bound, {}, gen);
}

}  // namespace kiln::nn
