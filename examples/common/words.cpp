#include "examples/common/words.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"

namespace kiln {

EncodedText encode_words(std::string_view text, const Vocabulary& vocab, std::string_view flag) {
  constexpr std::string_view kWhitespace = " \t\n\r\v\f";
  EncodedText encoded;
  std::size_t begin = text.find_first_not_of(kWhitespace);
  while (begin != std::string_view::npos) {
    const std::size_t end = std::min(text.find_first_of(kWhitespace, begin), text.size());
    const std::string_view word = text.substr(begin, end - begin);
    if (const std::optional<std::int64_t> id = vocab.find(word)) {
      encoded.ids.push_back(*id);
    } else {
      KILN_CHECK(vocab.contains(Vocabulary::kUnk),
                 "{}: the word {} is not in the vocabulary, which has no {} to stand for it", flag,
                 quote_word(word), Vocabulary::kUnk);
      encoded.ids.push_back(vocab.unk());
      encoded.unknown.emplace_back(word);
    }
    begin = text.find_first_not_of(kWhitespace, end);
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

}  // namespace kiln
