// Causal multi-head attention over a fused QKV projection, as one op. With d = d_head,
//   projected (B, T, (h + 2 kv) d) = [Q_0 .. Q_h-1 | K_0 .. K_kv-1 | V_0 .. V_kv-1] per position,
//   query head i reads kv head g(i) = floor(i kv / h) (GQA; MQA when kv = 1, MHA when kv = h),
//   S_i = Q_i K_g^T / sqrt(d) with key j visible from query t iff j <= t,
//   A_i = softmax(S_i), optionally dropped out (inverted dropout with probability p),
//   Y_i = A_i V_g,  out (B, T, h d) = [Y_0 .. Y_h-1] (the heads concatenated).
// Backward (D = dropout mask, A' = A * D):
//   dV_g = sum_i A'_i^T dY_i,  dA_i = (dY_i V_g^T) * D,  dS_i = A_i * (dA_i - rowsum(dA_i * A_i)),
//   dQ_i = dS_i K_g / sqrt(d),  dK_g = sum_i dS_i^T Q_i / sqrt(d).
// Q, K and V are read in place from the projection by strided GEMMs, Y is written in place into
// the concatenation, and the gradient is written once into a single (B, T, (h + 2 kv) d) buffer:
// no head reshapes, no copies, no zero-filled partial gradients.
#pragma once

#include "core/generator.h"
#include "core/tensor.h"

namespace kiln {

// projected (B, T, (heads + 2 kv_heads) d_head), heads a multiple of kv_heads -> (B, T, heads
// d_head). dropout_p in [0, 1) applies only when training. When `probabilities` is given it
// receives the attention probabilities A (B, heads, T, T), before dropout.
Tensor causal_attention(const Tensor& projected, std::int64_t heads, std::int64_t kv_heads,
                        double dropout_p = 0.0, bool training = false, Generator* gen = nullptr,
                        Tensor* probabilities = nullptr);

}  // namespace kiln
