#include "lm/transformer_checkpoint.h"

#include <map>
#include <new>
#include <string_view>
#include <vector>

#include "core/host_memory.h"
#include "lm/hugging_face.h"
#include "nn/transformer_layout.h"

namespace kiln::lm {

namespace {

std::string config_summary(const nn::TransformerConfig& c) {
  return fmt::format("vocab {}, d_model {}, heads {}, kv_heads {}, layers {}, ff {}, {}-LN",
                     c.vocab, c.d_model, c.heads, c.kv(), c.layers, c.ff, nn::name_of(c.norm));
}

// The config against the file's model tensors (names, dtypes, shapes), and the model's size
// against this machine's memory, before a byte is claimed for the model: an untrusted config
// must not make kiln build a model of 10^9 layers, or one of 3 GB, to find that the file's
// tensors do not fit it.
void check_config_fits_tensors(const TransformerCheckpoint& ckpt) {
  const nn::TransformerConfig& c = ckpt.config;
  const std::int64_t expected = nn::state_tensor_count(c);
  KILN_CHECK(expected == static_cast<std::int64_t>(ckpt.model.size()),
             "checkpoint {}: its config ({}) describes {} model tensors, but the file has {}",
             ckpt.path, config_summary(c), expected, ckpt.model.size());
  std::map<std::string_view, const Tensor*> tensors;
  for (const auto& [name, tensor] : ckpt.model) tensors.emplace(name, &tensor);
  std::vector<std::string> missing;
  for (const nn::TensorLayout& t : nn::state_layout(c)) {
    const auto it = tensors.find(t.name);
    if (it == tensors.end()) {
      missing.push_back(t.name);
      continue;
    }
    const Tensor& tensor = *it->second;
    KILN_CHECK(tensor.dtype() == t.dtype, "checkpoint {}: tensor '{}' is {}, not {}", ckpt.path,
               t.name, tensor.dtype(), t.dtype);
    KILN_CHECK(tensor.shape() == t.shape,
               "checkpoint {}: tensor '{}' has shape {}, but its config ({}) needs {}", ckpt.path,
               t.name, tensor.shape(), config_summary(c), t.shape);
  }
  KILN_CHECK(missing.empty(),
             "checkpoint {}: its config ({}) needs tensors the file lacks: {} (the file's "
             "tensors are of another model)",
             ckpt.path, config_summary(c), fmt::join(missing, ", "));
  // The parameters are in the file already; what the config alone sizes is the positional table.
  check_host_memory(nn::model_bytes(c),
                    fmt::format("checkpoint {}: the model of its config (max_seq_len {}, d_model "
                                "{}, {} positions)",
                                ckpt.path, c.max_seq_len, c.d_model, nn::name_of(c.position)));
}

}  // namespace

TransformerCheckpoint transformer_checkpoint_from(Checkpoint checkpoint) {
  TransformerCheckpoint ckpt;
  static_cast<Checkpoint&>(ckpt) = std::move(checkpoint);
  const std::string& config = metadata_entry(ckpt, "config", "a kiln TransformerLM checkpoint");
  try {
    ckpt.config = nn::TransformerConfig::from_json(config);
  } catch (const Error& e) {
    fail("checkpoint {}: {}", ckpt.path, e.what());
  }
  KILN_CHECK(ckpt.tokenizer->vocab_size() == ckpt.config.vocab,
             "checkpoint {}: the {} tokenizer has {} tokens but the config says vocab {}",
             ckpt.path, ckpt.tokenizer->kind(), ckpt.tokenizer->vocab_size(), ckpt.config.vocab);
  check_config_fits_tensors(ckpt);
  return ckpt;
}

TransformerCheckpoint read_transformer_checkpoint(const std::string& path) {
  if (is_hugging_face_folder(path)) return read_hugging_face_gpt2(path);
  return transformer_checkpoint_from(read_checkpoint(path));
}

std::unique_ptr<nn::TransformerLM> load_model(const TransformerCheckpoint& ckpt, Device device) {
  std::unique_ptr<nn::TransformerLM> model;
  try {
    model = std::make_unique<nn::TransformerLM>(ckpt.config);
    model->load_state_dict(ckpt.model);
  } catch (const Error& e) {
    fail("checkpoint {}: building its model ({}, max_seq_len {}): {}", ckpt.path,
         config_summary(ckpt.config), ckpt.config.max_seq_len, e.what());
  } catch (const std::bad_alloc&) {
    fail("checkpoint {}: out of memory building its model ({}, max_seq_len {})", ckpt.path,
         config_summary(ckpt.config), ckpt.config.max_seq_len);
  }
  model->to(device);
  model->eval();
  return model;
}

}  // namespace kiln::lm
