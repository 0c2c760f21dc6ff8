// Tokenizer: text to token ids and back, one interface over the three kinds kiln trains on
// (docs/tokenizers.md):
//
//   word  WikiText-2's whitespace words, "<eos>" after each line (data/word_tokenizer.h); unknown
//         words read as "<unk>", so decoding gives the words, not the text
//   char  UTF-8 code points, any other byte as a byte token (data/char_tokenizer.h)
//   bpe   byte-level BPE, GPT-2's, in Hugging Face's tokenizer.json (data/bpe_tokenizer.h)
//
// For char and bpe, decode(encode(text)) == text for any bytes, invalid UTF-8 included.
//
//   std::unique_ptr<Tokenizer> t = read_tokenizer("tokenizer.json");
//   std::vector<std::int64_t> ids = t->encode(text, /*threads=*/2);
//   std::string back = t->decode(ids);
//   t->hash();   // XXH64 of to_json(): what shards and checkpoints are checked against
//
// Cuts. A position p of a text is a cut when encode(text) == encode(text[0, p)) followed by
// encode(text[p, n)): streams of text are encoded block by block, and long texts on several
// threads, by cutting them there, and give exactly the ids of the whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // "word", "char" or "bpe".
  virtual std::string_view kind() const = 0;
  // Ids are in [0, vocab_size()).
  virtual std::int64_t vocab_size() const = 0;

  // Appends the ids of text to ids, on this thread.
  virtual void encode_append(std::string_view text, std::vector<std::int64_t>& ids) const = 0;
  // The text of ids appended to out; an error naming the id if one is outside [0, vocab_size()).
  virtual void decode_append(std::span<const std::int64_t> ids, std::string& out) const = 0;
  // The smallest cut p >= from with p < text.size(), or text.size() when there is none.
  virtual std::size_t next_cut(std::string_view text, std::size_t from) const = 0;
  // The largest cut p with 0 < p < text.size(), or 0 when there is none.
  virtual std::size_t last_cut(std::string_view text) const = 0;
  // Token id as a label for people (attention maps): its text, control characters and bytes
  // that are not UTF-8 escaped (\n, \xNN); an error if id is out of range.
  virtual std::string token_label(std::int64_t id) const = 0;
  // The canonical JSON of the tokenizer (for bpe, Hugging Face's tokenizer.json); the same
  // tokenizer always gives the same bytes.
  virtual std::string to_json() const = 0;

  // encode_append on `threads` threads (texts of 1 MiB or more), cut at cuts: the same ids.
  std::vector<std::int64_t> encode(std::string_view text, int threads = 1) const;
  std::string decode(std::span<const std::int64_t> ids) const;
  // XXH64 of to_json().
  std::uint64_t hash() const;
};

// The tokenizer a JSON text describes: a Hugging Face tokenizer.json with a BPE model, or one of
// kiln's {"kiln_tokenizer": "char" | "word", ...}. Errors name source and what is wrong.
std::unique_ptr<Tokenizer> tokenizer_from_json(std::string_view json, std::string_view source);
// The same from a file.
std::unique_ptr<Tokenizer> read_tokenizer(const std::filesystem::path& path);

// Bytes as people read them: valid UTF-8 as is, "\n", "\r", "\t" and other control bytes and
// bytes that are not UTF-8 escaped (\n, \r, \t, \xNN).
std::string printable_text(std::string_view bytes);

// Runs body(part) for part in [0, parts) on up to `threads` threads (std::thread), each part
// once; returns when all are done, rethrowing the first exception.
void run_parts(int parts, int threads, const std::function<void(int)>& body);

}  // namespace kiln
