#include "nn/dropout.h"

#include "core/ops/dropout.h"

namespace kiln::nn {

Dropout::Dropout(double p_in, Generator* gen) : p(p_in), gen_(gen) {
  KILN_CHECK(p >= 0.0 && p < 1.0, "Dropout: probability must be in [0, 1), got {}", p);
}

Tensor Dropout::forward(const Tensor& x) const { return dropout(x, p, is_training(), gen_); }

}  // namespace kiln::nn
