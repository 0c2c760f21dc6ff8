// Corpus: a word-level language-modelling corpus (WikiText-2) as three streams of token ids.
//
// A corpus folder holds train.txt, valid.txt and test.txt: UTF-8 text, already tokenized, words
// separated by spaces. Reading follows bench/torch_ref.py (pytorch/examples'
// word_language_model) exactly:
//   - a file is a sequence of lines; "\n", "\r\n" and "\r" end a line (Python's universal
//     newlines), and a last line without a newline still counts;
//   - each line is split on whitespace as Python's str.split() does (ASCII space, \t, \v, \f,
//     \x1c-\x1f and the Unicode spaces such as U+00A0 and U+3000), and one "<eos>" follows the
//     words of every line, so an empty line is a single "<eos>";
//   - word ids are given in order of first appearance over train, then valid, then test;
//   - a UTF-8 byte-order mark (EF BB BF) at the start of a file is skipped, and the stream says so
//     (byte_order_mark): it marks the encoding, and Windows editors write it. torch_ref.py's
//     open(encoding="utf8") keeps it, glued to the file's first word as a word of its own.
//
//   Corpus corpus(resolve_data_dir(flag));          // --data DIR, $KILN_DATA or
//   datasets/wikitext-2 corpus.vocabulary().size();                      // 33,278 for WikiText-2
//   const std::vector<std::int64_t>& ids = corpus.train().ids;   // 2,088,628 ids
//
// To evaluate a checkpoint, read with its vocabulary instead: words it lacks become "<unk>" and
// are counted.
//
//   TokenStream test = tokenize_file_fixed(dir / "test.txt", checkpoint_vocabulary);
//
// Errors (kiln::Error, naming the file, the line where there is one, and what was expected): a
// missing folder or file, one that cannot be reached (a symbolic-link loop, no permission), an
// empty file, a file with NUL bytes (not text), invalid UTF-8 (with
// line and byte offset), or a line longer than kMaxLineBytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/dataset.h"
#include "data/vocabulary.h"
#include "data/word_tokenizer.h"

namespace kiln {

// The longest line accepted, in bytes without its line ending: 1 MiB. WikiText-2's longest line
// has 3,841 bytes; a line 250 times longer means the file is not a corpus of paragraphs, and a
// clear error beats reading, say, a 10 MB minified file as one paragraph.
inline constexpr std::size_t kMaxLineBytes = std::size_t{1} << 20;

// The corpus folder: flag (--data DIR) if given, else $KILN_DATA if set and not empty, else
// "datasets/wikitext-2".
std::string resolve_data_dir(std::optional<std::string> flag);

// The token ids of one text, in order, with one "<eos>" id after each line.
struct TokenStream {
  std::vector<std::int64_t> ids;
  std::int64_t lines = 0;        // lines read (the number of "<eos>" in ids)
  std::int64_t unknown = 0;      // words a fixed vocabulary lacked, read as "<unk>"
  bool byte_order_mark = false;  // the text began with a UTF-8 byte-order mark, skipped
  std::int64_t bytes = 0;        // bytes of the text read (a byte-order mark included)
};

// Checks that dir is a folder that can be read: an error naming it when it is missing, a file, or
// cannot be reached (a symbolic-link loop, a folder without permission).
void check_data_folder(const std::filesystem::path& dir);

// Tokenizes text, giving each new word the next id in vocabulary (how a corpus's vocabulary is
// built). source names the text in error messages (a file path). Checks the whole text before
// adding any word, so vocabulary is unchanged when it throws. Safe on arbitrary bytes.
TokenStream tokenize_text(std::string_view text, std::string_view source, Vocabulary& vocabulary);
// Tokenizes text with a fixed vocabulary: a word it lacks becomes "<unk>" (counted in unknown).
// The vocabulary must contain "<eos>", and "<unk>" if any word is unknown.
TokenStream tokenize_text_fixed(std::string_view text, std::string_view source,
                                const Vocabulary& vocabulary);

// The words of a prompt or a sentence, split exactly as a corpus file's text is (the same
// whitespace, the same line endings, "<eos>" after each line end and the same checks: UTF-8, no
// NUL), except that text not ending in a line ending gets no "<eos>" after its last line: a
// prompt continues there. source names the text in errors ("--prompt").
std::vector<std::string_view> split_words(std::string_view text, std::string_view source);

// The bytes of a text file; an error if it is missing, not a regular file, unreadable or empty.
// what names the file's role in errors ("corpus", "Hugging Face config.json").
std::string read_text_file(const std::filesystem::path& path, std::string_view what = "corpus");
// read_text_file, then tokenize_text / tokenize_text_fixed.
TokenStream tokenize_file(const std::filesystem::path& path, Vocabulary& vocabulary);
TokenStream tokenize_file_fixed(const std::filesystem::path& path, const Vocabulary& vocabulary);

// The word-level tokens of text read block by block (blocks that never split a "\r\n" are not
// needed: a "\r" at a block's end is remembered), counted as tokenize_text reads text: its
// words and one line end per line, a last line without a line ending included. Bits per byte
// and per-word perplexity of any tokenization divide by these (data/dataset.h).
class WordCounter {
 public:
  void add(std::string_view block);
  // Ends the text's last line (the next add starts another text, e.g. the next file) and
  // returns the count of all text added so far: a running total over every text, not this one's.
  std::int64_t finish();

 private:
  std::int64_t count_ = 0;
  bool in_word_ = false, line_has_bytes_ = false, after_return_ = false;
};

// A Corpus is a Dataset (data/dataset.h) of word-level tokens: tokens("valid") is valid.txt's
// ids, with its size in bytes and its word count (its ids: one per word and per line).
class Corpus final : public Dataset {
 public:
  // Reads dir/train.txt, dir/valid.txt and dir/test.txt, building the vocabulary in that order.
  explicit Corpus(const std::filesystem::path& dir);
  // Reads the three files with a fixed vocabulary (a checkpoint's): unknown words become <unk>.
  Corpus(const std::filesystem::path& dir, Vocabulary vocabulary);

  const Vocabulary& vocabulary() const { return tokenizer_->vocabulary(); }
  const TokenStream& train() const { return train_; }
  const TokenStream& valid() const { return valid_; }
  const TokenStream& test() const { return test_; }
  // A split by name: "train", "valid" or "test" (an error naming the choices otherwise).
  const TokenStream& split(std::string_view name) const;

  const Tokenizer& tokenizer() const override { return *tokenizer_; }
  SplitTokens tokens(std::string_view split) const override;
  std::string describe() const override { return dir_; }

 private:
  std::string dir_;
  std::optional<WordTokenizer> tokenizer_;
  TokenStream train_, valid_, test_;
};

}  // namespace kiln
