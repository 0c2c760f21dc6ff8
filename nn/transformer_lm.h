// TransformerLM: a decoder-only language model with the output tied to the embedding.
//   X_0 = E[ids] * s + PE    s = sqrt(d), or 1 with embedding_scale none (GPT-2);
//                            PE sinusoidal, or a learned table P[past..past+T) (GPT-2's wpe);
//                            none with RoPE, which rotates Q and K instead
//   X_l = Block_l(X_{l-1}),  l = 1..N       (pre-LN adds a final LayerNorm)
//   logits = X_N E^T                          E is the embedding matrix itself: no second
//                                             vocabulary-sized matrix exists
// With adaptive_cutoffs the output is an adaptive softmax tied to E (or, with input adaptive, the
// input layer shares its clusters and E does not exist): nn/adaptive_softmax.h.
// With the default config it computes exactly the function of bench/torch_ref.py.
//
//   TransformerConfig config;  config.vocab = 33278;
//   TransformerLM model(config);
//   Tensor loss = model.loss(inputs, targets);   // inputs, targets (B, T) int64
//   loss.backward();
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "core/generator.h"
#include "nn/adaptive_softmax.h"
#include "nn/config.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/language_model.h"
#include "nn/layer_norm.h"
#include "nn/sinusoidal.h"
#include "nn/transformer_block.h"

namespace kiln::nn {

class TransformerLM : public LanguageModel {
 public:
  // Builds a custom feed-forward sublayer for each block (see examples/custom_module.cpp).
  using FeedForwardFactory = std::function<std::shared_ptr<UnaryModule>(const TransformerConfig&)>;

  // Parameters are drawn from the default generator (kiln::manual_seed makes them
  // reproducible): embedding U(-0.1, 0.1), Linear layers as PyTorch, LayerNorm (1, 0).
  explicit TransformerLM(const TransformerConfig& config, FeedForwardFactory make_ffn = nullptr);

  // ids (B, T) int64 -> logits (B, T, vocab). With caches (one per layer, see
  // new_caches), ids are the positions after the cached ones. With attention, it receives
  // A (B, h, T, T_keys) of every layer.
  Tensor forward(const Tensor& ids, std::vector<KVCache>* caches = nullptr,
                 std::vector<Tensor>* attention = nullptr) const;

  // The final hidden states X (B, T, d), before the output projection.
  Tensor hidden(const Tensor& ids, std::vector<KVCache>* caches = nullptr,
                std::vector<Tensor>* attention = nullptr) const;

  // The tied output layer, the one place it is computed: hidden states (..., d) -> logits
  // (..., vocab) = X E^T; with the adaptive softmax, its log-probabilities (logits whose
  // logsumexp is 0: softmax and sampling read them alike).
  Tensor logits(const Tensor& hidden_states) const;

  // Mean cross-entropy of next-token prediction over the targets that are not ignore_index:
  // inputs and targets (B, T) int64. Computed by the fused linear_cross_entropy
  // (core/ops/linear_cross_entropy.h), or the adaptive softmax's loss built on it: the (B T,
  // vocab) logits are never kept apart.
  Tensor loss(const Tensor& inputs, const Tensor& targets,
              std::int64_t ignore_index = -100) const override;

  std::vector<KVCache> new_caches() const { return std::vector<KVCache>(blocks.size()); }

  const TransformerConfig& config() const { return config_; }
  std::string config_json() const override { return config_.to_json(); }

  std::shared_ptr<Embedding> embedding;                     // null with adaptive input
  std::shared_ptr<AdaptiveSoftmax> adaptive;                // the adaptive softmax only
  std::shared_ptr<SinusoidalPositionalEncoding> positions;  // sinusoidal only
  // Learned positions only: (max_seq_len, d_model), initialised N(0, 0.02) as GPT-2's.
  std::shared_ptr<Embedding> position_embedding;
  std::vector<std::shared_ptr<TransformerBlock>> blocks;
  std::shared_ptr<LayerNorm> norm;  // pre-LN only

 private:
  TransformerConfig config_;
  std::shared_ptr<Dropout> dropout_;
  Generator* masks_;  // the dropout generator, for word dropout's masks
};

}  // namespace kiln::nn
