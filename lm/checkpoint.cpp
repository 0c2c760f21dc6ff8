#include "lm/checkpoint.h"

#include <filesystem>

#include "data/word_tokenizer.h"

namespace kiln::lm {

const std::string& metadata_entry(const Checkpoint& ckpt, const std::string& key,
                                  std::string_view what) {
  const auto it = ckpt.metadata.find(key);
  KILN_CHECK(it != ckpt.metadata.end(), "checkpoint {}: metadata has no '{}' (not {}?)", ckpt.path,
             key, what);
  return it->second;
}

Checkpoint checkpoint_from(SafetensorsFile file, const std::string& path) {
  Checkpoint ckpt;
  ckpt.path = path;
  ckpt.metadata = std::move(file.metadata);
  const std::string& format = metadata_entry(ckpt, "format", "a kiln checkpoint");
  KILN_CHECK(format == kCheckpointFormat,
             "checkpoint {}: format '{}' is not the '{}' this kiln reads", path, format,
             kCheckpointFormat);
  if (const auto tokenizer = ckpt.metadata.find("tokenizer"); tokenizer != ckpt.metadata.end()) {
    ckpt.tokenizer = tokenizer_from_json(
        tokenizer->second, fmt::format("in checkpoint {} (metadata 'tokenizer')", path));
    if (const auto* word = dynamic_cast<const WordTokenizer*>(ckpt.tokenizer.get()))
      ckpt.vocabulary = word->vocabulary();
  } else {
    try {
      ckpt.vocabulary = Vocabulary::from_string(metadata_entry(ckpt, "vocab", "a kiln checkpoint"));
    } catch (const Error& e) {
      fail("checkpoint {}: {}", path, e.what());
    }
    ckpt.tokenizer = std::make_shared<WordTokenizer>(ckpt.vocabulary);
  }
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

Checkpoint read_checkpoint(const std::string& path) {
  return checkpoint_from(load_safetensors(path), path);
}

void write_checkpoint(const std::string& path, const nn::LanguageModel& model,
                      const Vocabulary& vocabulary, const NamedTensors& optimizer_state,
                      Metadata metadata) {
  write_checkpoint(path, model, WordTokenizer(vocabulary), optimizer_state, std::move(metadata));
}

void write_checkpoint(const std::string& path, const nn::LanguageModel& model,
                      const Tokenizer& tokenizer, const NamedTensors& optimizer_state,
                      Metadata metadata) {
  metadata["format"] = kCheckpointFormat;
  if (const std::string config = model.config_json(); !config.empty()) metadata["config"] = config;
  // A word-level vocabulary keeps the form checkpoints have always had (tools read it).
  if (const auto* word = dynamic_cast<const WordTokenizer*>(&tokenizer)) {
    metadata["vocab"] = word->vocabulary().to_string();
  } else {
    metadata["tokenizer"] = tokenizer.to_json();
  }
  NamedTensors tensors = model.state_dict();
  for (const auto& [name, tensor] : optimizer_state)
    tensors.emplace_back(std::string(kOptimizerPrefix) + name, tensor);
  save_safetensors(path, tensors, metadata);
}

std::string best_checkpoint_path(const std::string& path) {
  const std::filesystem::path p(path);
  return (p.parent_path() / (p.stem().string() + ".best" + p.extension().string())).string();
}

}  // namespace kiln::lm
