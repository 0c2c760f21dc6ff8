#include "data/byte_level.h"

#include <array>

#include "data/unicode_classes.h"

namespace kiln {

namespace {

constexpr bool stands_for_itself(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

// bytes_to_unicode() of GPT-2's encoder.py.
constexpr std::array<char32_t, 256> kSymbols = [] {
  std::array<char32_t, 256> t{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) t[b] = stands_for_itself(b) ? static_cast<char32_t>(b) : next++;
  return t;
}();

constexpr std::array<std::int16_t, 512> kBytes = [] {
  std::array<std::int16_t, 512> t{};
  for (auto& v : t) v = -1;
  for (int b = 0; b < 256; ++b) t[kSymbols[b]] = static_cast<std::int16_t>(b);
  return t;
}();

}  // namespace

char32_t byte_symbol(std::uint8_t byte) { return kSymbols[byte]; }

int symbol_byte(char32_t symbol) { return symbol < kBytes.size() ? kBytes[symbol] : -1; }

std::string byte_symbols(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) append_utf8(kSymbols[static_cast<std::uint8_t>(c)], out);
  return out;
}

bool symbols_to_bytes(std::string_view symbols, std::string& out) {
  for (std::size_t i = 0; i < symbols.size();) {
    const Utf8Char c = decode_utf8(symbols, i);
    const int byte = c.code_point == kInvalidCodePoint ? -1 : symbol_byte(c.code_point);
    if (byte < 0) return false;
    out += static_cast<char>(byte);
    i += c.length;
  }
  return true;
}

}  // namespace kiln
