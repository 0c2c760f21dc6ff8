#include "nn/transformer_block.h"

#include "core/ops/elementwise.h"
#include "nn/feed_forward.h"

namespace kiln::nn {

TransformerBlock::TransformerBlock(const TransformerConfig& config,
                                   std::shared_ptr<RotaryEmbedding> rope, Generator* gen,
                                   std::shared_ptr<UnaryModule> ffn_in)
    : placement_(config.norm), max_positions_(config.max_seq_len) {
  attn = register_module(
      "attn", std::make_shared<MultiHeadAttention>(config.d_model, config.heads, config.kv(),
                                                   config.attn_dropout, std::move(rope), gen));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(config.d_model));
  if (!ffn_in) ffn_in = std::make_shared<FeedForward>(config.d_model, config.ff, config.activation);
  ffn = register_module("ffn", std::move(ffn_in));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(config.d_model));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(config.dropout, gen));
}

Tensor TransformerBlock::forward(const Tensor& x, KVCache* cache, Tensor* attention) const {
  if (placement_ == NormPlacement::post) {
    const Tensor Z = attn->forward(x, cache, attention, max_positions_);
    const Tensor x1 = norm1->forward(x + dropout_->forward(Z));       // X'
    return norm2->forward(x1 + dropout_->forward(ffn->forward(x1)));  // X''
  }
  const Tensor Z = attn->forward(norm1->forward(x), cache, attention, max_positions_);
  const Tensor x1 = x + dropout_->forward(Z);
  return x1 + dropout_->forward(ffn->forward(norm2->forward(x1)));
}

}  // namespace kiln::nn
