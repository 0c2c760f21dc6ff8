#include "data/dataset.h"

#include <fmt/format.h>

#include "core/error.h"
#include "data/corpus.h"
#include "data/word_tokenizer.h"

namespace kiln {

int split_index(std::string_view split) {
  for (int k = 0; k < 3; ++k)
    if (kAllSplits[k] == split) return k;
  fail("dataset: unknown split '{}'; expected one of train, valid, test", split);
}

bool is_prepared_dataset(const std::filesystem::path& dir) {
  std::error_code ec;
  return std::filesystem::is_regular_file(dir / "tokenizer.json", ec);
}

PreparedDataset::PreparedDataset(const std::filesystem::path& dir, const Tokenizer* expected,
                                 const std::vector<std::string>& splits)
    : dir_(dir.string()) {
  tokenizer_ = read_tokenizer(dir / "tokenizer.json");
  const std::uint64_t hash = tokenizer_->hash();
  if (expected)
    KILN_CHECK(expected->hash() == hash,
               "dataset {}: prepared with tokenizer {} ({}, {} tokens), but the checkpoint's is {} "
               "({}, {} tokens): evaluate or resume on data prepared with the checkpoint's "
               "tokenizer (kiln-prepare --tokenizer-file)",
               dir_, hex64(hash), tokenizer_->kind(), tokenizer_->vocab_size(),
               hex64(expected->hash()), expected->kind(), expected->vocab_size());
  for (const std::string& split : splits) {
    const std::filesystem::path path = dir / (split + ".bin");
    std::error_code ec;
    KILN_CHECK(std::filesystem::exists(path, ec),
               "dataset {}: {} not found; a prepared dataset holds tokenizer.json, train.bin, "
               "valid.bin and test.bin (kiln-prepare writes them)",
               dir_, path.string());
    shards_[split_index(split)] = std::make_unique<TokenShard>(
        path.string(),
        ShardExpectation{.tokenizer_hash = hash,
                         .vocab_size = static_cast<std::uint32_t>(tokenizer_->vocab_size()),
                         .tokenizer = tokenizer_.get()});
  }
}

const TokenShard& PreparedDataset::shard(std::string_view split) const {
  const auto& shard = shards_[split_index(split)];
  KILN_CHECK(shard != nullptr, "dataset {}: the {} split was not opened", dir_, split);
  return *shard;
}

SplitTokens PreparedDataset::tokens(std::string_view split) const {
  const TokenShard& s = shard(split);
  return {.ids = s.tokens(),
          .text_bytes = static_cast<std::int64_t>(s.header().text_bytes),
          .words = static_cast<std::int64_t>(s.header().words)};
}

const ShardHeader& PreparedDataset::header(std::string_view split) const {
  return shard(split).header();
}

EncodedTextDataset::EncodedTextDataset(const std::filesystem::path& dir,
                                       std::shared_ptr<const Tokenizer> tokenizer,
                                       const std::vector<std::string>& splits, int threads)
    : dir_(dir.string()), tokenizer_(std::move(tokenizer)) {
  const auto* word = dynamic_cast<const WordTokenizer*>(tokenizer_.get());
  for (const std::string& split : splits) {
    Split& s = splits_[split_index(split)];
    const std::filesystem::path path = dir / (split + ".txt");
    const std::string text = read_text_file(path);
    if (word) {
      TokenStream stream = tokenize_text_fixed(text, path.string(), word->vocabulary());
      s.ids = std::move(stream.ids);
      s.unknown = stream.unknown;
      s.byte_order_mark = stream.byte_order_mark;
    } else {
      s.ids = tokenizer_->encode(text, threads);
    }
    WordCounter counter;
    counter.add(text);
    s.words = counter.finish();
    s.text_bytes = static_cast<std::int64_t>(text.size());
    s.open = true;
  }
}

SplitTokens EncodedTextDataset::tokens(std::string_view split) const {
  const Split& s = splits_[split_index(split)];
  KILN_CHECK(s.open, "dataset {}: the {} split was not read", dir_, split);
  return {.ids = TokenView(s.ids),
          .text_bytes = s.text_bytes,
          .words = s.words,
          .unknown = s.unknown,
          .byte_order_mark = s.byte_order_mark};
}

std::unique_ptr<Dataset> open_dataset(const std::filesystem::path& dir,
                                      std::shared_ptr<const Tokenizer> tokenizer,
                                      const std::vector<std::string>& splits, int threads) {
  if (is_prepared_dataset(dir))
    return std::make_unique<PreparedDataset>(dir, tokenizer.get(), splits);
  if (tokenizer)
    return std::make_unique<EncodedTextDataset>(dir, std::move(tokenizer), splits, threads);
  return std::make_unique<Corpus>(dir);
}

}  // namespace kiln
