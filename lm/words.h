// Text to token ids for the example programs that read a prompt or a sentence: split by the
// corpus's own tokenizer (data/corpus.h: split_words), so a prompt reads as the same text in a
// corpus file would, and a word the vocabulary lacks becomes "<unk>", as it would have there.
//
//   const EncodedText prompt = encode_words("the cat sat", vocab, "--prompt");
//   warn_unknown_words(prompt, "generate");   // stderr, when some words became <unk>
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/vocabulary.h"

namespace kiln::lm {

struct EncodedText {
  std::vector<std::int64_t> ids;     // one per word
  std::vector<std::string> unknown;  // the words that became <unk>, in order
};

// Splits text as split_words does (Python's str.split() whitespace, "<eos>" at each line end
// inside the text) and maps each word to its id. Text that is not UTF-8 or holds a NUL byte,
// and an unknown word when the vocabulary has no "<unk>", are errors naming `flag`.
EncodedText encode_words(std::string_view text, const Vocabulary& vocab, std::string_view flag);

// "<program>: warning: ..." on stderr listing the words that became <unk> (nothing if none).
void warn_unknown_words(const EncodedText& text, std::string_view program);

}  // namespace kiln::lm
