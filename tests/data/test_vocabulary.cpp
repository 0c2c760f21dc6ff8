// Vocabulary: ids in order of first appearance, lookups, the saved form (words joined by "\n").
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "data/vocabulary.h"
#include "tests/data/data_test_util.h"

using namespace kiln;
using Catch::Matchers::Contains;
using kiln::testing::error_message;

TEST_CASE("vocabulary ids follow first appearance", "[vocabulary]") {
  Vocabulary vocab;
  REQUIRE(vocab.size() == 0);
  REQUIRE(vocab.add("the") == 0);
  REQUIRE(vocab.add("cat") == 1);
  REQUIRE(vocab.add("the") == 0);
  REQUIRE(vocab.add("<eos>") == 2);
  REQUIRE(vocab.add("café") == 3);
  REQUIRE(vocab.size() == 4);
  REQUIRE(vocab.words() == std::vector<std::string>{"the", "cat", "<eos>", "café"});
  REQUIRE(vocab.word(1) == "cat");
  REQUIRE(vocab.id_of("café") == 3);
  REQUIRE(vocab.find("dog") == std::nullopt);
  REQUIRE(vocab.find("cat") == std::optional<std::int64_t>(1));
  REQUIRE_FALSE(vocab.contains("Cat"));
  REQUIRE(vocab.eos() == 2);
}

TEST_CASE("vocabulary finds each of many words as its table grows", "[vocabulary]") {
  Vocabulary vocab;
  for (int i = 0; i < 20000; ++i) REQUIRE(vocab.add(fmt::format("w{}", i)) == i);
  for (int i = 0; i < 20000; ++i) {
    REQUIRE(vocab.id_of(fmt::format("w{}", i)) == i);
    REQUIRE_FALSE(vocab.contains(fmt::format("x{}", i)));
  }
  REQUIRE(vocab.add("w123") == 123);
  REQUIRE(vocab.size() == 20000);
}

TEST_CASE("vocabulary lookups outside it are errors naming the id or word", "[vocabulary]") {
  Vocabulary vocab({"a", "b"});
  REQUIRE_THAT(error_message([&] { vocab.word(2); }), Contains("id 2 is out of range [0, 2)"));
  REQUIRE_THAT(error_message([&] { vocab.word(-1); }), Contains("id -1 is out of range"));
  REQUIRE_THAT(error_message([&] { vocab.id_of("zebra"); }),
               Contains("'zebra' is not in the vocabulary"));
  REQUIRE_THAT(error_message([&] { vocab.eos(); }), Contains("'<eos>'"));
  REQUIRE_THAT(error_message([&] { vocab.unk(); }), Contains("'<unk>'"));
}

TEST_CASE("id_of_or_unk maps unknown words to <unk>", "[vocabulary]") {
  Vocabulary vocab({"<eos>", "the", "<unk>", "cat"});
  REQUIRE(vocab.id_of_or_unk("cat") == 3);
  REQUIRE(vocab.id_of_or_unk("zebra") == 2);
  REQUIRE(vocab.unk() == 2);
  const Vocabulary no_unk({"the", "cat"});
  REQUIRE_THAT(error_message([&] { no_unk.id_of_or_unk("zebra"); }),
               Contains("'zebra' is unknown") && Contains("has no <unk>"));
}

TEST_CASE("vocabulary round-trips through words joined by newlines", "[vocabulary]") {
  Vocabulary vocab;
  for (const char* word : {"<eos>", "=", "Valkyria", "Senjō", "@-@", "<unk>"}) vocab.add(word);
  const std::string saved = vocab.to_string();
  REQUIRE(saved == "<eos>\n=\nValkyria\nSenjō\n@-@\n<unk>");
  const Vocabulary restored = Vocabulary::from_string(saved);
  REQUIRE(restored.words() == vocab.words());
  REQUIRE(restored.id_of("Senjō") == 3);
  REQUIRE(Vocabulary::from_string("").size() == 0);
  REQUIRE(Vocabulary().to_string().empty());
  REQUIRE(Vocabulary::from_string("solo").words() == std::vector<std::string>{"solo"});
}

TEST_CASE("a corrupt saved vocabulary is an error saying what is wrong", "[vocabulary]") {
  REQUIRE_THAT(error_message([] { Vocabulary::from_string("a\n\nb"); }),
               Contains("word 1 of the saved vocabulary is empty"));
  REQUIRE_THAT(error_message([] { Vocabulary::from_string("a\nb\n"); }),
               Contains("word 2 of the saved vocabulary is empty"));
  REQUIRE_THAT(error_message([] { Vocabulary::from_string("a\nb\na"); }),
               Contains("'a' appears twice (ids 0 and 2)"));
  REQUIRE_THAT(error_message([] { Vocabulary::from_string("ok\nbad\xff"); }),
               Contains("'bad\\xff' is not valid UTF-8"));
}

TEST_CASE("vocabulary rejects words that cannot be saved", "[vocabulary]") {
  Vocabulary vocab;
  REQUIRE_THAT(error_message([&] { vocab.add(""); }), Contains("must not be empty"));
  REQUIRE_THAT(error_message([&] { vocab.add("two\nlines"); }),
               Contains("'two\\x0alines' contains a newline"));
  REQUIRE_THAT(error_message([&] { vocab.add("\xc3"); }), Contains("not valid UTF-8"));
  REQUIRE(vocab.size() == 0);
}

TEST_CASE("a copied vocabulary is independent and still finds its words", "[vocabulary]") {
  Vocabulary original({"a", "b"});
  Vocabulary copy = original;
  REQUIRE(copy.add("c") == 2);
  REQUIRE(copy.id_of("b") == 1);
  REQUIRE(original.size() == 2);
  REQUIRE_FALSE(original.contains("c"));
  Vocabulary moved = std::move(copy);
  REQUIRE(moved.id_of("c") == 2);
}

TEST_CASE("quote_word escapes control and invalid bytes and cuts long words", "[vocabulary]") {
  REQUIRE(quote_word("cat") == "'cat'");
  REQUIRE(quote_word("Senjō") == "'Senjō'");
  REQUIRE(quote_word(std::string_view("a\0b\x7f\xff", 5)) == "'a\\x00b\\x7f\\xff'");
  REQUIRE(quote_word(std::string(100, 'x')) == "'" + std::string(40, 'x') + "...' (100 bytes)");
}
