// The character classes of GPT-2's pre-tokenization pattern (data/pretokenizer.h) and a UTF-8
// decoder that never fails: \p{L} (letter), \p{N} (number), \s (space) and everything else
// (other), for every code point, from a table that tools/gen_unicode_classes.py generates from
// PyPI's unicodedata2 into data/unicode_classes_table.cpp (its Unicode version is kUnicodeVersion:
// 16.0, tokenizers 0.23's). A generated table rather than libpcre2: the pre-tokenizer is a
// hand-written scanner (several times faster than a regex engine, which the encoding speed needs),
// kiln gains no dependency, and the classes are exactly the ones Hugging Face tokenizers'
// Oniguruma uses (\s is Unicode's White_Space; tests/data/bpe checks the sample against
// tokenizers' output).
//
//   const Utf8Char c = decode_utf8(text, i);   // c.code_point, c.length (>= 1)
//   if (char_class(c.code_point) == CharClass::letter) ...
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

enum class CharClass : std::uint8_t { other, letter, number, space };

// The class of a code point; kInvalidCodePoint (a byte that starts no valid UTF-8 sequence)
// is `other`.
CharClass char_class(char32_t code_point);

inline constexpr char32_t kInvalidCodePoint = 0xFFFFFFFF;

struct Utf8Char {
  char32_t code_point;   // kInvalidCodePoint for a byte that is not valid UTF-8 here
  std::uint32_t length;  // bytes: 1 to 4; 1 for an invalid byte
};

// The character at text[i] (i < text.size()). A byte that does not start a valid sequence
// (overlong forms, surrogates, code points above U+10FFFF, truncated sequences, stray
// continuation bytes) is one invalid character of one byte, so any bytes decode.
Utf8Char decode_utf8(std::string_view text, std::size_t i);

// The UTF-8 bytes of a code point (<= U+10FFFF, not a surrogate), appended to out.
void append_utf8(char32_t code_point, std::string& out);

struct CodePointRange {
  char32_t first, last;  // inclusive
};

namespace unicode_tables {
extern const char* const kUnicodeVersion;
extern const CodePointRange kLetterRanges[];
extern const std::size_t kLetterRangeCount;
extern const CodePointRange kNumberRanges[];
extern const std::size_t kNumberRangeCount;
extern const CodePointRange kSpaceRanges[];
extern const std::size_t kSpaceRangeCount;
}  // namespace unicode_tables

}  // namespace kiln
