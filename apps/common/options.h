// TrainOptions: every setting of train_lm with its default, in one place, and the command-line
// flags that set them (CLI11). The defaults are the 15-minute recipe, searched on WikiText-2
// (docs/recipes.md): bench/torch_ref.py's model (TransformerConfig's defaults) with T 128 × B 16,
// the windows shuffled each epoch, dropout 0.3, word dropout 0.1, the adaptive softmax and adaptive
// input where the vocabulary is large, and a warm-up-stable-decay schedule fitted to the time
// budget.
// bench/compare_torch.sh names torch_ref.py's own recipe explicitly.
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
  // defaults are TransformerConfig's but for the recipe's regularization); vocab comes from the
  // corpus.
  nn::TransformerConfig model{.dropout = 0.3, .word_dropout = 0.1};
  // --adaptive-softmax auto (the default): model_config picks the cutoffs from the vocabulary
  // (auto_adaptive_cutoffs). False once the flag names cutoffs or none, or the model comes from a
  // preset, a resumed checkpoint or --init-from.
  bool adaptive_auto = true;
  // --input auto (the default): adaptive input when the output is the adaptive softmax (its
  // clusters tie the rare words' input and output vectors), else the embedding; false as above.
  bool input_auto = true;

  // ---- Data layout and seed: a resumed run must agree (the saved data position and random
  // streams depend on them).
  std::int64_t seq_len = 128;
  std::int64_t batch_size = 16;
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
  bool shuffle = true;
  std::string schedule = "wsd";
  std::int64_t warmup = 200;
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

// --adaptive-softmax auto's cutoffs: 2000,10000 for a vocabulary of at least kAutoAdaptiveVocab
// tokens, where the full softmax's head dominates a step (WikiText-2's 33,278 words, GPT-2's
// 50,257 tokens); none (the full softmax) below.
inline constexpr std::int64_t kAutoAdaptiveVocab = 20000;
std::vector<std::int64_t> auto_adaptive_cutoffs(std::int64_t vocab);

// The model the options describe (vocab from the corpus; auto's cutoffs and input resolved).
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
