// Word dropout (nn/word_dropout.h): a dropped word loses its embedding at every occurrence, a kept
// one is scaled by 1 / (1 - p), about p of the vocabulary drops, evaluation is the identity, the
// gradient is the product's (float64 finite differences), bad ids and shapes are errors, and the
// model's config carries the rate only when it is set.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "core/kiln.h"
#include "nn/config.h"
#include "nn/word_dropout.h"
#include "tests/harness/gradcheck.h"

using namespace kiln;
using namespace kiln::testing;

TEST_CASE("word dropout drops a word at every occurrence and scales the kept ones by 1/(1-p)") {
  const std::int64_t vocab = 12, B = 3, T = 8, D = 5;
  std::vector<std::int64_t> words(B * T);
  for (std::size_t n = 0; n < words.size(); ++n) words[n] = static_cast<std::int64_t>(n * 7 % 6);
  const Tensor ids = from_vector(words, {B, T});  // 6 of the 12 words, each 4 times
  Generator values(7);
  const Tensor x = uniform({B, T, D}, 0.5, 1.5, {}, &values);  // never 0
  const double p = 0.4;
  Generator gen(11);
  const Tensor y = nn::word_dropout(x, ids, vocab, p, /*training=*/true, &gen);
  const std::vector<float> xs = x.to_vector<float>(), ys = y.to_vector<float>();
  const std::vector<std::int64_t> id = ids.to_vector<std::int64_t>();
  std::vector<int> kept(vocab, -1);  // per word: -1 unseen, 0 dropped, 1 kept
  for (std::int64_t n = 0; n < B * T; ++n) {
    const bool dropped = ys[n * D] == 0.0f;
    int& word = kept[id[n]];
    REQUIRE((word == -1 || word == (dropped ? 0 : 1)));  // the same at every occurrence
    word = dropped ? 0 : 1;
    for (std::int64_t d = 0; d < D; ++d) {
      const float expected = dropped ? 0.0f : xs[n * D + d] * static_cast<float>(1.0 / (1.0 - p));
      REQUIRE(ys[n * D + d] == expected);
    }
  }
  // Evaluation, and p = 0, return x itself.
  CHECK(nn::word_dropout(x, ids, vocab, p, /*training=*/false, &gen).is_same(x));
  CHECK(nn::word_dropout(x, ids, vocab, 0.0, /*training=*/true, &gen).is_same(x));
}

TEST_CASE("word dropout drops about p of the vocabulary, a new mask per call") {
  const std::int64_t vocab = 2000;
  const Tensor ids = arange(vocab, {.dtype = DType::i64}).view({1, vocab});  // every word once
  const Tensor x = ones({1, vocab, 1});
  Generator gen(3);
  const double p = 0.3;
  double dropped = 0.0;
  const int calls = 20;
  std::vector<float> first;
  for (int c = 0; c < calls; ++c) {
    const std::vector<float> y = nn::word_dropout(x, ids, vocab, p, true, &gen).to_vector<float>();
    for (float v : y) dropped += v == 0.0f ? 1.0 : 0.0;
    if (c == 0) first = y;
    if (c == 1) CHECK(y != first);
  }
  // 40,000 Bernoulli(0.3) draws: the standard deviation of the fraction is 0.0023.
  CHECK(std::fabs(dropped / (calls * vocab) - p) < 0.015);
}

TEST_CASE("word dropout's gradient is the masked product's (float64 finite differences)") {
  const std::int64_t vocab = 6;
  const Tensor ids = from_vector(std::vector<std::int64_t>{0, 3, 3, 5, 1, 0}, {2, 3});
  Generator gen(5);
  const Tensor x = uniform({2, 3, 4}, -1, 1, {.dtype = DType::f64}, &gen);
  // A fresh generator per call: the same mask in every evaluation of the finite differences.
  gradcheck(
      [&](const std::vector<Tensor>& in) {
        Generator masks(17);
        return nn::word_dropout(in[0], ids, vocab, 0.5, true, &masks);
      },
      {x}, {true});
}

TEST_CASE("word dropout refuses ids outside the vocabulary, shapes that disagree, and bad p") {
  Generator gen(1);
  const Tensor x = ones({1, 3, 2});
  const Tensor ids = from_vector(std::vector<std::int64_t>{0, 1, 9}, {1, 3});
  REQUIRE_THROWS_WITH(nn::word_dropout(x, ids, 4, 0.5, true, &gen), Catch::Contains("9"));
  REQUIRE_THROWS_WITH(nn::word_dropout(ones({1, 2, 2}), ids, 10, 0.5, true, &gen),
                      Catch::Contains("word_dropout") && Catch::Contains("[1, 3]"));
  REQUIRE_THROWS_WITH(nn::word_dropout(x, ids, 10, 1.0, true, &gen),
                      Catch::Contains("word_dropout: p"));
}

TEST_CASE("the model config carries word_dropout only when it is set") {
  nn::TransformerConfig config;
  config.vocab = 100;
  CHECK(config.to_json().find("word_dropout") == std::string::npos);  // old files unchanged
  config.word_dropout = 0.25;
  const std::string json = config.to_json();
  CHECK(json.find("\"word_dropout\":0.25") != std::string::npos);
  CHECK(nn::TransformerConfig::from_json(json).word_dropout == 0.25);
  config.word_dropout = 1.0;
  CHECK_THROWS_WITH(config.validate(), Catch::Contains("word_dropout"));
}
