#include "nn/attention.h"

#include <cmath>

#include "core/autocast.h"
#include "core/autograd.h"
#include "core/backend.h"
#include "core/ops/attention.h"
#include "core/ops/dropout.h"
#include "core/ops/elementwise.h"
#include "core/ops/factories.h"
#include "core/ops/matmul.h"
#include "core/ops/softmax.h"
#include "core/profiler.h"

namespace kiln::nn {

MultiHeadAttention::MultiHeadAttention(std::int64_t d_model, std::int64_t heads_in,
                                       std::int64_t kv_heads_in, double attn_dropout_in,
                                       std::shared_ptr<RotaryEmbedding> rope, Generator* gen)
    : heads(heads_in),
      kv_heads(kv_heads_in),
      d_head(heads_in > 0 ? d_model / heads_in : 0),
      attn_dropout(attn_dropout_in),
      rope_(std::move(rope)),
      gen_(gen) {
  KILN_CHECK(heads > 0 && d_model % heads == 0,
             "MultiHeadAttention: heads ({}) must divide d_model ({})", heads, d_model);
  KILN_CHECK(kv_heads > 0 && heads % kv_heads == 0,
             "MultiHeadAttention: kv_heads ({}) must divide heads ({})", kv_heads, heads);
  qkv = register_module("qkv", std::make_shared<Linear>(d_model, (heads + 2 * kv_heads) * d_head));
  out = register_module("out", std::make_shared<Linear>(d_model, d_model));
}

Tensor MultiHeadAttention::forward(const Tensor& x, KVCache* cache, Tensor* attention,
                                   std::int64_t max_positions) const {
  KILN_CHECK(x.dim() == 3 && x.size(2) == heads * d_head,
             "MultiHeadAttention: expected input (B, T, {}), got shape {}", heads * d_head,
             x.shape());
  const std::int64_t B = x.size(0), T = x.size(1);
  const std::int64_t group = heads / kv_heads;  // query heads per kv head
  const std::int64_t past = cache != nullptr ? cache->length : 0;

  const Tensor projected = qkv->forward(x);  // (B, T, (h + 2 kv) d_head)
  if (cache == nullptr && !rope_) {
    // Training and whole-sequence evaluation: one fused op reads Q, K, V in place (and with
    // `attention`, materializes A to return it).
    return out->forward(
        causal_attention(projected, heads, kv_heads, attn_dropout, is_training(), gen_, attention));
  }
  auto heads_of = [&](std::int64_t first, std::int64_t count) {  // -> (B, count, T, d_head)
    return projected.narrow(2, first * d_head, count * d_head)
        .view({B, T, count, d_head})
        .permute({0, 2, 1, 3});
  };
  Tensor Q = heads_of(0, heads);
  Tensor K = heads_of(heads, kv_heads);
  Tensor V = heads_of(heads + kv_heads, kv_heads);
  if (rope_) {
    Q = rope_->forward(Q, past);
    K = rope_->forward(K, past);
  }
  // The dtype attention reads (bf16 under autocast): the cache keeps K and V in it, so that a
  // decoding step converts only its own positions.
  Q = autocast_operand(Q), K = autocast_operand(K), V = autocast_operand(V);
  if (cache != nullptr) {
    if (!cache->keys.defined() || (past == 0 && cache->keys.dtype() != K.dtype())) {
      const std::int64_t capacity = cache->keys.defined() ? cache->keys.size(2) : max_positions;
      KILN_CHECK(capacity > 0, "MultiHeadAttention: a new KV cache needs max_positions");
      cache->keys = empty({B, kv_heads, capacity, d_head}, {K.dtype(), x.device()});
      cache->values = empty({B, kv_heads, capacity, d_head}, {V.dtype(), x.device()});
    }
    KILN_CHECK(cache->keys.dtype() == K.dtype(),
               "MultiHeadAttention: the KV cache holds {} keys and values, but this step's are {}: "
               "a cache filled at one precision cannot go on at another",
               cache->keys.dtype(), K.dtype());
    KILN_CHECK(cache->keys.size(0) == B && past + T <= cache->keys.size(2),
               "MultiHeadAttention: KV cache of shape {} with {} positions cannot take {} more for "
               "batch {}",
               cache->keys.shape(), past, T, B);
    {
      NoGradGuard no_grad;
      cache->keys.narrow(2, past, T).copy_(K);
      cache->values.narrow(2, past, T).copy_(V);
    }
    cache->length = past + T;
    K = cache->keys.narrow(2, 0, past + T);
    V = cache->values.narrow(2, 0, past + T);
  }
  if (attention == nullptr && d_head <= kMaxAttentionHeadDim) {
    // RoPE, or a decoding step over the cache: the tiled op over the rotated and cached heads.
    return out->forward(causal_attention_heads(Q, K, V, attn_dropout, is_training(), gen_));
  }
  const std::int64_t keys = K.size(2);

  // The attention map is wanted (or d_head is beyond the tiled kernels): step by step, with A.
  Tensor Y;  // (B, kv, group T, d_head)
  {
    profile::Scope attention_region(profile::Family::attention);
    // Group the query heads that share a kv head: (B, kv, group * T, d_head), so one batched
    // GEMM per kv head serves all of its query heads without copying K or V.
    const Tensor Qg = Q.reshape({B, kv_heads, group * T, d_head});
    // S in float32 even under autocast (the product's float32 sums, scaled before any rounding),
    // as the fused kernels keep it; A is then float32 too, the attention map returned.
    const Tensor S = [&] {
      const Autocast float32_scores(Precision::f32);
      return matmul(Qg, K.transpose(2, 3)) * (1.0 / std::sqrt(static_cast<double>(d_head)));
    }();
    Tensor A = causal_softmax(S.view({B, kv_heads, group, T, keys}), past);  // sees keys <= t
    if (attention != nullptr) *attention = A.detach().view({B, heads, T, keys});
    A = dropout(A, attn_dropout, is_training(), gen_);
    Y = matmul(A.view({B, kv_heads, group * T, keys}), V);
  }
  const Tensor concatenated =
      Y.view({B, heads, T, d_head}).permute({0, 2, 1, 3}).reshape({B, T, heads * d_head});
  return out->forward(concatenated);  // Z = Y W_O
}

}  // namespace kiln::nn
