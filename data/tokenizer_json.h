// Internal to data/: the tokenizers from JSON already parsed (tokenizer_from_json reads the
// top level once and hands it on). Not installed with kiln's headers' users in mind: it
// includes nlohmann/json.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "data/bpe_tokenizer.h"
#include "data/char_tokenizer.h"
#include "data/word_tokenizer.h"

namespace kiln {

BpeTokenizer bpe_tokenizer_from_json(const nlohmann::json& j, std::string_view source);
CharTokenizer char_tokenizer_from_json(const nlohmann::json& j, std::string_view source);
WordTokenizer word_tokenizer_from_json(const nlohmann::json& j, std::string_view source);

}  // namespace kiln
