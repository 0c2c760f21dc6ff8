// LanguageModelBatches: torch_ref's batchify/get_batch on a hand-computed example, the short last
// window, errors, and the shuffled window order (a permutation that depends on seed and epoch).
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <numeric>

#include "data/batches.h"
#include "tests/data/data_test_util.h"

using namespace kiln;
using Catch::Matchers::Contains;
using kiln::testing::error_message;
using Ids = std::vector<std::int64_t>;

namespace {

// Tokens 100, 101, ..., 100 + n - 1: values that differ from every index.
Ids stream(std::int64_t n) {
  Ids tokens(static_cast<std::size_t>(n));
  std::iota(tokens.begin(), tokens.end(), 100);
  return tokens;
}

}  // namespace

TEST_CASE("windows follow torch_ref's batchify and get_batch", "[batches]") {
  // 23 tokens in B = 3 columns: R = 7 rows, tokens 121 and 122 dropped. Columns (batchify):
  //   column 0: 100..106, column 1: 107..113, column 2: 114..120.
  // T = 4: window 0 covers rows 0-3 (targets rows 1-4); window 1 rows 4-5, t = min(4, 7-1-4) = 2.
  const LanguageModelBatches batches(stream(23), 3, 4);
  REQUIRE(batches.rows() == 7);
  REQUIRE(batches.num_windows() == 2);
  REQUIRE(batches.num_targets() == 18);
  REQUIRE(batches.window_start(1) == 4);
  REQUIRE(batches.window_length(0) == 4);
  REQUIRE(batches.window_length(1) == 2);

  const Batch first = batches.window(0);
  REQUIRE(first.inputs.dtype() == DType::i64);
  REQUIRE(first.inputs.shape() == Shape{3, 4});
  REQUIRE(first.targets.shape() == Shape{3, 4});
  REQUIRE(first.inputs.to_vector<std::int64_t>() ==
          Ids{100, 101, 102, 103, 107, 108, 109, 110, 114, 115, 116, 117});
  REQUIRE(first.targets.to_vector<std::int64_t>() ==
          Ids{101, 102, 103, 104, 108, 109, 110, 111, 115, 116, 117, 118});

  const Batch last = batches.window(1);
  REQUIRE(last.inputs.shape() == Shape{3, 2});
  REQUIRE(last.inputs.to_vector<std::int64_t>() == Ids{104, 105, 111, 112, 118, 119});
  REQUIRE(last.targets.to_vector<std::int64_t>() == Ids{105, 106, 112, 113, 119, 120});
}

TEST_CASE("windows tile every column once, whatever T", "[batches]") {
  // For each T the inputs of column b, window after window, are rows 0..R-2 of the column and
  // the targets rows 1..R-1: no token is skipped or repeated.
  for (std::int64_t T : {1, 2, 5, 6, 7, 50}) {
    const LanguageModelBatches batches(stream(41), 4, T);  // R = 10
    INFO("T = " << T);
    REQUIRE(batches.num_windows() == (9 + T - 1) / T);
    std::int64_t targets = 0;
    for (std::int64_t b = 0; b < 4; ++b) {
      Ids inputs_seen, targets_seen;
      for (std::int64_t k = 0; k < batches.num_windows(); ++k) {
        const Batch batch = batches.window(k);
        const std::int64_t t = batch.inputs.size(1);
        REQUIRE(t == (k + 1 < batches.num_windows() ? T : 9 - k * T));
        const Ids in = batch.inputs.select(0, b).to_vector<std::int64_t>();
        const Ids out = batch.targets.select(0, b).to_vector<std::int64_t>();
        inputs_seen.insert(inputs_seen.end(), in.begin(), in.end());
        targets_seen.insert(targets_seen.end(), out.begin(), out.end());
        targets += t;
      }
      Ids column = stream(41);
      column = Ids(column.begin() + b * 10, column.begin() + (b + 1) * 10);
      REQUIRE(inputs_seen == Ids(column.begin(), column.end() - 1));
      REQUIRE(targets_seen == Ids(column.begin() + 1, column.end()));
    }
    REQUIRE(targets == batches.num_targets());
  }
}

TEST_CASE("batch arguments out of range are errors naming them", "[batches][errors]") {
  REQUIRE_THAT(error_message([] { LanguageModelBatches(stream(10), 0, 4); }),
               Contains("batch size must be at least 1, got 0"));
  REQUIRE_THAT(error_message([] { LanguageModelBatches(stream(10), 2, 0); }),
               Contains("window length must be at least 1, got 0"));
  REQUIRE_THAT(error_message([] { LanguageModelBatches(stream(5), 3, 4); }),
               Contains("5 tokens are too few for batch size 3"));
  // A batch size from a flag or a checkpoint: 2 B once overflowed (UBSan: signed overflow).
  REQUIRE_THAT(error_message([] { LanguageModelBatches(stream(6), std::int64_t{1} << 62, 4); }),
               Contains("6 tokens are too few for batch size 4611686018427387904"));
  const LanguageModelBatches batches(stream(6), 3, 4);  // R = 2: one window of one row
  REQUIRE(batches.num_windows() == 1);
  REQUIRE(batches.window(0).inputs.to_vector<std::int64_t>() == Ids{100, 102, 104});
  REQUIRE_THAT(error_message([&] { batches.window(1); }),
               Contains("window 1 is out of range [0, 1)"));
  REQUIRE_THAT(error_message([&] { batches.window(-1); }), Contains("window -1 is out of range"));
}

TEST_CASE("the shuffled order is a permutation fixed by seed and epoch", "[batches][shuffle]") {
  const Ids order = shuffled_order(1000, 42, 0);
  Ids sorted = order;
  std::sort(sorted.begin(), sorted.end());
  Ids identity(1000);
  std::iota(identity.begin(), identity.end(), 0);
  REQUIRE(sorted == identity);
  REQUIRE(order != identity);
  REQUIRE(shuffled_order(1000, 42, 0) == order);  // reproducible
  REQUIRE(shuffled_order(1000, 42, 1) != order);  // another epoch, another order
  REQUIRE(shuffled_order(1000, 43, 0) != order);  // another seed, another order
  REQUIRE(shuffled_order(0, 42, 0).empty());
  REQUIRE(shuffled_order(1, 42, 0) == Ids{0});
  REQUIRE_THAT(error_message([] { shuffled_order(5, 1, std::uint64_t{1} << 32); }),
               Contains("epoch 4294967296 does not fit in 32 bits"));
}

TEST_CASE("the shuffled order matches the documented Philox recipe", "[batches][shuffle]") {
  // Known answers from an independent Python transcription of the recipe in data/batches.h,
  // so the order is the same on every machine and after any refactoring.
  REQUIRE(shuffled_order(10, 1234, 0) == Ids{9, 7, 1, 5, 3, 6, 0, 4, 8, 2});
  REQUIRE(shuffled_order(10, 1234, 1) == Ids{1, 8, 2, 0, 4, 9, 5, 3, 7, 6});
  REQUIRE(shuffled_order(10, (std::uint64_t{5} << 32) | 7, 3) == Ids{0, 8, 4, 1, 3, 7, 5, 9, 2, 6});
}

TEST_CASE("every permutation of three windows is about equally likely", "[batches][shuffle]") {
  std::map<Ids, int> counts;
  for (std::uint64_t seed = 0; seed < 6000; ++seed) ++counts[shuffled_order(3, seed, 0)];
  REQUIRE(counts.size() == 6);
  for (const auto& [order, count] : counts) {
    INFO(count);
    REQUIRE(count > 850);  // 1000 expected, standard deviation 29: a 5-sigma band
    REQUIRE(count < 1150);
  }
}

TEST_CASE("epoch_order shuffles or not, and resumes from (epoch, index)", "[batches][shuffle]") {
  const LanguageModelBatches batches(stream(1000), 4, 5);  // R = 250: 50 windows
  REQUIRE(batches.num_windows() == 50);
  Ids identity(50);
  std::iota(identity.begin(), identity.end(), 0);
  REQUIRE(batches.epoch_order(7, 3, /*shuffle=*/false) == identity);
  REQUIRE(batches.epoch_order(7, 3) == shuffled_order(50, 7, 3));
  // A trainer that ran epochs 0-2 and stopped at (epoch 3, index 17) resumes, in a new
  // process, at the same window: the order carries no state from earlier epochs.
  Ids ran;
  for (std::uint64_t epoch = 0; epoch <= 3; ++epoch) ran = batches.epoch_order(7, epoch);
  const LanguageModelBatches resumed(stream(1000), 4, 5);
  const Ids order = resumed.epoch_order(7, 3);
  REQUIRE(order == ran);
  REQUIRE(resumed.window(order[17]).inputs.to_vector<std::int64_t>() ==
          batches.window(ran[17]).inputs.to_vector<std::int64_t>());
}
