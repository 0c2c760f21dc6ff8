#include "lm/words.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"
#include "data/corpus.h"

namespace kiln::lm {

EncodedText encode_words(std::string_view text, const Vocabulary& vocab, std::string_view flag) {
  EncodedText encoded;
  for (const std::string_view word : split_words(text, flag)) {
    if (const std::optional<std::int64_t> id = vocab.find(word)) {
      encoded.ids.push_back(*id);
    } else {
      KILN_CHECK(vocab.contains(Vocabulary::kUnk),
                 "{}: the word {} is not in the vocabulary, which has no {} to stand for it", flag,
                 quote_word(word), Vocabulary::kUnk);
      encoded.ids.push_back(vocab.unk());
      encoded.unknown.emplace_back(word);
    }
  }
  return encoded;
}

void warn_unknown_words(const EncodedText& text, std::string_view program) {
  if (text.unknown.empty()) return;
  constexpr std::size_t kShown = 10;
  std::string list;
  for (std::size_t i = 0; i < std::min(text.unknown.size(), kShown); ++i)
    list += (i > 0 ? ", " : "") + quote_word(text.unknown[i]);
  if (text.unknown.size() > kShown)
    list += fmt::format(" and {} more", text.unknown.size() - kShown);
  std::fprintf(stderr, "%s\n",
               fmt::format("{}: warning: {} word{} not in the vocabulary, read as {}: {}", program,
                           text.unknown.size(), text.unknown.size() == 1 ? " is" : "s are",
                           Vocabulary::kUnk, list)
                   .c_str());
}

}  // namespace kiln::lm
