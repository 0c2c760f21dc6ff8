#include "lm/trainer.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <span>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/autocast.h"
#include "core/autograd.h"
#include "core/build_info.h"
#include "core/io/crc32.h"
#include "core/ops/elementwise.h"
#include "core/ops/factories.h"
#include "core/ops/join.h"
#include "core/ops/optimizer_update.h"
#include "core/ops/reduction.h"
#include "core/philox.h"
#include "data/token_hash.h"
#include "optim/clip.h"

namespace kiln::lm {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Window `index` of epoch `epoch`'s order draws its dropout masks from a Philox key of its own,
// derived from the run's dropout seed: the masks depend on which window it is, never on what ran
// before it, so any rank can run any window of a step, and a resumed run needs no count of the
// draws so far.
std::uint64_t window_dropout_key(std::uint64_t seed, std::int64_t epoch, std::int64_t index) {
  const auto key = [](const philox::Words& w) {
    return (static_cast<std::uint64_t>(w.w[1]) << 32) | w.w[0];
  };
  const std::uint64_t epoch_key = key(philox::draw(seed, static_cast<std::uint64_t>(epoch)));
  return key(philox::draw(epoch_key, static_cast<std::uint64_t>(index)));
}

// The dropout masks' seed, kept apart from the weights' (the same Philox key would draw the
// same numbers for both).
constexpr std::uint64_t kDropoutSeedTag = 0x64726f70ULL << 32;  // "drop"

// The schedule of the options; cosine and wsd (and step without a step size) need a length,
// which cosine and wsd can also learn from the time budget (Trainer::fix_length_from_budget).
ScheduleConfig complete_schedule(ScheduleConfig config, std::int64_t decay_steps,
                                 bool length_from_budget) {
  const bool learns_length =
      config.kind == ScheduleKind::cosine || config.kind == ScheduleKind::wsd;
  const bool needs_length =
      learns_length || (config.kind == ScheduleKind::step && config.step_size == 0);
  KILN_CHECK(!needs_length || decay_steps > 0 || (learns_length && length_from_budget),
             "--decay-steps: the {} schedule needs a length; give --decay-steps, --epochs or "
             "--steps{}",
             schedule_kind_name(config.kind),
             learns_length ? ", or --time-budget alone to fit it to the budget" : "");
  if (config.step_size == 0) config.step_size = std::max<std::int64_t>(1, decay_steps / 3);
  return config;
}

NamedTensors weights_copy(const nn::Module& model) {
  NamedTensors copy;
  for (const auto& [name, tensor] : model.state_dict())
    copy.emplace_back(name, tensor.detach().clone().to(Device::cpu()));
  return copy;
}

bool weights_finite(const nn::Module& model) {
  NoGradGuard no_grad;
  for (const Tensor& p : model.parameters())
    if (!std::isfinite(p.sum().item<double>())) return false;
  return true;
}

// The loss of the model (in eval mode, without autograd or dropout draws, so a resumed run stays
// bit-exact) on one batch: a check that the weights are usable, since finite weights can still
// overflow a forward pass (weights of 1e30 after one step at --lr 1e30).
double probe_loss(nn::LanguageModel& model, const Batch& batch, Precision precision) {
  NoGradGuard no_grad;
  const Autocast mixed(precision);
  model.eval();
  const double loss = model.loss(batch.inputs, batch.targets).item<double>();
  model.train();
  return loss;
}

// Two checkpoints of the same model: the same tensor names and shapes, the same model
// description (a TransformerLM's config) and vocabulary.
bool same_model(const Checkpoint& a, const Checkpoint& b) {
  const auto config = [](const Checkpoint& c) {
    const auto it = c.metadata.find("config");
    return it == c.metadata.end() ? std::string() : it->second;
  };
  if (config(a) != config(b) || a.tokenizer->hash() != b.tokenizer->hash() ||
      a.model.size() != b.model.size())
    return false;
  for (std::size_t i = 0; i < a.model.size(); ++i)
    if (a.model[i].first != b.model[i].first ||
        a.model[i].second.shape() != b.model[i].second.shape())
      return false;
  return true;
}

// "<prefix>.<key> <value>" per key of a JSON object text (the text itself when it is not one):
// a line per setting, so that a difference between ranks names the setting.
std::string json_lines(const std::string& prefix, const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return prefix + " " + text + "\n";
  std::string lines;
  for (const auto& [key, value] : j.items())
    lines += prefix + "." + key + " " + value.dump() + "\n";
  return lines;
}

// Every setting the ranks of a run must share, a line each, named by its flag where programs
// give it one.
std::string settings_text(const TrainerOptions& o, const nn::LanguageModel& model) {
  const ScheduleConfig& sc = o.schedule;
  std::string text = fmt::format(
      "kiln git {}\n--batch-size {}\n--seq-len {}\n--seed {}\n--grad-accum {}\n--clip {}\n"
      "--shuffle {}\n--skip-nonfinite {}\n--precision {}\n--schedule {}\n--lr {}\n--warmup "
      "{}\n--step-size {}\n--gamma {}\n--min-lr {}\n--factor {}\n--patience {}\n"
      "--decay-fraction {}\n--decay-steps "
      "{}\n--steps {}\n--epochs {}\n--time-budget {}\n--log-every {}\n--eval-every {}\n"
      "--eval-batch-size {}\n--save-every {}\n--save {}\n--threads {}\n--device {}\n",
      build_info().git, o.batch_size, o.seq_len, o.seed, o.grad_accum, o.clip, o.shuffle,
      o.skip_nonfinite, precision_name(o.precision), schedule_kind_name(sc.kind), sc.lr,
      sc.warmup_steps, sc.step_size, sc.gamma, sc.min_lr, sc.factor, sc.patience, sc.decay_fraction,
      o.decay_steps, o.steps, o.epochs, o.time_budget, o.log_every, o.eval_every, o.eval_batch_size,
      o.save_every, o.save.empty() ? "(none)" : o.save, o.threads,
      o.device.is_cuda() ? "cuda" : "cpu");  // NCCL ranks use cuda:<local rank>
  if (const std::string config = model.config_json(); !config.empty())
    text += json_lines("config", config);
  for (const auto& [key, value] : o.settings) text += json_lines(key, value);
  return text;
}

// The data as the ranks compare it: each split's token count and TokenHash (of the ids' values,
// however wide they are stored), and the tokenizer's hash.
std::string data_text(const Dataset& data) {
  std::string text;
  for (const std::string& split : kAllSplits) {
    const TokenView ids = data.tokens(split).ids;
    const auto size = static_cast<std::size_t>(ids.size());
    TokenHash hash;
    switch (ids.width()) {
      case 2:
        hash.add(std::span(static_cast<const std::uint16_t*>(ids.data()), size));
        break;
      case 4:
        hash.add(std::span(static_cast<const std::uint32_t*>(ids.data()), size));
        break;
      default:
        hash.add(std::span(static_cast<const std::int64_t*>(ids.data()), size));
    }
    text += fmt::format("{} split: {} tokens, fingerprint {}\n", split, ids.size(), hash.hex());
  }
  const Tokenizer& tokenizer = data.tokenizer();
  return text + fmt::format("tokenizer: {}, {} tokens, hash {:016x}\n", tokenizer.kind(),
                            tokenizer.vocab_size(), tokenizer.hash());
}

// The CRC-32 of tensors' names and bytes, in order.
std::uint32_t tensors_crc(const NamedTensors& tensors) {
  std::uint32_t crc = 0;
  for (const auto& [name, tensor] : tensors) {
    crc = crc32(name.data(), name.size(), crc);
    const Tensor bytes = tensor.detach().contiguous().to(Device::cpu());
    crc = crc32(bytes.raw_data(),
                static_cast<std::size_t>(bytes.numel()) * dtype_size(bytes.dtype()), crc);
  }
  return crc;
}

std::int64_t saved_step(const Checkpoint& file) {
  const auto it = file.metadata.find("step");
  if (it == file.metadata.end()) return -1;
  std::int64_t step = -1;
  std::from_chars(it->second.data(), it->second.data() + it->second.size(), step);
  return step;
}

}  // namespace

Trainer::Trainer(nn::LanguageModel& model, Optimizer& optimizer, const Dataset& data,
                 TrainerOptions options)
    : model_(model),
      optimizer_(optimizer),
      data_(data),
      options_(std::move(options)),
      batches_(data.tokens("train").ids, options_.batch_size, options_.seq_len),
      best_path_(options_.save.empty() ? "" : best_checkpoint_path(options_.save)),
      best_loss_(std::numeric_limits<double>::infinity()) {
  if (options_.communicator != nullptr) {
    rank_ = options_.communicator->rank();
    world_ = options_.communicator->world_size();
  }
  // grad_accum · world_ <= windows, without overflowing the product.
  KILN_CHECK(options_.grad_accum >= 1 && options_.grad_accum <= windows() / world_,
             "--grad-accum {}{} exceeds the {} windows of an epoch (a step never spans epochs)",
             options_.grad_accum, world_ > 1 ? fmt::format(" on {} ranks", world_) : "", windows());
  // Validation and the final lines evaluate valid and test in eval_batch_size columns of at
  // least two tokens each: a split too short is refused now, not at the first validation, which
  // once ended a run with nothing saved.
  if (options_.eval_every > 0) {
    for (const char* split : {"valid", "test"}) {
      const std::int64_t tokens = data.tokens(split).ids.size();
      KILN_CHECK(tokens >= 2,
                 "dataset {}: the {} split has {} token{}, too short to evaluate (a column needs "
                 "at least 2 tokens: an input and its target); give a longer {} split",
                 data.describe(), split, tokens, tokens == 1 ? "" : "s", split);
      KILN_CHECK(tokens / 2 >= options_.eval_batch_size,
                 "dataset {}: the {} split has {} tokens, too few to evaluate in "
                 "--eval-batch-size {} columns, which needs at least 2 tokens per column; lower "
                 "--eval-batch-size to {} or give a longer {} split",
                 data.describe(), split, tokens, options_.eval_batch_size, tokens / 2, split);
    }
  }
  if (world_ > 1) {
    agree_on_settings();
    sync_ = std::make_unique<dist::GradientSync>(*options_.communicator, optimizer_.parameters());
  }
  state_.decay_steps = options_.decay_steps > 0 ? options_.decay_steps
                       : options_.epochs > 0    ? options_.epochs * steps_per_epoch()
                                                : options_.steps;
  length_from_budget_ = state_.decay_steps == 0 && options_.time_budget > 0;
  state_.windows = windows();
  state_.batch_size = options_.batch_size;
  state_.seq_len = options_.seq_len;
  state_.step_windows = options_.grad_accum * world_;
  state_.shuffle_seed = options_.seed;
  state_.threads = options_.threads;
  state_.world_size = world_;
  state_.dropout_seed = options_.seed ^ kDropoutSeedTag;
  order_ = batches_.epoch_order(state_.shuffle_seed, state_.position.epoch, options_.shuffle);
  probe_batch_ = batches_.window(0, options_.device);
  ledger_ = step_ledger(options_.device);
  read_every_step_ = options_.device.is_cpu() || world_ > 1 || options_.skip_nonfinite;
  model_.train();
}

void Trainer::resume(const Checkpoint& resumed) {
  const std::int64_t decay_steps = state_.decay_steps;
  state_ = read_train_state(resumed);
  // The model first: a checkpoint of another model (train_lm's, resumed by another program) has
  // other windows too, and "not the same corpus" would send its user to the wrong file.
  try {
    model_.load_state_dict(resumed.model);
  } catch (const Error& e) {
    fail("--resume {}: it holds another model than this run's: {}", resumed.path, e.what());
  }
  const bool same_layout = state_.batch_size == 0 || (state_.batch_size == options_.batch_size &&
                                                      state_.seq_len == options_.seq_len);
  KILN_CHECK(same_layout,
             "--resume {}: its windows are B {} x T {} and this run's B {} x T {}: the data "
             "position belongs to that layout (give its --batch-size and --seq-len)",
             resumed.path, state_.batch_size, state_.seq_len, options_.batch_size,
             options_.seq_len);
  KILN_CHECK(resumed.tokenizer->hash() == data_.tokenizer().hash(),
             "--resume {}: the run's tokenizer ({}, {} tokens) is not the data's ({}, {} tokens, "
             "{}): resume on the data the run trained on",
             resumed.path, resumed.tokenizer->kind(), resumed.tokenizer->vocab_size(),
             data_.tokenizer().kind(), data_.tokenizer().vocab_size(), data_.describe());
  KILN_CHECK(state_.windows == windows(),
             "--resume {}: the run had {} windows of B {} x T {} per epoch but this corpus gives "
             "{}: not the same corpus",
             resumed.path, state_.windows, options_.batch_size, options_.seq_len, windows());
  model_.to(options_.device);
  model_.train();
  if (!state_.dropout_keyed && world_ > 1) {
    state_.dropout_keyed = true;
    message(fmt::format(
        "note: {} draws its dropout masks from one stream, as kiln did before masks were keyed "
        "by window; with {} ranks this run keys them by window from here on, so its masks (and "
        "losses) differ from an uninterrupted run's",
        resumed.path, world_));
  }
  model_.dropout_generator().set_state(state_.dropout_seed, state_.dropout_offset);
  if (state_.decay_steps == 0 && decay_steps > 0 && options_.decay_steps == 0) {
    // Saved while a run bounded by its time budget was still timing its steps: this run's own
    // length (--epochs or --steps) is the schedule's.
    message(fmt::format("note: {} had not fixed its schedule's length yet; this run's {} steps are",
                        resumed.path, decay_steps));
    state_.decay_steps = decay_steps;
  }
  if (options_.decay_steps > 0 && decay_steps != state_.decay_steps) {
    message(fmt::format("note: --decay-steps {} overrides the checkpoint's {}", decay_steps,
                        state_.decay_steps));
    state_.decay_steps = decay_steps;
  }
  state_.threads = options_.threads;
  // A step's windows decide its update: 2 ranks x grad_accum 1 and 1 rank x grad_accum 2 train
  // alike, bit for bit (docs/distributed.md). Files without the count compare the ranks.
  const std::int64_t step_windows = options_.grad_accum * world_;
  if (state_.step_windows > 0 && state_.step_windows != step_windows)
    message(fmt::format(
        "warning: a step of {}'s run took {} windows ({} rank(s) x --grad-accum {}) and this "
        "run's takes {} ({} rank(s) x --grad-accum {}): the run differs from an uninterrupted one",
        resumed.path, state_.step_windows, state_.world_size,
        state_.step_windows / state_.world_size, step_windows, world_, options_.grad_accum));
  if (state_.step_windows == 0 && state_.world_size != world_)
    message(fmt::format(
        "warning: {} was trained with {} rank(s) and this run has {}: a step now takes {} "
        "windows, and the run differs from an uninterrupted one",
        resumed.path, state_.world_size, world_, step_windows));
  state_.world_size = world_;
  state_.batch_size = options_.batch_size;
  state_.seq_len = options_.seq_len;
  state_.step_windows = step_windows;
  optimizer_.load_state_dict(read_optimizer_state(resumed, optimizer_.name()));
  schedule().load_state(state_.schedule);
  order_ = batches_.epoch_order(state_.shuffle_seed, state_.position.epoch, options_.shuffle);
  elapsed_before_ = state_.elapsed_s;
  first_step_ = state_.step;
  last_eval_step_ = state_.curve.valid.empty() ? -1 : state_.curve.valid.back().step;
  find_resumed_best(resumed);
}

// The best-by-validation weights a resumed run starts from: the best of the resumed run's .best
// file and, when it holds the same model, the .best file this run will write (an older
// checkpoint resumed into the same save path), by the validation loss each file records. The
// loss must come from the file whose weights are kept: the resumed checkpoint's own record may
// be older than the .best beside it.
void Trainer::find_resumed_best(const Checkpoint& resumed) {
  std::vector<std::string> candidates = {best_checkpoint_path(resumed.path)};
  if (!best_path_.empty() && best_path_ != candidates[0]) candidates.push_back(best_path_);
  std::string found;
  for (const std::string& path : candidates) {
    if (!std::filesystem::exists(path)) {
      if (path == candidates[0] && state_.best_step >= 0)
        message(fmt::format("warning: {} is missing: the best weights start afresh", path));
      continue;
    }
    const Checkpoint file = read_checkpoint(path);
    if (!same_model(file, resumed)) {
      message(fmt::format(
          "warning: {} holds another model than {}; it is not a candidate for the best weights",
          path, resumed.path));
      continue;
    }
    const double loss = saved_valid_loss(file).value_or(state_.schedule.best_loss);
    if (!(loss < best_loss_)) continue;
    best_ = file.model;
    best_loss_ = loss;
    state_.best_step = saved_step(file);
    found = path;
  }
  best_written_ = !found.empty() && found == best_path_;
  if (!found.empty() && found != candidates[0])
    message(fmt::format("note: the best weights so far are {}'s (valid loss {:.4f} at step {})",
                        found, best_loss_, state_.best_step));
}

// Built on first use: a resumed run's length is the checkpoint's, known only after resume().
Schedule& Trainer::schedule() {
  if (!schedule_)
    schedule_.emplace(complete_schedule(options_.schedule, state_.decay_steps,
                                        length_from_budget_ && state_.decay_steps == 0));
  return *schedule_;
}

std::int64_t Trainer::schedule_length() const {
  // Longer than any run: wsd stays stable, cosine warms up (fix_length_from_budget fixes the
  // length before either would read it).
  constexpr std::int64_t kLengthPending = std::int64_t{1} << 52;
  return state_.decay_steps > 0 ? state_.decay_steps : kLengthPending;
}

// A budget-bounded run fixes its schedule's length as late as it can, so that the step rate it
// divides the budget by is timed over as much of the run as possible: right before the first
// step whose lr depends on the length (cosine: the step after its warm-up; wsd: the start of its
// decay, by the length the rate so far gives), and for wsd not before kRateSteps updates are
// timed (after the first, which also pays for first-touch allocations). A rate timed early runs
// out of budget before the decay ends when later steps are slower.
constexpr std::int64_t kRateSteps = 10;

void Trainer::fix_length_from_budget() {
  const std::int64_t done = state_.step - first_step_;
  if (done == 1) rate_start_seconds_ = train_seconds_;
  const std::int64_t timed = done - 1;
  const double seconds_per_step = timed > 0 ? (train_seconds_ - rate_start_seconds_) / timed
                                            : train_seconds_ / static_cast<double>(done);
  const double left = std::max(0.0, options_.time_budget - train_seconds_);
  const double room = seconds_per_step > 0 ? std::floor(left / seconds_per_step) : 0.0;
  std::int64_t length =
      state_.step + 1 + static_cast<std::int64_t>(std::min(room, static_cast<double>(1 << 30)));
  bool fix = state_.step + 1 >= first_step_needing_length(options_.schedule, length) &&
             (options_.schedule.kind == ScheduleKind::cosine || timed >= kRateSteps);
  // No step taken so far may fall in wsd's decay for the length: a longer run when the budget is
  // that short. (Cosine's first step that needs a length, N + 1, is not passed before this call.)
  if (options_.schedule.kind == ScheduleKind::wsd)
    while (wsd_decay_start(options_.schedule, length) < state_.step) ++length;
  if (world_ > 1) {
    // Each rank reads its own clock, so they decide together (every rank calls this after every
    // step until the length is fixed): at the first step any rank is ready, rank 0's length.
    std::array<std::int64_t, 2> agreed = {fix ? 1 : 0, rank_ == 0 ? length : 0};
    options_.communicator->allreduce(std::span<std::int64_t>(agreed), dist::ReduceOp::max);
    fix = agreed[0] != 0;
    length = agreed[1];
  }
  if (!fix) return;
  state_.decay_steps = length;
  message(fmt::format(
      "schedule: {} over {} steps, fitted to --time-budget {}s at {:.4f}s a step (timed over {} "
      "steps); --decay-steps {} reproduces this run",
      schedule_kind_name(options_.schedule.kind), length, options_.time_budget, seconds_per_step,
      std::max<std::int64_t>(timed, 1), length));
}

std::int64_t Trainer::steps_per_epoch() const {
  return (windows() + options_.grad_accum - 1) / options_.grad_accum;
}

std::int64_t Trainer::total_steps() const {
  std::int64_t total = options_.steps;
  if (options_.epochs > 0)
    total = std::min(total > 0 ? total : std::numeric_limits<std::int64_t>::max(),
                     options_.epochs * steps_per_epoch());
  return total;
}

void Trainer::notify(const std::function<void(TrainObserver&)>& call) const {
  for (TrainObserver* observer : observers_) {
    try {
      call(*observer);
    } catch (const std::exception&) {
      if (!observer_error_) observer_error_ = std::current_exception();
    }
  }
}

void Trainer::throw_observer_error() const {
  if (!observer_error_) return;
  try {
    std::rethrow_exception(observer_error_);
  } catch (const std::exception& e) {
    fail("{}; training stopped at step {}{}", e.what(), state_.step,
         options_.save.empty() ? std::string(" (no --save: nothing saved)")
         : rank_ == 0 ? fmt::format(" and saved its state to {} (continue with --resume {})",
                                    options_.save, options_.save)
                      : std::string());
  }
}

void Trainer::agree_on_settings() const {
  // The corpus first: it sizes the model's vocabulary, which the settings hold.
  options_.communicator->check_same("the corpus", data_text(data_),
                                    "every rank must read the same corpus (--data)");
  options_.communicator->check_same("a setting of the run", settings_text(options_, model_),
                                    "every rank must run the same binary with the same flags");
}

void Trainer::agree_on_state() {
  if (state_agreed_ || world_ == 1) return;
  state_agreed_ = true;
  const ScheduleState schedule_state = schedule().state();
  const OptimizerState optimizer_state = optimizer_.state_dict();
  const NamedTensors weights = model_.state_dict();
  const std::string state = fmt::format(
      "model weights: {} tensors, CRC-32 {:08x}\noptimizer state: step {}, {} tensors, CRC-32 "
      "{:08x}\nstep {}\ndata position: epoch {}, window {}\ndecay steps {}\ndropout seed {}, "
      "{}\nschedule: lr {}, best loss {}, bad validations {}\nbest step {}\n",
      weights.size(), tensors_crc(weights), optimizer_state.step, optimizer_state.tensors.size(),
      tensors_crc(optimizer_state.tensors), state_.step, state_.position.epoch,
      state_.position.index, state_.decay_steps, state_.dropout_seed,
      state_.dropout_keyed ? std::string("keyed") : fmt::format("offset {}", state_.dropout_offset),
      schedule_state.lr, schedule_state.best_loss, schedule_state.bad_evals, state_.best_step);
  options_.communicator->check_same(
      "the run's state", state,
      "every rank must start from the same state: the same --resume checkpoint, or none");
}

void Trainer::message(const std::string& text) const {
  notify([&](TrainObserver& o) { o.on_message(*this, text); });
}

double Trainer::elapsed() const { return elapsed_before_ + train_seconds_ + valid_seconds_; }

Trainer::Boundary Trainer::agree_at_boundary() const {
  const bool over_budget = options_.time_budget > 0 && train_seconds_ >= options_.time_budget;
  // An observer's failure stops the run as a request does (finish() then saves and throws it).
  const bool stop = stop_requested() || observer_error_ != nullptr;
  if (world_ == 1) return {.stop_requested = stop, .over_time_budget = over_budget};
  // Any rank's request stops them all. So does any rank's clock: each measures its own time, and
  // ranks that disagreed would leave the others waiting in the next step's collectives.
  std::array<std::int64_t, 2> flags = {stop ? 1 : 0, over_budget ? 1 : 0};
  options_.communicator->allreduce(std::span<std::int64_t>(flags), dist::ReduceOp::max);
  return {.stop_requested = flags[0] != 0, .over_time_budget = flags[1] != 0};
}

bool Trainer::stop_agreed() const { return agree_at_boundary().stop_requested; }

Trainer::StepWindows Trainer::step_windows() const {
  const std::int64_t count =
      std::min(options_.grad_accum * world_, windows() - state_.position.index);
  const std::int64_t first = std::min(count, rank_ * options_.grad_accum);
  return {.count = count, .first = first, .last = std::min(count, first + options_.grad_accum)};
}

Tensor Trainer::forward_backward(std::int64_t i, const StepWindows& windows) {
  const std::int64_t index = state_.position.index + i;
  if (state_.dropout_keyed)
    model_.dropout_generator().set_state(
        window_dropout_key(state_.dropout_seed, state_.position.epoch, index), 0);
  const Batch batch = batches_.window(order_[index], options_.device);
  Tensor loss;
  {
    const Autocast mixed(options_.precision);
    loss = model_.loss(batch.inputs, batch.targets);
  }
  (windows.count == 1 ? loss : loss * (1.0 / static_cast<double>(windows.count))).backward();
  return loss.detach().view({1});
}

Tensor Trainer::reduce_over_ranks(const std::vector<Tensor>& losses, const StepWindows& windows) {
  if (world_ == 1) return cat(losses, 0);
  // Every window's loss has one non-zero contributor: the sum is that loss exactly. The ranks add
  // on the host (a read every step; see read_every_step_).
  std::vector<double> all(windows.count, 0.0);
  if (!losses.empty()) {
    const std::vector<double> mine = cat(losses, 0).to_vector<double>();
    std::copy(mine.begin(), mine.end(), all.begin() + windows.first);
  }
  options_.communicator->allreduce(std::span<double>(all));
  sync_->allreduce(windows.last > windows.first);
  return from_vector(all, {windows.count}, options_.device);
}

std::optional<Trainer::StepFigures> Trainer::read_ledger(bool must) {
  if (!ledger_pending_ || (!must && !read_every_step_)) return std::nullopt;
  ledger_pending_ = false;
  const std::vector<double> l = ledger_.to_vector<double>();
  namespace slot = StepLedger;
  const auto first_bad = static_cast<std::int64_t>(l[slot::first_bad]);
  if (first_bad != 0 && !options_.skip_nonfinite) {
    // The device skipped every update from that step on: none of them counts.
    for (std::int64_t s = first_bad; s <= ledger_step_; ++s) optimizer_.uncount_step();
    fail(
        "step {}: the loss is {} and the gradient norm {}; stopping without saving (the last "
        "checkpoint is untouched). Lower --lr, or pass --skip-nonfinite to skip such steps",
        first_bad, l[slot::bad_loss], l[slot::bad_norm]);
  }
  // The interval's sums start again from 0 on the device (a fill, no wait).
  ledger_.narrow(0, slot::interval_loss, 2).fill_(0.0);
  ledger_.narrow(0, slot::first_bad, 1).fill_(0.0);
  return StepFigures{.loss = l[slot::loss],
                     .norm = l[slot::norm],
                     .applied = l[slot::apply] != 0.0,
                     .loss_sum = l[slot::interval_loss],
                     .finite_steps = static_cast<std::int64_t>(l[slot::interval_finite])};
}

std::int64_t Trainer::advance(const StepWindows& windows) {
  std::int64_t tokens = 0;
  for (std::int64_t i = 0; i < windows.count; ++i)
    tokens += batches_.batch_size() * batches_.window_length(order_[state_.position.index + i]);
  state_.position.index += windows.count;
  if (state_.position.index == this->windows()) {
    state_.position = {state_.position.epoch + 1, 0};
    order_ = batches_.epoch_order(state_.shuffle_seed, state_.position.epoch, options_.shuffle);
  }
  return tokens;
}

// One update, as llm.c's loop: the learning rate, forward and backward over this rank's windows,
// the sums over the ranks, the clipped update, the data position; then the record the observers
// see.
StepRecord Trainer::step() {
  agree_on_state();
  const auto start = Clock::now();
  const double lr = schedule().lr(state_.step, schedule_length());
  optimizer_.set_lr(lr);
  optimizer_.zero_grad();
  const StepWindows windows = step_windows();
  std::vector<Tensor> losses;  // this rank's windows'
  {
    const AutocastWeightCache step_casts;  // each weight rounded once per step, not per window
    for (std::int64_t i = windows.first; i < windows.last; ++i)
      losses.push_back(forward_backward(i, windows));
  }
  const Tensor window_losses = reduce_over_ranks(losses, windows);
  const std::vector<Tensor> params = optimizer_.parameters();
  step_guard_(ledger_, window_losses, grad_sums_of_squares(params, options_.device),
              {.clip = options_.clip,
               .stop_on_nonfinite = !options_.skip_nonfinite,
               .step = state_.step + 1});
  optimizer_.step(ledger_);
  ledger_pending_ = true;
  ledger_step_ = state_.step + 1;
  const bool log_due = (state_.step + 1) % options_.log_every == 0;
  const std::optional<StepFigures> figures = read_ledger(log_due || sync_due(state_.step + 1));
  const bool applied = !figures || figures->applied;
  if (!applied) {
    optimizer_.uncount_step();
    ++skipped_;
    message(fmt::format("step {}: skipped (loss {}, gradient norm {})", state_.step + 1,
                        figures->loss, figures->norm));
  }
  const std::int64_t epoch = state_.position.epoch;
  const std::int64_t tokens = advance(windows);
  ++state_.step;
  const double seconds = seconds_since(start);
  train_seconds_ += seconds;
  run_tokens_ += tokens;
  if (length_from_budget_ && state_.decay_steps == 0) fix_length_from_budget();
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  const StepRecord record{.step = state_.step,
                          .epoch = epoch + 1,
                          .epoch_done = state_.position.index == 0
                                            ? 1.0
                                            : static_cast<double>(state_.position.index) /
                                                  static_cast<double>(this->windows()),
                          .loss = figures && applied ? figures->loss : nan,
                          .lr = lr,
                          .grad_norm = figures ? figures->norm : nan,
                          .tokens = tokens,
                          .seconds = seconds,
                          .clock = train_seconds_,
                          .elapsed = elapsed(),
                          .log_due = log_due,
                          .read = figures.has_value(),
                          .loss_sum = figures ? figures->loss_sum : 0.0,
                          .finite_steps = figures ? figures->finite_steps : 0};
  record_curve(record);
  notify([&](TrainObserver& o) { o.on_step(*this, record); });
  return record;
}

// A step after which the host reads the ledger even between log intervals: what comes next
// (a validation, a checkpoint, the end) needs the non-finite rule settled.
bool Trainer::sync_due(std::int64_t step) const {
  return (options_.eval_every > 0 && step % options_.eval_every == 0) ||
         (options_.save_every > 0 && step % options_.save_every == 0) ||
         (options_.steps > 0 && step >= options_.steps);
}

void Trainer::record_curve(const StepRecord& record) {
  curve_interval_.add(record);
  if (!record.log_due) return;
  const IntervalSummary interval = curve_interval_.summary();
  if (std::isfinite(interval.loss)) state_.curve.train.push_back({record.step, interval.loss});
  curve_interval_.reset();
}

// Several ranks split each evaluation and never cut one short: they agree on stopping at steps.
EvalOptions Trainer::eval_options() const {
  return {.batch_size = options_.eval_batch_size,
          .seq_len = options_.seq_len,
          .precision = options_.precision,
          .cancelled = world_ == 1 ? options_.stop_requested : std::function<bool()>(),
          .communicator = world_ == 1 ? nullptr : options_.communicator};
}

std::optional<ValidationRecord> Trainer::validate() {
  agree_on_state();
  read_ledger(true);
  const EvalResult r = evaluate(model_, data_.tokens("valid").ids, eval_options());
  valid_seconds_ += r.seconds;
  if (!r.complete) return std::nullopt;
  last_eval_step_ = state_.step;
  ValidationRecord record{.step = state_.step, .loss = r.loss, .seconds = r.seconds};
  record.lr_cut = schedule().observe(r.loss);
  record.lr = schedule().state().lr;
  state_.curve.valid.push_back({state_.step, r.loss});
  if (r.loss < best_loss_) {
    best_loss_ = r.loss;
    state_.best_step = state_.step;
    best_ = weights_copy(model_);
    best_validated_here_ = true;
    record.new_best = true;
    if (!best_path_.empty()) {
      save_best(state_.step, r.loss);
      record.best_path = best_path_;
    }
  }
  notify([&](TrainObserver& o) { o.on_validation(*this, record); });
  return record;
}

void Trainer::save_best(std::int64_t step, double loss) {
  best_written_ = true;
  if (rank_ != 0) return;
  if (best_validated_here_ && state_.best_step == step) {
    save_best_weights(best_path_, model_, data_.tokenizer(), step, loss, options_.threads,
                      options_.settings);
  } else {
    // The best weights came from the resumed run's PATH.best: put them beside this PATH.
    NamedTensors current = weights_copy(model_);
    model_.load_state_dict(best_);
    save_best_weights(best_path_, model_, data_.tokenizer(), step, loss, options_.threads,
                      options_.settings);
    model_.load_state_dict(current);
  }
}

std::string Trainer::kept_state() const {
  std::error_code error;
  return std::filesystem::exists(options_.save, error)
             ? fmt::format("{} keeps its last good state", options_.save)
             : fmt::format("nothing was saved to {}", options_.save);
}

void Trainer::save() {
  read_ledger(true);
  KILN_CHECK(weights_finite(model_), "step {}: the weights are not finite; {}", state_.step,
             kept_state());
  const double probe = probe_loss(model_, probe_batch_, options_.precision);
  KILN_CHECK(std::isfinite(probe),
             "step {}: the weights give a loss of {} on the first training window; {}. Lower "
             "--lr",
             state_.step, probe, kept_state());
  state_.dropout_offset = state_.dropout_keyed ? 0 : model_.dropout_generator().offset();
  state_.schedule = schedule().state();
  state_.elapsed_s = elapsed();
  if (rank_ == 0)
    save_training_checkpoint(options_.save, model_, data_.tokenizer(), optimizer_, state_,
                             options_.settings);
}

StopReason Trainer::train() {
  schedule();  // a schedule without a length is an error before the first step
  agree_on_state();
  for (Boundary boundary; !(boundary = agree_at_boundary()).stop_requested;) {
    if (options_.steps > 0 && state_.step >= options_.steps) return StopReason::steps;
    if (options_.epochs > 0 && state_.position.epoch >= options_.epochs) return StopReason::epochs;
    if (boundary.over_time_budget) return StopReason::time_budget;
    step();
    if (options_.eval_every > 0 && state_.step % options_.eval_every == 0 && !validate()) break;
    if (options_.save_every > 0 && state_.step % options_.save_every == 0 && !stop_agreed()) {
      save();
      notify([&](TrainObserver& o) { o.on_save(*this, false); });
    }
  }
  return StopReason::requested;
}

std::optional<FinalResult> Trainer::finish() {
  agree_on_state();
  read_ledger(true);
  const auto interrupted = [&]() -> std::optional<FinalResult> {
    if (!options_.save.empty()) save();
    throw_observer_error();
    return std::nullopt;
  };
  if (stop_agreed()) return interrupted();
  if (options_.eval_every > 0 && last_eval_step_ != state_.step && !validate())
    return interrupted();
  if (!options_.save.empty()) {
    save();
    if (!best_.empty() && !best_written_) save_best(state_.best_step, best_loss_);
    notify([&](TrainObserver& o) { o.on_save(*this, true); });
  }
  throw_observer_error();
  if (options_.eval_every == 0) return FinalResult{.step = state_.step};
  // The best weights, evaluated in the model itself (it is done training).
  if (!best_.empty()) model_.load_state_dict(best_);
  const EvalOptions eval = eval_options();
  FinalResult result{.step = best_.empty() ? state_.step : state_.best_step};
  // Weights validated in this process need no second pass: the same function on the same
  // weights with the same threads gives the same bits.
  result.validated_here = best_validated_here_;
  result.valid = best_validated_here_ ? EvalResult{.loss = best_loss_}
                                      : evaluate(model_, data_.tokens("valid").ids, eval);
  result.test = evaluate(model_, data_.tokens("test").ids, eval);
  if (!result.valid.complete || !result.test.complete) return std::nullopt;
  // A diverged model has no perplexity to report, and exit 0 would say it has: a NaN loss, or a
  // finite one whose exp overflows ("ppl inf").
  KILN_CHECK(has_perplexity(result.valid.loss) && has_perplexity(result.test.loss),
             "the weights of step {} give a valid loss of {} and a test loss of {}: no finite "
             "perplexity to report (the run diverged; lower --lr)",
             result.step, result.valid.loss, result.test.loss);
  notify([&](TrainObserver& o) { o.on_final(*this, result); });
  throw_observer_error();
  return result;
}

}  // namespace kiln::lm
