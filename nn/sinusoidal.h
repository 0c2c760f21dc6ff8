// Sinusoidal positional encoding (Vaswani et al. 2017), interleaved as in PyTorch's tutorial:
//   PE[p, 2i] = sin(p / 10000^(2i/d)),  PE[p, 2i+1] = cos(p / 10000^(2i/d)).
#pragma once

#include "nn/module.h"

namespace kiln::nn {

class SinusoidalPositionalEncoding : public Module {
 public:
  SinusoidalPositionalEncoding(std::int64_t d_model, std::int64_t max_len);
  // x (B, T, d) + PE[offset : offset + T]
  Tensor forward(const Tensor& x, std::int64_t offset = 0) const;

  Tensor table;  // (max_len, d), a non-persistent buffer (recomputed, not saved)
};

}  // namespace kiln::nn
