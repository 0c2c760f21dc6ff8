// WikiText-2 as torch_ref reads it: the published counts, and ids checked against values that
// bench/torch_ref.py's Corpus gives (first ids, sums, <unk> counts). Reads $KILN_DATA;
// without it the case prints "skipped: no WikiText-2 data (set KILN_DATA)" and CTest skips it.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <numeric>

#include "data/batches.h"
#include "data/bpe_tokenizer.h"
#include "data/char_tokenizer.h"
#include "data/corpus.h"

using namespace kiln;
using Ids = std::vector<std::int64_t>;

namespace {

std::int64_t sum(const Ids& ids) {
  return std::accumulate(ids.begin(), ids.end(), std::int64_t{0});
}

std::int64_t count(const Ids& ids, std::int64_t id) {
  return static_cast<std::int64_t>(std::count(ids.begin(), ids.end(), id));
}

}  // namespace

TEST_CASE("WikiText-2 reads exactly as torch_ref reads it", "[wikitext2]") {
  const char* dir = std::getenv("KILN_DATA");
  if (dir == nullptr || *dir == '\0') {
    std::cout << "skipped: no WikiText-2 data (set KILN_DATA)\n";
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  const Corpus corpus(dir);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "WikiText-2 loaded in " << seconds << " s\n";

  const Vocabulary& vocab = corpus.vocabulary();
  REQUIRE(vocab.size() == 33278);
  REQUIRE(corpus.train().ids.size() == 2088628);
  REQUIRE(corpus.valid().ids.size() == 217646);
  REQUIRE(corpus.test().ids.size() == 245569);
  REQUIRE(corpus.train().lines == 36718);
  REQUIRE(corpus.valid().lines == 3760);
  REQUIRE(corpus.test().lines == 4358);

  // The first line is empty (one <eos>), the second the title " = Valkyria Chronicles III = ".
  const std::vector<std::string> first = {"<eos>", "=",     "Valkyria", "Chronicles",
                                          "III",   "Senjō", "no",       "3",
                                          ":",     "<unk>", "(",        "Japanese"};
  REQUIRE(std::vector<std::string>(vocab.words().begin(), vocab.words().begin() + 12) == first);
  REQUIRE(vocab.word(33275) == "Nests");
  REQUIRE(vocab.word(33277) == "gallinae");
  REQUIRE(Ids(corpus.train().ids.begin(), corpus.train().ids.begin() + 20) ==
          Ids{0, 1, 2, 3, 4, 1, 0, 0, 5, 6, 2, 7, 8, 9, 3, 10, 11, 8, 12, 13});
  REQUIRE(Ids(corpus.valid().ids.begin(), corpus.valid().ids.begin() + 10) ==
          Ids{0, 1, 32966, 32967, 1, 0, 0, 32966, 32967, 13});
  REQUIRE(Ids(corpus.test().ids.begin(), corpus.test().ids.begin() + 10) ==
          Ids{0, 1, 1144, 9, 1, 0, 0, 1144, 9, 26});
  REQUIRE(sum(corpus.train().ids) == 7397652102);
  REQUIRE(sum(corpus.valid().ids) == 618935623);
  REQUIRE(sum(corpus.test().ids) == 676583775);
  REQUIRE(vocab.unk() == 9);
  REQUIRE(count(corpus.train().ids, 9) == 54625);
  REQUIRE(count(corpus.valid().ids, 9) == 11718);
  REQUIRE(count(corpus.test().ids, 9) == 15218);

  // Read again with the vocabulary a checkpoint would store: the same ids, nothing unknown.
  const Corpus fixed(dir, Vocabulary::from_string(vocab.to_string()));
  REQUIRE(fixed.test().ids == corpus.test().ids);
  REQUIRE(fixed.train().unknown + fixed.valid().unknown + fixed.test().unknown == 0);

  // torch_ref's training batches (B = 20, T = 35): 104,431 rows, 2,984 windows, the last of 25.
  const LanguageModelBatches batches(corpus.train().ids, 20, 35);
  REQUIRE(batches.rows() == 104431);
  REQUIRE(batches.num_windows() == 2984);
  REQUIRE(batches.window_length(2983) == 25);
  REQUIRE(batches.window(0).inputs.at<std::int64_t>({1, 0}) == corpus.train().ids[104431]);
}

TEST_CASE("every line of WikiText-2 round-trips through BPE and char tokens", "[wikitext2]") {
  const char* dir = std::getenv("KILN_DATA");
  if (dir == nullptr || *dir == '\0') {
    std::cout << "skipped: no WikiText-2 data (set KILN_DATA)\n";
    return;
  }
  const BpeTokenizer bpe = BpeTokenizer::from_json(
      read_text_file(std::string(KILN_TEST_SOURCE_DIR) + "/tests/data/bpe/hf_tokenizer.json"),
      "hf_tokenizer.json");
  for (const char* split : {"train", "valid", "test"}) {
    const std::string text = read_text_file(std::string(dir) + "/" + split + ".txt");
    CharTokenizerBuilder builder;
    builder.add_text(text);
    const CharTokenizer chars = builder.build(0);
    std::size_t lines = 0, failed = 0;
    for (std::size_t start = 0; start < text.size();) {
      const std::size_t end = std::min(text.find('\n', start), text.size() - 1) + 1;
      const std::string_view line(text.data() + start, end - start);
      failed += bpe.decode(bpe.encode(line)) != line || chars.decode(chars.encode(line)) != line;
      ++lines;
      start = end;
    }
    INFO(split << ": " << failed << " of " << lines << " lines do not round-trip");
    CHECK(failed == 0);
    // The whole text on 2 threads is the lines' ids joined, and the same text again.
    CHECK(bpe.decode(bpe.encode(text, 2)) == text);
    // Per-word counts of any tokenization divide by the corpus's own token count.
    Vocabulary vocab;
    WordCounter counter;
    counter.add(text);
    CHECK(counter.finish() ==
          static_cast<std::int64_t>(tokenize_text(text, split, vocab).ids.size()));
  }
}
