// What a TransformerLM of a config holds, known from the config alone, without building it: the
// names and shapes of its state_dict, its parameter count and the bytes it claims. A checkpoint's
// config is untrusted, so its readers compare it with the tensors in the file, and a program
// sizes a model from its flags, before any memory is claimed for the model
// (lm/transformer_checkpoint.cpp, train_lm). Every count is checked arithmetic
// (core/checked.h): an absurd config is a kiln::Error naming the field, never a wrapped size.
//
//   const nn::TransformerConfig config = nn::TransformerConfig::from_json(text);
//   if (nn::state_tensor_count(config) == file_tensor_count)        // before enumerating
//     for (const nn::TensorLayout& t : nn::state_layout(config)) ...  // compare with the file
//
// The layout mirrors TransformerLM's constructor (nn/transformer_lm.cpp and the modules it
// registers; docs/checkpoint-format.md lists the names); tests/nn/test_layout.cpp checks that
// both agree for every kind of config.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"
#include "nn/config.h"

namespace kiln::nn {

struct TensorLayout {
  std::string name;  // dotted path, as state_dict names it
  Shape shape;
  DType dtype = DType::f32;  // int64 for the adaptive softmax's order, float32 otherwise
};

// Tensors in the state_dict: the embedding (or adaptive input's shortlist), the learned positions
// (if any), 12 per block, the final LayerNorm's 2 (pre-LN), and the adaptive softmax's cluster
// logits, 2 per cluster and its order.
std::int64_t state_tensor_count(const TransformerConfig& config);

// The state_dict's names, shapes and dtypes, in its order. It lists every block, so
// check state_tensor_count first when the config is untrusted.
std::vector<TensorLayout> state_layout(const TransformerConfig& config);

// Elements of the state_dict: the parameters, the tied embedding counted once.
std::int64_t parameter_count(const TransformerConfig& config);

// Elements of the positional tables the model computes and keeps (not saved): max_seq_len ×
// d_model sinusoids, or RoPE's cos and sin tables of max_seq_len × d_head / 2 each; none for
// learned positions, whose table is a parameter.
std::int64_t position_table_count(const TransformerConfig& config);

// Bytes a built model claims for its parameters and positional tables (4 per element), plus
// `copies_per_parameter` more float32 copies of the parameters (gradients, optimizer state).
std::int64_t model_bytes(const TransformerConfig& config, std::int64_t copies_per_parameter = 0);

}  // namespace kiln::nn
