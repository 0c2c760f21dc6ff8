#include "data/pretokenizer.h"

#include <array>
#include <cstdint>

#include "data/unicode_classes.h"

namespace kiln {

namespace {

constexpr std::array<CharClass, 128> kAsciiClass = [] {
  std::array<CharClass, 128> t{};
  for (int c = 0; c < 128; ++c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      t[c] = CharClass::letter;
    } else if (c >= '0' && c <= '9') {
      t[c] = CharClass::number;
    } else if (c == ' ' || (c >= '\t' && c <= '\r')) {
      t[c] = CharClass::space;
    } else {
      t[c] = CharClass::other;
    }
  }
  return t;
}();

struct Scanned {
  CharClass cls;
  std::uint32_t length;
};

inline Scanned scan(std::string_view text, std::size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  if (c < 0x80) return {kAsciiClass[c], 1};
  const Utf8Char u = decode_utf8(text, i);
  return {char_class(u.code_point), u.length};
}

// The contraction at text[i] ('s 't 're 've 'm 'll 'd, case-sensitive): its length, or 0.
inline std::size_t contraction(std::string_view text, std::size_t i) {
  if (text[i] != '\'' || i + 1 >= text.size()) return 0;
  const char d = text[i + 1];
  if (d == 's' || d == 't' || d == 'm' || d == 'd') return 2;
  if (i + 2 >= text.size()) return 0;
  const char e = text[i + 2];
  return (d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l') ? 3 : 0;
}

}  // namespace

std::size_t pretoken_end(std::string_view text, std::size_t i) {
  const std::size_t n = text.size();
  if (const std::size_t length = contraction(text, i)) return i + length;
  const Scanned first = scan(text, i);
  CharClass run = first.cls;
  std::size_t j = i + first.length;
  if (run == CharClass::space && text[i] == ' ' && j < n) {
    // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": a space joins the run that follows it.
    const Scanned next = scan(text, j);
    if (next.cls != CharClass::space) run = next.cls, j += next.length;
  }
  if (run != CharClass::space) {
    while (j < n) {
      const Scanned s = scan(text, j);
      if (s.cls != run) break;
      j += s.length;
    }
    return j;
  }
  // "\s+(?!\S)": a run of spaces that a non-space follows gives up its last space to the piece
  // after it; "\s+": a single space before a non-space stands alone.
  std::size_t last = i;
  j = i;
  while (j < n) {
    const Scanned s = scan(text, j);
    if (s.cls != CharClass::space) break;
    last = j;
    j += s.length;
  }
  if (j == n || last == i) return j;
  return last;
}

bool is_fixed_boundary(std::string_view text, std::size_t p) {
  const auto a = static_cast<unsigned char>(text[p - 1]);
  const auto b = static_cast<unsigned char>(text[p]);
  if (a >= 0x80 || b >= 0x80) return false;
  const bool a_space = kAsciiClass[a] == CharClass::space;
  const bool b_space = kAsciiClass[b] == CharClass::space;
  return (!a_space && b_space) || (a == '\n' && !b_space);
}

}  // namespace kiln
