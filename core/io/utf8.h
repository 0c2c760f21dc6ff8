// UTF-8 validation for text that comes from files (corpora, checkpoint vocabularies): strings
// are checked before they are used as words or put into JSON.
#pragma once

#include <cstddef>
#include <string_view>

namespace kiln {

// The byte offset of the first invalid UTF-8 sequence in text, or npos when it is all valid
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
std::size_t find_invalid_utf8(std::string_view text);

}  // namespace kiln
