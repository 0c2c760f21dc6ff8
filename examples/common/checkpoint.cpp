#include "examples/common/checkpoint.h"

#include <filesystem>
#include <map>
#include <new>
#include <string_view>
#include <vector>

#include "core/host_memory.h"
#include "core/utf8.h"
#include "nn/transformer_layout.h"

namespace kiln {

namespace {

std::string config_summary(const nn::TransformerConfig& c) {
  return fmt::format("vocab {}, d_model {}, heads {}, kv_heads {}, layers {}, ff {}, {}-LN",
                     c.vocab, c.d_model, c.heads, c.kv(), c.layers, c.ff, nn::name_of(c.norm));
}

// The config against the file's model tensors (names, dtypes, shapes), and the model's size
// against this machine's memory, before a byte is claimed for the model: an untrusted config
// must not make kiln build a model of 10^9 layers, or one of 3 GB, to find that the file's
// tensors do not fit it.
void check_config_fits_tensors(const Checkpoint& ckpt) {
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
    KILN_CHECK(tensor.dtype() == DType::f32, "checkpoint {}: tensor '{}' is {}, not float32",
               ckpt.path, t.name, tensor.dtype());
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

Checkpoint checkpoint_from(SafetensorsFile file, const std::string& path) {
  Checkpoint ckpt;
  ckpt.path = path;
  ckpt.metadata = std::move(file.metadata);
  auto entry = [&](const char* key) -> const std::string& {
    const auto it = ckpt.metadata.find(key);
    KILN_CHECK(it != ckpt.metadata.end(),
               "checkpoint {}: metadata has no '{}' (not a kiln TransformerLM checkpoint?)", path,
               key);
    return it->second;
  };
  KILN_CHECK(entry("format") == kCheckpointFormat,
             "checkpoint {}: format '{}' is not the '{}' this kiln reads", path, entry("format"),
             kCheckpointFormat);
  try {
    ckpt.config = nn::TransformerConfig::from_json(entry("config"));
    ckpt.vocabulary = Vocabulary::from_string(entry("vocab"));
  } catch (const Error& e) {
    fail("checkpoint {}: {}", path, e.what());
  }
  KILN_CHECK(ckpt.vocabulary.size() == ckpt.config.vocab,
             "checkpoint {}: the vocabulary has {} words but the config says vocab {}", path,
             ckpt.vocabulary.size(), ckpt.config.vocab);
  const std::string prefix = kOptimizerPrefix;
  for (auto& [name, tensor] : file.tensors) {
    if (name.rfind(prefix, 0) == 0) {
      ckpt.optimizer.emplace_back(name.substr(prefix.size()), std::move(tensor));
    } else {
      ckpt.model.emplace_back(name, std::move(tensor));
    }
  }
  check_config_fits_tensors(ckpt);
  return ckpt;
}

Checkpoint read_checkpoint(const std::string& path) {
  return checkpoint_from(load_safetensors(path), path);
}

std::unique_ptr<nn::TransformerLM> load_model(const Checkpoint& ckpt, Device device) {
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

void write_checkpoint(const std::string& path, const nn::TransformerLM& model,
                      const Vocabulary& vocabulary, const NamedTensors& optimizer_state,
                      Metadata metadata) {
  metadata["format"] = kCheckpointFormat;
  metadata["config"] = model.config().to_json();
  metadata["vocab"] = vocabulary.to_string();
  NamedTensors tensors = model.state_dict();
  for (const auto& [name, tensor] : optimizer_state)
    tensors.emplace_back(std::string(kOptimizerPrefix) + name, tensor);
  save_safetensors(path, tensors, metadata);
}

std::string best_checkpoint_path(const std::string& path) {
  const std::filesystem::path p(path);
  return (p.parent_path() / (p.stem().string() + ".best" + p.extension().string())).string();
}

}  // namespace kiln
