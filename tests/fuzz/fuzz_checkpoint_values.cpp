// libFuzzer target for the meaning of a checkpoint, where fuzz_safetensors covers its bytes. It
// starts from a valid training checkpoint of a tiny model (written at start-up by train_lm's own
// writer) and reads each input as a list of edits to its config and metadata values: sizes near
// 2^31, 2^32, 2^53, 2^62, 2^63 and 2^64, negative, zero, huge layer and thread counts, wrong JSON
// types, missing fields. Then it loads the edited checkpoint as the programs do
// (apps/common: lm::checkpoint_from, lm::load_model, the saved settings and training state, the
// thread count) and runs the model once. A kiln::Error is the right answer to a bad value; a crash,
// any other exception, a hang, a leak, a sanitizer report or an allocation past libFuzzer's limit
// is a bug, and so is an accepted checkpoint that breaks a property below. kiln's memory limit is
// set to 64 MB (core/host_memory.h), so a config the machine could hold but the fuzzer cannot is
// refused like one the machine cannot.
//
// An input is a sequence of records of 10 bytes (a shorter tail is ignored):
//   byte 0      the value to edit (kFields, modulo its size)
//   byte 1      the new value's kind (kinds below, modulo their count)
//   bytes 2-9   a payload for the kinds that take one (little-endian)
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "apps/common/options.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "core/io/safetensors.h"
#include "core/kiln.h"
#include "core/threads.h"
#include "data/word_tokenizer.h"
#include "lm/evaluate.h"
#include "lm/train_state.h"
#include "lm/transformer_checkpoint.h"
#include "nn/transformer_layout.h"
#include "optim/adam.h"
#include "tests/fuzz/fuzz_check.h"

using kiln::fuzz::require;
using json = nlohmann::ordered_json;

namespace {

constexpr std::int64_t kMemoryLimit = 64 << 20;

// The values an edit may change: an entry of the metadata (a JSON object's field, or the whole
// value when field is empty).
struct Field {
  const char* entry;
  const char* field;
};

const std::vector<Field> kFields = {
    {"config", "vocab"},
    {"config", "d_model"},
    {"config", "heads"},
    {"config", "kv_heads"},
    {"config", "layers"},
    {"config", "ff"},
    {"config", "max_seq_len"},
    {"config", "dropout"},
    {"config", "attn_dropout"},
    {"config", "activation"},
    {"config", "norm"},
    {"config", "position"},
    {"threads", ""},
    {"step", ""},
    {"decay_steps", ""},
    {"data_position", "epoch"},
    {"data_position", "index"},
    {"data_position", "windows"},
    {"data_position", "shuffle_seed"},
    {"rng", "dropout"},
    {"optimizer", "name"},
    {"optimizer", "step"},
    {"schedule", "lr"},
    {"schedule", "best_loss"},
    {"schedule", "bad_evals"},
    {"history", "elapsed_s"},
    {"history", "best_step"},
    {"train", "d_model"},
    {"train", "layers"},
    {"train", "seq_len"},
    {"train", "batch_size"},
    {"train", "seed"},
    {"train", "optimizer"},
    {"train", "lr"},
    {"train", "beta2"},
    {"train", "eps"},
    {"train", "grad_accum"},
    {"train", "eval_batch_size"},
    {"train", "max_seq_len"},
    {"train", "dropout"},
    {"train", "patience"},
    {"valid_loss", ""},
};

std::uint64_t payload_of(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= std::uint64_t{p[i]} << (8 * i);
  return v;
}

// The new value as JSON, or null to remove the field.
json value_of(std::uint8_t kind, std::uint64_t payload) {
  constexpr std::int64_t k2to31 = std::int64_t{1} << 31, k2to32 = std::int64_t{1} << 32;
  constexpr std::int64_t k2to53 = std::int64_t{1} << 53, k2to62 = std::int64_t{1} << 62;
  const std::vector<json> fixed = {0,
                                   1,
                                   -1,
                                   2,
                                   3,
                                   4,
                                   7,
                                   8,
                                   64,
                                   1024,
                                   1025,
                                   100'000'000,
                                   1'000'000'000,
                                   k2to31 - 1,
                                   k2to31,
                                   k2to31 + 1,
                                   k2to32 - 1,
                                   k2to32,
                                   k2to32 + 1,
                                   k2to53,
                                   k2to53 + 1,
                                   k2to62,
                                   std::numeric_limits<std::int64_t>::max(),
                                   std::numeric_limits<std::int64_t>::min(),
                                   std::numeric_limits<std::uint64_t>::max(),
                                   1'000'000'000'000'000'000,
                                   -k2to62,
                                   0.5,
                                   -0.5,
                                   1.5,
                                   1e30,
                                   -1e30,
                                   1e-300,
                                   "",
                                   "lion",
                                   "relu",
                                   "pre",
                                   "rope",
                                   "nan",
                                   "inf",
                                   "-inf",
                                   "1e400",
                                   "Adam",
                                   "SGD",
                                   true,
                                   json::array(),
                                   json::object()};
  const std::size_t n = fixed.size();
  if (kind % (n + 4) < n) return fixed[kind % (n + 4)];
  switch (kind % (n + 4) - n) {
    case 0:
      return static_cast<std::int64_t>(payload);  // any int64
    case 1:
      return static_cast<std::int64_t>(payload % 70'000);  // a plausible size
    case 2: {
      double d;
      std::memcpy(&d, &payload, sizeof d);
      return std::isfinite(d) ? json(d) : json(std::to_string(d));
    }
    default:
      return nullptr;  // remove it
  }
}

// Applies one edit: JSON fields get the value; whole entries get its text (every metadata value
// is a string), a string value as it is.
void apply(kiln::Metadata& metadata, const Field& f, const json& value) {
  const auto text = [](const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
  if (*f.field == '\0') {
    if (value.is_null()) {
      metadata.erase(f.entry);
    } else {
      metadata[f.entry] = text(value);
    }
    return;
  }
  const auto it = metadata.find(f.entry);
  if (it == metadata.end()) return;
  json object = json::parse(it->second, nullptr, false);
  if (!object.is_object()) return;
  if (value.is_null()) {
    object.erase(f.field);
  } else {
    object[f.field] = value;
  }
  it->second = object.dump();
}

kiln::SafetensorsFile& base_checkpoint() {
  static kiln::SafetensorsFile* file = [] {
    kiln::nn::TransformerConfig config;
    config.vocab = 6, config.d_model = 4, config.heads = 2, config.layers = 1, config.ff = 8;
    config.max_seq_len = 8, config.dropout = 0.0;
    kiln::TrainOptions options;
    options.model = config;
    options.seq_len = 4, options.batch_size = 2;
    const kiln::nn::TransformerLM model(config);
    const kiln::Adam optimizer(model.named_parameters());
    kiln::lm::TrainState state;
    state.step = 3, state.decay_steps = 10, state.windows = 3, state.position = {0, 1};
    state.threads = 2, state.best_step = -1;
    const kiln::WordTokenizer tokenizer(
        kiln::Vocabulary({"<eos>", "<unk>", "the", "cat", "sat", "."}));
    const std::string path = std::filesystem::temp_directory_path() /
                             ("kiln-fuzz-checkpoint-" + std::to_string(::getpid()));
    kiln::lm::save_training_checkpoint(path, model, tokenizer, optimizer, state,
                                       {{"train", kiln::saved_options_json(options)}});
    auto* loaded = new kiln::SafetensorsFile(kiln::load_safetensors(path));
    std::filesystem::remove(path);
    return loaded;
  }();
  return *file;
}

// Runs `step`; a kiln::Error is a refusal (false), anything else escapes as the bug it is.
bool accepted(const std::function<void()>& step) {
  try {
    step();
    return true;
  } catch (const kiln::Error&) {
    return false;
  }
}

// The programs' reading of a checkpoint, as eval_ppl, generate and train_lm --resume do it.
void load_as_programs_do(kiln::SafetensorsFile file) {
  kiln::lm::TransformerCheckpoint ckpt;
  if (!accepted([&] {
        ckpt = kiln::lm::transformer_checkpoint_from(
            kiln::lm::checkpoint_from(std::move(file), "fuzz input"));
      }))
    return;
  std::unique_ptr<kiln::nn::TransformerLM> model;
  // An accepted checkpoint's model builds, and it is the model the config describes.
  model = kiln::lm::load_model(ckpt, kiln::Device::cpu());
  require(model->num_parameters() == kiln::nn::parameter_count(ckpt.config),
          "an accepted checkpoint builds the model of its config");
  // eval_ppl: the thread count (validated, not set: 1024 threads would only slow the fuzzer)
  // and the window length, then one evaluation.
  int threads = 0;
  if (accepted([&] { threads = kiln::lm::checkpoint_threads(ckpt); }))
    require(threads >= 0 && threads <= 1024, "an accepted thread count is one kiln runs");
  const auto train = ckpt.metadata.find("train");
  std::int64_t T = 0;
  if (train != ckpt.metadata.end() &&
      accepted([&] { T = kiln::saved_seq_len(train->second, "fuzz input"); }))
    require(T >= 0, "an accepted window length is 0 (none) or positive");
  if (T > 0 && T <= ckpt.config.max_seq_len) {
    std::vector<std::int64_t> tokens(24);
    for (std::size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = static_cast<std::int64_t>(i) % ckpt.config.vocab;
    kiln::lm::EvalOptions options;
    options.batch_size = 2, options.seq_len = T;
    accepted([&] { kiln::lm::evaluate(*model, tokens, options); });
  }
  // train_lm --resume: the saved settings, then the state and the optimizer's.
  if (train == ckpt.metadata.end()) return;
  kiln::TrainOptions options;
  if (!accepted([&] {
        kiln::merge_saved_options(
            options, ckpt.config, train->second, [](std::string_view) { return false; },
            "fuzz input");
        kiln::check_options(options);
      }))
    return;
  kiln::lm::TrainState state;
  if (accepted([&] { state = kiln::lm::read_train_state(ckpt); }))
    require(state.position.index >= 0 && state.position.index < state.windows &&
                state.threads >= 1 && state.threads <= 1024,
            "an accepted training state has its data position in an epoch and a thread count");
  accepted([&] { kiln::lm::read_optimizer_state(ckpt, "Adam"); });
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::testing::set_host_memory_bytes(kMemoryLimit);
  kiln::set_num_threads(1);  // libFuzzer runs one input at a time; OpenMP's team only costs here
  base_checkpoint();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  kiln::SafetensorsFile file = base_checkpoint();  // tensors are shared, the metadata copied
  for (std::size_t at = 0; at + 10 <= size; at += 10) {
    const Field& field = kFields[data[at] % kFields.size()];
    apply(file.metadata, field, value_of(data[at + 1], payload_of(data + at + 2)));
  }
  load_as_programs_do(std::move(file));
  return 0;
}
