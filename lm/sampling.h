// Choosing the next token from a language model's logits: greedy, or one draw from the model's
// distribution reshaped by temperature, top-k and top-p (nucleus sampling). Draws use kiln's
// Philox generator (core/philox.h), never std:: distributions, so a seed gives the same text on
// every machine.
//
//   p_i ∝ exp(l_i / temperature)  temperature divides the logits: < 1 sharpens, > 1 flattens
//   top-k  keeps the k most probable tokens (0: all of them; 1 is greedy)
//   top-p  then keeps the smallest set of most probable tokens whose mass, among those top-k
//          left, reaches p (1: all of them)
//   the kept probabilities are renormalised and one token is drawn from them, by an
//   exponential race: every token i gets E_i ~ Exp(1) and the largest p_i / E_i wins.
//
// Ranking ties go to the lower id. A draw reserves ceil(vocab / 2) Philox counters (token i
// reads uniform double i % 2 of counter first + i / 2), whatever the options and the logits, so
// two decoders (the KV cache and the uncached path, see decoder.h) consume the generator
// identically. The race also makes the pick insensitive to rounding: logits that differ in
// their last bits, as the two decoders' do, pick the same token unless the two best scores are
// within that rounding of each other.
//
//   SamplingOptions options{.temperature = 0.8, .top_p = 0.95};
//   kiln::Generator gen(seed);
//   std::int64_t token = sample_next(logits, options, gen);
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/generator.h"

namespace kiln::lm {

struct SamplingOptions {
  bool greedy = false;       // the most probable token, no draw (ignores the rest)
  double temperature = 1.0;  // > 0
  std::int64_t top_k = 0;    // >= 0; 0 keeps every token
  double top_p = 1.0;        // in (0, 1]; 1 keeps every token
};

// A kiln::Error naming the first option out of range (and its flag).
void validate(const SamplingOptions& options);

// The most probable token: the largest logit, the lowest id among equals. Non-finite logits
// are an error.
std::int64_t argmax(std::span<const float> logits);

// The distribution a draw samples from, per token id (vocab): zero for the tokens top-k and
// top-p drop, summing to 1. With greedy, all mass on argmax. Non-finite logits are an error.
std::vector<double> next_token_distribution(std::span<const float> logits,
                                            const SamplingOptions& options);

// The next token: argmax when greedy (the generator is untouched), else a draw from
// next_token_distribution (the exponential race above, ceil(vocab / 2) counters of gen).
std::int64_t sample_next(std::span<const float> logits, const SamplingOptions& options,
                         kiln::Generator& gen);

}  // namespace kiln::lm
