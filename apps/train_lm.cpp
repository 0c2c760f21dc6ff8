// train_lm: trains a transformer language model on WikiText-2 (or any folder with train.txt,
// valid.txt and test.txt, read word by word) or on a prepared dataset of any text (kiln-prepare:
// byte-level BPE or characters), and reports its validation and test loss, bits per byte and
// perplexity.
//
//   build/apps/train_lm                                      # the defaults: 15 minutes
//   build/apps/train_lm --save runs/lm.safetensors --metrics runs/lm.metrics.jsonl
//   build/apps/train_lm --resume runs/lm.safetensors --save runs/lm.safetensors --steps 5000
//   build/apps/eval_ppl --checkpoint runs/lm.best.safetensors --split test
//
// It prints its environment, the model and the data, a log line every --log-every steps (a live
// line on a terminal), a line per validation, each split's "<split> bpb <x> | ..." line (bits per
// byte, loss and perplexity per token and per word: apps/common/text_data.h), and ends with (the
// lines scripts and tests read; ppl is per token, per word for a word-level model)
//
//   valid ppl <x>         both from the best-by-validation weights, by lm::evaluate
//   test ppl <x>          (eval_ppl on PATH.best prints the same numbers)
//   RESULT train_tokens_per_sec <x> steps <n> seconds <s>
//
// where steps is the global step reached and seconds this run's budgeted time: its training
// steps, without validation (as bench/torch_ref.py counts its --time-budget, so the
// two programs' budgets buy the same training). SIGINT or SIGTERM save the state at the next step
// boundary and exit 0. The training itself is lm::Trainer's; this file is the program around it.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "apps/common/loss_curve.h"
#include "apps/common/program.h"
#include "apps/common/progress.h"
#include "apps/common/signals.h"
#include "apps/common/text_data.h"
#include "apps/common/train_setup.h"
#include "core/backend.h"
#include "core/build_info.h"
#include "core/threads.h"
#include "distributed/communicator.h"
#include "lm/metrics_log.h"
#include "lm/transformer_checkpoint.h"
#include "nn/config_fields.h"

using namespace kiln;

namespace {

// A note when a run resumes on other CPU GEMMs than the checkpoint recorded (another library, or
// bf16 products natively where they were widened): each path sums in its own order, so the bits
// may differ from an uninterrupted run. Older checkpoints record none.
void note_other_gemm(const lm::TransformerCheckpoint& resumed, const std::string& path) {
  const auto saved = resumed.metadata.find("gemm");
  if (saved == resumed.metadata.end() || saved->second == cpu_gemm_source()) return;
  fmt::print(
      "note: {} was trained with the CPU GEMMs '{}' and this run uses '{}': the results may "
      "differ in the last bits from an uninterrupted run\n",
      path, saved->second, cpu_gemm_source());
}

int train(int argc, char** argv) {
  install_stop_handlers();
  CLI::App app{
      "train_lm: trains a transformer language model on a text folder (word-level) or a "
      "prepared dataset (kiln-prepare); the defaults are the recipe searched for 15 minutes of "
      "training (docs/recipes.md)"};
  TrainOptions o;
  add_train_flags(app, o);
  CLI11_PARSE(app, argc, argv);
  const auto given = [&](std::string_view flag) { return app.count(std::string(flag)) > 0; };
  apply_preset(o, given);

  // A resumed run takes the checkpoint's settings for every flag not given.
  std::optional<lm::TransformerCheckpoint> resumed;
  std::vector<std::string> notes;
  if (!o.resume.empty()) {
    resumed = lm::read_transformer_checkpoint(o.resume);
    const auto train_entry = resumed->metadata.find("train");
    KILN_CHECK(train_entry != resumed->metadata.end(),
               "--resume {}: not a training checkpoint (no saved training settings)", o.resume);
    notes = merge_saved_options(o, resumed->config, train_entry->second, given, o.resume);
  }
  // Initial weights: their config is the model (model flags and --preset are refused beside
  // them); the optimizer and the run start fresh.
  std::optional<lm::TransformerCheckpoint> initial;
  if (!o.init_from.empty()) {
    KILN_CHECK(o.resume.empty(), "--init-from and --resume exclude each other");
    KILN_CHECK(o.preset.empty(), "--init-from {}: the model is its config, --preset is not used",
               o.init_from);
    for (const nn::ConfigField& field : nn::config_fields()) {
      const std::string_view key = field.key;
      const bool model_flag = field.flag != nullptr && key != "dropout" && key != "attn_dropout" &&
                              key != "word_dropout";
      KILN_CHECK(!model_flag || !given(field.flag),
                 "--init-from {}: the model is its config, {} cannot change it", o.init_from,
                 field.flag);
    }
    initial = lm::read_transformer_checkpoint(o.init_from);
    const nn::TransformerConfig flags = o.model;
    o.model = initial->config;
    o.adaptive_auto = o.input_auto = false;
    if (given("--dropout")) o.model.dropout = flags.dropout;
    if (given("--attn-dropout")) o.model.attn_dropout = flags.attn_dropout;
    if (given("--word-dropout")) o.model.word_dropout = flags.word_dropout;
  }
  check_options(o);
  const Device device = device_from_flag(o.device);
  // One rank alone, or the ranks of mpirun (or torchrun-style variables); rank 0 prints.
  const std::unique_ptr<dist::Communicator> comm = dist::make_communicator({.device = device});
  if (comm->rank() != 0 && std::freopen("/dev/null", "w", stdout) == nullptr)
    fail("rank {}: cannot silence its stdout", comm->rank());
  const int saved_threads = resumed ? lm::read_train_state(*resumed).threads : 0;
  const int threads = resumed && !given("--threads") ? saved_threads
                      : o.threads > 0                ? o.threads
                                                     : num_threads();
  // auto becomes what this device runs natively before the ranks compare their flags: ranks that
  // resolve it apart (other CPUs) stop there, naming --precision.
  const PrecisionChoice precision = resolve_precision(o.precision, device);
  o.precision = precision.name;
  if (!precision.why.empty()) fmt::print("precision {} ({})\n", precision.name, precision.why);
  // Ranks started with other flags would train apart, or wait in collectives the others never
  // run (--steps, --save-every): the first flag that differs is named, with the rank.
  comm->check_same("a flag", options_text(o, threads));
  // Every file the run will write, before it trains for an hour to find one it cannot (rank 0
  // writes them all).
  std::optional<lm::MetricsLog> metrics;
  if (comm->rank() == 0) {
    if (!o.save.empty()) check_save_path(o.save, /*curve=*/true);
    if (!o.metrics.empty()) {
      make_parent_folder(o.metrics, "--metrics");
      metrics.emplace(o.metrics, resumed.has_value());
    }
  }
  set_num_threads(threads);
  release_stop_signals();
  fmt::print("{}\n", environment_summary());
  for (const std::string& note : notes) fmt::print("note: {}\n", note);
  if (resumed && threads != saved_threads)
    fmt::print(
        "warning: {} was trained with {} threads and this run uses {}: the results may "
        "differ in the last bits from an uninterrupted run\n",
        o.resume, saved_threads, threads);
  if (resumed && !device.is_cuda()) note_other_gemm(*resumed, o.resume);

  // Data: the checkpoint's tokenizer for a resumed or initialised run, so every token keeps its
  // id (a prepared dataset of another tokenizer is refused).
  const std::string data_dir =
      resolve_data_dir(o.data.empty() ? std::nullopt : std::optional(o.data));
  const lm::TransformerCheckpoint* source = resumed ? &*resumed : initial ? &*initial : nullptr;
  const std::unique_ptr<Dataset> data = load_training_data(data_dir, source, threads);

  // Model, optimizer and trainer: fresh, exactly as saved, or initial weights.
  std::unique_ptr<nn::TransformerLM> model;
  if (resumed) {
    model = lm::load_model(*resumed, device);
  } else if (initial) {
    lm::TransformerCheckpoint with_dropout = *initial;
    with_dropout.config = o.model;
    model = lm::load_model(with_dropout, device);
  } else {
    const std::int64_t vocab = data->tokenizer().vocab_size();
    model = make_model(o, vocab, device);
    order_by_frequency(*model, *data);
    if (o.adaptive_auto) {
      const bool adaptive = model->config().adaptive();
      fmt::print("output: {} (--adaptive-softmax auto: a vocabulary of {} is {} {})\n",
                 adaptive ? "adaptive softmax" : "full softmax", vocab,
                 adaptive ? "at least" : "below", kAutoAdaptiveVocab);
    }
    if (o.input_auto)
      fmt::print("input: {} (--input auto: the output is {})\n",
                 model->config().input == nn::InputKind::adaptive ? "adaptive input" : "embedding",
                 model->config().adaptive() ? "the adaptive softmax" : "the full softmax");
  }
  const auto optimizer = make_optimizer(*model, o);
  lm::TrainerOptions options = trainer_options(o, device, threads);
  options.stop_requested = [] { return stop_signal() != 0; };
  options.communicator = comm.get();
  lm::Trainer trainer(*model, *optimizer, *data, std::move(options));
  ProgressLog log(isatty(STDOUT_FILENO) == 1, trainer.total_steps(), o.time_budget);
  trainer.add_observer(log);
  print_model(*model);
  if (resumed) trainer.resume(*resumed);
  print_training(trainer, o, optimizer->name(), o.resume);
  if (metrics) trainer.add_observer(*metrics);
  LossCurveWriter curve(fmt::format("train_lm on {}: d_model {}, layers {}, T {}, B {}",
                                    std::filesystem::path(data_dir).filename().string(),
                                    model->config().d_model, model->config().layers, o.seq_len,
                                    o.batch_size));
  trainer.add_observer(curve);

  // Training, then the final state and perplexities.
  const lm::StopReason stopped_by = trainer.train();
  log.finish();
  if (device.is_cuda())
    fmt::print("RESULT gpu_peak_bytes {}\n", backend_for(device).peak_bytes_in_use());
  std::optional<lm::FinalResult> result;
  if (stopped_by != lm::StopReason::requested) {
    print_stop(trainer, stopped_by);
    result = trainer.finish();
  } else {
    trainer.finish();  // a stop request: saves the state and evaluates nothing
  }
  print_result(trainer, result, signal_name(stop_signal()), data.get());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return run_program("train_lm", [&] { return train(argc, argv); });
}
