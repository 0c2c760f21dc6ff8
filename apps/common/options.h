// TrainOptions: every setting of train_lm with its default, in one place (the defaults are
// bench/torch_ref.py's recipe, tuned here when the 15-minute CPU budget asks for it),
// and the command-line flags that set them (CLI11).
//
//   CLI::App app{"train_lm"};
//   TrainOptions options;
//   add_train_flags(app, options);
//   app.parse(argc, argv);
//   check_options(options);                   // kiln::Error naming the first bad flag
//
// The model's settings go into a checkpoint once, as the model's config
// (lm/transformer_checkpoint.h); every other saved setting (data layout, optimizer, schedule) as
// one JSON object, "train", keyed by its flag's name ("batch_size" for --batch-size). A resumed run
// takes every saved setting whose flag is not on its command line from the checkpoint; one that is
// given must agree for the model and data-layout flags (an error naming the flag) and overrides the
// saved value for the others (with a note, since the run then differs from an uninterrupted one).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/io/safetensors.h"
#include "nn/config.h"

namespace CLI {
class App;
}

namespace kiln {

struct TrainOptions {
  // ---- Run control: never saved; each run takes them from its own command line.
  std::string data;  // "" → $KILN_DATA, else datasets/wikitext-2
  std::int64_t steps = 0;
  std::int64_t epochs = 0;
  double time_budget = 900.0;    // seconds of training and periodic validation
  std::int64_t decay_steps = 0;  // 0: epochs × steps per epoch, else steps (saved on its own)
  std::int64_t log_every = 10;
  std::int64_t save_every = 0;
  std::string save, resume, metrics;
  std::string preset;     // "gpt2": GPT-2 small's model fields for those not given (apply_preset)
  std::string init_from;  // a checkpoint or Hugging Face folder whose weights start the run
  std::string device = "cpu";
  int threads = 0;  // 0: every core (a resumed run: the checkpoint's count)

  // ---- Model: a resumed run must agree. Its flags are generated from nn/config_fields.h (the
  // defaults are TransformerConfig's); vocab comes from the corpus.
  nn::TransformerConfig model;

  // ---- Data layout and seed: a resumed run must agree (the saved data position and random
  // streams depend on them).
  std::int64_t seq_len = 64;
  std::int64_t batch_size = 32;
  std::uint64_t seed = 1234;
  std::string optimizer = "adam";
  double momentum = 0.0;  // SGD only; 0 keeps no momentum state

  // ---- Training: a resumed run may override them.
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double clip = 1.0;  // global gradient-norm clip; 0: off
  std::int64_t grad_accum = 1;
  bool shuffle = false;
  std::string schedule = "constant";
  std::int64_t warmup = 0;
  std::int64_t step_size = 0;  // step schedule: 0 → a third of the decay steps
  double gamma = 0.1;
  double min_lr = 0.0;
  double factor = 4.0;
  std::int64_t patience = 0;
  double decay_fraction = 0.2;  // wsd: the fraction of the run that decays
  std::int64_t eval_every = 500;
  std::int64_t eval_batch_size = 10;
  bool skip_nonfinite = false;
  // auto (bf16 where the device multiplies bf16 natively, else f32: resolve_precision in
  // apps/common/train_setup.h), f32 or bf16 (core/autocast.h); saved resolved.
  std::string precision = "auto";
};

// Registers every flag on app, bound to options' members, with its default in --help.
void add_train_flags(CLI::App& app, TrainOptions& options);

// Sets the model fields of --preset (gpt2: GPT-2 small, 124M parameters with its 50257 tokens:
// d_model 768, 12 heads, 12 layers, ff 3072, max_seq_len 1024, learned positions, pre-LN,
// gelu_tanh, no embedding scale, dropout 0.1) whose flags were not given (given(flag) false).
void apply_preset(TrainOptions& options, const std::function<bool(std::string_view)>& given);

// Checks every value; a kiln::Error names the first bad flag, e.g. "--heads 3 does not divide
// --d-model 256".
void check_options(const TrainOptions& options);

// The model the options describe (vocab from the corpus).
nn::TransformerConfig model_config(const TrainOptions& options, std::int64_t vocab);

// The saved settings other than the model's as a JSON object (a checkpoint's "train" entry).
std::string saved_options_json(const TrainOptions& options);

// Merges a checkpoint's model config and "train" entry into options for a resumed run (see the
// top of this file); given(flag) says whether a flag was on the command line. Model keys in
// "train" (files written before the config was stored once) are ignored: the config is the
// model. Returns a note for each overridden setting; errors name the disagreeing flag and
// `source` (the checkpoint's path).
std::vector<std::string> merge_saved_options(TrainOptions& options,
                                             const nn::TransformerConfig& saved_model,
                                             std::string_view saved_json,
                                             const std::function<bool(std::string_view)>& given,
                                             std::string_view source);

// The training window length T a checkpoint's "train" entry records, or 0 if it has none; an
// error naming source (the checkpoint) when the entry is not JSON or T breaks --seq-len's rule.
std::int64_t saved_seq_len(std::string_view saved_json, std::string_view source);

// Every setting of a run, one "--flag value" line each, --threads as the run's count (threads):
// what the ranks of a data-parallel run compare at start-up, so a difference names its flag.
std::string options_text(const TrainOptions& options, int threads);
// The --precision a checkpoint's metadata records in its "train" entry: "f32" or "bf16"; "f32"
// when absent (checkpoints written before the flag, or by other programs) or not one of them.
std::string checkpoint_precision(const Metadata& metadata);

}  // namespace kiln
