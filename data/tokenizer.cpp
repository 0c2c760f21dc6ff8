#include "data/tokenizer.h"

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "data/char_tokenizer.h"
#include "data/corpus.h"
#include "data/tokenizer_json.h"
#include "data/unicode_classes.h"
#include "data/word_tokenizer.h"
#include "data/xxhash64.h"

namespace kiln {

void run_parts(int parts, int threads, const std::function<void(int)>& body) {
  threads = std::max(1, std::min(threads, parts));
  if (threads == 1) {
    for (int p = 0; p < parts; ++p) body(p);
    return;
  }
  std::exception_ptr error;
  std::mutex mutex;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int p = t; p < parts; p += threads) {
        try {
          body(p);
        } catch (...) {
          const std::lock_guard<std::mutex> lock(mutex);
          if (!error) error = std::current_exception();
        }
      }
    });
  }
  for (std::thread& thread : pool) thread.join();
  if (error) std::rethrow_exception(error);
}

std::vector<std::int64_t> Tokenizer::encode(std::string_view text, int threads) const {
  std::vector<std::int64_t> ids;
  constexpr std::size_t kParallelBytes = std::size_t{1} << 20;
  if (threads <= 1 || text.size() < kParallelBytes) {
    encode_append(text, ids);
    return ids;
  }
  // A part per thread, each starting at the first cut after an equal share of the text.
  std::vector<std::size_t> starts{0};
  for (int t = 1; t < threads; ++t) {
    const std::size_t share = text.size() / static_cast<std::size_t>(threads) * t;
    starts.push_back(next_cut(text, std::max(starts.back(), share)));
  }
  starts.push_back(text.size());
  std::vector<std::vector<std::int64_t>> parts(static_cast<std::size_t>(threads));
  run_parts(threads, threads, [&](int t) {
    const std::size_t begin = starts[t], end = starts[t + 1];
    encode_append(text.substr(begin, end - begin), parts[t]);
  });
  std::size_t total = 0;
  for (const auto& part : parts) total += part.size();
  ids.reserve(total);
  for (const auto& part : parts) ids.insert(ids.end(), part.begin(), part.end());
  return ids;
}

std::string Tokenizer::decode(std::span<const std::int64_t> ids) const {
  std::string text;
  decode_append(ids, text);
  return text;
}

std::uint64_t Tokenizer::hash() const {
  const std::string json = to_json();
  return xxh64(json.data(), json.size());
}

std::unique_ptr<Tokenizer> tokenizer_from_json(std::string_view json, std::string_view source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    fail("tokenizer {}: not valid JSON: {}", source, e.what());
  }
  KILN_CHECK(j.is_object(), "tokenizer {}: expected a JSON object", source);
  if (const auto kind = j.find("kiln_tokenizer"); kind != j.end()) {
    if (*kind == "char")
      return std::make_unique<CharTokenizer>(char_tokenizer_from_json(j, source));
    if (*kind == "word")
      return std::make_unique<WordTokenizer>(word_tokenizer_from_json(j, source));
    fail("tokenizer {}: kiln_tokenizer {} is not one of \"char\", \"word\"", source, kind->dump());
  }
  KILN_CHECK(j.contains("model"),
             "tokenizer {}: neither a Hugging Face tokenizer.json (no \"model\") nor a kiln "
             "tokenizer (no \"kiln_tokenizer\")",
             source);
  return std::make_unique<BpeTokenizer>(bpe_tokenizer_from_json(j, source));
}

std::unique_ptr<Tokenizer> read_tokenizer(const std::filesystem::path& path) {
  return tokenizer_from_json(read_text_file(path), path.string());
}

std::string printable_text(std::string_view bytes) {
  std::string out;
  for (std::size_t i = 0; i < bytes.size();) {
    const Utf8Char c = decode_utf8(bytes, i);
    const auto byte = static_cast<unsigned char>(bytes[i]);
    if (c.code_point == '\n') {
      out += "\\n";
    } else if (c.code_point == '\r') {
      out += "\\r";
    } else if (c.code_point == '\t') {
      out += "\\t";
    } else if (c.code_point == kInvalidCodePoint || c.code_point < 0x20 || c.code_point == 0x7F) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += bytes.substr(i, c.length);
    }
    i += c.length;
  }
  return out;
}

}  // namespace kiln
