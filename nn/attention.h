// Multi-head causal self-attention with a fused QKV projection, grouped-query attention and a
// KV cache (docs/attention.md walks through the equations and this code side by side).
//
// For input X (B, T, d) and h heads of d_head = d / h:
//   [Q K V] = X W_qkv + b        one projection; W_qkv rows are ordered Q heads, K heads, V heads
//   Q (B, h, T, d_head), K and V (B, kv_heads, T, d_head)
//   S = Q K^T / sqrt(d_head)     query head i reads kv head floor(i * kv_heads / h)
//   A = softmax(S) with a causal mask (position t sees positions <= t)
//   Y = A V, heads concatenated to (B, T, d);   Z = Y W_O + b_O
// kv_heads = h is multi-head attention, 1 is multi-query, between is grouped-query.
// S and A are never stored: the attention itself is the tiled op of core/ops/attention.h
// (causal_attention over the projection; causal_attention_heads after RoPE or over the KV
// cache), so memory grows linearly with T. Asking for the attention weights A (attention maps)
// takes the materializing path instead.
#pragma once

#include <memory>

#include "core/generator.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/rotary.h"

namespace kiln::nn {

// Keys and values of the positions seen so far by one attention layer, for decoding one token
// at a time: each step projects only the new token and attends over the cache. Storage is
// allocated once for `capacity` positions: (B, kv_heads, capacity, d_head) each, so its memory
// is proportional to kv_heads. Inference only: no gradient flows into cached positions.
struct KVCache {
  Tensor keys;              // (B, kv_heads, capacity, d_head)
  Tensor values;            // (B, kv_heads, capacity, d_head)
  std::int64_t length = 0;  // positions cached so far
};

class MultiHeadAttention : public Module {
 public:
  // rope (shared, may be null) rotates Q and K; attn_dropout drops attention probabilities.
  MultiHeadAttention(std::int64_t d_model, std::int64_t heads, std::int64_t kv_heads,
                     double attn_dropout = 0.0, std::shared_ptr<RotaryEmbedding> rope = nullptr,
                     Generator* gen = nullptr);

  // X (B, T, d) -> Z (B, T, d). With a cache, X holds the positions after the cached ones and
  // they are appended to it (capacity: max_positions, allocated on first use). With
  // `attention`, A (B, h, T, T_keys) is stored there.
  Tensor forward(const Tensor& x, KVCache* cache = nullptr, Tensor* attention = nullptr,
                 std::int64_t max_positions = 0) const;

  std::int64_t heads, kv_heads, d_head;
  double attn_dropout;
  std::shared_ptr<Linear> qkv;  // W_qkv (h d_head + 2 kv_heads d_head, d)
  std::shared_ptr<Linear> out;  // W_O (d, d)

 private:
  std::shared_ptr<RotaryEmbedding> rope_;
  Generator* gen_;
};

}  // namespace kiln::nn
