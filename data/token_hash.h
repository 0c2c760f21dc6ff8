// TokenHash: a 64-bit fingerprint of a sequence of token ids, to tell whether two processes read
// the same data. The ranks of a data-parallel job compare it at start-up (lm/trainer.h): a rank
// whose corpus has two lines swapped, or a train.txt twice as long, would otherwise train on its
// own windows silently, or stall the job at the end of an epoch.
//
// It hashes the ids' values in order, whatever their storage width, so the ids of a corpus read
// from text and the same ids read from prepared token shards (uint16 or uint32 on disk) give the
// same fingerprint; it takes them in pieces of any size:
//
//   TokenHash hash;
//   hash.add(std::span(corpus.train().ids));   // or shard by shard, in order
//   const std::uint64_t fingerprint = hash.value();
//
// Words (a vocabulary) go in with add_text. Not cryptographic: it catches accidents, not an
// adversary (two sequences collide with probability about 2^-64).
#pragma once

#include <concepts>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace kiln {

class TokenHash {
 public:
  // Continues the sequence with ids (their values: 7 as uint16 or as int64 hashes alike).
  template <std::integral Id>
  void add(std::span<const Id> ids) {
    for (const Id id : ids) mix(static_cast<std::uint64_t>(static_cast<std::int64_t>(id)));
  }
  // Continues the sequence with a text (a word): its length, then its bytes.
  void add_text(std::string_view text);

  // The fingerprint of everything added so far (the count of items included).
  std::uint64_t value() const;
  // Items added: ids, and one per text.
  std::int64_t count() const { return count_; }
  // value() as 16 hexadecimal digits.
  std::string hex() const;

 private:
  void mix(std::uint64_t x);
  std::uint64_t state_ = 0x6b696c6e746f6b73ULL;  // "kilntoks"
  std::int64_t count_ = 0;
};

}  // namespace kiln
