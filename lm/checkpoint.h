// Checkpoints: one safetensors file (core/safetensors.h) holding a language model's tensors, its
// tokenizer and, for training checkpoints, the optimizer state and the run's state
// (lm/train_state.h). docs/checkpoint-format.md lists every name.
//
//   tensors   model tensors by dotted path ("embedding.weight", "blocks.0.attn.qkv.weight", ...)
//             optimizer state as "optim.<param path>.<exp_avg|exp_avg_sq|momentum_buffer>"
//   metadata  format "kiln-1"; the tokenizer: a word-level one as vocab (words joined by "\n"),
//             a char or BPE one as tokenizer (its JSON, data/tokenizer.h); config (the model's
//             config_json(), when it has one), and whatever the writer adds: the training state
//
// This file knows any nn::LanguageModel; lm/transformer_checkpoint.h adds what rebuilding a
// TransformerLM from a file needs (its config, checked against the tensors, and load_model).
//
//   const lm::Checkpoint ckpt = lm::read_checkpoint("runs/bigram.safetensors");
//   model.load_state_dict(ckpt.model);
#pragma once

#include <memory>
#include <string>

#include "core/io/safetensors.h"
#include "data/tokenizer.h"
#include "data/vocabulary.h"
#include "nn/language_model.h"

namespace kiln::lm {

inline constexpr const char* kCheckpointFormat = "kiln-1";
inline constexpr const char* kOptimizerPrefix = "optim.";

struct Checkpoint {
  std::string path;
  std::shared_ptr<const Tokenizer> tokenizer;  // always set
  Vocabulary vocabulary;   // a word-level checkpoint's words (empty for char and BPE)
  Metadata metadata;       // every metadata entry (format and vocab included)
  NamedTensors model;      // model tensors
  NamedTensors optimizer;  // optimizer state, names without the "optim." prefix
};

// Reads and checks a checkpoint: the file itself (load_safetensors), its format and tokenizer.
// Errors name the file and the problem.
Checkpoint read_checkpoint(const std::string& path);
// The same over a file already read (the fuzz targets pass parse_safetensors' result); path
// names it in errors.
Checkpoint checkpoint_from(SafetensorsFile file, const std::string& path);

// A metadata entry; an error naming the file and the key when it is missing (`what` says what
// kind of checkpoint lacks it).
const std::string& metadata_entry(const Checkpoint& checkpoint, const std::string& key,
                                  std::string_view what);

// Writes model (its state_dict), tokenizer, optimizer state (names as Optimizer::state_dict
// gives them) and `metadata` atomically to path; format, the tokenizer (vocab or tokenizer) and
// the model's config (when config_json() has one) are added.
void write_checkpoint(const std::string& path, const nn::LanguageModel& model,
                      const Tokenizer& tokenizer, const NamedTensors& optimizer_state,
                      Metadata metadata);
// The same with a word-level vocabulary.
void write_checkpoint(const std::string& path, const nn::LanguageModel& model,
                      const Vocabulary& vocabulary, const NamedTensors& optimizer_state,
                      Metadata metadata);

// Where the best-by-validation weights of a run saved to path go: path with ".best" before the
// extension (runs/lm.safetensors → runs/lm.best.safetensors; runs/lm → runs/lm.best).
std::string best_checkpoint_path(const std::string& path);

}  // namespace kiln::lm
