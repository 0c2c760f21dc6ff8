// TransformerLM checkpoints: one safetensors file (core/safetensors.h) that carries everything a
// program needs to rebuild the model — its config and vocabulary travel in the metadata — plus,
// for training checkpoints, the optimizer state. docs/checkpoint-format.md lists the names.
//
//   tensors   model tensors by dotted path ("embedding.weight", "blocks.0.attn.qkv.weight", ...)
//             optimizer state as "optim.<param path>.<exp_avg|exp_avg_sq|momentum_buffer>"
//   metadata  format "kiln-1", config (TransformerConfig JSON), vocab (words joined by "\n"),
//             and whatever the writer adds (step, decay_steps, rng, data_position, threads, git)
//
//   const Checkpoint ckpt = read_checkpoint("runs/lm.safetensors");
//   auto model = load_model(ckpt, Device::cpu());
//   const Vocabulary& vocab = ckpt.vocabulary;
#pragma once

#include <memory>
#include <string>

#include "core/safetensors.h"
#include "data/vocabulary.h"
#include "nn/transformer_lm.h"

namespace kiln {

inline constexpr const char* kCheckpointFormat = "kiln-1";
inline constexpr const char* kOptimizerPrefix = "optim.";

struct Checkpoint {
  std::string path;
  nn::TransformerConfig config;
  Vocabulary vocabulary;
  Metadata metadata;       // every metadata entry (config and vocab included)
  NamedTensors model;      // model tensors
  NamedTensors optimizer;  // optimizer state, names without the "optim." prefix
};

// Reads and checks a checkpoint: the file itself (load_safetensors), its format, a config that
// validates, a vocabulary whose size equals config.vocab, and the config against the file's
// model tensors (every name, dtype and shape, nn/transformer_layout.h) and against this machine's
// memory, so that load_model builds nothing that the file cannot fill. Errors name the file and
// the problem.
Checkpoint read_checkpoint(const std::string& path);
// The same checks over a file already read (the fuzz targets pass parse_safetensors' result);
// path names it in errors.
Checkpoint checkpoint_from(SafetensorsFile file, const std::string& path);

// A TransformerLM built from the checkpoint's config with its weights (every name must match),
// on `device`, in eval mode. A failure to build it (out of memory) names the file and the config.
std::unique_ptr<nn::TransformerLM> load_model(const Checkpoint& checkpoint, Device device);

// Writes model, vocabulary, optimizer state (names as Optimizer::state_dict gives them) and
// `metadata` (format, config and vocab are added) atomically to path.
void write_checkpoint(const std::string& path, const nn::TransformerLM& model,
                      const Vocabulary& vocabulary, const NamedTensors& optimizer_state,
                      Metadata metadata);

// Where the best-by-validation weights of a run saved to path go: path with ".best" before the
// extension (runs/lm.safetensors → runs/lm.best.safetensors; runs/lm → runs/lm.best).
std::string best_checkpoint_path(const std::string& path);

}  // namespace kiln
