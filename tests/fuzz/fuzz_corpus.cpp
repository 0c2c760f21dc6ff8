// libFuzzer target for the corpus reader and the saved vocabulary. An input is a text file:
// tokenize_text reads it building a vocabulary, tokenize_text_fixed reads it again with that
// vocabulary and with a small fixed one (most words unknown), and Vocabulary::from_string reads
// the same bytes as a checkpoint's "vocab" entry. A kiln::Error is the right answer to garbage; a
// crash, any other exception, a hang, a leak or a sanitizer report is a bug, and so is an accepted
// text that breaks one of the properties below.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/error.h"
#include "data/corpus.h"
#include "data/vocabulary.h"
#include "tests/fuzz/fuzz_check.h"

using kiln::fuzz::require;

namespace {

constexpr std::string_view kSource = "fuzz input";

void read_building_vocabulary(std::string_view text) {
  kiln::Vocabulary vocabulary;
  kiln::TokenStream built;
  try {
    built = kiln::tokenize_text(text, kSource, vocabulary);
  } catch (const kiln::Error&) {
    require(vocabulary.size() == 0, "a rejected text adds no word to the vocabulary");
    return;
  }
  const std::optional<std::int64_t> eos = vocabulary.find(kiln::Vocabulary::kEos);
  std::int64_t eos_count = 0;
  for (const std::int64_t id : built.ids) {
    require(id >= 0 && id < vocabulary.size(), "every id is in the vocabulary");
    eos_count += eos && id == *eos;
  }
  // The text may also hold the word "<eos>" itself, which reads as the same token.
  require(eos_count == built.lines ||
              (eos_count > built.lines && text.find(kiln::Vocabulary::kEos) != text.npos),
          "one <eos> per line");
  if (built.lines > 0) {  // otherwise the vocabulary lacks <eos>, which a fixed read needs
    const kiln::TokenStream fixed = kiln::tokenize_text_fixed(text, kSource, vocabulary);
    require(fixed.ids == built.ids && fixed.unknown == 0,
            "reading with the built vocabulary gives the same ids");
  }
  require(kiln::Vocabulary::from_string(vocabulary.to_string()).words() == vocabulary.words(),
          "the vocabulary survives to_string and from_string");
}

void read_with_small_vocabulary(std::string_view text) {
  static const kiln::Vocabulary small({"<eos>", "<unk>", "the", "="});
  try {
    const kiln::TokenStream read = kiln::tokenize_text_fixed(text, kSource, small);
    for (const std::int64_t id : read.ids) {
      require(id >= 0 && id < small.size(), "every id is in the fixed vocabulary");
    }
  } catch (const kiln::Error&) {
  }
}

void read_as_saved_vocabulary(std::string_view text) {
  try {
    const kiln::Vocabulary vocabulary = kiln::Vocabulary::from_string(text);
    require(vocabulary.to_string() == text, "an accepted vocabulary is saved as it was read");
  } catch (const kiln::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  read_building_vocabulary(text);
  read_with_small_vocabulary(text);
  read_as_saved_vocabulary(text);
  return 0;
}
