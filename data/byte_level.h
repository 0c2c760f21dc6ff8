// GPT-2's byte-to-symbol mapping, with which byte-level BPE writes its tokens as text: each of
// the 256 byte values stands for one printable code point. The printable bytes '!'..'~',
// '¡'..'¬' and '®'..'ÿ' stand for themselves; the other 68 (controls, space, DEL, NBSP, soft
// hyphen) for U+0100 onwards, in byte order (space is 'Ġ', "\n" is 'Ċ'). tokenizer.json's vocab
// and merges are written in these symbols.
//
//   byte_symbols("hi there")            // "hiĠthere"
//   symbols_to_bytes("hiĠthere", out)   // true, out == "hi there"
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

// The symbol of a byte.
char32_t byte_symbol(std::uint8_t byte);

// The byte a symbol stands for, or -1 if the code point is none of the 256 symbols.
int symbol_byte(char32_t symbol);

// The symbols of bytes, as UTF-8.
std::string byte_symbols(std::string_view bytes);

// The bytes that UTF-8 text of symbols stands for, appended to out; false (out unspecified) if
// the text is not valid UTF-8 or holds a code point that is not a symbol.
bool symbols_to_bytes(std::string_view symbols, std::string& out);

}  // namespace kiln
