#include "nn/transformer_lm.h"

#include <cmath>

#include "core/autocast.h"
#include "core/autograd.h"
#include "core/ops/elementwise.h"
#include "core/ops/factories.h"
#include "core/ops/linear_cross_entropy.h"
#include "core/ops/matmul.h"
#include "core/profiler.h"
#include "nn/word_dropout.h"

namespace kiln::nn {

TransformerLM::TransformerLM(const TransformerConfig& config, FeedForwardFactory make_ffn)
    : config_(config) {
  config_.validate();
  if (config_.input == InputKind::embedding) {
    embedding =
        register_module("embedding", std::make_shared<Embedding>(config_.vocab, config_.d_model));
    NoGradGuard no_grad;
    embedding->weight.copy_(uniform(embedding->weight.shape(), -0.1, 0.1));
  }
  std::shared_ptr<RotaryEmbedding> rope;
  if (config_.position == PositionKind::sinusoidal) {
    positions = register_module("positions", std::make_shared<SinusoidalPositionalEncoding>(
                                                 config_.d_model, config_.max_seq_len));
  } else if (config_.position == PositionKind::learned) {
    position_embedding = register_module(
        "position_embedding", std::make_shared<Embedding>(config_.max_seq_len, config_.d_model));
    NoGradGuard no_grad;
    position_embedding->weight.copy_(normal(position_embedding->weight.shape(), 0.0, 0.02));
  } else {
    rope = register_module(
        "rope", std::make_shared<RotaryEmbedding>(config_.d_head(), config_.max_seq_len));
  }
  dropout_ =
      register_module("dropout", std::make_shared<Dropout>(config_.dropout, &dropout_generator()));
  masks_ = &dropout_generator();
  for (std::int64_t l = 0; l < config_.layers; ++l) {
    std::shared_ptr<UnaryModule> ffn = make_ffn ? make_ffn(config_) : nullptr;
    blocks.push_back(std::make_shared<TransformerBlock>(config_, rope, &dropout_generator(), ffn));
  }
  // Registered as "blocks.<l>" through a container module so the paths read blocks.0.attn...
  struct Blocks : Module {
    explicit Blocks(const std::vector<std::shared_ptr<TransformerBlock>>& list) {
      for (std::size_t l = 0; l < list.size(); ++l) register_module(std::to_string(l), list[l]);
    }
  };
  register_module("blocks", std::make_shared<Blocks>(blocks));
  if (config_.norm == NormPlacement::pre)
    norm = register_module("norm", std::make_shared<LayerNorm>(config_.d_model));
  if (config_.adaptive())
    adaptive = register_module(
        "adaptive",
        std::make_shared<AdaptiveSoftmax>(config_.vocab, config_.d_model, config_.adaptive_cutoffs,
                                          config_.adaptive_div, embedding));
}

Tensor TransformerLM::hidden(const Tensor& ids, std::vector<KVCache>* caches,
                             std::vector<Tensor>* attention) const {
  KILN_CHECK(ids.dim() == 2 && ids.dtype() == DType::i64,
             "TransformerLM: expected int64 ids (B, T), got {} {}", ids.dtype(), ids.shape());
  KILN_CHECK(caches == nullptr || caches->size() == blocks.size(),
             "TransformerLM: {} caches for {} layers", caches ? caches->size() : 0, blocks.size());
  const std::int64_t past = caches != nullptr ? (*caches)[0].length : 0;
  KILN_CHECK(past + ids.size(1) <= config_.max_seq_len,
             "TransformerLM: positions up to {} exceed max_seq_len {}", past + ids.size(1),
             config_.max_seq_len);
  Tensor x = embedding ? embedding->forward(ids) : adaptive->embed(ids);
  x = word_dropout(x, ids, config_.vocab, config_.word_dropout, is_training(), masks_);
  if (config_.embedding_scale == EmbeddingScale::sqrt_d)
    x = x * std::sqrt(static_cast<double>(config_.d_model));
  if (positions) x = positions->forward(x, past);
  if (position_embedding) x = x + position_embedding->weight.narrow(0, past, ids.size(1));
  x = dropout_->forward(x);
  if (attention != nullptr) attention->assign(blocks.size(), Tensor());
  for (std::size_t l = 0; l < blocks.size(); ++l) {
    x = blocks[l]->forward(x, caches != nullptr ? &(*caches)[l] : nullptr,
                           attention != nullptr ? &(*attention)[l] : nullptr);
  }
  if (norm) x = norm->forward(x);
  return x;
}

Tensor TransformerLM::forward(const Tensor& ids, std::vector<KVCache>* caches,
                              std::vector<Tensor>* attention) const {
  return logits(hidden(ids, caches, attention));
}

Tensor TransformerLM::logits(const Tensor& hidden_states) const {
  if (adaptive) return adaptive->log_prob(hidden_states);
  profile::Scope vocabulary_region(profile::Family::vocabulary);
  // Under autocast the product reads bf16 operands, but the logits stay float32 (its float32
  // sums, not rounded again), as the loss's: samplers and evaluation read them.
  const Tensor x = autocast_operand(hidden_states), tied = autocast_operand(embedding->weight);
  const Autocast float32_result(Precision::f32);
  return matmul(x, tied.t());  // logits = X E^T, tied
}

Tensor TransformerLM::loss(const Tensor& inputs, const Tensor& targets,
                           std::int64_t ignore_index) const {
  KILN_CHECK(targets.shape() == inputs.shape(),
             "TransformerLM: targets {} and inputs {} must have the same shape", targets.shape(),
             inputs.shape());
  const Tensor x = hidden(inputs);  // (B, T, d)
  if (adaptive)
    return adaptive->loss(x.view({-1, config_.d_model}), targets.reshape({-1}), ignore_index);
  return linear_cross_entropy(x.view({-1, config_.d_model}), embedding->weight,
                              targets.reshape({-1}), ignore_index);
}

}  // namespace kiln::nn
