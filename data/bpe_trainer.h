// BpeTrainer: learns a byte-level BPE vocabulary from text, as GPT-2's was learnt. The text is
// pre-tokenized (data/pretokenizer.h) and its distinct pieces counted; every piece starts as its
// bytes (256 tokens, in the order of their symbols' code points, as GPT-2's vocabulary and
// tokenizers' trainer order them). Then, until the vocabulary has vocab_size tokens, the most
// frequent adjacent pair of tokens over all pieces (ties: the lower left id, then the lower right
// id) becomes a merge, and a new token (or the token that already has the pair's bytes).
// Counting is exact, so the result does not depend on the thread count.
//
//   BpeTrainer trainer({.vocab_size = 8192, .threads = 2});
//   trainer.add_text(block);                 // the training text, block by block (cut at cuts)
//   const BpeTokenizer tokenizer = trainer.train();
//
// Pair counts are kept up to date over the pieces that hold each pair, so a merge costs the
// pieces it touches, not a pass over the text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/bpe_tokenizer.h"

namespace kiln {

struct BpeTrainOptions {
  std::int64_t vocab_size = 8192;  // tokens in all: the 256 bytes and the merges' tokens
  std::int64_t min_frequency = 2;  // a pair seen fewer times is never merged
  int threads = 1;                 // threads that pre-tokenize and count
};

class BpeTrainer {
 public:
  explicit BpeTrainer(BpeTrainOptions options);

  // Counts the pieces of a block of the training text (blocks must be cut at cuts of a
  // byte-level BPE tokenizer: BpeTokenizer::last_cut, or file ends).
  void add_text(std::string_view text);
  std::int64_t pieces() const { return pieces_; }  // pieces counted
  std::int64_t distinct_pieces() const { return static_cast<std::int64_t>(counts_.size()); }

  // The tokenizer; an error when no text was counted. It has fewer than vocab_size tokens when
  // the text runs out of pairs seen min_frequency times.
  BpeTokenizer train() const;

 private:
  BpeTrainOptions options_;
  std::unordered_map<std::string, std::int64_t> counts_;
  std::int64_t pieces_ = 0;
};

}  // namespace kiln
