// Causal multi-head attention as one op, in memory that grows linearly with the context. With
// d = d_head, query head i reading kv head g(i) = floor(i kv / h) (GQA; MQA when kv = 1, MHA
// when kv = h) and the queries the last T_q of T_k positions:
//   S_i = Q_i K_g^T / sqrt(d), key j visible from query t iff j <= t + T_k - T_q,
//   A_i = softmax(S_i), optionally dropped out (inverted dropout with probability p),
//   Y_i = A_i V_g,  out (B, T_q, h d) = [Y_0 .. Y_h-1] (the heads concatenated).
// Backward (Z = dropout mask, A' = A * Z, D = rowsum(dY * Y) = rowsum(dA' * A)):
//   dV_g = sum_i A'_i^T dY_i,  dA_i = (dY_i V_g^T) * Z,  dS_i = A_i * (dA_i - D),
//   dQ_i = dS_i K_g / sqrt(d),  dK_g = sum_i dS_i^T Q_i / sqrt(d).
// The kernels (Backend::attention_forward/backward) run FlashAttention-2's algorithm: query
// tiles against key tiles with a running max and sum, the output rescaled as it goes, only the
// logsumexp of each query row saved; the backward recomputes S and A tile by tile. Tiles above
// the diagonal are skipped. Neither S nor A is ever stored: memory is O(B h T d), not O(B h T^2).
// The dropout mask is a function of (generator state, batch, head, query, key) —
// philox::attention_keep — so the backward recomputes the same mask, and it is the mask dropout()
// would draw for the materialized (B, h, T_q, T_k) probabilities from the same generator.
// docs/attention.md maps these equations to the code.
#pragma once

#include "core/generator.h"
#include "core/tensor.h"

namespace kiln {

// Self-attention over a fused QKV projection: projected (B, T, (heads + 2 kv_heads) d_head),
// heads a multiple of kv_heads -> (B, T, heads d_head). Q, K and V are read in place and the
// gradient is written once into one (B, T, (heads + 2 kv_heads) d_head) buffer. dropout_p in
// [0, 1) applies only when training. When `probabilities` is given it receives A (B, heads, T, T)
// before dropout, and the op runs the materializing algorithm (memory O(T^2)), as it does for a
// d_head above kMaxAttentionHeadDim (core/backend.h). A product, as matmul: bf16 operands are
// computed on in float32 and give float32; under an Autocast to bf16 float32 operands are cast to
// bf16 and the result is rounded to bf16. The fused path saves the bf16 operands and result (on
// CUDA its tensor-core kernels read them directly, rounding P, dS and dY to bf16 as
// FlashAttention-2 does); the materializing path widens bf16 operands to float32 first.
Tensor causal_attention(const Tensor& projected, std::int64_t heads, std::int64_t kv_heads,
                        double dropout_p = 0.0, bool training = false, Generator* gen = nullptr,
                        Tensor* probabilities = nullptr);

// Attention of separate heads (after RoPE, or over a KV cache): q (B, heads, T_q, d_head),
// k and v (B, kv_heads, T_k, d_head) with T_k >= T_q, any strides (an operand whose rows of
// d_head are not contiguous, or less than d_head apart as in a sequence expanded from one
// position, is copied) -> (B, T_q, heads d_head). The queries are the last T_q positions:
// query t sees keys j <= t + T_k - T_q (a decoding step's one query sees the whole cache).
// d_head at most kMaxAttentionHeadDim. bf16 and autocast as causal_attention's fused path (the
// three operands of one dtype, after autocast's cast).
Tensor causal_attention_heads(const Tensor& q, const Tensor& k, const Tensor& v,
                              double dropout_p = 0.0, bool training = false,
                              Generator* gen = nullptr);

}  // namespace kiln
