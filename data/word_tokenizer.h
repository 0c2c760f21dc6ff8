// WordTokenizer: WikiText-2's word-level tokens as a Tokenizer (data/tokenizer.h). Encoding reads
// text as data/corpus.h reads a corpus file (Python's str.split() whitespace, "<eos>" after
// every line, a last line without a line ending included), with a fixed vocabulary: a word it
// lacks becomes "<unk>". Decoding joins the words with spaces and writes "<eos>" as "\n", so it
// gives the words back, not the text's exact spacing. Cuts are at line ends.
//
//   WordTokenizer t(corpus.vocabulary());
//   t.encode("the cat\n");      // ids of "the", "cat", "<eos>"
//
// JSON: {"kiln_tokenizer": "word", "version": 1, "words": ["the", ...]} (a checkpoint keeps the
// words in its "vocab" entry instead, as it always has).
#pragma once

#include <string_view>

#include "data/tokenizer.h"
#include "data/vocabulary.h"

namespace kiln {

class WordTokenizer final : public Tokenizer {
 public:
  // Encoding needs "<eos>" in the vocabulary (and "<unk>" for words it lacks).
  explicit WordTokenizer(Vocabulary vocabulary);

  std::string_view kind() const override { return "word"; }
  std::int64_t vocab_size() const override { return vocabulary_.size(); }
  // An error naming the line for text that is not UTF-8, holds NUL, or has a word the
  // vocabulary lacks when it has no "<unk>".
  void encode_append(std::string_view text, std::vector<std::int64_t>& ids) const override;
  void decode_append(std::span<const std::int64_t> ids, std::string& out) const override;
  std::size_t next_cut(std::string_view text, std::size_t from) const override;
  std::size_t last_cut(std::string_view text) const override;
  std::string token_label(std::int64_t id) const override;
  std::string to_json() const override;

  const Vocabulary& vocabulary() const { return vocabulary_; }

 private:
  Vocabulary vocabulary_;
};

// The vocabulary of a training text read block by block (blocks cut at line ends): its words in
// order of first appearance, then "<unk>" if it has none (for the words of other texts).
class WordTokenizerBuilder {
 public:
  void add_text(std::string_view text, std::string_view source);
  WordTokenizer build();

 private:
  Vocabulary vocabulary_;
};

}  // namespace kiln
