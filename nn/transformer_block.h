// One transformer block. Post-LN (the original, default):
//   X'  = LayerNorm(X + Dropout(Z)),  Z = Attention(X)
//   X'' = LayerNorm(X' + Dropout(FFN(X')))
// Pre-LN (option): X' = X + Dropout(Attention(LayerNorm(X))), X'' = X' +
// Dropout(FFN(LayerNorm(X'))).
#pragma once

#include <memory>

#include "nn/attention.h"
#include "nn/config.h"
#include "nn/dropout.h"
#include "nn/layer_norm.h"

namespace kiln::nn {

class TransformerBlock : public Module {
 public:
  // ffn: the feed-forward sublayer; null builds the config's FeedForward.
  TransformerBlock(const TransformerConfig& config, std::shared_ptr<RotaryEmbedding> rope,
                   Generator* gen, std::shared_ptr<UnaryModule> ffn = nullptr);

  // X (B, T, d) -> (B, T, d); cache and attention as in MultiHeadAttention::forward.
  Tensor forward(const Tensor& x, KVCache* cache = nullptr, Tensor* attention = nullptr) const;

  std::shared_ptr<MultiHeadAttention> attn;
  std::shared_ptr<LayerNorm> norm1;
  std::shared_ptr<UnaryModule> ffn;
  std::shared_ptr<LayerNorm> norm2;

 private:
  std::shared_ptr<Dropout> dropout_;
  NormPlacement placement_;
  std::int64_t max_positions_;
};

}  // namespace kiln::nn
