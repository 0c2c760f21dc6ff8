// The programs' data and the lines that compare tokenizations: a --data folder opened as a
// prepared dataset or a text folder (data/dataset.h), and each split's loss as bits per byte and
// per-word perplexity beside the per-token figures (lm::text_measures).
//
//   const std::unique_ptr<Dataset> data = load_training_data(dir, resumed, threads);
//   print_text_measures("valid", result.valid.loss, data->tokens("valid"));
//     → valid bpb 1.6012 | loss 4.9012 nats per token | ppl 134.44 per token | ppl 181.30 per word
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "data/dataset.h"
#include "lm/checkpoint.h"

namespace kiln {

// train_lm's data: a prepared dataset (checked against a resumed run's tokenizer); else the text
// folder, word-level (load_corpus), or encoded with a resumed char or BPE run's tokenizer. Prints
// "data <dir>: ..." with the tokenizer and each split's tokens.
std::unique_ptr<Dataset> load_training_data(const std::string& dir, const lm::Checkpoint* resumed,
                                            int threads);

// One split of eval_ppl's data with the checkpoint's tokenizer; prints its "data" line.
std::unique_ptr<Dataset> load_eval_split(const std::string& dir, const lm::Checkpoint& checkpoint,
                                         const std::string& split, int threads);

// "<split> bpb <x> | loss <l> nats per token | ppl <p> per token | ppl <w> per word" (the last
// when the split's words are known).
void print_text_measures(std::string_view split, double loss, const SplitTokens& tokens);

}  // namespace kiln
