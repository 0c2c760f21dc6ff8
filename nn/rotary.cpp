#include "nn/rotary.h"

#include <cmath>

#include "core/checked.h"
#include "core/ops/elementwise.h"
#include "core/ops/factories.h"
#include "core/ops/join.h"

namespace kiln::nn {

RotaryEmbedding::RotaryEmbedding(std::int64_t d_head, std::int64_t max_len, double base) {
  KILN_CHECK(
      d_head > 0 && d_head % 2 == 0 && max_len > 0,
      "RotaryEmbedding: d_head must be positive and even and max_len positive, got {} and {}",
      d_head, max_len);
  const std::int64_t pairs = d_head / 2;
  // The sizes may come from a checkpoint: checked, and written straight into the tensors.
  checked_mul(max_len, pairs, "RotaryEmbedding: the tables of max_len x d_head / 2");
  Tensor cos_table = empty({max_len, pairs}), sin_table = empty({max_len, pairs});
  float* c = cos_table.data<float>();  // (max_len, d_head / 2)
  float* s = sin_table.data<float>();  // (max_len, d_head / 2)
  for (std::int64_t p = 0; p < max_len; ++p) {
    for (std::int64_t i = 0; i < pairs; ++i) {
      const double angle = static_cast<double>(p) * std::pow(base, -2.0 * i / d_head);
      c[p * pairs + i] = static_cast<float>(std::cos(angle));
      s[p * pairs + i] = static_cast<float>(std::sin(angle));
    }
  }
  cos = register_buffer("cos", cos_table, false);
  sin = register_buffer("sin", sin_table, false);
}

Tensor RotaryEmbedding::forward(const Tensor& x, std::int64_t offset) const {
  const std::int64_t d_head = 2 * cos.size(1);
  KILN_CHECK(x.dim() == 4 && x.size(3) == d_head,
             "RotaryEmbedding: expected input (B, H, T, {}), got shape {}", d_head, x.shape());
  const std::int64_t T = x.size(2);
  KILN_CHECK(offset >= 0 && offset + T <= cos.size(0),
             "RotaryEmbedding: positions {}..{} exceed max_seq_len {}", offset, offset + T - 1,
             cos.size(0));
  const Tensor c = cos.narrow(0, offset, T), s = sin.narrow(0, offset, T);  // (T, d_head / 2)
  const Tensor even = x.slice(3, 0, d_head, 2), odd = x.slice(3, 1, d_head, 2);
  const Tensor rotated_even = even * c - odd * s;
  const Tensor rotated_odd = even * s + odd * c;
  // Interleave back: (.., d_head / 2, 2) -> (.., d_head).
  return cat({rotated_even.unsqueeze(4), rotated_odd.unsqueeze(4)}, 4).view(x.shape());
}

}  // namespace kiln::nn
