#include "lm/decoder.h"

#include <algorithm>

#include "core/autograd.h"
#include "core/error.h"
#include "core/ops/factories.h"

namespace kiln::lm {

Decoder::Decoder(const nn::TransformerLM& model, DecodeMode mode)
    : model_(model),
      mode_(mode),
      max_len_(model.config().max_seq_len),
      caches_(model.new_caches()) {}

std::vector<float> Decoder::start(std::span<const std::int64_t> tokens) {
  KILN_CHECK(!tokens.empty(), "decoder: the context is empty (start needs at least one token)");
  const auto n = static_cast<std::int64_t>(tokens.size());
  dropped_ = std::max<std::int64_t>(0, n - max_len_);
  context_.assign(tokens.begin() + dropped_, tokens.end());
  return run_context();
}

std::vector<float> Decoder::append(std::int64_t token) {
  KILN_CHECK(!context_.empty(), "decoder: append({}) before start", token);
  context_.push_back(token);
  if (static_cast<std::int64_t>(context_.size()) > max_len_) {
    context_.erase(context_.begin());
    ++dropped_;
    return run_context();
  }
  if (mode_ == DecodeMode::cached) return run({token}, true);
  return run(context_, false);
}

std::vector<float> Decoder::run_context() {
  // Rewinding the caches reuses their storage (allocated once for max_seq_len positions).
  for (nn::KVCache& cache : caches_) cache.length = 0;
  return run(context_, mode_ == DecodeMode::cached);
}

std::vector<float> Decoder::run(const std::vector<std::int64_t>& ids, bool use_cache) {
  const std::int64_t vocab = model_.config().vocab;
  for (std::int64_t id : ids)
    KILN_CHECK(id >= 0 && id < vocab, "decoder: token id {} is outside the vocabulary [0, {})", id,
               vocab);
  NoGradGuard no_grad;
  const auto T = static_cast<std::int64_t>(ids.size());
  const Tensor input = from_vector(ids, {1, T}, model_.device());              // (1, T)
  const Tensor hidden = model_.hidden(input, use_cache ? &caches_ : nullptr);  // (1, T, d)
  // Only the last position is sampled from.
  return model_.logits(hidden.select(1, T - 1)).to_vector<float>();  // (1, vocab)
}

std::vector<std::int64_t> Decoder::generate(std::span<const std::int64_t> prompt, std::int64_t n,
                                            const SamplingOptions& options, kiln::Generator& rng,
                                            const std::function<void(std::int64_t)>& on_token) {
  KILN_CHECK(n >= 0, "generate: the number of tokens must be >= 0, got {}", n);
  validate(options);
  std::vector<std::int64_t> tokens;
  if (n == 0) return tokens;
  std::vector<float> logits = start(prompt);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t token = sample_next(logits, options, rng);
    tokens.push_back(token);
    if (on_token) on_token(token);
    if (i + 1 < n) logits = append(token);
  }
  return tokens;
}

}  // namespace kiln::lm
