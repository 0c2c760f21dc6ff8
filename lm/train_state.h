// TrainState: everything about a training run that is not a tensor, and the checkpoints that
// carry it. A training checkpoint holds the model, the optimizer state and this state, so that
// `train_lm --resume` continues exactly where the run stopped: the same batches, dropout masks,
// learning rates and updates, bit for bit (for the same thread count).
//
//   metadata key    value (every value is a string; doubles in round-trip form)
//   step            the global step: training steps taken, skipped non-finite ones included
//   decay_steps     the schedule's length
//   rng             {"dropout": {"seed": S, "keyed": true}}: the seed of every window's dropout
//   key;
//                   {"dropout": {"seed": S, "offset": O}} (before keyed masks): one stream
//   data_position   {"epoch": e, "index": i, "windows": W, "shuffle_seed": s, "batch_size": B,
//                   "seq_len": T, "step_windows": n}: the next step starts at window i of epoch
//                   e's order (W windows of B x T per epoch, to check the data); a step took n
//                   windows (grad_accum x ranks). B, T and n are absent from older files.
//   threads         CPU threads of the run (of each rank)
//   world_size      data-parallel ranks of the run (absent: 1)
//   git             the commit kiln was built from
//   train           the program's saved settings (train_lm: apps/common/options.h)
//   config          a TransformerLM's config (lm/transformer_checkpoint.h)
//   optimizer       {"name": "Adam", "step": n}: step() calls so far (its tensors are optim.*)
//   schedule        {"lr": η_p, "best_loss": ..., "bad_evals": n}: optim/schedule.h's state
//   history         {"elapsed_s": ..., "best_step": n, "train": [[step, loss], ...],
//                    "valid": [[step, loss], ...]}: for the log, the metrics and the loss curve
//
// A best-weights checkpoint (PATH.best) holds the model only, with step, valid_loss, threads,
// git, config and train, so eval_ppl finds the training window length and thread count in it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "lm/checkpoint.h"
#include "lm/history.h"
#include "nn/language_model.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"

namespace kiln::lm {

// Where the batch iterator resumes: window `index` of epoch `epoch`'s order.
struct DataPosition {
  std::int64_t epoch = 0;
  std::int64_t index = 0;
};

struct TrainState {
  std::int64_t step = 0;
  std::int64_t decay_steps = 0;
  DataPosition position;
  std::int64_t windows = 0;  // windows per epoch
  std::uint64_t shuffle_seed = 0;
  // The windows' B and T, and the windows a step took (grad_accum x ranks); 0: not recorded
  // (files before issue 43; step_windows then comes from train_lm's saved --grad-accum).
  std::int64_t batch_size = 0, seq_len = 0, step_windows = 0;
  // Dropout masks: keyed, each window's from a key of (dropout_seed, epoch, window) (lm/trainer.h);
  // or, resuming a checkpoint written before masks were keyed, one stream of dropout_seed read
  // from dropout_offset on.
  std::uint64_t dropout_seed = 0;
  bool dropout_keyed = true;
  std::uint64_t dropout_offset = 0;
  int threads = 0;
  int world_size = 1;  // data-parallel ranks (lm/trainer.h)
  ScheduleState schedule;
  std::int64_t best_step = -1;  // the step of the best validation; −1: none yet
  double elapsed_s = 0.0;       // training and validation seconds, over every run so far
  LossCurve curve;
};

// Writes a training checkpoint: model, optimizer state, state (see above) and `settings`, the
// entries that describe the run (a program's saved flags, "train").
void save_training_checkpoint(const std::string& path, const nn::LanguageModel& model,
                              const Tokenizer& tokenizer, const Optimizer& optimizer,
                              const TrainState& state, const Metadata& settings);

// The state of a training checkpoint, every value checked against what a run can have written
// (a data position inside the epoch, a thread count in [1, kMaxThreads], integers read as 64 bits
// and checked against their range, never wrapped); errors name the file and the entry at fault.
TrainState read_train_state(const Checkpoint& checkpoint);
// Its optimizer state: the step count (at most the run's step) and the optim.* tensors; an error
// unless it is the state of the optimizer named optimizer_name (Optimizer::name(), e.g. "Adam").
OptimizerState read_optimizer_state(const Checkpoint& checkpoint, std::string_view optimizer_name);

// The validation loss a best-weights checkpoint records, or nothing if it has none.
std::optional<double> saved_valid_loss(const Checkpoint& checkpoint);

// Writes the best-by-validation weights (model only, see above).
void save_best_weights(const std::string& path, const nn::LanguageModel& model,
                       const Tokenizer& tokenizer, std::int64_t step, double valid_loss,
                       int threads, const Metadata& settings);

// The thread count a checkpoint records, or 0 if it has none; an error naming the file when it is
// not in [1, kMaxThreads].
int checkpoint_threads(const Checkpoint& checkpoint);

}  // namespace kiln::lm
