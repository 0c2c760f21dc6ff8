// GPT-2's pre-tokenization: text cut into pieces that byte-level BPE encodes one at a time, as
// the pattern
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// matches it, alternatives tried in order at each position (a backtracking engine's leftmost
// alternative, as Hugging Face tokenizers' Oniguruma and OpenAI's regex module run it). A
// hand-written scanner: letters, numbers, spaces and other characters come from
// data/unicode_classes.h; a byte that is not valid UTF-8 is an "other" character, so any bytes
// pre-tokenize (tokenizers only ever sees valid text).
//
//   for (std::size_t i = 0; i < text.size();) {
//     const std::size_t end = pretoken_end(text, i);   // text.substr(i, end - i) is a piece
//     i = end;
//   }
#pragma once

#include <cstddef>
#include <string_view>

namespace kiln {

// The end of the piece that starts at text[i] (i < text.size()); always > i.
std::size_t pretoken_end(std::string_view text, std::size_t i);

// Whether every text that holds text[p - 1] and text[p] at these places is cut into pieces
// between them, whatever comes before or after (0 < p < text.size()): an ASCII non-space
// followed by an ASCII space (no piece holds a non-space and then a space), or "\n" followed by
// an ASCII non-space (a piece that holds "\n" holds spaces only). Text cut at such places
// pre-tokenizes piece for piece as the whole does.
bool is_fixed_boundary(std::string_view text, std::size_t p);

}  // namespace kiln
