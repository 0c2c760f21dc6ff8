// Text to token ids for the example programs that read a prompt or a sentence: words are
// separated by whitespace, as in the WikiText corpus, and a word the vocabulary lacks becomes
// "<unk>", as it would have in the corpus.
//
//   const EncodedText prompt = encode_words("the cat sat", vocab, "--prompt");
//   warn_unknown_words(prompt, "generate");   // stderr, when some words became <unk>
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/vocabulary.h"

namespace kiln {

struct EncodedText {
  std::vector<std::int64_t> ids;     // one per word
  std::vector<std::string> unknown;  // the words that became <unk>, in order
};

// Splits text at whitespace (space, tab, newline, CR, VT, FF) and maps each word to its id.
// An unknown word when the vocabulary has no "<unk>" is an error naming `flag`.
EncodedText encode_words(std::string_view text, const Vocabulary& vocab, std::string_view flag);

// "<program>: warning: ..." on stderr listing the words that became <unk> (nothing if none).
void warn_unknown_words(const EncodedText& text, std::string_view program);

}  // namespace kiln
