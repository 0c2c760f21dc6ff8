#include "tests/apps/crafted.h"

#include <stdexcept>

#include <nlohmann/json.hpp>

#include "programs.h"

namespace kiln::testing {

std::string train_base_checkpoint(const TempDir& dir, const std::string& extra_flags) {
  write_tiny_corpus(dir.path().string());
  const std::string path = dir.file("base.safetensors");
  const RunResult r =
      run(kTrainLm + " --data " + dir.path().string() + " " + kTinyFlags +
          " --threads 1 --steps 2 --eval-every 0 --save " + path + " " + extra_flags);
  if (r.status != 0) throw std::runtime_error("train_lm failed:\n" + r.output);
  return path;
}

void rewrite_checkpoint(const std::string& in, const std::string& out,
                        const std::function<void(Metadata&, NamedTensors&)>& edit) {
  SafetensorsFile file = load_safetensors(in);
  edit(file.metadata, file.tensors);
  save_safetensors(out, file.tensors, file.metadata);
}

void set_json_field(Metadata& metadata, const std::string& entry, const std::string& field,
                    const std::string& json_value) {
  nlohmann::ordered_json object = nlohmann::ordered_json::parse(metadata.at(entry));
  object[field] = nlohmann::ordered_json::parse(json_value);
  metadata[entry] = object.dump();
}

}  // namespace kiln::testing
