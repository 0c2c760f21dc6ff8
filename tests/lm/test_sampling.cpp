// Sampling semantics (lm/sampling.h): temperature divides the logits, top-k keeps
// the k most probable tokens, top-p the smallest most-probable set whose mass reaches p, greedy
// is lm::argmax, and a draw reserves the same Philox counters whatever the options.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "core/philox.h"
#include "lm/sampling.h"
#include "tests/harness/near.h"

using namespace kiln;
using kiln::testing::near;

namespace {

// Logits whose softmax is p (the log of each probability).
std::vector<float> logits_of(const std::vector<double>& p) {
  std::vector<float> logits;
  for (double q : p) logits.push_back(static_cast<float>(std::log(q)));
  return logits;
}

// The ids with non-zero probability.
std::vector<std::int64_t> support(const std::vector<double>& p) {
  std::vector<std::int64_t> ids;
  for (std::size_t i = 0; i < p.size(); ++i)
    if (p[i] > 0) ids.push_back(static_cast<std::int64_t>(i));
  return ids;
}

const std::vector<float> kLogits = logits_of({0.1, 0.4, 0.2, 0.3});  // ranks: 1, 3, 2, 0

}  // namespace

TEST_CASE("with no options the distribution is the softmax of the logits") {
  const std::vector<double> p = lm::next_token_distribution(kLogits, {});
  const std::vector<double> expected{0.1, 0.4, 0.2, 0.3};
  for (std::size_t i = 0; i < p.size(); ++i) REQUIRE(near(p[i], expected[i], 1e-6, 0));
}

TEST_CASE("temperature divides the logits") {
  const std::vector<float> logits{1.0f, -0.5f, 2.0f, 0.25f};
  for (double temperature : {0.5, 1.0, 2.0}) {
    const std::vector<double> p = lm::next_token_distribution(logits, {.temperature = temperature});
    double total = 0;
    for (float l : logits) total += std::exp(l / temperature);
    for (std::size_t i = 0; i < logits.size(); ++i)
      REQUIRE(near(p[i], std::exp(logits[i] / temperature) / total, 1e-12, 0));
  }
}

TEST_CASE("top-k keeps the k most probable tokens, renormalised") {
  const std::vector<double> p = lm::next_token_distribution(kLogits, {.top_k = 2});
  REQUIRE(support(p) == std::vector<std::int64_t>{1, 3});
  REQUIRE(near(p[1], 0.4 / 0.7, 1e-6, 0));
  REQUIRE(near(p[3], 0.3 / 0.7, 1e-6, 0));
  // k at or above the vocabulary keeps everything.
  REQUIRE(support(lm::next_token_distribution(kLogits, {.top_k = 4})).size() == 4);
  REQUIRE(support(lm::next_token_distribution(kLogits, {.top_k = 100})).size() == 4);
}

TEST_CASE("top-p keeps the smallest set of most probable tokens whose mass reaches p") {
  // Sorted: 0.4 (id 1), 0.3 (id 3), 0.2 (id 2), 0.1 (id 0).
  REQUIRE(support(lm::next_token_distribution(kLogits, {.top_p = 0.39})) ==
          std::vector<std::int64_t>{1});
  REQUIRE(support(lm::next_token_distribution(kLogits, {.top_p = 0.41})) ==
          std::vector<std::int64_t>{1, 3});
  REQUIRE(support(lm::next_token_distribution(kLogits, {.top_p = 0.69})) ==
          std::vector<std::int64_t>{1, 3});
  REQUIRE(support(lm::next_token_distribution(kLogits, {.top_p = 0.71})) ==
          std::vector<std::int64_t>{1, 2, 3});
  REQUIRE(support(lm::next_token_distribution(kLogits, {.top_p = 1.0})).size() == 4);
  const std::vector<double> p = lm::next_token_distribution(kLogits, {.top_p = 0.5});
  REQUIRE(near(p[1], 0.4 / 0.7, 1e-6, 0));
  REQUIRE(near(p[3], 0.3 / 0.7, 1e-6, 0));
}

TEST_CASE("top-p measures mass among the tokens top-k kept") {
  // Top-3 renormalised: 0.4/0.9, 0.3/0.9, 0.2/0.9; the first two reach 0.75 of that.
  const std::vector<double> p = lm::next_token_distribution(kLogits, {.top_k = 3, .top_p = 0.75});
  REQUIRE(support(p) == std::vector<std::int64_t>{1, 3});
}

TEST_CASE("temperature applies before top-p") {
  // Flattened to near-uniform by a high temperature, half the mass needs two of four tokens;
  // sharpened by a low one, the top token alone has it.
  REQUIRE(
      support(lm::next_token_distribution(kLogits, {.temperature = 100, .top_p = 0.5})).size() ==
      2);
  REQUIRE(support(lm::next_token_distribution(kLogits, {.temperature = 0.1, .top_p = 0.5})) ==
          std::vector<std::int64_t>{1});
}

TEST_CASE("greedy and top-k 1 pick the most probable token, ties to the lower id") {
  REQUIRE(lm::argmax(kLogits) == 1);
  REQUIRE(lm::argmax(std::vector<float>{0.5f, 2.0f, 2.0f, -1.0f}) == 1);
  const std::vector<float> tied{3.0f, 3.0f, 3.0f};
  Generator gen(11);
  REQUIRE(lm::sample_next(tied, {.greedy = true}, gen) == 0);
  Generator random_logits(5);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> logits(37);
    for (float& l : logits) {
      const philox::Words w = philox::draw(random_logits.seed(), random_logits.reserve(1));
      l = 8 * philox::uniform_float(w.w[0]) - 4;
    }
    const std::int64_t best = lm::argmax(logits);
    REQUIRE(lm::sample_next(logits, {.greedy = true}, gen) == best);
    REQUIRE(lm::sample_next(logits, {.top_k = 1}, gen) == best);
    REQUIRE(lm::sample_next(logits, {.temperature = 0.7, .top_k = 1}, gen) == best);
  }
}

TEST_CASE("a draw reserves ceil(vocab / 2) counters whatever the options, greedy none") {
  Generator gen(42);
  lm::sample_next(kLogits, {}, gen);
  REQUIRE(gen.offset() == 2);
  lm::sample_next(kLogits, {.temperature = 0.5, .top_k = 2, .top_p = 0.9}, gen);
  REQUIRE(gen.offset() == 4);
  lm::sample_next(kLogits, {.greedy = true}, gen);
  REQUIRE(gen.offset() == 4);
  lm::sample_next(std::vector<float>(7, 0.0f), {.top_k = 1}, gen);
  REQUIRE(gen.offset() == 8);
}

TEST_CASE("a draw ignores differences in the last bits of the logits") {
  // 33278 near-uniform logits, as a random model of WikiText-2's size gives, and the same
  // logits with a relative error of a few float ulps (cached vs uncached rounding).
  Generator noise(8);
  std::vector<float> logits(33278), rounded(33278);
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const philox::Words w = philox::draw(noise.seed(), noise.reserve(1));
    logits[i] = 10 * philox::uniform_float(w.w[0]) - 5;
    rounded[i] = logits[i] * (1 + 3e-7f * (philox::uniform_float(w.w[1]) - 0.5f));
  }
  Generator a(3), b(3);
  for (int draw = 0; draw < 200; ++draw)
    REQUIRE(lm::sample_next(logits, {}, a) == lm::sample_next(rounded, {}, b));
}

TEST_CASE("the same seed draws the same tokens") {
  Generator a(9), b(9), c(10);
  std::vector<std::int64_t> from_a, from_b, from_c;
  for (int i = 0; i < 64; ++i) {
    from_a.push_back(lm::sample_next(kLogits, {}, a));
    from_b.push_back(lm::sample_next(kLogits, {}, b));
    from_c.push_back(lm::sample_next(kLogits, {}, c));
  }
  REQUIRE(from_a == from_b);
  REQUIRE(from_a != from_c);
}

TEST_CASE("draws follow the distribution") {
  const int draws = 40000;
  for (const lm::SamplingOptions& options :
       {lm::SamplingOptions{}, lm::SamplingOptions{.temperature = 2.0},
        lm::SamplingOptions{.top_p = 0.8}}) {
    const std::vector<double> p = lm::next_token_distribution(kLogits, options);
    std::vector<int> counts(p.size(), 0);
    Generator gen(123);
    for (int i = 0; i < draws; ++i) ++counts[lm::sample_next(kLogits, options, gen)];
    for (std::size_t id = 0; id < p.size(); ++id) {
      INFO("token " << id << ": p " << p[id] << ", frequency " << counts[id] / double(draws));
      // 5 standard deviations of a frequency at most sqrt(0.25 / draws) = 0.0025.
      REQUIRE(near(counts[id] / double(draws), p[id], 0, 0.0125));
      if (p[id] == 0) REQUIRE(counts[id] == 0);
    }
  }
}

TEST_CASE("errors/sampling: options out of range name their flag") {
  REQUIRE_THROWS_WITH(lm::validate({.temperature = 0}), Catch::Contains("--temperature"));
  REQUIRE_THROWS_WITH(lm::validate({.temperature = -1}), Catch::Contains("--temperature"));
  REQUIRE_THROWS_WITH(lm::validate({.top_k = -1}), Catch::Contains("--top-k"));
  REQUIRE_THROWS_WITH(lm::validate({.top_p = 0}), Catch::Contains("--top-p"));
  REQUIRE_THROWS_WITH(lm::validate({.top_p = 1.5}), Catch::Contains("--top-p"));
  Generator gen(1);
  REQUIRE_THROWS_WITH(lm::sample_next(std::vector<float>{0.0f, NAN}, {}, gen),
                      Catch::Contains("not finite"));
  REQUIRE_THROWS_WITH(lm::argmax(std::vector<float>{}), Catch::Contains("no logits"));
}
