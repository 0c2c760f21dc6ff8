#include "examples/common/checkpoint.h"

#include <filesystem>

#include "core/utf8.h"

namespace kiln {

Checkpoint read_checkpoint(const std::string& path) {
  SafetensorsFile file = load_safetensors(path);
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
  return ckpt;
}

std::unique_ptr<nn::TransformerLM> load_model(const Checkpoint& ckpt, Device device) {
  auto model = std::make_unique<nn::TransformerLM>(ckpt.config);
  try {
    model->load_state_dict(ckpt.model);
  } catch (const Error& e) {
    fail("checkpoint {}: {}", ckpt.path, e.what());
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
