// lm::Decoder: next-token logits for a growing sequence of tokens, with or without the KV
// cache, and the generation loop that samples from them.
//
// Cached: starting runs the context once and fills every layer's KV cache; each appended token
// then runs alone (one position of projections, attention over the cached K and V), so a token
// costs one position of attention, not a re-run of the prefix.
// Uncached: every token re-runs forward() on the whole context, as a loop without a cache would
// (logits for every position included): the reference the cache must match, and the baseline of
// generate's --bench.
// Both keep at most the model's max_seq_len tokens of context: beyond it the oldest are dropped,
// and the cached path rebuilds its cache from the tokens left (positions are absolute, so cached
// keys cannot be shifted). Both therefore see the same context at every step.
//
//   lm::Decoder decoder(model, lm::DecodeMode::cached);
//   kiln::Generator rng(seed);   // the random draws (core/generator.h)
//   std::vector<std::int64_t> tokens = decoder.generate(prompt, 50, options, rng);
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "lm/sampling.h"
#include "nn/transformer_lm.h"

namespace kiln::lm {

enum class DecodeMode { cached, uncached };

class Decoder {
 public:
  // The model must outlive the decoder; it should be in eval mode (load_model leaves it so).
  Decoder(const nn::TransformerLM& model, DecodeMode mode);

  // Makes `tokens` (their last max_seq_len) the context and returns the logits of the next
  // token (vocab). An empty context is an error.
  std::vector<float> start(std::span<const std::int64_t> tokens);
  // Appends token to the context and returns the logits of the token after it (vocab).
  std::vector<float> append(std::int64_t token);

  const std::vector<std::int64_t>& context() const { return context_; }
  // Tokens dropped from the front of the context since start() (0 while it fits).
  std::int64_t dropped() const { return dropped_; }
  DecodeMode mode() const { return mode_; }

  // Generates n tokens after prompt: starts on the prompt, then picks each token with
  // sample_next (drawing from rng) and appends it. on_token (optional) sees each token as soon
  // as it is picked.
  std::vector<std::int64_t> generate(std::span<const std::int64_t> prompt, std::int64_t n,
                                     const SamplingOptions& options, kiln::Generator& rng,
                                     const std::function<void(std::int64_t)>& on_token = {});

 private:
  // Runs ids (the positions after the cached ones, or the whole context) and returns the last
  // position's logits.
  std::vector<float> run(const std::vector<std::int64_t>& ids, bool use_cache);
  // Runs the whole context from position 0, refilling the cache in cached mode.
  std::vector<float> run_context();

  const nn::TransformerLM& model_;
  DecodeMode mode_;
  std::int64_t max_len_;
  std::vector<std::int64_t> context_;
  std::int64_t dropped_ = 0;
  std::vector<nn::KVCache> caches_;  // cached mode; storage kept across rebuilds
};

}  // namespace kiln::lm
