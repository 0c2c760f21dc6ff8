// Dataset: what a language model trains and is evaluated on, whatever the tokenization: a
// tokenizer and, for each split ("train", "valid", "test"), its token ids with the size of the
// text they encode. Three kinds:
//
//   - Corpus (data/corpus.h): a folder of train.txt, valid.txt, test.txt read word by word;
//   - PreparedDataset: kiln-prepare's folder, tokenizer.json and the memory-mapped token shards
//     train.bin, valid.bin, test.bin (data/token_shard.h);
//   - EncodedTextDataset: such a text folder encoded in memory with a given tokenizer (a
//     checkpoint's, to evaluate or resume a char or BPE model on text).
//
//   const std::unique_ptr<Dataset> data = open_dataset("data/wt2-bpe", nullptr, kAllSplits, 2);
//   const SplitTokens valid = data->tokens("valid");   // valid.ids, valid.text_bytes, ...
//
// Comparing tokenizations (lm/evaluate.h): a split's total loss is its mean loss per token times
// ids.size(); bits per byte divide it by ln 2 and text_bytes, perplexity per word by words.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/token_shard.h"
#include "data/token_view.h"
#include "data/tokenizer.h"

namespace kiln {

inline const std::vector<std::string> kAllSplits = {"train", "valid", "test"};

struct SplitTokens {
  TokenView ids;
  std::int64_t text_bytes = 0;   // bytes of the split's text as stored
  std::int64_t words = 0;        // its whitespace words and line ends (0: unknown)
  std::int64_t unknown = 0;      // word-level: words read as "<unk>"
  bool byte_order_mark = false;  // word-level: the text began with a UTF-8 byte-order mark, skipped
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual const Tokenizer& tokenizer() const = 0;
  // A split by name; an error naming the choices for another name, or a split not opened.
  virtual SplitTokens tokens(std::string_view split) const = 0;
  // Where the data is (a folder), for messages.
  virtual std::string describe() const = 0;
};

// Whether dir is a prepared dataset (it holds tokenizer.json).
bool is_prepared_dataset(const std::filesystem::path& dir);

class PreparedDataset final : public Dataset {
 public:
  // Opens dir/tokenizer.json and the shards of `splits`, each checked against the tokenizer
  // (data/token_shard.h). expected (a checkpoint's tokenizer, or nullptr) must be the dataset's:
  // an error naming both hashes otherwise.
  PreparedDataset(const std::filesystem::path& dir, const Tokenizer* expected,
                  const std::vector<std::string>& splits);

  const Tokenizer& tokenizer() const override { return *tokenizer_; }
  SplitTokens tokens(std::string_view split) const override;
  std::string describe() const override { return dir_; }
  // The header of an opened split's shard (its ids_hash identifies the token stream).
  const ShardHeader& header(std::string_view split) const;

 private:
  const TokenShard& shard(std::string_view split) const;
  std::string dir_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<TokenShard> shards_[3];
};

class EncodedTextDataset final : public Dataset {
 public:
  // Reads dir/<split>.txt for each of `splits` and encodes it with tokenizer on `threads`
  // threads (a word tokenizer reads as data/corpus.h does, counting unknown words).
  EncodedTextDataset(const std::filesystem::path& dir, std::shared_ptr<const Tokenizer> tokenizer,
                     const std::vector<std::string>& splits, int threads);

  const Tokenizer& tokenizer() const override { return *tokenizer_; }
  SplitTokens tokens(std::string_view split) const override;
  std::string describe() const override { return dir_; }

 private:
  struct Split {
    bool open = false;
    std::vector<std::int64_t> ids;
    std::int64_t text_bytes = 0, words = 0, unknown = 0;
    bool byte_order_mark = false;
  };
  std::string dir_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  Split splits_[3];
};

// The dataset at dir: a PreparedDataset (checked against tokenizer, when given); else a text
// folder: with tokenizer, an EncodedTextDataset; without, a word-level Corpus over its three
// files (its vocabulary built from them, in order of first appearance).
std::unique_ptr<Dataset> open_dataset(const std::filesystem::path& dir,
                                      std::shared_ptr<const Tokenizer> tokenizer,
                                      const std::vector<std::string>& splits, int threads);

// The index of a split name (train 0, valid 1, test 2); an error naming the choices otherwise.
int split_index(std::string_view split);

}  // namespace kiln
