#include "data/char_tokenizer.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/tokenizer_json.h"
#include "data/unicode_classes.h"

namespace kiln {

namespace {

bool continuation_byte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

}  // namespace

CharTokenizer::CharTokenizer(std::vector<char32_t> code_points)
    : code_points_(std::move(code_points)) {
  for (std::size_t k = 0; k < code_points_.size(); ++k) {
    const char32_t cp = code_points_[k];
    KILN_CHECK(cp >= 0x80 && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF),
               "char tokenizer: code point {} (entry {}) is not a code point at or above U+0080",
               static_cast<std::uint32_t>(cp), k);
    KILN_CHECK(k == 0 || code_points_[k - 1] < cp,
               "char tokenizer: code points must ascend, but entry {} (U+{:04X}) follows U+{:04X}",
               k, static_cast<std::uint32_t>(cp), static_cast<std::uint32_t>(code_points_[k - 1]));
    ids_.emplace(cp, 256 + static_cast<std::int64_t>(k));
  }
}

void CharTokenizer::encode_append(std::string_view text, std::vector<std::int64_t>& ids) const {
  for (std::size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x80) {
      ids.push_back(byte);
      ++i;
      continue;
    }
    const Utf8Char c = decode_utf8(text, i);
    const auto it = c.code_point == kInvalidCodePoint ? ids_.end() : ids_.find(c.code_point);
    if (it != ids_.end()) {
      ids.push_back(it->second);
    } else {
      for (std::uint32_t k = 0; k < c.length; ++k)
        ids.push_back(static_cast<unsigned char>(text[i + k]));
    }
    i += c.length;
  }
}

void CharTokenizer::decode_append(std::span<const std::int64_t> ids, std::string& out) const {
  for (const std::int64_t id : ids) {
    KILN_CHECK(id >= 0 && id < vocab_size(), "char tokenizer: id {} is out of range [0, {})", id,
               vocab_size());
    if (id < 256) {
      out += static_cast<char>(id);
    } else {
      append_utf8(code_points_[static_cast<std::size_t>(id - 256)], out);
    }
  }
}

std::size_t CharTokenizer::next_cut(std::string_view text, std::size_t from) const {
  std::size_t p = std::max<std::size_t>(from, 1);
  while (p < text.size() && continuation_byte(text[p])) ++p;
  return std::min(p, text.size());
}

std::size_t CharTokenizer::last_cut(std::string_view text) const {
  for (std::size_t p = text.size(); p-- > 1;)
    if (!continuation_byte(text[p])) return p;
  return 0;
}

std::string CharTokenizer::token_label(std::int64_t id) const {
  std::string text;
  decode_append(std::span<const std::int64_t>(&id, 1), text);
  return printable_text(text);
}

std::string CharTokenizer::to_json() const {
  nlohmann::ordered_json j;
  j["kiln_tokenizer"] = "char";
  j["version"] = 1;
  std::vector<std::uint32_t> points(code_points_.begin(), code_points_.end());
  j["code_points"] = points;
  return j.dump();
}

CharTokenizer CharTokenizer::from_json(std::string_view json, std::string_view source) {
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  KILN_CHECK(!j.is_discarded(), "tokenizer {}: not valid JSON", source);
  return char_tokenizer_from_json(j, source);
}

CharTokenizer char_tokenizer_from_json(const nlohmann::json& j, std::string_view source) {
  const auto version = j.find("version");
  KILN_CHECK(version != j.end() && *version == 1,
             "tokenizer {}: char tokenizer version {} is not the 1 this kiln reads", source,
             version == j.end() ? "(none)" : version->dump());
  const auto points = j.find("code_points");
  KILN_CHECK(points != j.end() && points->is_array(),
             "tokenizer {}: a char tokenizer needs \"code_points\", an array of integers", source);
  std::vector<char32_t> code_points;
  for (const auto& p : *points) {
    KILN_CHECK(p.is_number_unsigned() && p.get<std::uint64_t>() <= 0x10FFFF,
               "tokenizer {}: code point {} is not an integer in [128, 1114111]", source, p.dump());
    code_points.push_back(static_cast<char32_t>(p.get<std::uint64_t>()));
  }
  try {
    return CharTokenizer(std::move(code_points));
  } catch (const Error& e) {
    fail("tokenizer {}: {}", source, e.what());
  }
}

void CharTokenizerBuilder::add_text(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const Utf8Char c = decode_utf8(text, i);
    if (c.code_point != kInvalidCodePoint) ++counts_[c.code_point];
    i += c.length;
  }
}

CharTokenizer CharTokenizerBuilder::build(std::int64_t vocab_size) const {
  std::vector<std::pair<char32_t, std::int64_t>> seen(counts_.begin(), counts_.end());
  if (vocab_size > 0) {
    KILN_CHECK(vocab_size >= 256,
               "char tokenizer: a vocabulary of {} is too small: the 256 bytes come first",
               vocab_size);
    const auto keep = static_cast<std::size_t>(vocab_size - 256);
    if (seen.size() > keep) {
      std::stable_sort(seen.begin(), seen.end(),
                       [](const auto& a, const auto& b) { return a.second > b.second; });
      seen.resize(keep);
    }
  }
  std::vector<char32_t> code_points;
  for (const auto& [cp, count] : seen) code_points.push_back(cp);
  std::sort(code_points.begin(), code_points.end());
  return CharTokenizer(std::move(code_points));
}

}  // namespace kiln
