#include "examples/common/options.h"

#include <cmath>
#include <initializer_list>
#include <type_traits>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace kiln {

namespace {

// What a resumed run does with a saved setting whose flag is on its command line.
enum class Kind {
  model,     // must agree: the saved weights are this model's
  fixed,     // must agree: the saved data position, random streams or optimizer state need it
  training,  // overrides the saved value
};

struct Field {
  const char* flag;
  Kind kind;
  const char* help;
  std::initializer_list<const char*> choices = {};
};

// Every saved setting, in --help order. Options is TrainOptions or const TrainOptions.
template <typename Options, typename F>
void for_each_saved(Options& o, F&& f) {
  const Kind model = Kind::model, fixed = Kind::fixed, training = Kind::training;
  f(Field{"--d-model", model, "model width"}, o.d_model);
  f(Field{"--heads", model, "attention heads (must divide --d-model)"}, o.heads);
  f(Field{"--kv-heads", model, "key/value heads, GQA/MQA (0: as many as --heads; must divide it)"},
    o.kv_heads);
  f(Field{"--layers", model, "transformer blocks"}, o.layers);
  f(Field{"--ff", model, "feed-forward hidden size"}, o.ff);
  f(Field{"--max-seq-len", model,
          "longest sequence the model takes (--seq-len must not exceed it)"},
    o.max_seq_len);
  f(Field{"--dropout", model, "dropout after embedding + positions and on each sublayer output"},
    o.dropout);
  f(Field{"--attn-dropout", model, "dropout on the attention probabilities"}, o.attn_dropout);
  f(Field{"--activation", model, "feed-forward activation", {"relu", "gelu"}}, o.activation);
  f(Field{"--pos", model, "positions: added sinusoids or rotary (RoPE)", {"sinusoidal", "rope"}},
    o.pos);
  f(Field{"--norm", model, "LayerNorm after (post) or before (pre) each sublayer", {"post", "pre"}},
    o.norm);
  f(Field{"--seq-len", fixed, "training window length T (also eval_ppl's default)"}, o.seq_len);
  f(Field{"--batch-size", fixed, "training batch size B"}, o.batch_size);
  f(Field{"--seed", fixed, "seed of the initial weights, dropout masks and window order"}, o.seed);
  f(Field{"--optimizer", fixed, "optimizer", {"sgd", "adam", "adamw"}}, o.optimizer);
  f(Field{"--momentum", fixed, "SGD momentum"}, o.momentum);
  f(Field{"--lr", training, "peak learning rate"}, o.lr);
  f(Field{"--beta1", training, "Adam/AdamW beta1"}, o.beta1);
  f(Field{"--beta2", training, "Adam/AdamW beta2"}, o.beta2);
  f(Field{"--eps", training, "Adam/AdamW epsilon"}, o.eps);
  f(Field{"--weight-decay", training,
          "weight decay (Adam, SGD: L2 on every parameter; AdamW: decoupled, not on biases, "
          "LayerNorm and embedding)"},
    o.weight_decay);
  f(Field{"--clip", training, "clip the global gradient norm to this (0: no clipping)"}, o.clip);
  f(Field{"--grad-accum", training, "windows whose gradients are averaged into one step"},
    o.grad_accum);
  f(Field{"--shuffle", training, "visit the windows in a shuffled order each epoch"}, o.shuffle);
  f(Field{"--schedule",
          training,
          "learning-rate schedule",
          {"constant", "step", "cosine", "plateau"}},
    o.schedule);
  f(Field{"--warmup", training, "steps of linear learning-rate warm-up"}, o.warmup);
  f(Field{"--step-size", training,
          "step schedule: steps between decays (0: a third of --decay-steps)"},
    o.step_size);
  f(Field{"--gamma", training, "step schedule: factor per decay"}, o.gamma);
  f(Field{"--min-lr", training, "cosine and plateau schedules: the floor"}, o.min_lr);
  f(Field{"--factor", training, "plateau schedule: divide the lr by this when validation stalls"},
    o.factor);
  f(Field{"--patience", training, "plateau schedule: stalled validations tolerated"}, o.patience);
  f(Field{"--eval-every", training,
          "validate every N steps and at the end, keeping the best weights (0: no evaluation)"},
    o.eval_every);
  f(Field{"--eval-batch-size", training, "batch size of validation and the final perplexities"},
    o.eval_batch_size);
  f(Field{"--skip-nonfinite", training,
          "skip the update of a step whose loss or gradient norm is not finite (default: stop)"},
    o.skip_nonfinite);
}

// "--d-model" -> "d_model", the key in the saved JSON.
std::string key_of(std::string_view flag) {
  std::string key(flag.substr(2));
  for (char& c : key)
    if (c == '-') c = '_';
  return key;
}

}  // namespace

void add_train_flags(CLI::App& app, TrainOptions& o) {
  // A repeated flag takes its last value, so wrappers such as scripts/train.sh can pass defaults
  // that the user's own arguments, given after them, override.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--data", o.data,
                 "corpus folder with train.txt, valid.txt and test.txt (default: $KILN_DATA, "
                 "else data/wikitext-2)");
  app.add_option("--steps", o.steps,
                 "stop when the global step reaches N (0: no limit; a resumed run counts the "
                 "steps already done)")
      ->capture_default_str();
  app.add_option("--epochs", o.epochs, "stop after N epochs (0: no limit)")->capture_default_str();
  app.add_option("--time-budget", o.time_budget,
                 "stop after S seconds of training steps in this run, validation not counted "
                 "(0: no limit)")
      ->capture_default_str();
  app.add_option("--decay-steps", o.decay_steps,
                 "length of the lr schedule (0: epochs x steps per epoch, else --steps; a "
                 "resumed run keeps the saved length)")
      ->capture_default_str();
  app.add_option("--log-every", o.log_every, "one log line and one metrics row every N steps")
      ->capture_default_str();
  app.add_option("--save", o.save,
                 "checkpoint of the latest state (at the end, every --save-every steps and on "
                 "SIGINT/SIGTERM); best weights go to PATH with .best before the extension, the "
                 "loss curve to PATH with .curve.svg");
  app.add_option("--save-every", o.save_every, "also save every N steps (0: only at the end)")
      ->capture_default_str();
  app.add_option("--resume", o.resume, "continue the run saved in this checkpoint");
  app.add_option("--metrics", o.metrics, "write metrics to this file, one JSON object per line");
  app.add_option("--device", o.device, "cpu, cuda or cuda:N")->capture_default_str();
  app.add_option("--threads", o.threads,
                 "CPU threads (0: every core; a resumed run: the checkpoint's count)")
      ->capture_default_str();
  for_each_saved(o, [&](const Field& field, auto& member) {
    CLI::Option* option;
    if constexpr (std::is_same_v<std::remove_reference_t<decltype(member)>, bool>) {
      option = app.add_flag(field.flag, member, field.help);
    } else {
      option = app.add_option(field.flag, member, field.help)->capture_default_str();
    }
    if (field.choices.size() > 0)
      option->check(
          CLI::IsMember(std::vector<std::string>(field.choices.begin(), field.choices.end())));
  });
}

void check_options(const TrainOptions& o) {
  const auto positive = [](const char* flag, std::int64_t value) {
    KILN_CHECK(value > 0, "{} must be positive, got {}", flag, value);
  };
  const auto non_negative = [](const char* flag, double value) {
    KILN_CHECK(std::isfinite(value) && value >= 0, "{} must be non-negative, got {}", flag, value);
  };
  const auto probability = [](const char* flag, double value) {
    KILN_CHECK(value >= 0 && value < 1, "{} must be in [0, 1), got {}", flag, value);
  };
  positive("--d-model", o.d_model);
  positive("--heads", o.heads);
  KILN_CHECK(o.d_model % o.heads == 0, "--heads {} does not divide --d-model {}", o.heads,
             o.d_model);
  non_negative("--kv-heads", static_cast<double>(o.kv_heads));
  KILN_CHECK(o.kv_heads == 0 || o.heads % o.kv_heads == 0,
             "--kv-heads {} does not divide --heads {}", o.kv_heads, o.heads);
  positive("--layers", o.layers);
  positive("--ff", o.ff);
  positive("--max-seq-len", o.max_seq_len);
  probability("--dropout", o.dropout);
  probability("--attn-dropout", o.attn_dropout);
  KILN_CHECK(o.pos != "rope" || (o.d_model / o.heads) % 2 == 0,
             "--pos rope needs an even head size, but --d-model {} / --heads {} is odd", o.d_model,
             o.heads);
  positive("--seq-len", o.seq_len);
  KILN_CHECK(o.seq_len <= o.max_seq_len, "--seq-len {} exceeds --max-seq-len {}", o.seq_len,
             o.max_seq_len);
  positive("--batch-size", o.batch_size);
  positive("--grad-accum", o.grad_accum);
  positive("--eval-batch-size", o.eval_batch_size);
  positive("--log-every", o.log_every);
  for (const auto& [flag, value] : {std::pair{"--steps", o.steps},
                                    {"--epochs", o.epochs},
                                    {"--decay-steps", o.decay_steps},
                                    {"--save-every", o.save_every},
                                    {"--eval-every", o.eval_every},
                                    {"--warmup", o.warmup},
                                    {"--step-size", o.step_size},
                                    {"--patience", o.patience}})
    non_negative(flag, static_cast<double>(value));
  non_negative("--threads", o.threads);
  non_negative("--time-budget", o.time_budget);
  non_negative("--lr", o.lr);
  probability("--beta1", o.beta1);
  probability("--beta2", o.beta2);
  non_negative("--eps", o.eps);
  non_negative("--weight-decay", o.weight_decay);
  non_negative("--momentum", o.momentum);
  non_negative("--clip", o.clip);
  KILN_CHECK(std::isfinite(o.gamma) && o.gamma > 0, "--gamma must be positive, got {}", o.gamma);
  KILN_CHECK(o.min_lr >= 0 && o.min_lr <= o.lr, "--min-lr {} must be in [0, --lr {}]", o.min_lr,
             o.lr);
  KILN_CHECK(std::isfinite(o.factor) && o.factor >= 1, "--factor must be at least 1, got {}",
             o.factor);
  KILN_CHECK(o.save_every == 0 || !o.save.empty(), "--save-every {} needs --save PATH",
             o.save_every);
}

nn::TransformerConfig model_config(const TrainOptions& o, std::int64_t vocab) {
  nn::TransformerConfig c;
  c.vocab = vocab;
  c.d_model = o.d_model;
  c.heads = o.heads;
  c.kv_heads = o.kv_heads;
  c.layers = o.layers;
  c.ff = o.ff;
  c.max_seq_len = o.max_seq_len;
  c.dropout = o.dropout;
  c.attn_dropout = o.attn_dropout;
  c.activation = nn::parse_activation(o.activation);
  c.position = nn::parse_position(o.pos);
  c.norm = nn::parse_norm(o.norm);
  return c;
}

std::string saved_options_json(const TrainOptions& o) {
  nlohmann::json j = nlohmann::json::object();
  for_each_saved(o,
                 [&](const Field& field, const auto& member) { j[key_of(field.flag)] = member; });
  return j.dump();
}

std::vector<std::string> merge_saved_options(TrainOptions& o, std::string_view saved_json,
                                             const std::function<bool(std::string_view)>& given,
                                             std::string_view source) {
  const nlohmann::json saved = nlohmann::json::parse(saved_json, nullptr, false);
  KILN_CHECK(saved.is_object(), "{}: the saved training settings are not a JSON object", source);
  std::vector<std::string> notes;
  for_each_saved(o, [&](const Field& field, auto& member) {
    using T = std::remove_reference_t<decltype(member)>;
    const std::string key = key_of(field.flag);
    const auto it = saved.find(key);
    KILN_CHECK(it != saved.end(), "{}: the saved training settings lack '{}'", source, key);
    T value{};
    try {
      value = it->template get<T>();
    } catch (const nlohmann::json::exception&) {
      fail("{}: the saved setting '{}' is a {}, not a {}", source, key, it->type_name(),
           nlohmann::json(member).type_name());
    }
    if (!given(field.flag)) {
      member = value;
      return;
    }
    if (member == value) return;
    const std::string mine = nlohmann::json(member).dump(), theirs = it->dump();
    KILN_CHECK(field.kind == Kind::training,
               "{} {} disagrees with the checkpoint's {} ({}): drop the flag to continue that "
               "run, or start a new one without --resume",
               field.flag, mine, theirs, source);
    notes.push_back(
        fmt::format("{} {} overrides the checkpoint's {}: the run will differ from an "
                    "uninterrupted one",
                    field.flag, mine, theirs));
  });
  return notes;
}

std::int64_t saved_seq_len(std::string_view saved_json) {
  const nlohmann::json saved = nlohmann::json::parse(saved_json, nullptr, false);
  if (!saved.is_object()) return 0;
  const auto it = saved.find("seq_len");
  return it != saved.end() && it->is_number_integer() ? it->get<std::int64_t>() : 0;
}

}  // namespace kiln
