#include "nn/sinusoidal.h"

#include <cmath>

#include "core/checked.h"
#include "core/ops/elementwise.h"
#include "core/ops/factories.h"

namespace kiln::nn {

SinusoidalPositionalEncoding::SinusoidalPositionalEncoding(std::int64_t d_model,
                                                           std::int64_t max_len) {
  KILN_CHECK(d_model > 0 && max_len > 0,
             "SinusoidalPositionalEncoding: sizes must be positive, got d {} max_len {}", d_model,
             max_len);
  // The sizes may come from a checkpoint: checked, and written straight into the tensor (an
  // overflowing max_len x d_model once sized a buffer too small for the loop below).
  checked_mul(max_len, d_model, "SinusoidalPositionalEncoding: the table of max_len x d_model");
  Tensor values = empty({max_len, d_model});
  float* pe = values.data<float>();  // (max_len, d)
  for (std::int64_t p = 0; p < max_len; ++p) {
    for (std::int64_t i = 0; i < d_model; i += 2) {
      const double angle = static_cast<double>(p) *
                           std::exp(static_cast<double>(i) * (-std::log(10000.0) / d_model));
      pe[p * d_model + i] = static_cast<float>(std::sin(angle));
      if (i + 1 < d_model) pe[p * d_model + i + 1] = static_cast<float>(std::cos(angle));
    }
  }
  table = register_buffer("table", values, false);
}

Tensor SinusoidalPositionalEncoding::forward(const Tensor& x, std::int64_t offset) const {
  KILN_CHECK(x.dim() == 3 && x.size(2) == table.size(1),
             "SinusoidalPositionalEncoding: expected input (B, T, {}), got shape {}", table.size(1),
             x.shape());
  KILN_CHECK(offset >= 0 && offset + x.size(1) <= table.size(0),
             "SinusoidalPositionalEncoding: positions {}..{} exceed max_seq_len {}", offset,
             offset + x.size(1) - 1, table.size(0));
  return x + table.narrow(0, offset, x.size(1));
}

}  // namespace kiln::nn
