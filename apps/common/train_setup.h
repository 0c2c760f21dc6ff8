// What train_lm's flags build: the model (checked before it is built), the optimizer, and the
// options of lm::Trainer.
//
//   auto model = make_model(options, corpus.vocabulary().size(), device);
//   auto optimizer = make_optimizer(*model, options);
//   lm::Trainer trainer(*model, *optimizer, corpus, trainer_options(options, device, threads));
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "apps/common/options.h"
#include "data/corpus.h"
#include "data/dataset.h"
#include "lm/trainer.h"
#include "nn/transformer_lm.h"
#include "optim/optimizer.h"

namespace kiln {

// The corpus in data_dir (with the vocabulary of a resumed run, else its own), with its line
// "data <dir>: vocab ... | read in <s>", a warning when words became <unk>, and an error when
// train.txt has nothing to learn.
Corpus load_corpus(const std::string& data_dir, const Vocabulary* vocabulary);

// Creates the folder of path (named by flag in errors).
void make_parent_folder(const std::string& path, std::string_view flag);

// Checks, before a run trains, every file --save makes it write: save, its best weights
// (lm::best_checkpoint_path) and, with curve, its loss curve (curve_path) name a regular file or
// nothing (core/io/output_file.h); their folder is created and must take new files. Errors name
// --save.
void check_save_path(const std::string& save, bool curve);

// A note for each split of corpus whose file began with a UTF-8 byte-order mark, which reading
// skipped (data/corpus.h).
void print_byte_order_marks(const Corpus& corpus, const std::string& data_dir);

// The model of the flags (vocab from the corpus) on device, seeded by --seed, checked first to
// fit int64 arithmetic and this machine's memory with its gradients and the optimizer's state.
std::unique_ptr<nn::TransformerLM> make_model(const TrainOptions& options, std::int64_t vocab,
                                              Device device);

// The adaptive softmax's frequency order from the train split's token counts (a model without
// one is left as it is); a fresh model's, before it trains.
void order_by_frequency(nn::TransformerLM& model, const Dataset& data);

// --optimizer with its settings over the model's parameters.
std::unique_ptr<Optimizer> make_optimizer(const nn::TransformerLM& model,
                                          const TrainOptions& options);

// --precision resolved on `device`: auto becomes bf16 where the device multiplies bf16 natively
// (core/native_bf16.h), else f32; f32 and bf16 stay as given.
struct PrecisionChoice {
  std::string name;  // "f32" or "bf16"
  std::string why;   // auto's reason, for the banner; empty when the flag named the precision
};
PrecisionChoice resolve_precision(std::string_view flag, Device device);

// The trainer's options: the flags', on device with threads; checkpoints carry the saved flags
// (saved_options_json) as "train".
lm::TrainerOptions trainer_options(const TrainOptions& options, Device device, int threads);

// The lines train_lm prints before it trains: "model: ...", "training: ..." (and "resumed from
// ..." when resumed_path is not empty), and the line of why it stopped.
void print_model(const nn::TransformerLM& model);
void print_training(const lm::Trainer& trainer, const TrainOptions& options,
                    std::string_view optimizer, const std::string& resumed_path);
void print_stop(const lm::Trainer& trainer, lm::StopReason reason);
// The last lines: the final perplexities (result, when evaluated; with data, each split's bits
// per byte first: apps/common/text_data.h), or where an interrupted run (no result; signal names
// what stopped it) saved its state; then the RESULT line.
void print_result(const lm::Trainer& trainer, const std::optional<lm::FinalResult>& result,
                  std::string_view signal, const Dataset* data = nullptr);

}  // namespace kiln
