// Prompts and sentences (lm/words.h) are split by the corpus's own tokenizer: a
// prompt gives the ids the same text gives in a corpus file, without the "<eos>" the file adds
// after its last line.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "data/corpus.h"
#include "lm/words.h"

using namespace kiln;

namespace {

Vocabulary words_vocabulary() { return Vocabulary({"<eos>", "the", "cat", "sat", "<unk>"}); }

// The ids of text read as a corpus file whose last line ends there, that line's "<eos>" dropped.
std::vector<std::int64_t> as_in_a_corpus_file(const std::string& text) {
  std::vector<std::int64_t> ids =
      tokenize_text_fixed(text + "\n", "corpus.txt", words_vocabulary()).ids;
  ids.pop_back();
  return ids;
}

}  // namespace

TEST_CASE("a prompt splits as the same text does in a corpus file", "[words]") {
  const Vocabulary vocab = words_vocabulary();
  // U+00A0 and U+3000 separate words in the corpus (Python's str.split()); a newline, CR LF or a
  // lone CR ends a line there and adds "<eos>"; \x1c is whitespace too.
  for (const std::string text : {"the\u00a0cat sat", "the cat\nsat", "the\r\ncat\rsat",
                                 "the\u3000cat\x1csat", "  the cat  ", "the cat\n", "the\n\ncat"}) {
    INFO("text: " << text);
    const lm::EncodedText encoded = lm::encode_words(text, vocab, "--prompt");
    CHECK(encoded.ids == as_in_a_corpus_file(text));
    CHECK(encoded.unknown.empty());
  }
  CHECK(lm::encode_words("the cat\nsat", vocab, "--prompt").ids ==
        std::vector<std::int64_t>{1, 2, 0, 3});
  CHECK(lm::encode_words("the cat\n", vocab, "--prompt").ids == std::vector<std::int64_t>{1, 2, 0});
  CHECK(lm::encode_words("", vocab, "--prompt").ids.empty());
}

TEST_CASE("a prompt that is not UTF-8 text is an error naming the flag", "[words]") {
  REQUIRE_THROWS_WITH(lm::encode_words("the \xff cat", words_vocabulary(), "--prompt"),
                      Catch::Contains("--prompt") && Catch::Contains("UTF-8"));
  REQUIRE_THROWS_WITH(lm::encode_words(std::string("the\0cat", 7), words_vocabulary(), "--text"),
                      Catch::Contains("--text") && Catch::Contains("NUL"));
}
