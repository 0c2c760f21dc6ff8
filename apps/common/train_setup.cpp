#include "apps/common/train_setup.h"

#include <chrono>
#include <filesystem>

#include <fmt/format.h>

#include "apps/common/loss_curve.h"
#include "apps/common/text_data.h"
#include "core/autocast.h"
#include "core/generator.h"
#include "core/host_memory.h"
#include "core/io/output_file.h"
#include "core/native_bf16.h"
#include "nn/transformer_layout.h"
#include "optim/adam.h"
#include "optim/sgd.h"

namespace kiln {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Corpus load_corpus(const std::string& data_dir, const Vocabulary* vocabulary) {
  const auto start = std::chrono::steady_clock::now();
  const Corpus corpus = vocabulary ? Corpus(data_dir, *vocabulary) : Corpus(data_dir);
  const std::int64_t unknown =
      corpus.train().unknown + corpus.valid().unknown + corpus.test().unknown;
  fmt::print("data {}: vocab {} | train {} valid {} test {} tokens | read in {:.2f}s\n", data_dir,
             corpus.vocabulary().size(), corpus.train().ids.size(), corpus.valid().ids.size(),
             corpus.test().ids.size(), seconds_since(start));
  print_byte_order_marks(corpus, data_dir);
  if (unknown > 0)
    fmt::print(
        "warning: {} words are not in the checkpoint's vocabulary and read as <unk>: is "
        "this the corpus the run started on?\n",
        unknown);
  // Only line ends (<eos>) to predict: a model learns that at once, to a perplexity of 1.00.
  KILN_CHECK(corpus.train().ids.size() > static_cast<std::size_t>(corpus.train().lines),
             "--data {}: train.txt has {} lines but no words, nothing to learn", data_dir,
             corpus.train().lines);
  return corpus;
}

void make_parent_folder(const std::string& path, std::string_view flag) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (parent.empty()) return;
  std::error_code error;
  std::filesystem::create_directories(parent, error);
  KILN_CHECK(!error, "{} {}: cannot create its folder {}: {}", flag, path, parent.string(),
             error.message());
}

void check_save_path(const std::string& save, bool curve) {
  check_output_file(save, "--save");
  check_output_file(lm::best_checkpoint_path(save), "--save (its best weights)");
  if (curve) check_output_file(curve_path(save), "--save (its loss curve)");
  make_parent_folder(save, "--save");
  check_folder_writable(save, "--save");
}

void print_byte_order_marks(const Corpus& corpus, const std::string& data_dir) {
  for (const char* split : {"train", "valid", "test"})
    if (corpus.split(split).byte_order_mark)
      fmt::print(
          "note: {}/{}.txt begins with a UTF-8 byte-order mark, skipped (it marks the "
          "encoding, it is not part of the first word)\n",
          data_dir, split);
}

std::unique_ptr<nn::TransformerLM> make_model(const TrainOptions& o, std::int64_t vocab,
                                              Device device) {
  const nn::TransformerConfig config = model_config(o, vocab);
  const std::string model = fmt::format(
      "the model of --d-model {} --heads {} --layers {} --ff {} --max-seq-len {} (vocabulary {})",
      config.d_model, config.heads, config.layers, config.ff, config.max_seq_len, vocab);
  try {
    config.validate();
    // Weights, gradients and up to two optimizer states, and the positional table.
    check_host_memory(nn::model_bytes(config, 3), "training it");
  } catch (const Error& e) {
    fail("{}: {}", model, e.what());
  }
  manual_seed(o.seed);
  auto lm = std::make_unique<nn::TransformerLM>(config);
  lm->to(device);
  return lm;
}

std::unique_ptr<Optimizer> make_optimizer(const nn::TransformerLM& model, const TrainOptions& o) {
  if (o.optimizer == "sgd")
    return std::make_unique<Sgd>(
        model.named_parameters(),
        SgdOptions{.lr = o.lr, .momentum = o.momentum, .weight_decay = o.weight_decay});
  if (o.optimizer == "adamw")
    return std::make_unique<AdamW>(weight_decay_groups(model.named_parameters(), o.weight_decay),
                                   AdamWOptions{.lr = o.lr,
                                                .beta1 = o.beta1,
                                                .beta2 = o.beta2,
                                                .eps = o.eps,
                                                .weight_decay = o.weight_decay});
  return std::make_unique<Adam>(model.named_parameters(),
                                AdamOptions{.lr = o.lr,
                                            .beta1 = o.beta1,
                                            .beta2 = o.beta2,
                                            .eps = o.eps,
                                            .weight_decay = o.weight_decay});
}

PrecisionChoice resolve_precision(std::string_view flag, Device device) {
  if (flag != "auto") return {std::string(flag), {}};
  const NativeBf16 bf16 = native_bf16(device);
  return {bf16.native ? "bf16" : "f32", fmt::format("auto on {}: {}", device.str(), bf16.why)};
}

lm::TrainerOptions trainer_options(const TrainOptions& o, Device device, int threads) {
  return {.batch_size = o.batch_size,
          .seq_len = o.seq_len,
          .seed = o.seed,
          .grad_accum = o.grad_accum,
          .clip = o.clip,
          .shuffle = o.shuffle,
          .skip_nonfinite = o.skip_nonfinite,
          .precision = parse_precision(resolve_precision(o.precision, device).name),
          .schedule = {.kind = parse_schedule_kind(o.schedule),
                       .lr = o.lr,
                       .warmup_steps = o.warmup,
                       .step_size = o.step_size,
                       .gamma = o.gamma,
                       .min_lr = o.min_lr,
                       .factor = o.factor,
                       .patience = o.patience,
                       .decay_fraction = o.decay_fraction},
          .decay_steps = o.decay_steps,
          .steps = o.steps,
          .epochs = o.epochs,
          .time_budget = o.time_budget,
          .log_every = o.log_every,
          .eval_every = o.eval_every,
          .eval_batch_size = o.eval_batch_size,
          .save_every = o.save_every,
          .save = o.save,
          .settings = {{"train", saved_options_json(o)}},
          .device = device,
          .threads = threads};
}

void print_model(const nn::TransformerLM& model) {
  const nn::TransformerConfig& c = model.config();
  fmt::print(
      "model: d_model {} | heads {} (kv {}) | layers {} | ff {} | {}-LN | {} | {} | "
      "dropout {} | {} parameters (embedding {}){}\n",
      c.d_model, c.heads, c.kv(), c.layers, c.ff, nn::name_of(c.norm), nn::name_of(c.position),
      nn::name_of(c.activation), c.dropout, model.num_parameters(),
      model.embedding ? model.embedding->weight.numel() : 0,
      c.adaptive()
          ? fmt::format(" | adaptive softmax {} div {} | input {}",
                        nn::cutoffs_text(c.adaptive_cutoffs), c.adaptive_div, nn::name_of(c.input))
          : "");
}

void order_by_frequency(nn::TransformerLM& model, const Dataset& data) {
  if (!model.adaptive) return;
  const std::int64_t vocab = model.config().vocab;
  const TokenView train = data.tokens("train").ids;
  std::vector<std::int64_t> counts(static_cast<std::size_t>(vocab), 0);
  for (std::int64_t i = 0; i < train.size(); ++i) {
    const std::int64_t id = train[i];
    KILN_CHECK(id >= 0 && id < vocab, "{}: train token {} is id {}, outside the vocabulary of {}",
               data.describe(), i, id, vocab);
    ++counts[static_cast<std::size_t>(id)];
  }
  model.adaptive->set_order(nn::AdaptiveSoftmax::frequency_order(counts));
}

void print_training(const lm::Trainer& trainer, const TrainOptions& o, std::string_view optimizer,
                    const std::string& resumed_path) {
  const lm::TrainState& state = trainer.state();
  fmt::print(
      "training: {} lr {} | {} schedule (warm-up {}, decay steps {}) | B {} x T {} x {} "
      "| {} steps per epoch | clip {} | device {} | precision {} | stop at: steps {} epochs {} "
      "time budget {}s\n",
      optimizer, o.lr, o.schedule, o.warmup, state.decay_steps, o.batch_size, o.seq_len,
      o.grad_accum, trainer.steps_per_epoch(), o.clip, trainer.options().device, o.precision,
      o.steps, o.epochs, o.time_budget);
  if (trainer.world_size() > 1)
    fmt::print("data parallel: {} ranks, each {} of the step's {} windows\n", trainer.world_size(),
               o.grad_accum, o.grad_accum * trainer.world_size());
  if (!resumed_path.empty())
    fmt::print("resumed from {} at step {} (epoch {}, window {} of {})\n", resumed_path, state.step,
               state.position.epoch + 1, state.position.index, trainer.windows());
}

void print_stop(const lm::Trainer& trainer, lm::StopReason reason) {
  const lm::TrainState& state = trainer.state();
  const char* flag = reason == lm::StopReason::steps    ? "--steps"
                     : reason == lm::StopReason::epochs ? "--epochs"
                                                        : "--time-budget";
  fmt::print(
      "stopped by {} at step {} ({:.2f} epochs) after {} steps in this run{}\n", flag, state.step,
      static_cast<double>(state.position.epoch) +
          static_cast<double>(state.position.index) / static_cast<double>(trainer.windows()),
      state.step - trainer.first_step(),
      trainer.skipped() > 0 ? fmt::format(", {} skipped as non-finite", trainer.skipped()) : "");
}

void print_result(const lm::Trainer& trainer, const std::optional<lm::FinalResult>& result,
                  std::string_view signal, const Dataset* data) {
  const lm::TrainerOptions& o = trainer.options();
  if (!result) {
    fmt::print("interrupted by {} at step {}: {}\n", signal, trainer.state().step,
               o.save.empty() ? std::string("nothing saved (no --save)")
                              : fmt::format("saved the state to {} (continue with --resume {})",
                                            o.save, o.save));
  } else if (o.eval_every > 0) {
    fmt::print(
        "final perplexities from the weights of step {} (valid {}, test {:.1f}s):\n", result->step,
        result->validated_here ? "as validated" : fmt::format("{:.1f}s", result->valid.seconds),
        result->test.seconds);
    if (data != nullptr) {
      print_text_measures("valid", result->valid.loss, data->tokens("valid"));
      print_text_measures("test", result->test.loss, data->tokens("test"));
    }
    fmt::print("valid ppl {}\n", lm::format_ppl(result->valid.loss));
    fmt::print("test ppl {}\n", lm::format_ppl(result->test.loss));
  }
  fmt::print("RESULT train_tokens_per_sec {:.1f} steps {} seconds {:.1f}\n",
             trainer.train_seconds() > 0
                 ? static_cast<double>(trainer.run_tokens()) / trainer.train_seconds()
                 : 0.0,
             trainer.state().step, trainer.train_seconds());
}

}  // namespace kiln
