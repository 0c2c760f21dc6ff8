// Checkpoints: one safetensors file (core/safetensors.h) holding a language model's tensors, its
// vocabulary and, for training checkpoints, the optimizer state and the run's state
// (lm/train_state.h). docs/checkpoint-format.md lists every name.
//
//   tensors   model tensors by dotted path ("embedding.weight", "blocks.0.attn.qkv.weight", ...)
//             optimizer state as "optim.<param path>.<exp_avg|exp_avg_sq|momentum_buffer>"
//   metadata  format "kiln-1", vocab (words joined by "\n"), config (the model's config_json(),
//             when it has one), and whatever the writer adds: the training state
//
// This file knows any nn::LanguageModel; lm/transformer_checkpoint.h adds what rebuilding a
// TransformerLM from a file needs (its config, checked against the tensors, and load_model).
//
//   const lm::Checkpoint ckpt = lm::read_checkpoint("runs/bigram.safetensors");
//   model.load_state_dict(ckpt.model);
#pragma once

#include <string>

#include "core/io/safetensors.h"
#include "data/vocabulary.h"
#include "nn/language_model.h"

namespace kiln::lm {

inline constexpr const char* kCheckpointFormat = "kiln-1";
inline constexpr const char* kOptimizerPrefix = "optim.";

struct Checkpoint {
  std::string path;
  Vocabulary vocabulary;
  Metadata metadata;       // every metadata entry (format and vocab included)
  NamedTensors model;      // model tensors
  NamedTensors optimizer;  // optimizer state, names without the "optim." prefix
};

// Reads and checks a checkpoint: the file itself (load_safetensors), its format and vocabulary.
// Errors name the file and the problem.
Checkpoint read_checkpoint(const std::string& path);
// The same over a file already read (the fuzz targets pass parse_safetensors' result); path
// names it in errors.
Checkpoint checkpoint_from(SafetensorsFile file, const std::string& path);

// A metadata entry; an error naming the file and the key when it is missing (`what` says what
// kind of checkpoint lacks it).
const std::string& metadata_entry(const Checkpoint& checkpoint, const std::string& key,
                                  std::string_view what);

// Writes model (its state_dict), vocabulary, optimizer state (names as Optimizer::state_dict
// gives them) and `metadata` atomically to path; format, vocab and the model's config (when
// config_json() has one) are added.
void write_checkpoint(const std::string& path, const nn::LanguageModel& model,
                      const Vocabulary& vocabulary, const NamedTensors& optimizer_state,
                      Metadata metadata);

// Where the best-by-validation weights of a run saved to path go: path with ".best" before the
// extension (runs/lm.safetensors → runs/lm.best.safetensors; runs/lm → runs/lm.best).
std::string best_checkpoint_path(const std::string& path);

}  // namespace kiln::lm
