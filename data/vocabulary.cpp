#include "data/vocabulary.h"

#include <algorithm>
#include <functional>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"
#include "core/io/utf8.h"

namespace kiln {

std::string quote_word(std::string_view word) {
  constexpr std::size_t kShown = 40;
  std::string out = "'";
  std::size_t i = 0;
  while (i < word.size() && i < kShown) {
    const auto c = static_cast<unsigned char>(word[i]);
    const std::size_t length = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    const std::string_view sequence = word.substr(i, length);
    if (c < 0x20 || c == 0x7F || find_invalid_utf8(sequence) != std::string_view::npos) {
      out += fmt::format("\\x{:02x}", c);
      ++i;
    } else {
      out += sequence;
      i += sequence.size();
    }
  }
  out += i < word.size() ? fmt::format("...' ({} bytes)", word.size()) : "'";
  return out;
}

namespace {

void check_word(std::string_view word) {
  KILN_CHECK(!word.empty(), "vocabulary: a word must not be empty");
  KILN_CHECK(word.find('\n') == std::string_view::npos,
             "vocabulary: word {} contains a newline; words are stored joined by \"\\n\"",
             quote_word(word));
  const std::size_t bad = find_invalid_utf8(word);
  KILN_CHECK(bad == std::string_view::npos,
             "vocabulary: word {} is not valid UTF-8 (bad byte at offset {})", quote_word(word),
             bad);
}

}  // namespace

Vocabulary::Vocabulary(const std::vector<std::string>& words) {
  words_.reserve(words.size());
  for (const std::string& word : words) {
    const std::optional<std::int64_t> existing = find(word);
    KILN_CHECK(!existing, "vocabulary: word {} appears twice (ids {} and {})", quote_word(word),
               *existing, size());
    add(word);
  }
}

std::string Vocabulary::to_string() const {
  std::string joined;
  for (const std::string& word : words_) {
    if (!joined.empty()) joined += '\n';
    joined += word;
  }
  return joined;
}

Vocabulary Vocabulary::from_string(std::string_view joined) {
  std::vector<std::string> words;
  if (joined.empty()) return Vocabulary(words);
  std::size_t start = 0;
  while (true) {
    const std::size_t end = joined.find('\n', start);
    const std::string_view word =
        joined.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    KILN_CHECK(!word.empty(),
               "vocabulary: word {} of the saved vocabulary is empty (expected words joined by "
               "\"\\n\", with no empty line and no newline at the end)",
               words.size());
    words.emplace_back(word);
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return Vocabulary(words);
}

std::size_t Vocabulary::slot_of(std::string_view word, std::uint64_t hash) const {
  const std::size_t mask = slots_.size() - 1;
  const auto tag = static_cast<std::uint32_t>(hash >> 32);
  for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& slot = slots_[i];
    if (slot.id < 0 || (slot.tag == tag && words_[slot.id] == word)) return i;
  }
}

void Vocabulary::grow() {
  slots_.assign(std::max<std::size_t>(64, 2 * slots_.size()), Slot{0, -1});
  for (std::size_t id = 0; id < words_.size(); ++id) {
    const std::uint64_t hash = std::hash<std::string_view>{}(words_[id]);
    slots_[slot_of(words_[id], hash)] =
        Slot{static_cast<std::uint32_t>(hash >> 32), static_cast<std::int32_t>(id)};
  }
}

std::int64_t Vocabulary::add(std::string_view word) {
  const std::uint64_t hash = std::hash<std::string_view>{}(word);
  if (!slots_.empty()) {
    if (const Slot& slot = slots_[slot_of(word, hash)]; slot.id >= 0) return slot.id;
  }
  check_word(word);
  KILN_CHECK(size() < std::numeric_limits<std::int32_t>::max(),
             "vocabulary: cannot add word {}: the vocabulary already has {} words",
             quote_word(word), size());
  if (2 * (words_.size() + 1) > slots_.size()) grow();
  const auto id = static_cast<std::int32_t>(words_.size());
  words_.emplace_back(word);
  slots_[slot_of(word, hash)] = Slot{static_cast<std::uint32_t>(hash >> 32), id};
  return id;
}

std::optional<std::int64_t> Vocabulary::find(std::string_view word) const {
  if (slots_.empty()) return std::nullopt;
  const Slot& slot = slots_[slot_of(word, std::hash<std::string_view>{}(word))];
  if (slot.id < 0) return std::nullopt;
  return slot.id;
}

std::int64_t Vocabulary::id_of(std::string_view word) const {
  const std::optional<std::int64_t> id = find(word);
  KILN_CHECK(id.has_value(), "vocabulary: word {} is not in the vocabulary ({} words)",
             quote_word(word), size());
  return *id;
}

std::int64_t Vocabulary::id_of_or_unk(std::string_view word) const {
  if (const std::optional<std::int64_t> id = find(word)) return *id;
  KILN_CHECK(contains(kUnk),
             "vocabulary: word {} is unknown and the vocabulary ({} words) has no {} to stand "
             "for it",
             quote_word(word), size(), kUnk);
  return unk();
}

const std::string& Vocabulary::word(std::int64_t id) const {
  KILN_CHECK(id >= 0 && id < size(), "vocabulary: id {} is out of range [0, {})", id, size());
  return words_[static_cast<std::size_t>(id)];
}

}  // namespace kiln
