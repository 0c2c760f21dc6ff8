// Rotary position embedding, RoPE (Su et al. 2021): each pair (2i, 2i+1) of a head's d_head
// features at position p is rotated by the angle p * base^(-2i / d_head):
//   x'[2i]   = x[2i] cos - x[2i+1] sin
//   x'[2i+1] = x[2i] sin + x[2i+1] cos
// Applied to Q and K after the projection; positions are offset by the KV cache's length.
#pragma once

#include "nn/module.h"

namespace kiln::nn {

class RotaryEmbedding : public Module {
 public:
  RotaryEmbedding(std::int64_t d_head, std::int64_t max_len, double base = 10000.0);
  // x (B, H, T, d_head), rotated for positions offset .. offset + T - 1
  Tensor forward(const Tensor& x, std::int64_t offset = 0) const;

  Tensor cos;  // (max_len, d_head / 2), non-persistent buffers
  Tensor sin;
};

}  // namespace kiln::nn
