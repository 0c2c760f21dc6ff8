#include "data/token_shard.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "core/io/crc32.h"
#include "core/io/input_file.h"
#include "core/io/output_file.h"
#include "data/tokenizer.h"

namespace kiln {

namespace {

constexpr unsigned char kMagic[8] = {'K', 'I', 'L', 'N', 'T', 'O', 'K', '\0'};

template <typename T>
void put(unsigned char* at, T value) {
  std::memcpy(at, &value, sizeof value);  // little-endian hosts only
}

template <typename T>
T get(const unsigned char* at) {
  T value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

}  // namespace

std::uint32_t id_bytes_for(std::int64_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

std::array<unsigned char, kShardHeaderBytes> encode_shard_header(const ShardHeader& h) {
  std::array<unsigned char, kShardHeaderBytes> b{};
  std::memcpy(b.data(), kMagic, 8);
  put(b.data() + 8, h.version);
  put(b.data() + 12, h.id_bytes);
  put(b.data() + 16, h.tokens);
  put(b.data() + 24, h.text_bytes);
  put(b.data() + 32, h.words);
  put(b.data() + 40, h.tokenizer_hash);
  put(b.data() + 48, h.ids_hash);
  put(b.data() + 56, h.vocab_size);
  put(b.data() + 60, crc32(b.data(), 60));
  return b;
}

ShardHeader decode_shard_header(std::span<const unsigned char> b, std::string_view source) {
  KILN_CHECK(b.size() >= kShardHeaderBytes && std::memcmp(b.data(), kMagic, 8) == 0,
             "token shard {}: not a kiln token shard (no \"KILNTOK\" header); prepare the data "
             "with kiln-prepare",
             source);
  ShardHeader h;
  h.version = get<std::uint32_t>(b.data() + 8);
  KILN_CHECK(h.version == kShardVersion,
             "token shard {}: version {}, but this kiln reads version {}", source, h.version,
             kShardVersion);
  const auto crc = get<std::uint32_t>(b.data() + 60);
  KILN_CHECK(crc == crc32(b.data(), 60),
             "token shard {}: the header is corrupt (its CRC-32 is {:08x}, the bytes give {:08x})",
             source, crc, crc32(b.data(), 60));
  h.id_bytes = get<std::uint32_t>(b.data() + 12);
  h.tokens = get<std::uint64_t>(b.data() + 16);
  h.text_bytes = get<std::uint64_t>(b.data() + 24);
  h.words = get<std::uint64_t>(b.data() + 32);
  h.tokenizer_hash = get<std::uint64_t>(b.data() + 40);
  h.ids_hash = get<std::uint64_t>(b.data() + 48);
  h.vocab_size = get<std::uint32_t>(b.data() + 56);
  KILN_CHECK(h.id_bytes == 2 || h.id_bytes == 4, "token shard {}: id width {} is not 2 or 4",
             source, h.id_bytes);
  KILN_CHECK(h.id_bytes == 4 || h.vocab_size <= 65536,
             "token shard {}: a vocabulary of {} does not fit 2-byte ids", source, h.vocab_size);
  return h;
}

ShardWriter::ShardWriter(std::string path, Options options) : path_(std::move(path)) {
  header_.id_bytes = options.id_bytes;
  header_.vocab_size = options.vocab_size;
  header_.tokenizer_hash = options.tokenizer_hash;
  KILN_CHECK(options.id_bytes == 2 || options.id_bytes == 4,
             "token shard {}: id width {} is not 2 or 4", path_, options.id_bytes);
  check_output_file(path_, "token shard");
  const std::filesystem::path target(path_);
  const std::string scratch =
      (target.parent_path() / fmt::format(".{}.ids.{}", target.filename().string(), ::getpid()))
          .string();
  scratch_ = std::fopen(scratch.c_str(), "w+b");
  KILN_CHECK(scratch_ != nullptr, "token shard {}: cannot create the scratch file {}: {}", path_,
             scratch, std::strerror(errno));
  std::remove(scratch.c_str());  // lives while open
}

ShardWriter::~ShardWriter() {
  if (scratch_) std::fclose(scratch_);
}

void ShardWriter::append(std::span<const std::int64_t> ids) {
  buffer_.resize(ids.size() * header_.id_bytes);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::int64_t id = ids[i];
    KILN_CHECK(id >= 0 && id < header_.vocab_size,
               "token shard {}: id {} is outside the vocabulary [0, {})", path_, id,
               header_.vocab_size);
    if (header_.id_bytes == 2) {
      put(buffer_.data() + 2 * i, static_cast<std::uint16_t>(id));
    } else {
      put(buffer_.data() + 4 * i, static_cast<std::uint32_t>(id));
    }
  }
  hash_.update(buffer_.data(), buffer_.size());
  KILN_CHECK(std::fwrite(buffer_.data(), 1, buffer_.size(), scratch_) == buffer_.size(),
             "token shard {}: writing the scratch file failed (disk full?): {}", path_,
             std::strerror(errno));
  header_.tokens += ids.size();
}

void ShardWriter::add_text(std::uint64_t bytes, std::uint64_t words) {
  header_.text_bytes += bytes;
  header_.words += words;
}

ShardHeader ShardWriter::commit() {
  header_.ids_hash = hash_.digest();
  KILN_CHECK(std::fflush(scratch_) == 0 && std::fseek(scratch_, 0, SEEK_SET) == 0,
             "token shard {}: rereading the scratch file failed: {}", path_, std::strerror(errno));
  AtomicFile file(path_, "token shard");
  const auto head = encode_shard_header(header_);
  file.write(head.data(), head.size());
  std::vector<unsigned char> chunk(std::size_t{1} << 20);
  std::size_t got;
  while ((got = std::fread(chunk.data(), 1, chunk.size(), scratch_)) > 0)
    file.write(chunk.data(), got);
  KILN_CHECK(!std::ferror(scratch_), "token shard {}: rereading the scratch file failed: {}", path_,
             std::strerror(errno));
  KILN_CHECK(file.bytes_written() == kShardHeaderBytes + header_.tokens * header_.id_bytes,
             "token shard {}: wrote {} bytes, expected {}", path_, file.bytes_written(),
             kShardHeaderBytes + header_.tokens * header_.id_bytes);
  file.commit();
  std::fclose(scratch_);
  scratch_ = nullptr;
  return header_;
}

TokenShard::TokenShard(const std::string& path, const ShardExpectation& expect) : path_(path) {
  const OpenedFile file = open_input_file(path, "token shard");
  const std::uint64_t size = file.size();
  KILN_CHECK(size >= kShardHeaderBytes,
             "token shard {}: {} bytes, shorter than the {}-byte header (truncated?)", path, size,
             kShardHeaderBytes);
  map_bytes_ = static_cast<std::size_t>(size);
  map_ = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_PRIVATE, file.fd(), 0);
  const int map_errno = errno;
  if (map_ == MAP_FAILED) map_ = nullptr;
  KILN_CHECK(map_ != nullptr, "token shard {}: cannot map it: {}", path, std::strerror(map_errno));
  try {
    const auto* bytes = static_cast<const unsigned char*>(map_);
    header_ = decode_shard_header({bytes, kShardHeaderBytes}, path);
    // tokens <= available / id_bytes first, so that tokens · id_bytes cannot overflow.
    const std::uint64_t available = size - kShardHeaderBytes;
    const bool fits = header_.tokens <= available / header_.id_bytes &&
                      header_.tokens * header_.id_bytes == available;
    KILN_CHECK(fits,
               "token shard {}: the header says {} ids of {} bytes, but the file holds {} bytes "
               "after the header (truncated, or not written to the end)",
               path, header_.tokens, header_.id_bytes, available);
    const std::uint64_t payload = available;
    // The expected hash and vocabulary, given or (with a tokenizer) the tokenizer's own.
    const Tokenizer* tokenizer = expect.tokenizer;
    for (const std::optional<std::uint64_t>& hash :
         {expect.tokenizer_hash, tokenizer ? std::optional(tokenizer->hash()) : std::nullopt})
      if (hash)
        KILN_CHECK(header_.tokenizer_hash == *hash,
                   "token shard {}: prepared with tokenizer {}, but the tokenizer here is {}: the "
                   "shard belongs to another tokenizer (prepare the data again with this one)",
                   path, hex64(header_.tokenizer_hash), hex64(*hash));
    for (const std::optional<std::int64_t>& vocab :
         {expect.vocab_size ? std::optional<std::int64_t>(*expect.vocab_size) : std::nullopt,
          tokenizer ? std::optional(tokenizer->vocab_size()) : std::nullopt})
      if (vocab)
        KILN_CHECK(header_.vocab_size == *vocab,
                   "token shard {}: vocabulary {} in the header, but the tokenizer has {}", path,
                   header_.vocab_size, *vocab);
    const unsigned char* ids = bytes + kShardHeaderBytes;
    const std::uint64_t hash = xxh64(ids, payload);
    KILN_CHECK(hash == header_.ids_hash,
               "token shard {}: the ids are corrupt (their XXH64 is {}, the header says {})", path,
               hex64(hash), hex64(header_.ids_hash));
    // Per token of the tokenizer: the bytes of its text (word: a word is at least one byte,
    // <eos> maybe none) and its line feeds, each a line end that words counts.
    const bool word = tokenizer != nullptr && tokenizer->kind() == "word";
    std::vector<std::uint32_t> token_bytes, token_feeds;
    if (tokenizer) {
      token_bytes.resize(header_.vocab_size);
      token_feeds.resize(header_.vocab_size);
      for (std::uint32_t id = 0; id < header_.vocab_size; ++id) {
        const std::int64_t one[1] = {id};
        const std::string text = tokenizer->decode(one);
        const bool eos = word && text == "\n";
        token_bytes[id] = word ? (eos ? 0 : 1) : static_cast<std::uint32_t>(text.size());
        token_feeds[id] = static_cast<std::uint32_t>(std::count(text.begin(), text.end(), '\n'));
      }
    }
    // One pass over the ids: each inside the vocabulary, and the counts a tokenizer checks.
    std::uint64_t text_bytes = 0, line_feeds = 0;
    const TokenView view = tokens();
    for (std::int64_t i = 0; i < view.size(); ++i) {
      const std::int64_t id = view[i];
      KILN_CHECK(id < header_.vocab_size,
                 "token shard {}: id {} at token {} is outside the vocabulary [0, {})", path, id, i,
                 header_.vocab_size);
      if (tokenizer) {
        text_bytes += token_bytes[static_cast<std::size_t>(id)];
        line_feeds += token_feeds[static_cast<std::size_t>(id)];
      }
    }
    if (tokenizer) check_counts(word, text_bytes, line_feeds);
  } catch (...) {
    ::munmap(map_, map_bytes_);
    throw;
  }
}

void TokenShard::check_counts(bool word, std::uint64_t text_bytes, std::uint64_t line_feeds) const {
  KILN_CHECK(header_.tokens > 0,
             "token shard {}: the header's tokens is 0: the split holds no text (kiln-prepare "
             "never writes one)",
             path_);
  if (word) {
    KILN_CHECK(header_.text_bytes >= std::max<std::uint64_t>(text_bytes, 1),
               "token shard {}: the header's text_bytes is {}, but its {} words take at least {} "
               "bytes",
               path_, header_.text_bytes, text_bytes, text_bytes);
    KILN_CHECK(header_.words == 0 || header_.words == header_.tokens,
               "token shard {}: the header's words is {}, but a word tokenizer's {} tokens are "
               "{} words and line ends",
               path_, header_.words, header_.tokens, header_.tokens);
    return;
  }
  KILN_CHECK(header_.text_bytes == text_bytes,
             "token shard {}: the header's text_bytes is {}, but the ids decode to {} bytes", path_,
             header_.text_bytes, text_bytes);
  // Each word and each line end but a file's last takes a byte of its own: words <= 2 bytes.
  KILN_CHECK(header_.words == 0 ||
                 (header_.words >= line_feeds && header_.words <= 2 * header_.text_bytes),
             "token shard {}: the header's words is {}, but the ids' text of {} bytes has {} line "
             "ends (words counts each, and at most 2 per byte)",
             path_, header_.words, header_.text_bytes, line_feeds);
}

TokenShard::~TokenShard() {
  if (map_) ::munmap(map_, map_bytes_);
}

TokenView TokenShard::tokens() const {
  return TokenView(static_cast<const unsigned char*>(map_) + kShardHeaderBytes,
                   static_cast<int>(header_.id_bytes), static_cast<std::int64_t>(header_.tokens));
}

}  // namespace kiln
