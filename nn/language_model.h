// LanguageModel: what lm/ (lm::Trainer, lm::evaluate, checkpoints) needs of a model that
// predicts the next token, so that a user's own model trains, checkpoints, resumes and evaluates
// like TransformerLM (examples/train_custom.cpp):
//   - its parameters and buffers (a Module: state_dict, load_state_dict, train/eval),
//   - loss(): the mean cross-entropy of next-token prediction over a batch of windows,
//   - the generator of its random draws (dropout masks), whose state a checkpoint carries so a
//     resumed run draws the masks an uninterrupted one would,
//   - optionally its configuration as JSON, which checkpoints carry as "config" so that a
//     program rebuilds the model from the file alone.
//
//   class Bigram : public nn::LanguageModel {
//    public:
//     Tensor loss(const Tensor& inputs, const Tensor& targets, std::int64_t ignore) const override;
//   };
#pragma once

#include <cstdint>
#include <string>

#include "core/generator.h"
#include "nn/module.h"

namespace kiln::nn {

class LanguageModel : public Module {
 public:
  // Mean cross-entropy (nats) of predicting targets from inputs, over the targets that are not
  // ignore_index: inputs and targets (B, T) int64 on device().
  virtual Tensor loss(const Tensor& inputs, const Tensor& targets,
                      std::int64_t ignore_index = -100) const = 0;

  // The model's configuration as JSON (TransformerLM: TransformerConfig::to_json), or "" when
  // it has none to record.
  virtual std::string config_json() const { return {}; }

  // Where the parameters are (the first one's device; the CPU for a model without any): inputs
  // go to this device.
  Device device() const;

  // The generator of dropout masks: pass its address to the model's Dropout modules.
  Generator& dropout_generator() { return dropout_generator_; }

 private:
  Generator dropout_generator_{0};
};

}  // namespace kiln::nn
