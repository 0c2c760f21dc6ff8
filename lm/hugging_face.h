// Hugging Face GPT-2 folders in and out (docs/huggingface.md).
//
// In: a folder as transformers' save_pretrained writes it (config.json, model.safetensors,
// tokenizer.json or vocab.json + merges.txt) is read as a kiln TransformerCheckpoint, so every
// program that takes a checkpoint path takes the folder (lm::read_transformer_checkpoint sends
// folders here). GPT-2 is kiln's pre-LN model with learned positions, GPT-2's tanh GELU and no
// √d scale on the embeddings; Conv1D weights are (in, out), kiln's Linear (out, in): they are
// transposed. One table (kBlockNames in the .cpp) maps the names.
//
//   const lm::TransformerCheckpoint gpt2 = lm::read_hugging_face_gpt2("models/gpt2");
//   auto model = lm::load_model(gpt2, Device::cpu());
//
// Out: write_hugging_face_gpt2 writes a GPT-2-family kiln model as such a folder, loadable by
// transformers.AutoModelForCausalLM.from_pretrained; models GPT-2 cannot express are refused
// with the reason.
#pragma once

#include <string>
#include <string_view>

#include "lm/transformer_checkpoint.h"

namespace kiln::lm {

// True when path is a folder holding config.json (a Hugging Face model folder).
bool is_hugging_face_folder(const std::string& path);

// The kiln config of a GPT-2 config.json's text, with the vocabulary size it states; a
// kiln::Error names the field kiln cannot express (scale_attn_by_inverse_layer_idx, an
// activation other than gelu_new / gelu_pytorch_tanh / gelu / relu, tie_word_embeddings false,
// ...). source names the file in errors.
nn::TransformerConfig config_from_hugging_face(std::string_view config_json,
                                               std::string_view source);

// Reads a Hugging Face GPT2LMHeadModel folder. model.safetensors holds F32, F16 or BF16
// tensors, with or without the "transformer." prefix; attn.bias and attn.masked_bias (causal
// mask buffers) are ignored; lm_head.weight, if present, must equal wte. A pytorch_model.bin
// alone is refused (a pickle can run code; the message says how to convert it). Errors name the
// folder and the tensor or field: missing, extra or misshapen tensors included.
TransformerCheckpoint read_hugging_face_gpt2(const std::string& dir);

// Writes config.json, model.safetensors (metadata format "pt", names "transformer.*", no
// lm_head) and tokenizer.json to dir, replacing it whole (core/io/staging_folder.h: written
// beside it and swapped in, so a failed export leaves the old folder as it was; an existing dir
// must hold only these three files). Refuses, naming the reason, a model GPT-2 does not express:
// post-LN, sinusoidal or rotary positions, GQA/MQA, the √d embedding scale, or a word or char
// tokenizer.
void write_hugging_face_gpt2(const TransformerCheckpoint& checkpoint, const std::string& dir);

}  // namespace kiln::lm
