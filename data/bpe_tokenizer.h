// BpeTokenizer: GPT-2's byte-level BPE. Text is cut into pieces by GPT-2's pre-tokenization
// (data/pretokenizer.h); each piece's bytes start as one token per byte, and merges apply in
// rank order (the lowest-ranked adjacent pair first, the leftmost of equal ones) until none
// applies. Added tokens (GPT-2's "<|endoftext|>") are found in the text first, leftmost and
// longest, and stand for themselves. Tokens are bytes, so decode(encode(text)) == text for any
// bytes, invalid UTF-8 included (its bytes are pre-tokenized as "other" characters).
//
// Read and written as Hugging Face's tokenizer.json (model "BPE", vocab and merges, ByteLevel
// pre-tokenizer and decoder, no normalizer), so GPT-2's own file works and a vocabulary kiln
// trains (data/bpe_trainer.h) works in tokenizers; tokens are written in GPT-2's byte symbols
// (data/byte_level.h).
//
//   const BpeTokenizer gpt2 = BpeTokenizer::from_json(read_text_file("tokenizer.json"), "gpt2");
//   gpt2.encode("Hello world");   // [15496, 995]
//
// Encoding caches each distinct piece's ids (per call), so common words cost one hash lookup;
// pieces longer than 256 bytes merge with a heap (O(m log m)), so a megabyte of spaces is no
// quadratic trap.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "data/pretokenizer.h"
#include "data/tokenizer.h"

namespace kiln {

class BpeTokenizer final : public Tokenizer {
 public:
  // Merge `rank`: tokens left and right, side by side, become token result.
  struct Merge {
    std::int32_t left, right, result;
  };
  // A token matched in the raw text before pre-tokenization.
  struct AddedToken {
    std::int32_t id;
    std::string content;
    bool special = true;
    bool normalized = false;
  };

  // symbols[id]: token id as tokenizer.json writes it (its bytes in GPT-2's symbols); every byte
  // must have its one-symbol token; merges[k] must join two tokens that the bytes or merges
  // before k make, into the token whose symbols are theirs joined; an added token's symbols are
  // its content. ignore_merges: a piece that is a token as a whole is that token. Errors name
  // what is wrong.
  BpeTokenizer(std::vector<std::string> symbols, std::vector<Merge> merges,
               std::vector<AddedToken> added, bool ignore_merges);
  // A Hugging Face tokenizer.json (see the top of this file); source names it in errors.
  static BpeTokenizer from_json(std::string_view json, std::string_view source);

  std::string_view kind() const override { return "bpe"; }
  std::int64_t vocab_size() const override { return static_cast<std::int64_t>(bytes_.size()); }
  void encode_append(std::string_view text, std::vector<std::int64_t>& ids) const override;
  void decode_append(std::span<const std::int64_t> ids, std::string& out) const override;
  std::size_t next_cut(std::string_view text, std::size_t from) const override;
  std::size_t last_cut(std::string_view text) const override;
  std::string token_label(std::int64_t id) const override;
  std::string to_json() const override;

  const std::vector<std::string>& symbols() const { return symbols_; }
  const std::vector<Merge>& merges() const { return merges_; }
  const std::vector<AddedToken>& added_tokens() const { return added_; }
  // The bytes token id stands for.
  const std::string& token_bytes(std::int64_t id) const;

  // The pieces of the pre-tokenization of text, with added tokens: piece(begin, end, id), id the
  // added token's or -1 for text to merge.
  template <typename F>
  void for_each_piece(std::string_view text, F&& piece) const;

 private:
  class Cache;
  struct Slot {
    std::uint64_t key;  // left << 32 | right; kEmpty when free
    std::uint32_t rank;
    std::int32_t result;
  };
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};

  // The rank and result of merging left and right, or nullptr.
  const Slot* find_merge(std::int32_t left, std::int32_t right) const;
  void encode_piece(std::string_view piece, std::vector<std::int64_t>& ids, Cache& cache) const;
  void merge_short(std::vector<std::int32_t>& symbols, Cache& cache) const;
  void merge_long(std::vector<std::int32_t>& symbols) const;
  // Whether p falls strictly inside an occurrence of an added token, or inside one that the
  // text's end may begin (text ends with a prefix of it).
  bool may_span_added(std::string_view text, std::size_t p) const;
  // The start of the earliest added token that the text's end begins but does not hold whole,
  // or text.size().
  std::size_t partial_added_start(std::string_view text) const;

  std::vector<std::string> symbols_;
  std::vector<std::string> bytes_;
  std::array<std::int32_t, 256> byte_ids_{};
  std::vector<Merge> merges_;
  std::vector<Slot> table_;  // open addressing, a power of two, at most half full
  std::vector<AddedToken> added_;
  bool ignore_merges_ = false;
  std::unordered_map<std::string, std::int32_t> whole_;  // bytes -> id, for ignore_merges
};

template <typename F>
void BpeTokenizer::for_each_piece(std::string_view text, F&& piece) const {
  // The next occurrence of each added token at or after pos (npos: none left).
  std::vector<std::size_t> next(added_.size(), 0);
  for (std::size_t k = 0; k < added_.size(); ++k) next[k] = text.find(added_[k].content);
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t at = std::string_view::npos, chosen = 0;
    for (std::size_t k = 0; k < added_.size(); ++k) {
      if (next[k] != std::string_view::npos && next[k] < pos)
        next[k] = text.find(added_[k].content, pos);
      if (next[k] < at || (next[k] == at && at != std::string_view::npos &&
                           added_[k].content.size() > added_[chosen].content.size()))
        at = next[k], chosen = k;
    }
    const std::size_t end = at == std::string_view::npos ? text.size() : at;
    const std::string_view segment = text.substr(0, end);
    for (std::size_t i = pos; i < end;) {
      const std::size_t e = pretoken_end(segment, i);
      piece(i, e, -1);
      i = e;
    }
    if (at == std::string_view::npos) break;
    pos = at + added_[chosen].content.size();
    piece(at, pos, added_[chosen].id);
  }
}

}  // namespace kiln
