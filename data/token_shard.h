// Token shards: a split of a prepared dataset (data/dataset.h) as one file of token ids behind a
// 64-byte header, memory-mapped when read, so that a corpus of any size is never read into
// memory (docs/tokenizers.md has the layout).
//
//   offset  bytes  field (little-endian)
//        0      8  magic "KILNTOK" and a NUL
//        8      4  version (1)
//       12      4  id_bytes: 2 (uint16 ids, vocabularies up to 65,536) or 4 (uint32)
//       16      8  tokens: N
//       24      8  text_bytes: the bytes of the text the ids encode, as stored (bits per byte)
//       32      8  words: its whitespace words and line ends (per-word perplexity; 0: unknown)
//       40      8  tokenizer_hash: XXH64 of the tokenizer's canonical JSON (Tokenizer::hash)
//       48      8  ids_hash: XXH64 of the N · id_bytes bytes that follow the header
//       56      4  vocab_size
//       60      4  CRC-32 of bytes 0-59
//       64           the ids
//
// The file is N · id_bytes + 64 bytes long. ids_hash is the hash of the token stream: ranks and
// runs compare it from the header alone (ShardHeader), without reading the ids.
//
//   ShardWriter writer("data/train.bin", {.id_bytes = 2, .vocab_size = 8192, .tokenizer_hash = h});
//   writer.append(ids);  writer.add_text(bytes, words);  ...  writer.commit();   // atomic
//   const TokenShard shard("data/train.bin", {.tokenizer_hash = h, .vocab_size = 8192});
//   shard.tokens();   // a TokenView over the mapped ids
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "data/token_view.h"
#include "data/xxhash64.h"

namespace kiln {

inline constexpr std::size_t kShardHeaderBytes = 64;
inline constexpr std::uint32_t kShardVersion = 1;

struct ShardHeader {
  std::uint32_t version = kShardVersion;
  std::uint32_t id_bytes = 2;
  std::uint64_t tokens = 0;
  std::uint64_t text_bytes = 0;
  std::uint64_t words = 0;
  std::uint64_t tokenizer_hash = 0;
  std::uint64_t ids_hash = 0;
  std::uint32_t vocab_size = 0;
};

// The 64 bytes of a header (magic and CRC included), and back: an error naming source when the
// magic, version, id width or CRC is wrong.
std::array<unsigned char, kShardHeaderBytes> encode_shard_header(const ShardHeader& header);
ShardHeader decode_shard_header(std::span<const unsigned char> bytes, std::string_view source);

// The id width of a vocabulary: 2 bytes up to 65,536 tokens, else 4.
std::uint32_t id_bytes_for(std::int64_t vocab_size);

// Writes a shard: ids are appended to a scratch file beside the target (unlinked, so a crash
// leaves nothing), then commit() writes the header and the ids through an AtomicFile
// (core/io/output_file.h): the target is the old file or the whole new one, never a part.
class ShardWriter {
 public:
  struct Options {
    std::uint32_t id_bytes = 2;
    std::uint32_t vocab_size = 0;
    std::uint64_t tokenizer_hash = 0;
  };
  ShardWriter(std::string path, Options options);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // An error naming the id if one is outside [0, vocab_size).
  void append(std::span<const std::int64_t> ids);
  // Counts text the ids encode: its bytes and words.
  void add_text(std::uint64_t bytes, std::uint64_t words);
  const ShardHeader& header() const { return header_; }
  // Writes the shard; returns its header.
  ShardHeader commit();

 private:
  std::string path_;
  ShardHeader header_;
  std::FILE* scratch_ = nullptr;
  Xxh64 hash_;
  std::vector<unsigned char> buffer_;
};

class Tokenizer;

// Expectations a reader checks a shard against (nothing: not checked). With the tokenizer (its
// hash and vocabulary are then expected too), the header's counts are checked against the ids:
// text_bytes is the bytes the ids decode to (char, bpe) or at least one per word (word); words
// is the tokens (word), or at least the ids' line feeds and at most 2 · text_bytes (char, bpe);
// and a shard of no tokens is refused. A header that lies (its CRC recomputed) would otherwise
// give bits per byte of nan or 10^5 and any per-word perplexity.
struct ShardExpectation {
  std::optional<std::uint64_t> tokenizer_hash;
  std::optional<std::uint32_t> vocab_size;
  const Tokenizer* tokenizer = nullptr;
};

// A shard, mapped read-only. Opening checks that the path is a regular file, the header, the
// file's size, the expectations and the ids' hash, then in one pass over the ids that every id is
// below vocab_size and (with a tokenizer) the header's counts; each error names the file and the
// field.
class TokenShard {
 public:
  TokenShard(const std::string& path, const ShardExpectation& expect);
  ~TokenShard();
  TokenShard(const TokenShard&) = delete;
  TokenShard& operator=(const TokenShard&) = delete;

  const ShardHeader& header() const { return header_; }
  const std::string& path() const { return path_; }
  TokenView tokens() const;

 private:
  // The header's counts against the sums over the ids (ShardExpectation).
  void check_counts(bool word, std::uint64_t text_bytes, std::uint64_t line_feeds) const;
  std::string path_;
  ShardHeader header_;
  void* map_ = nullptr;
  std::size_t map_bytes_ = 0;
};

}  // namespace kiln
