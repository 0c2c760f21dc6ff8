// CharTokenizer: a token per character. Ids 0-255 are the bytes (ASCII characters are their
// byte); ids from 256 on are the code points at or above U+0080 that the training text holds, in
// code point order. A code point without an id, and any byte that is not valid UTF-8, encodes as
// its bytes, so decode(encode(text)) == text for any bytes.
//
//   CharTokenizerBuilder builder;
//   builder.add_text(train_text);                        // block by block
//   CharTokenizer t = builder.build(/*vocab_size=*/0);   // 0: every code point seen
//   t.encode("héllo");                                   // [104, 256 + k, 108, 108, 111]
//
// JSON: {"kiln_tokenizer": "char", "version": 1, "code_points": [233, 8212, ...]}.
#pragma once

#include <cstdint>
#include <map>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/tokenizer.h"

namespace kiln {

class CharTokenizer final : public Tokenizer {
 public:
  // code_points: ascending, each in [U+0080, U+10FFFF] and not a surrogate.
  explicit CharTokenizer(std::vector<char32_t> code_points);
  static CharTokenizer from_json(std::string_view json, std::string_view source);

  std::string_view kind() const override { return "char"; }
  std::int64_t vocab_size() const override {
    return 256 + static_cast<std::int64_t>(code_points_.size());
  }
  void encode_append(std::string_view text, std::vector<std::int64_t>& ids) const override;
  void decode_append(std::span<const std::int64_t> ids, std::string& out) const override;
  std::size_t next_cut(std::string_view text, std::size_t from) const override;
  std::size_t last_cut(std::string_view text) const override;
  std::string token_label(std::int64_t id) const override;
  std::string to_json() const override;

  const std::vector<char32_t>& code_points() const { return code_points_; }

 private:
  std::vector<char32_t> code_points_;
  std::unordered_map<char32_t, std::int64_t> ids_;
};

// Counts the code points of a training text and picks the vocabulary.
class CharTokenizerBuilder {
 public:
  void add_text(std::string_view text);
  // Every code point seen (vocab_size 0), or the vocab_size − 256 most frequent (ties: the lower
  // code point); vocab_size must then be at least 256.
  CharTokenizer build(std::int64_t vocab_size) const;

 private:
  std::map<char32_t, std::int64_t> counts_;
};

}  // namespace kiln
