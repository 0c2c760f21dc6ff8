#include "apps/common/options.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <type_traits>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "apps/common/flags.h"
#include "core/error.h"
#include "core/threads.h"
#include "nn/config_fields.h"

namespace kiln {

namespace {

// What a resumed run does with a saved setting whose flag is on its command line.
enum class Kind {
  fixed,     // must agree: the saved data position, random streams or optimizer state need it
  training,  // overrides the saved value
};

struct Field {
  const char* flag;
  Kind kind;
  const char* help;
  std::initializer_list<const char*> choices = {};
  FlagRange range = {};  // numeric settings only (apps/common/flags.h)
  // A setting added after checkpoints were written without it: their value, as JSON text
  // ("\"f32\"", "0.2").
  const char* unsaved = nullptr;
  // Overriding it on resume earns no note here: lm::Trainer tells whether the run changed
  // (--grad-accum: 2 ranks x 1 and 1 rank x 2 train alike).
  bool trainer_notes = false;
};

// The flag rule of a model field (nn/config_fields.h).
FlagRange flag_range(const nn::FieldRange& r) {
  return {.min = r.min, .max = r.max, .max_open = r.max_open, .zero = r.zero};
}

// The model fields that have a flag (vocab comes from the corpus), in --help order.
template <typename F>
void for_each_model_field(F&& f) {
  for (const nn::ConfigField& field : nn::config_fields())
    if (field.flag != nullptr) f(field);
}

// Every saved setting but the model's, in --help order. Options is TrainOptions or const
// TrainOptions.
template <typename Options, typename F>
void for_each_saved(Options& o, F&& f) {
  const Kind fixed = Kind::fixed, training = Kind::training;
  const FlagRange positive{.min = 1}, probability{.min = 0, .max = 1, .max_open = true};
  f(Field{"--seq-len", fixed, "training window length T (also eval_ppl's default)", {}, positive},
    o.seq_len);
  f(Field{"--batch-size", fixed, "training batch size B", {}, positive}, o.batch_size);
  f(Field{"--seed",
          fixed,
          "seed of the initial weights, dropout masks and window order",
          {},
          {.min = 0}},
    o.seed);
  f(Field{"--optimizer", fixed, "optimizer", {"sgd", "adam", "adamw"}}, o.optimizer);
  f(Field{"--momentum", fixed, "SGD momentum", {}, {.min = 0}}, o.momentum);
  f(Field{"--lr", training, "peak learning rate", {}, {.min = 0, .min_open = true}}, o.lr);
  f(Field{"--beta1", training, "Adam/AdamW beta1", {}, probability}, o.beta1);
  f(Field{"--beta2", training, "Adam/AdamW beta2", {}, probability}, o.beta2);
  f(Field{"--eps", training, "Adam/AdamW epsilon", {}, {.min = 0, .min_open = true}}, o.eps);
  f(Field{"--weight-decay",
          training,
          "weight decay (Adam, SGD: L2 on every parameter; AdamW: decoupled, not on biases, "
          "LayerNorm and embedding)",
          {},
          {.min = 0}},
    o.weight_decay);
  f(Field{"--clip",
          training,
          "clip the global gradient norm to this",
          {},
          {.min = 0, .zero = "no clipping"}},
    o.clip);
  f(Field{.flag = "--grad-accum",
          .kind = training,
          .help = "windows whose gradients are averaged into one step (at most the windows of an "
                  "epoch)",
          .range = positive,
          .trainer_notes = true},
    o.grad_accum);
  f(Field{"--shuffle", training,
          "visit the windows in a shuffled order each epoch (--no-shuffle: in order)"},
    o.shuffle);
  f(Field{"--schedule",
          training,
          "learning-rate schedule",
          {"constant", "step", "cosine", "plateau", "wsd"}},
    o.schedule);
  f(Field{"--warmup",
          training,
          "steps of linear learning-rate warm-up",
          {},
          {.min = 0, .zero = "no warm-up"}},
    o.warmup);
  f(Field{"--step-size",
          training,
          "step schedule: steps between decays",
          {},
          {.min = 0, .zero = "a third of --decay-steps"}},
    o.step_size);
  f(Field{"--gamma", training, "step schedule: factor per decay", {}, {.min = 0, .min_open = true}},
    o.gamma);
  f(Field{"--min-lr",
          training,
          "cosine, plateau and wsd schedules: the floor (at most --lr)",
          {},
          {.min = 0}},
    o.min_lr);
  f(Field{"--factor",
          training,
          "plateau schedule: divide the lr by this when validation stalls",
          {},
          {.min = 1}},
    o.factor);
  f(Field{"--patience",
          training,
          "plateau schedule: stalled validations tolerated",
          {},
          {.min = 0}},
    o.patience);
  f(Field{.flag = "--decay-fraction",
          .kind = training,
          .help = "wsd schedule (warm-up, stable, decay): the last fraction of the run, whose lr "
                  "falls linearly to --min-lr",
          .range = {.min = 0, .max = 1, .min_open = true},
          .unsaved = "0.2"},
    o.decay_fraction);
  f(Field{"--eval-every",
          training,
          "validate every N steps and at the end, keeping the best weights",
          {},
          {.min = 0, .zero = "no evaluation"}},
    o.eval_every);
  f(Field{"--eval-batch-size",
          training,
          "batch size of validation and the final perplexities",
          {},
          positive},
    o.eval_batch_size);
  f(Field{"--skip-nonfinite", training,
          "skip the update of a step whose loss or gradient norm is not finite (default: stop)"},
    o.skip_nonfinite);
  f(Field{.flag = "--precision",
          .kind = training,
          .help = "the matrix products: f32, or bf16 operands with float32 sums (weights, "
                  "gradients and optimizer state stay float32: docs/mixed-precision.md), or auto: "
                  "bf16 where the device multiplies bf16 natively (AVX512_BF16, a GPU's bf16 "
                  "tensor cores), else f32",
          .choices = {"auto", "f32", "bf16"},
          .unsaved = "\"f32\""},
    o.precision);
}

// The numeric run-control settings (never saved), in --help order.
template <typename Options, typename F>
void for_each_run_number(Options& o, F&& f) {
  f("--steps", "stop when the global step reaches N (a resumed run counts the steps already done)",
    FlagRange{.min = 0, .zero = "no limit"}, o.steps);
  f("--epochs", "stop after N epochs", FlagRange{.min = 0, .zero = "no limit"}, o.epochs);
  f("--time-budget", "stop after S seconds of training steps in this run, validation not counted",
    FlagRange{.min = 0, .zero = "no limit"}, o.time_budget);
  f("--decay-steps", "length of the lr schedule (a resumed run keeps the saved length)",
    FlagRange{.min = 0, .zero = "epochs x steps per epoch, else --steps"}, o.decay_steps);
  f("--log-every", "one log line and one metrics row every N steps", FlagRange{.min = 1},
    o.log_every);
  f("--save-every", "also save every N steps", FlagRange{.min = 0, .zero = "only at the end"},
    o.save_every);
  f("--threads", "CPU threads (a resumed run: the checkpoint's count)",
    thread_flag_range("every core"), o.threads);
}

// The saved settings' JSON object; errors name source and, for text that does not parse, the
// parser's reason (a number like 1e400).
nlohmann::json saved_settings(std::string_view saved_json, std::string_view source) {
  nlohmann::json saved;
  try {
    saved = nlohmann::json::parse(saved_json);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: the saved training settings are not valid JSON ({})", source, e.what());
  }
  KILN_CHECK(saved.is_object(), "{}: the saved training settings are not a JSON object", source);
  return saved;
}

// "--d-model" -> "d_model", the key in the saved JSON.
std::string key_of(std::string_view flag) {
  std::string key(flag.substr(2));
  for (char& c : key)
    if (c == '-') c = '_';
  return key;
}

// A saved setting read as T and checked by its flag's rule; errors name the checkpoint (source)
// and the key. JSON numbers convert silently in nlohmann (1.5 to 1, 2^64 − 1 to −1), so the
// JSON type is checked first.
template <typename T>
T saved_value(const nlohmann::json& j, const Field& field, const std::string& key,
              std::string_view source) {
  bool fits;
  if constexpr (std::is_same_v<T, bool>) {
    fits = j.is_boolean();
  } else if constexpr (std::is_same_v<T, std::string>) {
    fits = j.is_string();
  } else if constexpr (std::is_unsigned_v<T>) {
    fits = j.is_number_unsigned();
  } else if constexpr (std::is_integral_v<T>) {
    fits = j.is_number_integer() &&
           (!j.is_number_unsigned() ||
            j.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<T>::max()));
  } else {
    fits = j.is_number();
  }
  KILN_CHECK(fits, "{}: the saved setting '{}' is {}, not {}", source, key, j.dump(),
             std::is_same_v<T, bool>          ? "true or false"
             : std::is_same_v<T, std::string> ? "a string"
             : std::is_integral_v<T>          ? "an integer"
                                              : "a number");
  const T value = j.get<T>();
  if constexpr (std::is_same_v<T, std::string>) {
    const bool known =
        field.choices.size() == 0 ||
        std::find(field.choices.begin(), field.choices.end(), value) != field.choices.end();
    KILN_CHECK(known, "{}: the saved setting '{}' is '{}', not one of {} (as {} takes)", source,
               key, value, fmt::join(field.choices, ", "), field.flag);
  } else if constexpr (!std::is_same_v<T, bool>) {
    check_flag_value(field.flag, static_cast<double>(value), std::is_integral_v<T>, field.range,
                     source);
  }
  return value;
}

// The model fields whose default is auto (resolved by model_config): the option's switch, or
// nullptr for the others.
bool* auto_switch(TrainOptions& o, std::string_view flag) {
  if (flag == "--adaptive-softmax") return &o.adaptive_auto;
  if (flag == "--input") return &o.input_auto;
  return nullptr;
}

std::string auto_help(std::string_view flag) {
  if (flag == "--input")
    return "adaptive input when the output is the adaptive softmax, else the embedding";
  return fmt::format("{} for a vocabulary of at least {} tokens, else none",
                     nn::cutoffs_text(auto_adaptive_cutoffs(kAutoAdaptiveVocab)),
                     kAutoAdaptiveVocab);
}

}  // namespace

void add_train_flags(CLI::App& app, TrainOptions& o) {
  // A repeated flag takes its last value, so wrappers such as scripts/train.sh can pass defaults
  // that the user's own arguments, given after them, override.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  add_path_flag(app, "--data", o.data,
                "a folder with train.txt, valid.txt and test.txt (read word by word), or a "
                "prepared dataset (kiln-prepare; default: $KILN_DATA, else datasets/wikitext-2)");
  for_each_run_number(o, [&](const char* flag, const char* help, const FlagRange& range,
                             auto& member) { add_number_flag(app, flag, member, help, range); });
  add_path_flag(app, "--save", o.save,
                "checkpoint of the latest state (at the end, every --save-every steps and on "
                "SIGINT/SIGTERM); best weights go to PATH with .best before the extension, the "
                "loss curve to PATH with .curve.svg");
  add_path_flag(app, "--resume", o.resume, "continue the run saved in this checkpoint");
  add_path_flag(app, "--init-from", o.init_from,
                "start from these weights (a kiln checkpoint or a Hugging Face GPT-2 folder, "
                "docs/huggingface.md) with a fresh optimizer; the model flags are its config's");
  app.add_option("--preset", o.preset,
                 "model preset: gpt2 (GPT-2 small's architecture; model flags given override it)")
      ->check(CLI::IsMember({"gpt2"}));
  add_path_flag(app, "--metrics", o.metrics,
                "write metrics to this file, one JSON object per line");
  app.add_option("--device", o.device, "cpu, cuda or cuda:N")->capture_default_str();
  for_each_model_field([&](const nn::ConfigField& field) {
    if (bool* is_auto = auto_switch(o, field.flag)) {
      std::vector<std::string> choices(field.choices.begin(), field.choices.end());
      CLI::Option* option = app.add_option_function<std::string>(
                                   field.flag,
                                   [is_auto, &o, &field](const std::string& name) {
                                     *is_auto = name == "auto";
                                     if (!*is_auto) field.set_choice(o.model, name);
                                   },
                                   fmt::format("{}; auto: {}", field.help, auto_help(field.flag)))
                                ->default_str("auto");
      if (!choices.empty()) {
        choices.emplace_back("auto");
        option->check(CLI::IsMember(choices));
      }
    } else if (field.is_choice()) {
      CLI::Option* option =
          app.add_option_function<std::string>(
                 field.flag,
                 [&o, &field](const std::string& name) { field.set_choice(o.model, name); },
                 field.help)
              ->default_str(field.text(o.model));
      if (!field.choices.empty())
        option->check(
            CLI::IsMember(std::vector<std::string>(field.choices.begin(), field.choices.end())));
    } else if (field.integer) {
      add_number_flag(app, field.flag, o.model.*field.integer, field.help, flag_range(field.range));
    } else {
      add_number_flag(app, field.flag, o.model.*field.real, field.help, flag_range(field.range));
    }
  });
  for_each_saved(o, [&](const Field& field, auto& member) {
    using T = std::remove_reference_t<decltype(member)>;
    CLI::Option* option;
    if constexpr (std::is_same_v<T, bool>) {
      // A switch that is on by default is turned off by its --no- form.
      const std::string names =
          member ? fmt::format("{},!--no-{}", field.flag, field.flag + 2) : std::string(field.flag);
      option = app.add_flag(names, member, field.help);
    } else if constexpr (std::is_same_v<T, std::string>) {
      option = app.add_option(field.flag, member, field.help)->capture_default_str();
    } else {
      option = add_number_flag(app, field.flag, member, field.help, field.range);
    }
    if (field.choices.size() > 0)
      option->check(
          CLI::IsMember(std::vector<std::string>(field.choices.begin(), field.choices.end())));
  });
}

void apply_preset(TrainOptions& o, const std::function<bool(std::string_view)>& given) {
  if (o.preset.empty()) return;
  KILN_CHECK(o.preset == "gpt2", "--preset: unknown preset '{}'", o.preset);
  const nn::TransformerConfig gpt2{.d_model = 768,
                                   .heads = 12,
                                   .layers = 12,
                                   .ff = 3072,
                                   .max_seq_len = 1024,
                                   .dropout = 0.1,
                                   .attn_dropout = 0.1,
                                   .activation = nn::Activation::gelu_tanh,
                                   .norm = nn::NormPlacement::pre,
                                   .position = nn::PositionKind::learned,
                                   .embedding_scale = nn::EmbeddingScale::none};
  for (const char* flag : {"--adaptive-softmax", "--input"})  // the preset's output and input
    if (!given(flag)) *auto_switch(o, flag) = false;
  for_each_model_field([&](const nn::ConfigField& field) {
    if (given(field.flag)) return;
    if (field.is_choice()) {
      field.set_choice(o.model, field.get_choice(gpt2));
    } else if (field.integer) {
      o.model.*field.integer = gpt2.*field.integer;
    } else {
      o.model.*field.real = gpt2.*field.real;
    }
  });
}

void check_options(const TrainOptions& o) {
  // Each value by its flag's rule (values merged from a checkpoint were checked as they were
  // read, naming it; this covers options set in code).
  for_each_run_number(
      o, [](const char* flag, const char*, const FlagRange& range, const auto& member) {
        using T = std::remove_cvref_t<decltype(member)>;
        check_flag_value(flag, static_cast<double>(member), std::is_integral_v<T>, range);
      });
  for_each_model_field([&](const nn::ConfigField& field) {
    if (!field.is_choice())
      check_flag_value(
          field.flag,
          field.integer ? static_cast<double>(o.model.*field.integer) : o.model.*field.real,
          field.integer != nullptr, flag_range(field.range));
  });
  for_each_saved(o, [](const Field& field, const auto& member) {
    using T = std::remove_cvref_t<decltype(member)>;
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>)
      check_flag_value(field.flag, static_cast<double>(member), std::is_integral_v<T>, field.range);
  });
  // Then the rules that tie flags together.
  const nn::TransformerConfig& m = o.model;
  KILN_CHECK(m.d_model % m.heads == 0, "--heads {} does not divide --d-model {}", m.heads,
             m.d_model);
  KILN_CHECK(m.kv_heads == 0 || m.heads % m.kv_heads == 0,
             "--kv-heads {} does not divide --heads {}", m.kv_heads, m.heads);
  KILN_CHECK(m.position != nn::PositionKind::rope || m.d_head() % 2 == 0,
             "--pos rope needs an even head size, but --d-model {} / --heads {} is odd", m.d_model,
             m.heads);
  KILN_CHECK(o.seq_len <= m.max_seq_len, "--seq-len {} exceeds --max-seq-len {}", o.seq_len,
             m.max_seq_len);
  KILN_CHECK(o.min_lr <= o.lr, "--min-lr {} must be in [0, --lr {}]", o.min_lr, o.lr);
  KILN_CHECK(o.save_every == 0 || !o.save.empty(), "--save-every {} needs --save PATH",
             o.save_every);
}

std::vector<std::int64_t> auto_adaptive_cutoffs(std::int64_t vocab) {
  if (vocab < kAutoAdaptiveVocab) return {};
  return {2000, 10000};
}

nn::TransformerConfig model_config(const TrainOptions& o, std::int64_t vocab) {
  nn::TransformerConfig c = o.model;
  c.vocab = vocab;
  if (o.adaptive_auto) c.adaptive_cutoffs = auto_adaptive_cutoffs(vocab);
  if (o.input_auto) c.input = c.adaptive() ? nn::InputKind::adaptive : nn::InputKind::embedding;
  return c;
}

std::string saved_options_json(const TrainOptions& o) {
  nlohmann::json j = nlohmann::json::object();
  for_each_saved(o,
                 [&](const Field& field, const auto& member) { j[key_of(field.flag)] = member; });
  return j.dump();
}

std::vector<std::string> merge_saved_options(TrainOptions& o,
                                             const nn::TransformerConfig& saved_model,
                                             std::string_view saved_json,
                                             const std::function<bool(std::string_view)>& given,
                                             std::string_view source) {
  const nlohmann::json saved = saved_settings(saved_json, source);
  // The model: its flags must agree with the saved config; the rest take its values.
  nn::TransformerConfig asked = o.model, kept = saved_model;
  asked.kv_heads = asked.kv();  // --kv-heads 0 and the count it stands for agree
  kept.kv_heads = kept.kv();
  for_each_model_field([&](const nn::ConfigField& field) {
    const std::string mine = field.text(asked), theirs = field.text(kept);
    if (const bool* is_auto = auto_switch(o, field.flag); is_auto && *is_auto) return;
    KILN_CHECK(!given(field.flag) || mine == theirs,
               "{} {} disagrees with the checkpoint's {} ({}): drop the flag to continue that "
               "run, or start a new one without --resume",
               field.flag, mine, theirs, source);
  });
  const std::int64_t vocab = o.model.vocab;
  o.model = saved_model;
  o.adaptive_auto = o.input_auto = false;  // the checkpoint's output and input
  o.model.vocab = vocab;
  std::vector<std::string> notes;
  for_each_saved(o, [&](const Field& field, auto& member) {
    using T = std::remove_reference_t<decltype(member)>;
    const std::string key = key_of(field.flag);
    const auto it = saved.find(key);
    KILN_CHECK(it != saved.end() || field.unsaved != nullptr,
               "{}: the saved training settings lack '{}'", source, key);
    const nlohmann::json entry = it != saved.end() ? *it : nlohmann::json::parse(field.unsaved);
    const T value = saved_value<T>(entry, field, key, source);
    if (!given(field.flag)) {
      member = value;
      return;
    }
    if (member == value) return;
    const std::string mine = nlohmann::json(member).dump(), theirs = entry.dump();
    KILN_CHECK(field.kind != Kind::fixed,
               "{} {} disagrees with the checkpoint's {} ({}): drop the flag to continue that "
               "run, or start a new one without --resume",
               field.flag, mine, theirs, source);
    if (field.trainer_notes) return;
    notes.push_back(
        fmt::format("{} {} overrides the checkpoint's {}: the run will differ from an "
                    "uninterrupted one",
                    field.flag, mine, theirs));
  });
  return notes;
}

std::int64_t saved_seq_len(std::string_view saved_json, std::string_view source) {
  const nlohmann::json saved = saved_settings(saved_json, source);
  const auto it = saved.find("seq_len");
  if (it == saved.end()) return 0;
  std::int64_t seq_len = 0;
  const TrainOptions defaults;
  for_each_saved(defaults, [&](const Field& field, const auto&) {
    if (std::string_view(field.flag) == "--seq-len")
      seq_len = saved_value<std::int64_t>(*it, field, "seq_len", source);
  });
  return seq_len;
}

std::string options_text(const TrainOptions& o, int threads) {
  std::string text = fmt::format("--data {}\n--save {}\n--resume {}\n--metrics {}\n--device {}\n",
                                 o.data, o.save, o.resume, o.metrics, o.device);
  for_each_run_number(o, [&](const char* flag, const char*, const FlagRange&, const auto& member) {
    if (std::string_view(flag) != "--threads") text += fmt::format("{} {}\n", flag, member);
  });
  text += fmt::format("--threads {}\n", threads);
  for_each_model_field([&](const nn::ConfigField& field) {
    text += fmt::format("{} {}\n", field.flag, field.text(o.model));
  });
  for_each_saved(o, [&](const Field& field, const auto& member) {
    text += fmt::format("{} {}\n", field.flag, nlohmann::json(member).dump());
  });
  return text;
}

std::string checkpoint_precision(const Metadata& metadata) {
  const auto train = metadata.find("train");
  if (train == metadata.end()) return "f32";
  const nlohmann::json saved = nlohmann::json::parse(train->second, nullptr, false);
  if (!saved.is_object()) return "f32";
  const auto it = saved.find("precision");
  return it != saved.end() && it->is_string() && (*it == "f32" || *it == "bf16")
             ? it->get<std::string>()
             : "f32";
}

}  // namespace kiln
