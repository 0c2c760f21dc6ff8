#include "data/unicode_classes.h"

#include <algorithm>
#include <array>
#include <span>
#include <vector>

namespace kiln {

namespace {

using namespace unicode_tables;

bool in_ranges(std::span<const CodePointRange> ranges, char32_t cp) {
  const auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                                   [](char32_t c, const CodePointRange& r) { return c < r.first; });
  return it != ranges.begin() && cp <= std::prev(it)->last;
}

CharClass lookup(char32_t cp) {
  if (in_ranges({kLetterRanges, kLetterRangeCount}, cp)) return CharClass::letter;
  if (in_ranges({kNumberRanges, kNumberRangeCount}, cp)) return CharClass::number;
  if (in_ranges({kSpaceRanges, kSpaceRangeCount}, cp)) return CharClass::space;
  return CharClass::other;
}

// The Basic Multilingual Plane as one byte per code point (64 KiB, built on first use); the
// rest by binary search over the ranges.
const std::vector<CharClass>& bmp_table() {
  static const std::vector<CharClass> table = [] {
    std::vector<CharClass> t(0x10000);
    for (char32_t cp = 0; cp < 0x10000; ++cp) t[cp] = lookup(cp);
    return t;
  }();
  return table;
}

}  // namespace

CharClass char_class(char32_t cp) {
  if (cp < 0x10000) return bmp_table()[cp];
  if (cp > 0x10FFFF) return CharClass::other;
  return lookup(cp);
}

Utf8Char decode_utf8(std::string_view text, std::size_t i) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data()) + i;
  const std::size_t n = text.size() - i;
  const unsigned char c = s[0];
  constexpr Utf8Char invalid{kInvalidCodePoint, 1};
  if (c < 0x80) return {c, 1};
  const auto continuation = [&](std::size_t k) { return k < n && (s[k] & 0xC0) == 0x80; };
  if (c >= 0xC2 && c <= 0xDF) {
    if (!continuation(1)) return invalid;
    return {static_cast<char32_t>((c & 0x1F) << 6 | (s[1] & 0x3F)), 2};
  }
  if (c >= 0xE0 && c <= 0xEF) {
    if (!continuation(1) || !continuation(2)) return invalid;
    const char32_t cp = (c & 0x0F) << 12 | (s[1] & 0x3F) << 6 | (s[2] & 0x3F);
    if (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF)) return invalid;  // overlong, surrogate
    return {cp, 3};
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!continuation(1) || !continuation(2) || !continuation(3)) return invalid;
    const char32_t cp = (c & 0x07) << 18 | (s[1] & 0x3F) << 12 | (s[2] & 0x3F) << 6 | (s[3] & 0x3F);
    if (cp < 0x10000 || cp > 0x10FFFF) return invalid;
    return {cp, 4};
  }
  return invalid;
}

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | cp >> 6);
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | cp >> 12);
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | cp >> 18);
    out += static_cast<char>(0x80 | (cp >> 12 & 0x3F));
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace kiln
