#include "lm/sampling.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/philox.h"

namespace kiln::lm {

namespace {

void check_logits(std::span<const float> logits) {
  KILN_CHECK(!logits.empty(), "sampling: no logits (an empty vocabulary)");
  for (std::size_t i = 0; i < logits.size(); ++i)
    KILN_CHECK(std::isfinite(logits[i]),
               "sampling: the logit of token {} is {}: the model's output is not finite (a "
               "diverged or corrupt checkpoint?)",
               i, logits[i]);
}

}  // namespace

void validate(const SamplingOptions& options) {
  KILN_CHECK(options.temperature > 0 && std::isfinite(options.temperature),
             "sampling: --temperature must be a positive number, got {} (--greedy picks the most "
             "probable token)",
             options.temperature);
  KILN_CHECK(options.top_k >= 0, "sampling: --top-k must be >= 0 (0 keeps every token), got {}",
             options.top_k);
  KILN_CHECK(options.top_p > 0 && options.top_p <= 1,
             "sampling: --top-p must be in (0, 1] (1 keeps every token), got {}", options.top_p);
}

std::int64_t argmax(std::span<const float> logits) {
  check_logits(logits);
  // max_element returns the first of equal maxima: the lowest id.
  return std::max_element(logits.begin(), logits.end()) - logits.begin();
}

std::vector<double> next_token_distribution(std::span<const float> logits,
                                            const SamplingOptions& options) {
  validate(options);
  const std::int64_t best = argmax(logits);
  std::vector<double> p(logits.size(), 0.0);
  if (options.greedy) {
    p[best] = 1.0;
    return p;
  }
  // w = exp((l - max l) / temperature): the probability up to normalisation, without overflow.
  struct Candidate {
    float logit;
    std::int64_t id;
    double w;
  };
  std::vector<Candidate> kept(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i)
    kept[i] = {logits[i], static_cast<std::int64_t>(i),
               std::exp((static_cast<double>(logits[i]) - logits[best]) / options.temperature)};
  // Ranking by logit is ranking by probability (temperature > 0 keeps the order); ties go to
  // the lower id, so top-k 1 is exactly argmax.
  const auto before = [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };
  if (options.top_k > 0 && options.top_k < static_cast<std::int64_t>(kept.size())) {
    std::nth_element(kept.begin(), kept.begin() + options.top_k, kept.end(), before);
    kept.resize(options.top_k);
  }
  if (options.top_p < 1) {
    // Walk the kept tokens in rank order until their mass reaches p. Only as many are ranked
    // as the walk needs, in chunks that double: a peaked distribution's nucleus is a few
    // tokens, and sorting all 33k of them would cost more than a cached decoding step.
    double total = 0;
    for (const Candidate& c : kept) total += c.w;
    double mass = 0;
    std::size_t n = 0, ranked = 0;
    while (mass < options.top_p * total) {
      if (n == ranked) {
        const std::size_t next = std::min(kept.size(), std::max<std::size_t>(64, 2 * ranked));
        std::nth_element(kept.begin() + ranked, kept.begin() + next, kept.end(), before);
        std::sort(kept.begin() + ranked, kept.begin() + next, before);
        ranked = next;
      }
      mass += kept[n++].w;
    }
    kept.resize(n);
  }
  double mass = 0;
  for (const Candidate& c : kept) mass += c.w;
  for (const Candidate& c : kept) p[c.id] = c.w / mass;
  return p;
}

std::int64_t sample_next(std::span<const float> logits, const SamplingOptions& options,
                         kiln::Generator& gen) {
  if (options.greedy) return argmax(logits);
  const std::vector<double> p = next_token_distribution(logits, options);
  // Exponential race: E_i ~ Exp(1) for every token, and the largest p_i / E_i wins, which
  // happens with probability p_i (Gumbel-max in another form). The winner depends only on the
  // two best ratios, so logits that differ in the last bits (the cached and uncached paths'
  // GEMMs round differently) give the same token except in a near tie; inverting the
  // cumulative sum over 33k tokens would flip a token every hundred or so.
  const std::uint64_t first = gen.reserve((p.size() + 1) / 2);
  std::int64_t winner = -1;
  double best = 0;
  for (std::size_t pair = 0; 2 * pair < p.size(); ++pair) {
    const std::size_t end = std::min(p.size(), 2 * pair + 2);
    if (p[2 * pair] == 0 && (end == 2 * pair + 1 || p[2 * pair + 1] == 0)) continue;
    const philox::Words words = philox::draw(gen.seed(), first + pair);
    for (std::size_t i = 2 * pair; i < end; ++i) {
      if (p[i] == 0) continue;
      const std::size_t j = i % 2;  // uniform double j of the counter: words 2j, 2j + 1
      const double u = philox::uniform_double(words.w[2 * j], words.w[2 * j + 1]);  // [0, 1)
      const double score = p[i] / -std::log1p(-u);  // E = 0 (u = 0) scores inf and wins
      if (winner < 0 || score > best) {
        winner = static_cast<std::int64_t>(i);
        best = score;
      }
    }
  }
  return winner;
}

}  // namespace kiln::lm
