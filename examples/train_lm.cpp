// train_lm: trains a word-level transformer language model on WikiText-2 (or any folder with
// train.txt, valid.txt and test.txt) and reports its validation and test perplexity.
//
//   build/examples/train_lm                                      # the defaults: 15 minutes
//   build/examples/train_lm --save runs/lm.safetensors --metrics runs/lm.metrics.jsonl
//   build/examples/train_lm --resume runs/lm.safetensors --save runs/lm.safetensors --steps 5000
//   build/examples/eval_ppl --checkpoint runs/lm.best.safetensors --split test
//
// It prints its environment, the model and the data, a log line every --log-every steps (a live
// line on a terminal), a line per validation, and ends with (DESIGN.md's interface contract)
//
//   valid ppl <x>         both from the best-by-validation weights, by examples/common/evaluate
//   test ppl <x>          (eval_ppl on PATH.best prints the same numbers)
//   RESULT train_tokens_per_sec <x> steps <n> seconds <s>
//
// where steps is the global step reached and seconds this run's budgeted time: its training
// steps, without validation (as ../shared/bench/torch_ref.py counts its --time-budget, so the
// two programs' budgets buy the same training). SIGINT or SIGTERM save the state at the next step
// boundary and exit 0.
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/build_info.h"
#include "core/generator.h"
#include "core/host_memory.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduction.h"
#include "core/output_file.h"
#include "core/threads.h"
#include "data/batches.h"
#include "data/corpus.h"
#include "examples/common/checkpoint.h"
#include "examples/common/evaluate.h"
#include "examples/common/loss_curve.h"
#include "examples/common/metrics.h"
#include "examples/common/options.h"
#include "examples/common/program.h"
#include "examples/common/progress.h"
#include "examples/common/signals.h"
#include "examples/common/train_state.h"
#include "nn/transformer_layout.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "optim/sgd.h"

using namespace kiln;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The dropout masks' seed, kept apart from the weights' (the same Philox key would draw the
// same numbers for both).
constexpr std::uint64_t kDropoutSeedTag = 0x64726f70ULL << 32;  // "drop"

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

// The schedule of the flags; cosine (and step without --step-size) need a length.
ScheduleConfig schedule_config(const TrainOptions& o, std::int64_t decay_steps) {
  const ScheduleKind kind = parse_schedule_kind(o.schedule);
  const bool needs_length =
      kind == ScheduleKind::cosine || (kind == ScheduleKind::step && o.step_size == 0);
  KILN_CHECK(!needs_length || decay_steps > 0,
             "--decay-steps: the {} schedule needs a length; give --decay-steps, --epochs or "
             "--steps",
             o.schedule);
  return {.kind = kind,
          .lr = o.lr,
          .warmup_steps = o.warmup,
          .step_size = o.step_size > 0 ? o.step_size : std::max<std::int64_t>(1, decay_steps / 3),
          .gamma = o.gamma,
          .min_lr = o.min_lr,
          .factor = o.factor,
          .patience = o.patience};
}

// Copies of the weights on the CPU (the best-by-validation ones outlive later steps).
NamedTensors weights_copy(const nn::TransformerLM& model) {
  NamedTensors copy;
  for (const auto& [name, tensor] : model.state_dict())
    copy.emplace_back(name, tensor.detach().clone().to(Device::cpu()));
  return copy;
}

bool weights_finite(const nn::TransformerLM& model) {
  NoGradGuard no_grad;
  for (const Tensor& p : model.parameters())
    if (!std::isfinite(p.sum().item<double>())) return false;
  return true;
}

// The loss of the model (in eval mode, without autograd or dropout draws, so a resumed run stays
// bit-exact) on one batch: a check that the weights are usable, since finite weights can still
// overflow a forward pass (weights of 1e30 after one step at --lr 1e30).
double probe_loss(nn::TransformerLM& model, const Batch& batch) {
  NoGradGuard no_grad;
  model.eval();
  const double loss = model.loss(batch.inputs, batch.targets).item<double>();
  model.train();
  return loss;
}

void make_parent_folder(const std::string& path, std::string_view flag) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (parent.empty()) return;
  std::error_code error;
  std::filesystem::create_directories(parent, error);
  KILN_CHECK(!error, "{} {}: cannot create its folder {}: {}", flag, path, parent.string(),
             error.message());
}

// The model of the flags (vocab from the corpus), checked to fit int64 arithmetic and this
// machine's memory with its gradients and the optimizer's state, before it is built.
nn::TransformerConfig checked_model_config(const TrainOptions& o, std::int64_t vocab) {
  const nn::TransformerConfig config = model_config(o, vocab);
  const std::string model = fmt::format(
      "the model of --d-model {} --heads {} --layers {} --ff {} --max-seq-len {} (vocabulary {})",
      o.d_model, o.heads, o.layers, o.ff, o.max_seq_len, vocab);
  try {
    config.validate();
    // Weights, gradients and up to two optimizer states, and the positional table.
    check_host_memory(nn::model_bytes(config, 3), "training it");
  } catch (const Error& e) {
    fail("{}: {}", model, e.what());
  }
  return config;
}

// The best-by-validation weights a resumed run starts from: the best of the resumed run's .best
// file and, when it holds the same model, the .best file this run will write (an older
// checkpoint resumed into the same --save), by the validation loss each file records. The loss
// must come from the file whose weights are kept: the resumed checkpoint's own record may be
// older than the .best beside it.
struct BestWeights {
  NamedTensors weights;
  double loss = std::numeric_limits<double>::infinity();
  std::int64_t step = -1;
  std::string path;  // the file they came from; empty: none
};

BestWeights resumed_best_weights(const Checkpoint& resumed, const TrainState& state,
                                 const std::string& best_path, std::vector<std::string>& notes) {
  BestWeights best;
  std::vector<std::string> candidates = {best_checkpoint_path(resumed.path)};
  if (!best_path.empty() && best_path != candidates[0]) candidates.push_back(best_path);
  for (const std::string& path : candidates) {
    if (!std::filesystem::exists(path)) {
      if (path == candidates[0] && state.best_step >= 0)
        notes.push_back(fmt::format("warning: {} is missing: the best weights start afresh", path));
      continue;
    }
    const Checkpoint file = read_checkpoint(path);
    if (file.metadata.at("config") != resumed.metadata.at("config") ||
        file.vocabulary.words() != resumed.vocabulary.words()) {
      notes.push_back(fmt::format(
          "warning: {} holds another model than {}; it is not a candidate for the best weights",
          path, resumed.path));
      continue;
    }
    const double loss = saved_valid_loss(file).value_or(state.schedule.best_loss);
    if (!(loss < best.loss)) continue;
    std::int64_t step = -1;
    if (const auto it = file.metadata.find("step"); it != file.metadata.end())
      std::from_chars(it->second.data(), it->second.data() + it->second.size(), step);
    best = {file.model, loss, step, path};
  }
  return best;
}

int train(int argc, char** argv) {
  install_stop_handlers();
  CLI::App app{
      "train_lm: trains a word-level transformer language model; the defaults are "
      "../shared/bench/torch_ref.py's recipe, trained for 15 minutes"};
  TrainOptions o;
  add_train_flags(app, o);
  CLI11_PARSE(app, argc, argv);
  const auto given = [&](std::string_view flag) { return app.count(std::string(flag)) > 0; };

  // A resumed run takes the checkpoint's settings for every flag not given.
  std::optional<Checkpoint> resumed;
  TrainState state;
  std::vector<std::string> notes;
  if (!o.resume.empty()) {
    resumed = read_checkpoint(o.resume);
    const auto train_entry = resumed->metadata.find("train");
    KILN_CHECK(train_entry != resumed->metadata.end(),
               "--resume {}: not a training checkpoint (no saved training settings)", o.resume);
    notes = merge_saved_options(o, train_entry->second, given, o.resume);
    state = read_train_state(*resumed);
  }
  check_options(o);
  // Every file the run will replace, before it trains for an hour to find one it must not.
  if (!o.save.empty()) {
    check_output_file(o.save, "--save");
    check_output_file(best_checkpoint_path(o.save), "--save (its best weights)");
    check_output_file(curve_path(o.save), "--save (its loss curve)");
  }
  const Device device = device_from_flag(o.device);

  const int threads = resumed && !given("--threads") ? state.threads
                      : o.threads > 0                ? o.threads
                                                     : num_threads();
  set_num_threads(threads);
  release_stop_signals();
  fmt::print("{}\n", environment_summary());
  for (const std::string& note : notes) fmt::print("note: {}\n", note);
  if (resumed && threads != state.threads)
    fmt::print(
        "warning: {} was trained with {} threads and this run uses {}: the results may "
        "differ in the last bits from an uninterrupted run\n",
        o.resume, state.threads, threads);

  // Data: the checkpoint's vocabulary for a resumed run, so every word keeps its id.
  const std::string data_dir =
      resolve_data_dir(o.data.empty() ? std::nullopt : std::optional(o.data));
  const auto load_start = Clock::now();
  const Corpus corpus = resumed ? Corpus(data_dir, resumed->vocabulary) : Corpus(data_dir);
  const std::int64_t unknown =
      corpus.train().unknown + corpus.valid().unknown + corpus.test().unknown;
  fmt::print("data {}: vocab {} | train {} valid {} test {} tokens | read in {:.2f}s\n", data_dir,
             corpus.vocabulary().size(), corpus.train().ids.size(), corpus.valid().ids.size(),
             corpus.test().ids.size(), seconds_since(load_start));
  if (unknown > 0)
    fmt::print(
        "warning: {} words are not in the checkpoint's vocabulary and read as <unk>: is "
        "this the corpus the run started on?\n",
        unknown);
  // Only line ends (<eos>) to predict: a model learns that at once, to a perplexity of 1.00.
  KILN_CHECK(corpus.train().ids.size() > static_cast<std::size_t>(corpus.train().lines),
             "--data {}: train.txt has {} lines but no words, nothing to learn", data_dir,
             corpus.train().lines);
  const LanguageModelBatches batches(corpus.train().ids, o.batch_size, o.seq_len);
  const std::int64_t windows = batches.num_windows();
  KILN_CHECK(o.grad_accum <= windows,
             "--grad-accum {} exceeds the {} windows of an epoch (a step never spans epochs)",
             o.grad_accum, windows);
  const std::int64_t steps_per_epoch = (windows + o.grad_accum - 1) / o.grad_accum;

  // Model, optimizer and schedule: fresh, or exactly as saved.
  manual_seed(o.seed);
  std::unique_ptr<nn::TransformerLM> model;
  if (resumed) {
    model = load_model(*resumed, device);
    model->dropout_generator().set_state(state.dropout_seed, state.dropout_offset);
    KILN_CHECK(state.windows == windows,
               "--resume {}: the run had {} windows per epoch but {} gives {}: not the same corpus",
               o.resume, state.windows, data_dir, windows);
  } else {
    model =
        std::make_unique<nn::TransformerLM>(checked_model_config(o, corpus.vocabulary().size()));
    model->to(device);
    model->dropout_generator().set_state(o.seed ^ kDropoutSeedTag, 0);
    state.decay_steps = o.decay_steps > 0 ? o.decay_steps
                        : o.epochs > 0    ? o.epochs * steps_per_epoch
                                          : o.steps;
    state.windows = windows;
    state.shuffle_seed = o.seed;
  }
  model->train();
  if (resumed && given("--decay-steps") && o.decay_steps != state.decay_steps) {
    fmt::print("note: --decay-steps {} overrides the checkpoint's {}\n", o.decay_steps,
               state.decay_steps);
    state.decay_steps = o.decay_steps;
  }
  state.threads = threads;
  std::unique_ptr<Optimizer> optimizer = make_optimizer(*model, o);
  Schedule schedule(schedule_config(o, state.decay_steps));
  if (resumed) {
    optimizer->load_state_dict(read_optimizer_state(*resumed, optimizer->name()));
    schedule.load_state(state.schedule);
  }
  const nn::TransformerConfig& config = model->config();
  fmt::print(
      "model: d_model {} | heads {} (kv {}) | layers {} | ff {} | {}-LN | {} | {} | "
      "dropout {} | {} parameters (embedding {})\n",
      config.d_model, config.heads, config.kv(), config.layers, config.ff, nn::name_of(config.norm),
      nn::name_of(config.position), nn::name_of(config.activation), config.dropout,
      model->num_parameters(), model->embedding->weight.numel());
  fmt::print(
      "training: {} lr {} | {} schedule (warm-up {}, decay steps {}) | B {} x T {} x {} "
      "| {} steps per epoch | clip {} | device {} | stop at: steps {} epochs {} time "
      "budget {}s\n",
      optimizer->name(), o.lr, o.schedule, o.warmup, state.decay_steps, o.batch_size, o.seq_len,
      o.grad_accum, steps_per_epoch, o.clip, device, o.steps, o.epochs, o.time_budget);
  if (resumed)
    fmt::print("resumed from {} at step {} (epoch {}, window {} of {})\n", o.resume, state.step,
               state.position.epoch + 1, state.position.index, windows);

  // The best-by-validation weights: kept in memory for the final lines and in PATH.best.
  const std::string best_path = o.save.empty() ? "" : best_checkpoint_path(o.save);
  NamedTensors best;
  double best_loss = std::numeric_limits<double>::infinity();
  bool best_written = false;         // best_path holds `best`
  bool best_validated_here = false;  // best_loss came from this process's validation
  if (resumed) {
    std::vector<std::string> best_notes;
    BestWeights found = resumed_best_weights(*resumed, state, best_path, best_notes);
    for (const std::string& note : best_notes) fmt::print("{}\n", note);
    best = std::move(found.weights);
    best_loss = found.loss;
    state.best_step = found.step;
    best_written = !found.path.empty() && found.path == best_path;
    if (!found.path.empty() && found.path != best_checkpoint_path(o.resume))
      fmt::print("note: the best weights so far are {}'s (valid loss {:.4f} at step {})\n",
                 found.path, found.loss, found.step);
  }

  if (!o.save.empty()) make_parent_folder(o.save, "--save");
  if (!o.metrics.empty()) make_parent_folder(o.metrics, "--metrics");
  MetricsLog metrics =
      o.metrics.empty() ? MetricsLog() : MetricsLog(o.metrics, resumed.has_value());
  const std::string curve_title =
      fmt::format("train_lm on {}: d_model {}, layers {}, T {}, B {}",
                  std::filesystem::path(data_dir).filename().string(), config.d_model,
                  config.layers, o.seq_len, o.batch_size);

  std::int64_t total_steps = o.steps;
  if (o.epochs > 0)
    total_steps = std::min(total_steps > 0 ? total_steps : std::numeric_limits<std::int64_t>::max(),
                           o.epochs * steps_per_epoch);
  ProgressLog log(isatty(STDOUT_FILENO) == 1, o.log_every, total_steps, o.time_budget);

  // This run's clocks: the budget counts training steps only; the elapsed time saved in the
  // checkpoint counts validation too.
  double train_seconds = 0.0, valid_seconds = 0.0;
  const auto run_clock = [&] { return train_seconds + valid_seconds; };
  const double elapsed_before = state.elapsed_s;
  std::int64_t run_tokens = 0, skipped = 0;
  const std::int64_t first_step = state.step;
  std::int64_t last_eval_step = state.curve.valid.empty() ? -1 : state.curve.valid.back().step;
  const auto cancelled = [] { return stop_signal() != 0; };

  const Batch probe_batch = batches.window(0, device);
  const auto save_state = [&] {
    KILN_CHECK(weights_finite(*model),
               "step {}: the weights are not finite; {} keeps its last good state", state.step,
               o.save);
    const double probe = probe_loss(*model, probe_batch);
    KILN_CHECK(std::isfinite(probe),
               "step {}: the weights give a loss of {} on the first training window; {} keeps "
               "its last good state. Lower --lr",
               state.step, probe, o.save);
    state.dropout_seed = model->dropout_generator().seed();
    state.dropout_offset = model->dropout_generator().offset();
    state.schedule = schedule.state();
    state.elapsed_s = elapsed_before + run_clock();
    save_training_checkpoint(o.save, *model, corpus.vocabulary(), *optimizer, state, o);
  };

  // Validates on the whole valid split; false when a signal cut it short.
  const auto validate = [&] {
    const EvalResult r =
        evaluate(*model, corpus.valid().ids,
                 {.batch_size = o.eval_batch_size, .seq_len = o.seq_len, .cancelled = cancelled});
    valid_seconds += r.seconds;
    if (!r.complete) return false;
    last_eval_step = state.step;
    const bool lr_cut = schedule.observe(r.loss);
    metrics.eval(state.step, "valid", r.loss);
    state.curve.valid.push_back({state.step, r.loss});
    std::string note;
    if (r.loss < best_loss) {
      best_loss = r.loss;
      state.best_step = state.step;
      best = weights_copy(*model);
      best_validated_here = true;
      if (!best_path.empty()) {
        save_best_weights(best_path, *model, corpus.vocabulary(), state.step, r.loss, threads, o);
        best_written = true;
        note = fmt::format(" | new best, saved {}", best_path);
      } else {
        note = " | new best";
      }
    }
    if (lr_cut) note += fmt::format(" | plateau: lr now {:.3g}", schedule.state().lr);
    log.message(fmt::format("validation at step {}: loss {:.4f} | ppl {:.2f} | {:.1f}s{}",
                            state.step, r.loss, std::exp(r.loss), r.seconds, note));
    if (!o.save.empty()) write_loss_curve(curve_path(o.save), state.curve, curve_title);
    return true;
  };

  // Training. Each step takes up to --grad-accum windows of the current epoch, in its order.
  std::vector<std::int64_t> order =
      batches.epoch_order(state.shuffle_seed, state.position.epoch, o.shuffle);
  std::string stopped_by;
  while (stop_signal() == 0) {
    if (o.steps > 0 && state.step >= o.steps) {
      stopped_by = "--steps";
      break;
    }
    if (o.epochs > 0 && state.position.epoch >= o.epochs) {
      stopped_by = "--epochs";
      break;
    }
    if (o.time_budget > 0 && train_seconds >= o.time_budget) {
      stopped_by = "--time-budget";
      break;
    }
    const auto step_start = Clock::now();
    const double lr = schedule.lr(state.step, state.decay_steps);
    optimizer->set_lr(lr);
    optimizer->zero_grad();
    const std::int64_t n = std::min(o.grad_accum, windows - state.position.index);
    double loss_sum = 0.0;
    std::int64_t tokens = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const Batch batch = batches.window(order[state.position.index + i], device);
      const Tensor loss = model->loss(batch.inputs, batch.targets);
      (n == 1 ? loss : loss * (1.0 / static_cast<double>(n))).backward();
      loss_sum += loss.item<double>();
      tokens += batch.targets.numel();
    }
    const double loss = loss_sum / static_cast<double>(n);
    const double norm = grad_norm(optimizer->parameters());
    const bool finite = std::isfinite(loss) && std::isfinite(norm);
    KILN_CHECK(finite || o.skip_nonfinite,
               "step {}: the loss is {} and the gradient norm {}; stopping without saving (the "
               "last checkpoint is untouched). Lower --lr, or pass --skip-nonfinite to skip such "
               "steps",
               state.step + 1, loss, norm);
    if (finite) {
      optimizer->step(o.clip > 0 ? clip_scale(norm, o.clip) : 1.0);
    } else {
      ++skipped;
      log.message(
          fmt::format("step {}: skipped (loss {}, gradient norm {})", state.step + 1, loss, norm));
    }
    ++state.step;
    const std::int64_t epoch = state.position.epoch;
    state.position.index += n;
    if (state.position.index == windows) {
      state.position = {epoch + 1, 0};
      order = batches.epoch_order(state.shuffle_seed, state.position.epoch, o.shuffle);
    }
    const double step_seconds = seconds_since(step_start);
    train_seconds += step_seconds;
    run_tokens += tokens;

    const double epoch_done =
        state.position.index == 0
            ? 1.0
            : static_cast<double>(state.position.index) / static_cast<double>(windows);
    const auto interval = log.step({.step = state.step,
                                    .epoch = epoch + 1,
                                    .epoch_done = epoch_done,
                                    .loss = finite ? loss : NAN,
                                    .lr = lr,
                                    .tokens = tokens,
                                    .seconds = step_seconds,
                                    .clock = train_seconds,
                                    .elapsed = elapsed_before + run_clock()});
    if (interval && std::isfinite(interval->loss)) {
      metrics.train(state.step, interval->loss, lr, interval->tokens_per_s,
                    elapsed_before + run_clock());
      state.curve.train.push_back({state.step, interval->loss});
    }
    if (o.eval_every > 0 && state.step % o.eval_every == 0 && !validate()) break;
    if (o.save_every > 0 && state.step % o.save_every == 0 && stop_signal() == 0) save_state();
  }
  log.finish();
  if (device.is_cuda())
    fmt::print("RESULT gpu_peak_bytes {}\n", backend_for(device).peak_bytes_in_use());

  const auto result_line = [&] {
    fmt::print("RESULT train_tokens_per_sec {:.1f} steps {} seconds {:.1f}\n",
               train_seconds > 0 ? static_cast<double>(run_tokens) / train_seconds : 0.0,
               state.step, train_seconds);
  };
  const auto interrupted = [&] {
    const int signal = stop_signal();
    if (!o.save.empty()) save_state();
    fmt::print("interrupted by {} at step {}: {}\n", signal_name(signal), state.step,
               o.save.empty() ? std::string("nothing saved (no --save)")
                              : fmt::format("saved the state to {} (continue with --resume {})",
                                            o.save, o.save));
    result_line();
    return 0;
  };
  if (stop_signal() != 0) return interrupted();
  fmt::print("stopped by {} at step {} ({:.2f} epochs) after {} steps in this run{}\n", stopped_by,
             state.step,
             static_cast<double>(state.position.epoch) +
                 static_cast<double>(state.position.index) / static_cast<double>(windows),
             state.step - first_step,
             skipped > 0 ? fmt::format(", {} skipped as non-finite", skipped) : "");

  // The end: a last validation unless this step had one, the latest state, then the final lines
  // from the best weights.
  if (o.eval_every > 0 && last_eval_step != state.step && !validate()) return interrupted();
  if (!o.save.empty()) {
    save_state();
    if (!best.empty() && !best_written) {
      // The best weights came from the resumed run's PATH.best: put them beside this PATH.
      nn::TransformerLM copy(config);
      copy.load_state_dict(best);
      save_best_weights(best_path, copy, corpus.vocabulary(), state.best_step, best_loss, threads,
                        o);
    }
    write_loss_curve(curve_path(o.save), state.curve, curve_title);
    fmt::print("saved {}{}\n", o.save, best.empty() ? "" : fmt::format(" and {}", best_path));
  }
  if (o.eval_every > 0) {
    nn::TransformerLM* final_model = model.get();
    std::unique_ptr<nn::TransformerLM> best_model;
    if (!best.empty()) {
      best_model = std::make_unique<nn::TransformerLM>(config);
      best_model->load_state_dict(best);
      best_model->to(device);
      final_model = best_model.get();
    }
    const EvalOptions eval{
        .batch_size = o.eval_batch_size, .seq_len = o.seq_len, .cancelled = cancelled};
    // Weights validated in this process need no second pass: the same function on the same
    // weights with the same threads gives the same bits.
    const EvalResult valid = best_validated_here ? EvalResult{.loss = best_loss}
                                                 : evaluate(*final_model, corpus.valid().ids, eval);
    const EvalResult test = evaluate(*final_model, corpus.test().ids, eval);
    if (!valid.complete || !test.complete) return interrupted();
    // A diverged model has no perplexity to report, and exit 0 would say it has.
    KILN_CHECK(std::isfinite(valid.loss) && std::isfinite(test.loss),
               "the weights of step {} give a valid loss of {} and a test loss of {}: no "
               "perplexity to report (the run diverged; lower --lr)",
               best.empty() ? state.step : state.best_step, valid.loss, test.loss);
    metrics.eval(state.best_step >= 0 ? state.best_step : state.step, "test", test.loss);
    fmt::print("final perplexities from the weights of step {} (valid {}, test {:.1f}s):\n",
               best.empty() ? state.step : state.best_step,
               best_validated_here ? "as validated" : fmt::format("{:.1f}s", valid.seconds),
               test.seconds);
    fmt::print("valid ppl {}\n", format_ppl(valid.loss));
    fmt::print("test ppl {}\n", format_ppl(test.loss));
  }
  result_line();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return run_program("train_lm", [&] { return train(argc, argv); });
}
