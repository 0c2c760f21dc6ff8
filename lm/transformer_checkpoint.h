// TransformerLM checkpoints: a checkpoint (lm/checkpoint.h) whose metadata also carries the
// model's config ("config", TransformerConfig JSON), so a program rebuilds the model from the
// file alone. The config is stored once: a training checkpoint's saved settings ("train") leave
// the model's fields out (files written before commit baed1dc's successor held them twice; their
// copy in "train" is ignored).
//
//   const lm::TransformerCheckpoint ckpt = lm::read_transformer_checkpoint("runs/lm.safetensors");
//   auto model = lm::load_model(ckpt, Device::cpu());
//   const Vocabulary& vocab = ckpt.vocabulary;
#pragma once

#include <memory>
#include <string>

#include "lm/checkpoint.h"
#include "nn/transformer_lm.h"

namespace kiln::lm {

struct TransformerCheckpoint : Checkpoint {
  nn::TransformerConfig config;
};

// Reads and checks a TransformerLM checkpoint: read_checkpoint's checks, a config that
// validates, a vocabulary whose size equals config.vocab, and the config against the file's
// model tensors (every name, dtype and shape, nn/transformer_layout.h) and against this
// machine's memory, so that load_model builds nothing that the file cannot fill. Errors name the
// file and the problem. A Hugging Face GPT-2 folder (one with config.json) is read by
// read_hugging_face_gpt2 (lm/hugging_face.h).
TransformerCheckpoint read_transformer_checkpoint(const std::string& path);
// The same checks over a checkpoint already read.
TransformerCheckpoint transformer_checkpoint_from(Checkpoint checkpoint);

// A TransformerLM built from the checkpoint's config with its weights (every name must match),
// on `device`, in eval mode. A failure to build it (out of memory) names the file and the config.
std::unique_ptr<nn::TransformerLM> load_model(const TransformerCheckpoint& checkpoint,
                                              Device device);

}  // namespace kiln::lm
