// libFuzzer target for the token-shard reader (data/token_shard.h). An input is a whole shard
// file: TokenShard opens it alone and as the valid split of a prepared dataset of a fixed char
// tokenizer, which checks the header's counts against the ids. A kiln::Error is the right answer
// to garbage; a crash, any other exception, a hang, a leak or a sanitizer report is a bug, and so
// is an accepted shard that breaks one of the properties below.
//
// A random edit almost always breaks the header's CRC-32 or the ids' XXH64, and the reader then
// stops before the checks behind them. So the input's last byte, when present, picks repairs
// made before reading: bit 0 recomputes the CRC, bit 1 the ids' hash, bit 2 sets the tokenizer
// hash to the fixed tokenizer's (the byte itself is not part of the shard).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "core/error.h"
#include "core/io/crc32.h"
#include "data/char_tokenizer.h"
#include "data/dataset.h"
#include "data/token_shard.h"
#include "data/xxhash64.h"
#include "tests/fuzz/fuzz_check.h"

using kiln::fuzz::require;
namespace fs = std::filesystem;

namespace {

// A dataset folder of this process: the fixed tokenizer, and train.bin and test.bin of one
// token, so that the valid split is the fuzzed one.
struct Folder {
  fs::path dir;
  std::unique_ptr<kiln::Tokenizer> tokenizer;
  Folder() {
    dir = fs::temp_directory_path() / ("kiln-fuzz-shard-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    tokenizer =
        kiln::tokenizer_from_json(kiln::CharTokenizer({U'\u00e9', U'\u4e2d'}).to_json(), "fixed");
    std::ofstream(dir / "tokenizer.json", std::ios::binary) << tokenizer->to_json();
    for (const char* split : {"train.bin", "test.bin"}) {
      kiln::ShardWriter writer((dir / split).string(),
                               {.id_bytes = 2,
                                .vocab_size = static_cast<std::uint32_t>(tokenizer->vocab_size()),
                                .tokenizer_hash = tokenizer->hash()});
      writer.append(tokenizer->encode("a"));
      writer.add_text(1, 2);
      writer.commit();
    }
  }
  ~Folder() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

template <typename T>
void put(std::string& bytes, std::size_t at, T value) {
  std::memcpy(bytes.data() + at, &value, sizeof value);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const Folder folder;
  if (size == 0) return 0;
  const std::uint8_t repairs = data[size - 1];
  std::string bytes(reinterpret_cast<const char*>(data), size - 1);
  if (bytes.size() >= kiln::kShardHeaderBytes) {
    if (repairs & 4) put(bytes, 40, folder.tokenizer->hash());
    if (repairs & 2)
      put(bytes, 48,
          kiln::xxh64(bytes.data() + kiln::kShardHeaderBytes,
                      bytes.size() - kiln::kShardHeaderBytes));
    if (repairs & 1) put(bytes, 60, kiln::crc32(bytes.data(), 60));
  }
  const std::string path = (folder.dir / "valid.bin").string();
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;

  try {
    const kiln::TokenShard shard(path, {});
    const kiln::ShardHeader& h = shard.header();
    require(kiln::kShardHeaderBytes + h.tokens * h.id_bytes == bytes.size(),
            "an accepted shard holds exactly its header's ids");
    const auto header = kiln::encode_shard_header(h);
    require(std::memcmp(header.data(), bytes.data(), header.size()) == 0,
            "an accepted header is encoded back to its bytes");
    const kiln::TokenView ids = shard.tokens();
    require(ids.size() == static_cast<std::int64_t>(h.tokens), "the view has the header's tokens");
    for (std::int64_t i = 0; i < ids.size(); ++i)
      require(ids[i] >= 0 && ids[i] < h.vocab_size, "every id is in the vocabulary");
  } catch (const kiln::Error&) {
  }
  try {
    const kiln::PreparedDataset dataset(folder.dir, nullptr, kiln::kAllSplits);
    const kiln::SplitTokens valid = dataset.tokens("valid");
    std::vector<std::int64_t> ids(static_cast<std::size_t>(valid.ids.size()));
    valid.ids.copy(0, valid.ids.size(), ids.data());
    // A char tokenizer's ids decode to exactly the text the header counts.
    require(static_cast<std::int64_t>(dataset.tokenizer().decode(ids).size()) == valid.text_bytes,
            "an accepted split's text_bytes is its ids' text");
    require(valid.ids.size() > 0 && valid.text_bytes > 0, "an accepted split holds text");
  } catch (const kiln::Error&) {
  }
  return 0;
}
