// The decoder (lm/decoder.h): the KV cache gives the logits of re-running the whole
// context, so cached and uncached generation pick the same tokens, greedy and sampled, also past
// max_seq_len where the context slides and the cache is rebuilt.
#include <catch2/catch.hpp>
#include <cmath>

#include "core/kiln.h"
#include "lm/decoder.h"
#include "tests/harness/near.h"
#include "tests/lm/tiny_lm.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// The layouts the cache must handle: absolute sinusoids with post-LN (the default), and RoPE
// (positions offset by the cache length) with pre-LN and multi-query attention.
std::vector<nn::TransformerConfig> configs() {
  nn::TransformerConfig rope = tiny_config();
  rope.position = nn::PositionKind::rope;
  rope.norm = nn::NormPlacement::pre;
  rope.kv_heads = 1;
  return {tiny_config(), rope};
}

void require_close(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("logit " << i << ": " << a[i] << " vs " << b[i]);
    REQUIRE(near(a[i], b[i], 1e-4, 1e-5));
  }
}

const std::vector<std::int64_t> kPrompt{1, 2, 3};  // "the cat sat"

}  // namespace

TEST_CASE("cached steps give the logits of re-running the whole context") {
  for (const nn::TransformerConfig& config : configs()) {
    const auto model = tiny_model(config);
    lm::Decoder cached(*model, lm::DecodeMode::cached), uncached(*model, lm::DecodeMode::uncached);
    require_close(cached.start(kPrompt), uncached.start(kPrompt));
    // 20 steps from a 3-token prompt run 11 tokens past max_seq_len 12.
    for (std::int64_t step = 0; step < 20; ++step) {
      const std::int64_t token = (step * 7) % config.vocab;
      require_close(cached.append(token), uncached.append(token));
      REQUIRE(cached.context() == uncached.context());
    }
    REQUIRE(cached.context().size() == 12);
    REQUIRE(cached.dropped() == 11);
  }
}

TEST_CASE("the context keeps the last max_seq_len tokens") {
  const auto model = tiny_model(tiny_config());
  lm::Decoder decoder(*model, lm::DecodeMode::cached);
  std::vector<std::int64_t> long_prompt;
  for (std::int64_t i = 0; i < 15; ++i) long_prompt.push_back(i % 20);
  const std::vector<float> logits = decoder.start(long_prompt);
  REQUIRE(decoder.dropped() == 3);
  REQUIRE(decoder.context() ==
          std::vector<std::int64_t>(long_prompt.begin() + 3, long_prompt.end()));
  // The same as starting from those 12 tokens.
  lm::Decoder fresh(*model, lm::DecodeMode::uncached);
  require_close(logits, fresh.start(decoder.context()));
  decoder.append(5);
  REQUIRE(decoder.dropped() == 4);
  REQUIRE(decoder.context().back() == 5);
  REQUIRE(decoder.context().size() == 12);
}

TEST_CASE("cached and uncached generation pick the same tokens") {
  const std::vector<lm::SamplingOptions> options{
      {.greedy = true},
      {},
      {.temperature = 1.5},
      {.temperature = 0.8, .top_k = 5, .top_p = 0.9},
  };
  for (const nn::TransformerConfig& config : configs()) {
    const auto model = tiny_model(config);
    for (const lm::SamplingOptions& option : options) {
      lm::Decoder cached(*model, lm::DecodeMode::cached),
          uncached(*model, lm::DecodeMode::uncached);
      kiln::Generator gen_cached(77), gen_uncached(77);
      const std::vector<std::int64_t> a = cached.generate(kPrompt, 30, option, gen_cached);
      const std::vector<std::int64_t> b = uncached.generate(kPrompt, 30, option, gen_uncached);
      REQUIRE(a.size() == 30);
      REQUIRE(a == b);
      // The generator was consumed identically: ceil(vocab / 2) counters per sampled token.
      REQUIRE(gen_cached.offset() == gen_uncached.offset());
      REQUIRE(gen_cached.offset() == (option.greedy ? 0u : 30u * 12u));
    }
  }
}

TEST_CASE("generation is deterministic for a seed, and the seed matters") {
  const auto model = tiny_model(tiny_config());
  auto run = [&](std::uint64_t seed) {
    lm::Decoder decoder(*model, lm::DecodeMode::cached);
    kiln::Generator gen(seed);
    return decoder.generate(kPrompt, 40, {}, gen);
  };
  REQUIRE(run(5) == run(5));
  REQUIRE(run(5) != run(6));
}

TEST_CASE("Decoder::generate reports each token as it is picked") {
  const auto model = tiny_model(tiny_config());
  lm::Decoder decoder(*model, lm::DecodeMode::cached);
  kiln::Generator gen(1);
  std::vector<std::int64_t> seen;
  const std::vector<std::int64_t> tokens =
      decoder.generate(kPrompt, 6, {}, gen, [&](std::int64_t token) { seen.push_back(token); });
  REQUIRE(seen == tokens);
  // The context holds the prompt and every token but the last (its successor was not needed).
  REQUIRE(decoder.context().size() == kPrompt.size() + 5);
}

TEST_CASE("errors/decoder: an empty context and ids outside the vocabulary") {
  const auto model = tiny_model(tiny_config());
  lm::Decoder decoder(*model, lm::DecodeMode::cached);
  REQUIRE_THROWS_WITH(decoder.start(std::vector<std::int64_t>{}), Catch::Contains("empty"));
  REQUIRE_THROWS_WITH(decoder.append(1), Catch::Contains("before start"));
  REQUIRE_THROWS_WITH(decoder.start(std::vector<std::int64_t>{1, 24}),
                      Catch::Contains("outside the vocabulary"));
}
