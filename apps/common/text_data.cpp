#include "apps/common/text_data.h"

#include <chrono>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "apps/common/train_setup.h"
#include "core/error.h"
#include "data/corpus.h"
#include "data/xxhash64.h"
#include "lm/evaluate.h"

namespace kiln {

namespace {

void print_data_line(const Dataset& data, const std::vector<std::string>& splits, double seconds) {
  std::string counts;
  for (const std::string& split : splits)
    counts += fmt::format(" {} {}", split, data.tokens(split).ids.size());
  fmt::print("data {}: {} tokenizer, vocab {} ({}) |{} tokens | read in {:.2f}s\n", data.describe(),
             data.tokenizer().kind(), data.tokenizer().vocab_size(),
             is_prepared_dataset(data.describe()) ? "prepared" : "encoded from text", counts,
             seconds);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

std::unique_ptr<Dataset> load_training_data(const std::string& dir, const lm::Checkpoint* resumed,
                                            int threads) {
  const bool word_run = resumed == nullptr || resumed->tokenizer->kind() == "word";
  if (!is_prepared_dataset(dir) && word_run)
    return std::make_unique<Corpus>(load_corpus(dir, resumed ? &resumed->vocabulary : nullptr));
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<Dataset> data =
      open_dataset(dir, resumed ? resumed->tokenizer : nullptr, kAllSplits, threads);
  print_data_line(*data, kAllSplits, seconds_since(start));
  return data;
}

std::unique_ptr<Dataset> load_eval_split(const std::string& dir, const lm::Checkpoint& checkpoint,
                                         const std::string& split, int threads) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<Dataset> data = open_dataset(dir, checkpoint.tokenizer, {split}, threads);
  print_data_line(*data, {split}, seconds_since(start));
  return data;
}

void print_text_measures(std::string_view split, double loss, const SplitTokens& tokens) {
  const lm::TextMeasures m = lm::text_measures(loss, tokens);
  std::string line =
      fmt::format("{} bpb {:.4f} | loss {:.4f} nats per token | ppl {:.2f} per token", split,
                  m.bits_per_byte, m.nats_per_token, m.ppl_per_token);
  if (std::isfinite(m.ppl_per_word)) line += fmt::format(" | ppl {:.2f} per word", m.ppl_per_word);
  fmt::print("{}\n", line);
}

}  // namespace kiln
