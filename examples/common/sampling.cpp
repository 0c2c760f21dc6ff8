#include "examples/common/sampling.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/philox.h"

namespace kiln {

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
                         Generator& gen) {
  if (options.greedy) return argmax(logits);
  const std::vector<double> p = next_token_distribution(logits, options);
  const philox::Words words = philox::draw(gen.seed(), gen.reserve(1));
  const double u = philox::uniform_double(words.w[0], words.w[1]);
  double cumulative = 0;
  std::int64_t last = -1;
  for (std::size_t id = 0; id < p.size(); ++id) {
    if (p[id] == 0) continue;
    last = static_cast<std::int64_t>(id);
    cumulative += p[id];
    if (u < cumulative) return last;
  }
  return last;  // u landed beyond a total that rounded to just under 1
}

}  // namespace kiln
