// lm::Trainer: trains any nn::LanguageModel on a corpus, with validation, the best weights kept,
// checkpoints that resume bit for bit (for the same thread count), and observers for what a
// program shows or records (progress, metrics, the loss curve) — none of that is in the loop.
//
// Phases, each a call:
//   setup     the constructor: a fresh run (the model built and seeded by the caller)
//   resume    resume(checkpoint): weights, optimizer, schedule, data position, dropout seed,
//             history and the best weights so far, as the checkpoint's run left them
//   step      step(): one update from up to grad_accum windows of the current epoch
//   validate  validate(): the loss on the whole valid split; keeps the best weights
//   save      save(): the training checkpoint at options.save
//   finish    finish(): a last validation unless this step had one, the latest state and the
//             best weights saved, then the best weights' valid and test losses (the model
//             holds the best weights afterwards)
// train() runs step, validate and save as their intervals say until a limit or a stop request.
//
//   lm::Trainer trainer(model, optimizer, corpus, {.steps = 300, .save = "runs/lm.safetensors"});
//   trainer.add_observer(progress);
//   const lm::StopReason reason = trainer.train();
//   const std::optional<lm::FinalResult> result = trainer.finish();
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/autocast.h"
#include "data/batches.h"
#include "data/corpus.h"
#include "data/dataset.h"
#include "distributed/communicator.h"
#include "distributed/gradient_sync.h"
#include "lm/checkpoint.h"
#include "lm/evaluate.h"
#include "lm/interval.h"
#include "lm/train_state.h"
#include "nn/language_model.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"

namespace kiln::lm {

struct TrainerOptions {
  // Data layout and seed: a resumed run must agree (its data position and streams depend on them).
  std::int64_t batch_size = 32;  // B
  std::int64_t seq_len = 64;     // T
  std::uint64_t seed = 1234;     // the window order and the dropout masks (weights: the caller's)
  // The update.
  std::int64_t grad_accum = 1;  // windows averaged into one step
  double clip = 1.0;            // global gradient-norm clip; 0: off
  bool shuffle = false;         // a shuffled window order each epoch
  bool skip_nonfinite = false;  // skip a non-finite step's update instead of stopping
  // The matrix products' precision in every forward pass (core/autocast.h): with bf16 the
  // weights, gradients and optimizer state stay float32 (docs/mixed-precision.md).
  Precision precision = Precision::f32;
  // The learning rate: step_size 0 means a third of the decay steps; decay_steps 0 means
  // epochs × steps per epoch, else steps, else (cosine, wsd) the steps the time budget leaves
  // room for, measured (a resumed run keeps the saved length unless given).
  ScheduleConfig schedule{.step_size = 0};
  std::int64_t decay_steps = 0;
  // Limits (0: none): the global step, epochs, seconds of training steps in this run.
  std::int64_t steps = 0;
  std::int64_t epochs = 0;
  double time_budget = 0.0;
  // Intervals: a summary every log_every steps; validation every eval_every (0: never, and no
  // final perplexities); a checkpoint every save_every (0: at the end only).
  std::int64_t log_every = 10;
  std::int64_t eval_every = 500;
  std::int64_t eval_batch_size = 10;
  std::int64_t save_every = 0;
  // The training checkpoint ("": none); best weights go to best_checkpoint_path(save).
  std::string save = {};
  // Entries added to every checkpoint the trainer writes: what describes the run (a program's
  // saved flags as "train"; the model's config comes from the model).
  Metadata settings = {};
  Device device = Device::cpu();
  int threads = 1;  // recorded in checkpoints (a different count changes the last bits)
  // Polled between steps and evaluation windows: true asks the trainer to stop (a signal).
  std::function<bool()> stop_requested = {};
  // Data parallelism over the communicator's ranks (nullptr: one process); see below.
  dist::Communicator* communicator = nullptr;
};

// Data parallelism. With W ranks a step takes grad_accum · W windows of the epoch (the global
// batch); rank r runs windows [r · grad_accum, (r + 1) · grad_accum) of them. A window's dropout
// masks are keyed by the run's seed, the epoch and the window's place in it, so whichever rank
// runs a window draws the masks one process would; the gradients are summed in rank order
// (dist::GradientSync), so that W ranks with grad_accum 1 train bit for bit like one process with
// grad_accum W (docs/distributed.md). The losses, the gradient norm and the update are the same
// on every rank; stop requests are agreed on at step boundaries (a validation is then not cut
// short); rank 0 writes the checkpoints, which hold the one data position every rank shares.
//
// Start-up agreement: ranks that would train apart stop before the first step, every rank with
// a kiln::Error naming what differs and the first rank that differs from rank 0
// (Communicator::check_same). The constructor compares the settings (the model's config, every
// option below that must match, such as steps, save_every, threads, grad_accum, seq_len,
// batch_size, seed and the schedule, and the program's saved settings) and the corpus (a
// TokenHash of each split's token ids and of the vocabulary, data/token_hash.h); the first step
// (or validation, or finish) compares the state: the resume point, the schedule's state and a
// CRC-32 of the weights and of the optimizer state (so ranks resumed from different checkpoints
// are caught).
//
// Observers. An observer that throws (a --metrics disk that filled up, a loss curve that cannot
// be written) does not lose the run: training stops at the next step boundary (on every rank),
// finish() saves the state as a stop request would, and then throws that error, naming the step
// and where the state went.

// One finished step, as the log shows it.
//
// The step's loss and gradient norm are computed on the model's device and read by the host only
// when `read`: every step on the CPU (reading costs nothing there), with several ranks and with
// skip_nonfinite; on a GPU only at the end of a log_every interval and before a validation, a
// checkpoint or the last step, so that the steps between make no host synchronisation and the
// GPU's queue never drains. A read step carries, in loss_sum and finite_steps, the sums over every
// step since the previous read one (itself included): an IntervalMeter adds those, and gets the
// same interval mean either way (the device adds the losses in the host's order, in double).
struct StepRecord {
  std::int64_t step;   // the global step just finished (1-based)
  std::int64_t epoch;  // 1-based epoch of the step's windows
  double epoch_done;   // fraction of that epoch done after the step, in [0, 1]
  double loss;         // mean loss of the step; NaN for a skipped (non-finite) or unread step
  double lr;
  double grad_norm;       // NaN for an unread step
  std::int64_t tokens;    // target tokens of the step
  double seconds;         // the step's compute time
  double clock;           // this run's budgeted seconds so far (training steps only)
  double elapsed;         // budgeted seconds over every run so far
  bool log_due;           // the step ends a log_every interval (lm/interval.h sums intervals)
  bool read = true;       // the host read this step's figures (see above)
  double loss_sum = 0.0;  // Σ finite steps' losses since the previous read step
  std::int64_t finite_steps = 0;  // and how many they are
};

struct ValidationRecord {
  std::int64_t step = 0;
  double loss = 0.0;
  double seconds = 0.0;
  bool new_best = false;
  std::string best_path = {};  // where the new best weights went ("" when not saved)
  bool lr_cut = false;         // the plateau schedule divided the lr
  double lr = 0.0;             // the schedule's lr after this validation
};

enum class StopReason { steps, epochs, time_budget, requested };

struct FinalResult {
  std::int64_t step = 0;             // the step of the weights evaluated (the best, else the last)
  EvalResult valid = {}, test = {};  // valid.seconds is 0 when the best weights were validated here
  bool validated_here = false;       // valid is the validation that chose them, not a second pass
};

class Trainer;

// What a program shows or records; every hook is optional.
class TrainObserver {
 public:
  virtual ~TrainObserver() = default;
  // After every step (an observer that shows intervals keeps an lm::IntervalMeter).
  virtual void on_step(const Trainer&, const StepRecord&) {}
  virtual void on_validation(const Trainer&, const ValidationRecord&) {}
  // A training checkpoint was written; the bool says it is finish()'s. Any hook may throw: see
  // "Observers" above.
  virtual void on_save(const Trainer&, bool) {}
  virtual void on_final(const Trainer&, const FinalResult&) {}
  // Warnings and notes ("warning: ..." / "note: ...").
  virtual void on_message(const Trainer&, const std::string&) {}
};

class Trainer {
 public:
  // The model (built, seeded and on options.device), its optimizer and the data (a word-level
  // Corpus or any other Dataset: data/dataset.h) outlive the trainer. Checks the options against
  // the data (grad_accum at most the windows of an epoch). Checkpoints carry the data's tokenizer.
  Trainer(nn::LanguageModel& model, Optimizer& optimizer, const Dataset& data,
          TrainerOptions options);

  // Continues the run saved in checkpoint (an error unless the data has the checkpoint's
  // tokenizer and gives the same windows, and the optimizer is the saved one).
  void resume(const Checkpoint& checkpoint);
  void add_observer(TrainObserver& observer) { observers_.push_back(&observer); }

  StepRecord step();
  // nullopt when a stop request cut it short.
  std::optional<ValidationRecord> validate();
  void save();
  StopReason train();
  // nullopt when a stop request cut it short (the latest state is saved then). Throws, after
  // saving, when an observer failed (see "Observers" above), and when the weights give no finite
  // perplexity.
  std::optional<FinalResult> finish();

  const TrainState& state() const { return state_; }
  const TrainerOptions& options() const { return options_; }
  std::int64_t windows() const { return batches_.num_windows(); }
  std::int64_t steps_per_epoch() const;
  // The step at which train() will stop, 0 when only the time budget or a request stops it.
  std::int64_t total_steps() const;
  std::int64_t first_step() const { return first_step_; }  // where this run started
  std::int64_t skipped() const { return skipped_; }        // non-finite steps skipped here
  double train_seconds() const { return train_seconds_; }
  std::int64_t run_tokens() const { return run_tokens_; }
  // This process's request to stop; with several ranks train() and finish() act on any rank's.
  bool stop_requested() const { return options_.stop_requested && options_.stop_requested(); }
  int rank() const { return rank_; }
  int world_size() const { return world_; }
  // PATH.best of options.save ("" without save), and whether best weights exist.
  const std::string& best_path() const { return best_path_; }
  bool has_best() const { return !best_.empty(); }

 private:
  // Calls every observer; the first failure is kept in observer_error_ (a stop request).
  void notify(const std::function<void(TrainObserver&)>& call) const;
  // Throws the kept observer failure, if any, saying where training stopped.
  void throw_observer_error() const;
  // The start-up agreement of the ranks (see above): the settings and corpus, then the state.
  void agree_on_settings() const;
  void agree_on_state();
  // What the first save of a failing run leaves: "F keeps its last good state" or "nothing was
  // saved to F".
  std::string kept_state() const;
  void message(const std::string& text) const;
  double elapsed() const;
  void find_resumed_best(const Checkpoint& resumed);
  EvalOptions eval_options() const;
  void save_best(std::int64_t step, double loss);
  Schedule& schedule();
  // The schedule's length for step()'s lr: state_.decay_steps, or a length that no step before
  // fix_length_from_budget() runs depends on while a budget-bounded run is still measuring.
  std::int64_t schedule_length() const;
  // A run bounded only by --time-budget: right before the first step whose lr depends on the
  // length (by the step rate timed so far), fixes state_.decay_steps to the steps the budget
  // leaves room for, rank 0's for every rank, and says so.
  void fix_length_from_budget();
  // What the ranks agree on at a step boundary (a collective with several ranks): whether any
  // asked to stop, and whether any has used up the time budget.
  struct Boundary {
    bool stop_requested = false, over_time_budget = false;
  };
  Boundary agree_at_boundary() const;
  // Whether any rank asked to stop.
  bool stop_agreed() const;
  // The next step's windows: `count` of the epoch's order from the data position, of which this
  // rank runs [first, last).
  struct StepWindows {
    std::int64_t count = 0, first = 0, last = 0;
  };
  StepWindows step_windows() const;
  // Window i of the step forward and backward, its gradient scaled by 1 / count, its dropout
  // masks keyed by the window (window_dropout_key); returns its loss (shape {1}, on the device).
  Tensor forward_backward(std::int64_t i, const StepWindows& windows);
  // Every window's loss of the step (windows.count, in order, on the device); with several ranks,
  // after summing the windows' losses and the gradients over the ranks.
  Tensor reduce_over_ranks(const std::vector<Tensor>& losses, const StepWindows& windows);
  // What the host reads from the step ledger (StepLedger, core/optimizer_args.h).
  struct StepFigures {
    double loss = 0.0, norm = 0.0;
    bool applied = true;  // the device applied the last step's update
    double loss_sum = 0.0;
    std::int64_t finite_steps = 0;
  };
  // Reads the ledger when steps are pending and `must` or read_every_step_ (nullopt otherwise),
  // resetting its interval sums; the non-finite rule's stop is raised here, naming the first
  // non-finite step (its update and every later one were skipped on the device).
  std::optional<StepFigures> read_ledger(bool must);
  // Whether the host reads the ledger after `step` although no log line is due.
  bool sync_due(std::int64_t step) const;
  // Moves the data position past the step's windows (into the next epoch's order at the end of
  // one); returns the target tokens they held.
  std::int64_t advance(const StepWindows& windows);
  // Adds the step to the interval of the train loss curve (state_.curve.train, a point every
  // log_every steps).
  void record_curve(const StepRecord& record);

  nn::LanguageModel& model_;
  Optimizer& optimizer_;
  const Dataset& data_;
  TrainerOptions options_;
  LanguageModelBatches batches_;
  std::optional<Schedule> schedule_;
  TrainState state_;
  std::vector<std::int64_t> order_;  // the current epoch's windows
  std::vector<TrainObserver*> observers_;
  Batch probe_batch_;  // the first window: a finite-loss check before every save
  int rank_ = 0, world_ = 1;
  std::unique_ptr<dist::GradientSync> sync_;
  // The step ledger on options.device: the loss, norm, clip scale and non-finite flags of the
  // steps since the host last read it (core/ops/optimizer_update.h step_guard_).
  Tensor ledger_;
  bool ledger_pending_ = false;   // steps the host has not read yet
  std::int64_t ledger_step_ = 0;  // the last step whose update was queued
  bool read_every_step_ = true;   // the CPU, several ranks or skip_nonfinite (see StepRecord)
  bool state_agreed_ = false;     // the ranks compared their state (agree_on_state)
  mutable std::exception_ptr observer_error_;

  // The best-by-validation weights, on the CPU; in best_path_ when best_written_.
  std::string best_path_;
  NamedTensors best_;
  double best_loss_;
  bool best_written_ = false;
  bool best_validated_here_ = false;

  // This run's clocks: the budget counts training steps only; the elapsed time saved in
  // checkpoints counts validation too.
  double train_seconds_ = 0.0, valid_seconds_ = 0.0, elapsed_before_ = 0.0;
  std::int64_t run_tokens_ = 0, skipped_ = 0, first_step_ = 0, last_eval_step_ = -1;
  bool length_from_budget_ = false;  // the length is fixed from the step rate (see above)
  double rate_start_seconds_ = 0.0;  // train_seconds_ after this run's first step
  IntervalMeter curve_interval_;     // the steps since the last point of state_.curve.train
};

}  // namespace kiln::lm
