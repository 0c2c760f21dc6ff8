// Corpus reading: torch_ref's semantics on small generated corpora (ids in first-appearance order
// over train, valid, test; Python's line endings and whitespace; one <eos> per line), reading
// with a fixed vocabulary, every error path, and safety on arbitrary bytes.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>

#include "core/philox.h"
#include "data/corpus.h"
#include "tests/data/data_test_util.h"

using namespace kiln;
using Catch::Matchers::Contains;
using kiln::testing::error_message;
using kiln::testing::TempDir;
using Ids = std::vector<std::int64_t>;

namespace {

// The words of a token stream, to compare with what Python's line.split() + ['<eos>'] gives.
std::vector<std::string> words_of(const TokenStream& stream, const Vocabulary& vocab) {
  std::vector<std::string> words;
  for (std::int64_t id : stream.ids) words.push_back(vocab.word(id));
  return words;
}

std::vector<std::string> tokenize_words(std::string_view text) {
  Vocabulary vocab;
  return words_of(tokenize_text(text, "text", vocab), vocab);
}

// Writes a corpus folder with the three splits.
void write_corpus(const TempDir& dir, std::string_view train, std::string_view valid,
                  std::string_view test) {
  dir.write("train.txt", train);
  dir.write("valid.txt", valid);
  dir.write("test.txt", test);
}

}  // namespace

TEST_CASE("corpus ids follow first appearance over train, valid, then test", "[corpus]") {
  TempDir dir;
  write_corpus(dir, " the cat sat \n\n the dog \n", " a cat <unk> \n", "dog\tbird\r\nfish");
  const Corpus corpus(dir.path());
  REQUIRE(corpus.vocabulary().words() == std::vector<std::string>{"the", "cat", "sat", "<eos>",
                                                                  "dog", "a", "<unk>", "bird",
                                                                  "fish"});
  REQUIRE(corpus.train().ids == Ids{0, 1, 2, 3, 3, 0, 4, 3});  // the empty line is one <eos>
  REQUIRE(corpus.train().lines == 3);
  REQUIRE(corpus.valid().ids == Ids{5, 1, 6, 3});
  REQUIRE(corpus.valid().lines == 1);
  REQUIRE(corpus.test().ids == Ids{4, 7, 3, 8, 3});  // a last line without "\n" still counts
  REQUIRE(corpus.test().lines == 2);
  REQUIRE(corpus.train().unknown == 0);
  REQUIRE(&corpus.split("train") == &corpus.train());
  REQUIRE(&corpus.split("valid") == &corpus.valid());
  REQUIRE(&corpus.split("test") == &corpus.test());
  REQUIRE_THAT(error_message([&] { corpus.split("dev"); }),
               Contains("unknown split 'dev'; expected one of train, valid, test"));
}

TEST_CASE("lines end at LF, CRLF and CR, as in Python's universal newlines", "[corpus]") {
  using W = std::vector<std::string>;
  REQUIRE(tokenize_words("a\rb\r\r\nc") == W{"a", "<eos>", "b", "<eos>", "<eos>", "c", "<eos>"});
  REQUIRE(tokenize_words("\n\n") == W{"<eos>", "<eos>"});
  REQUIRE(tokenize_words(" ") == W{"<eos>"});
  REQUIRE(tokenize_words("\r") == W{"<eos>"});
  REQUIRE(tokenize_words("a ") == W{"a", "<eos>"});
  REQUIRE(tokenize_words("").empty());
}

TEST_CASE("words split on Python's whitespace, ASCII and Unicode", "[corpus]") {
  using W = std::vector<std::string>;
  // U+00A0, U+3000, U+2028, \x1c, \v, \f, U+0085 separate words; U+2028 does not end the line.
  // U+200B (zero-width space) and U+2010 (hyphen) are not whitespace in Python.
  const std::string text =
      "a\u00a0b\u3000c\u2028d\u200be\u2010f\x1cg\vh\fi\u0085j\u1680k\u2000l\u200am\u2029n"
      "\u202fo\u205fp\u2009q\u2007\u200c\n";
  REQUIRE(tokenize_words(text) == W{"a", "b", "c", "d\u200be\u2010f", "g", "h", "i", "j", "k", "l",
                                    "m", "n", "o", "p", "q", "\u200c", "<eos>"});
}

TEST_CASE("the tokenizer agrees with a direct transcription of Python's rules", "[corpus]") {
  // Random texts from fragments that exercise every byte class; the reference decodes code
  // points, splits lines on \n, \r\n, \r and words on the 29 code points Python calls spaces.
  const std::vector<std::string> fragments = {
      "a",      "b",      "é",      "日",           " ",
      "\t",     "\r",     "\n",     "\r\n",         "\u00a0",
      "\u200b", "\u3000", "\x1c",   "\u2028",       "\u0085",
      "\u2010", "\u1680", "\u205f", "\u00e9\u0301", "<unk>"};
  const auto is_space = [](char32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
  };
  const auto decode = [](std::string_view s, std::size_t& i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    char32_t code = n == 1 ? c : c & (0x7F >> n);
    for (int k = 1; k < n; ++k) code = (code << 6) | (s[i + k] & 0x3F);
    i += n;
    return code;
  };
  for (std::uint32_t trial = 0; trial < 300; ++trial) {
    std::string text;
    for (std::uint32_t k = 0; k < 40; ++k) {
      text += fragments[philox::draw(trial, k).w[0] % fragments.size()];
    }
    std::vector<std::string> expected;
    std::string line;
    const auto end_line = [&] {
      std::string word;
      std::size_t i = 0;
      while (i < line.size()) {
        const std::size_t start = i;
        if (is_space(decode(line, i))) {
          if (!word.empty()) expected.push_back(word), word.clear();
        } else {
          word += line.substr(start, i - start);
        }
      }
      if (!word.empty()) expected.push_back(word);
      expected.push_back("<eos>");
      line.clear();
    };
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\n' || text[i] == '\r') {
        if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
        end_line();
      } else {
        line += text[i];
      }
    }
    if (!line.empty()) end_line();
    INFO("trial " << trial);
    REQUIRE(tokenize_words(text) == expected);
  }
}

TEST_CASE("a fixed vocabulary reads unknown words as <unk> and counts them", "[corpus]") {
  const Vocabulary vocab({"<eos>", "the", "cat", "<unk>"});
  const TokenStream stream = tokenize_text_fixed("the dog\n<unk> cat zebra\n", "eval.txt", vocab);
  REQUIRE(stream.ids == Ids{1, 3, 0, 3, 2, 3, 0});
  REQUIRE(stream.unknown == 2);  // the literal <unk> is a known word, not counted
  REQUIRE(stream.lines == 2);
  REQUIRE(vocab.size() == 4);

  TempDir dir;
  write_corpus(dir, "the cat\n", "the dog\n", "a cat\n");
  const Corpus corpus(dir.path(), vocab);
  REQUIRE(corpus.vocabulary().words() == vocab.words());
  REQUIRE(corpus.train().ids == Ids{1, 2, 0});
  REQUIRE(corpus.train().unknown == 0);
  REQUIRE(corpus.valid().ids == Ids{1, 3, 0});
  REQUIRE(corpus.valid().unknown == 1);
  REQUIRE(corpus.test().unknown == 1);
  REQUIRE(tokenize_file_fixed(dir.path() / "valid.txt", vocab).ids == Ids{1, 3, 0});
}

TEST_CASE("a fixed vocabulary without <unk> or <eos> is an error naming the place", "[corpus]") {
  const Vocabulary no_unk({"<eos>", "the"});
  REQUIRE_THAT(
      error_message([&] { tokenize_text_fixed("the\nthe zebra\n", "eval.txt", no_unk); }),
      Contains("eval.txt:2: word 'zebra' is not in the vocabulary") && Contains("no <unk>"));
  const Vocabulary no_eos({"the", "<unk>"});
  REQUIRE_THAT(error_message([&] { tokenize_text_fixed("the\n", "eval.txt", no_eos); }),
               Contains("cannot read eval.txt") && Contains("has no <eos>"));
}

TEST_CASE("resolve_data_dir: --data, else $KILN_DATA, else datasets/wikitext-2", "[corpus]") {
  const char* saved = std::getenv("KILN_DATA");
  const std::string saved_value = saved != nullptr ? saved : "";
  ::setenv("KILN_DATA", "/from/env", 1);
  REQUIRE(resolve_data_dir(std::string("/from/flag")) == "/from/flag");
  REQUIRE(resolve_data_dir(std::nullopt) == "/from/env");
  ::setenv("KILN_DATA", "", 1);  // set but empty counts as unset
  REQUIRE(resolve_data_dir(std::nullopt) == "datasets/wikitext-2");
  ::unsetenv("KILN_DATA");
  REQUIRE(resolve_data_dir(std::nullopt) == "datasets/wikitext-2");
  if (saved != nullptr) ::setenv("KILN_DATA", saved_value.c_str(), 1);
}

TEST_CASE("missing folders and files are errors naming them", "[corpus][errors]") {
  TempDir dir;
  const std::string missing = (dir.path() / "nowhere").string();
  REQUIRE_THAT(error_message([&] { Corpus corpus(missing); }),
               Contains("data folder '" + missing + "' not found") && Contains("--data DIR") &&
                   Contains("KILN_DATA"));
  dir.write("train.txt", "a\n");
  dir.write("valid.txt", "a\n");
  const std::string test = (dir.path() / "test.txt").string();
  REQUIRE_THAT(
      error_message([&] { Corpus corpus(dir.path()); }),
      Contains("'" + test + "' not found") && Contains("train.txt, valid.txt and test.txt"));
  REQUIRE_THAT(error_message([&] { read_text_file(test); }), Contains("'" + test + "' not found"));
  std::filesystem::create_directory(test);
  REQUIRE_THAT(error_message([&] { Corpus corpus(dir.path()); }),
               Contains("'" + test + "' is not a regular file"));
}

TEST_CASE("a folder or file behind a symbolic-link loop is named as such, not as missing",
          "[corpus][errors]") {
  // Before, exists() answered false for the loop, and train_lm said "not found".
  TempDir dir;
  const std::filesystem::path loop = dir.path() / "loop";
  std::filesystem::create_symlink(loop, loop);
  REQUIRE_THAT(error_message([&] { Corpus corpus(loop); }),
               Contains("cannot reach '" + loop.string() + "'") &&
                   Contains("Too many levels of symbolic links") && !Contains("not found"));
  REQUIRE_THAT(error_message([&] { check_data_folder(loop); }), Contains("cannot reach"));
  write_corpus(dir, "a\n", "a\n", "a\n");
  std::filesystem::remove(dir.path() / "valid.txt");
  std::filesystem::create_symlink(dir.path() / "valid.txt", dir.path() / "valid.txt");
  REQUIRE_THAT(error_message([&] { Corpus corpus(dir.path()); }),
               Contains("cannot reach '" + (dir.path() / "valid.txt").string() + "'"));
}

TEST_CASE("a UTF-8 byte-order mark at the start of a file is skipped, and said so", "[corpus]") {
  // Before, "\xEF\xBB\xBFthe" became a word of its own, unlike the "the" of every other line.
  const std::string bom = "\xEF\xBB\xBF";
  TempDir dir;
  write_corpus(dir, bom + "the cat\nthe dog\n", "the cat\n", bom + "the\n");
  const Corpus corpus(dir.path());
  REQUIRE(corpus.vocabulary().words() == std::vector<std::string>{"the", "cat", "<eos>", "dog"});
  REQUIRE(corpus.train().ids == Ids{0, 1, 2, 0, 3, 2});
  REQUIRE(corpus.train().byte_order_mark);
  REQUIRE(!corpus.valid().byte_order_mark);
  REQUIRE(corpus.test().byte_order_mark);
  const Corpus fixed(dir.path(), corpus.vocabulary());  // a checkpoint's vocabulary
  REQUIRE(fixed.train().ids == corpus.train().ids);
  REQUIRE(fixed.train().unknown == 0);
  REQUIRE(fixed.test().byte_order_mark);
  // Only at the start: U+FEFF inside a line is a character of its word.
  Vocabulary vocab;
  REQUIRE(tokenize_text("a " + bom + "b\n", "t.txt", vocab).ids.size() == 3);
  REQUIRE(vocab.words() == std::vector<std::string>{"a", bom + "b", "<eos>"});
}

TEST_CASE("an empty split file is an error naming it", "[corpus][errors]") {
  TempDir dir;
  write_corpus(dir, "a\n", "", "a\n");
  const std::string valid = (dir.path() / "valid.txt").string();
  REQUIRE_THAT(error_message([&] { Corpus corpus(dir.path()); }),
               Contains("'" + valid + "' is empty"));
}

TEST_CASE("invalid UTF-8 is an error naming file, line and byte offset", "[corpus][errors]") {
  TempDir dir;
  write_corpus(dir, " fine line \n bad \xff here \n", "a\n", "a\n");
  const std::string train = (dir.path() / "train.txt").string();
  REQUIRE_THAT(error_message([&] { Corpus corpus(dir.path()); }),
               Contains(train + ":2: invalid UTF-8 (byte 0xff) at byte offset 17 (column 6)"));
  // Overlong forms, surrogates and truncated sequences are invalid too, as in Python.
  Vocabulary vocab;
  for (const char* bad : {"\xc0\xaf", "\xed\xa0\x80", "ab\xe2\x80", "\x80"}) {
    INFO(bad);
    REQUIRE_THAT(error_message([&] { tokenize_text(bad, "t.txt", vocab); }),
                 Contains("t.txt:1: invalid UTF-8"));
  }
}

TEST_CASE("a file with NUL bytes is reported as not text", "[corpus][errors]") {
  TempDir dir;
  write_corpus(dir, "a\n", "a\n", std::string("ok\r\nbin\0ary\n", 12));
  const std::string test = (dir.path() / "test.txt").string();
  REQUIRE_THAT(
      error_message([&] { Corpus corpus(dir.path()); }),
      Contains(test + ":2: NUL byte at byte offset 7 (column 4): this is not a text file"));
}

TEST_CASE("a line over 1 MiB is an error, not a hang", "[corpus][errors]") {
  Vocabulary vocab;
  const std::string longest(kMaxLineBytes, 'x');
  REQUIRE(tokenize_text(longest + "\r\n", "t.txt", vocab).ids.size() == 2);
  REQUIRE_THAT(error_message([&] { tokenize_text("a\n" + longest + "y\n", "t.txt", vocab); }),
               Contains("t.txt:2: line of 1048577 bytes is over the limit of 1048576 bytes"));

  TempDir dir;
  write_corpus(dir, "a\n", "a\n", "a\n");
  const std::string huge(10 * 1000 * 1000, 'z');  // 10 MB, no line ending at all
  dir.write("train.txt", " first line \n" + huge);
  const std::string train = (dir.path() / "train.txt").string();
  REQUIRE_THAT(error_message([&] { Corpus corpus(dir.path()); }),
               Contains(train + ":2: line of 10000000 bytes is over the limit"));
}

TEST_CASE("a failed read leaves the vocabulary unchanged", "[corpus][errors]") {
  Vocabulary vocab({"kept"});
  REQUIRE_THROWS_AS(tokenize_text("new words\nthen \xfe\n", "t.txt", vocab), kiln::Error);
  REQUIRE(vocab.words() == std::vector<std::string>{"kept"});
}

TEST_CASE("arbitrary bytes give ids or a kiln::Error and never crash", "[corpus][errors]") {
  // Random buffers: mostly fragments the tokenizer treats specially, one byte in 64 uniformly
  // random (enough to reach every check; more would stop nearly every buffer at the checks).
  const std::vector<std::string> fragments = {
      "\n",     "\r",     " ",      "\t",     "a",      "\x1c",   "é",      "\u0085",
      "\u00a0", "\u1680", "\u2000", "\u200a", "\u200b", "\u2028", "\u205f", "\u3000"};
  std::int64_t accepted = 0;
  for (std::uint32_t trial = 0; trial < 2000; ++trial) {
    const std::size_t length = philox::draw(1000 + trial, 0).w[0] % 64;
    std::string text;
    for (std::size_t k = 0; k < length; ++k) {
      const std::uint32_t w = philox::draw(trial, k + 1).w[0];
      if (w % 64 == 0) {
        text += static_cast<char>(w >> 24);
      } else {
        text += fragments[(w >> 6) % fragments.size()];
      }
    }
    Vocabulary vocab;
    try {
      const TokenStream stream = tokenize_text(text, "fuzz", vocab);
      ++accepted;
      std::int64_t eos = 0;
      for (std::int64_t id : stream.ids) {
        REQUIRE(id >= 0);
        REQUIRE(id < vocab.size());
        eos += vocab.word(id) == "<eos>";
      }
      REQUIRE(eos == stream.lines);
    } catch (const kiln::Error& e) {
      REQUIRE_THAT(e.what(), Contains("fuzz:"));
    }
  }
  REQUIRE(accepted > 1000);  // the trials exercise the tokenizer, not only the checks
}
