// Learning-rate schedules (the formulas are in optim/schedule.h).
#include "optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "core/error.h"

namespace kiln {

namespace {

void check_step(std::int64_t step, std::int64_t decay_steps) {
  KILN_CHECK(step >= 0 && decay_steps >= 0,
             "schedule: step {} and decay_steps {} must be non-negative", step, decay_steps);
}

}  // namespace

ScheduleKind parse_schedule_kind(std::string_view name) {
  for (ScheduleKind kind : {ScheduleKind::constant, ScheduleKind::step, ScheduleKind::cosine,
                            ScheduleKind::plateau, ScheduleKind::wsd})
    if (name == schedule_kind_name(kind)) return kind;
  fail("schedule: unknown schedule '{}' (expected constant, step, cosine, plateau or wsd)", name);
}

std::string_view schedule_kind_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::constant:
      return "constant";
    case ScheduleKind::step:
      return "step";
    case ScheduleKind::cosine:
      return "cosine";
    case ScheduleKind::plateau:
      return "plateau";
    case ScheduleKind::wsd:
      return "wsd";
  }
  return "?";
}

double warmup_factor(std::int64_t step, std::int64_t warmup_steps) {
  check_step(step, 0);
  if (step >= warmup_steps) return 1.0;
  return static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
}

double constant_lr(const ScheduleConfig& c, std::int64_t step) {
  return c.lr * warmup_factor(step, c.warmup_steps);
}

double step_decay_lr(const ScheduleConfig& c, std::int64_t step) {
  KILN_CHECK(c.step_size >= 1, "schedule: invalid step_size {} (expected >= 1)", c.step_size);
  const double decays = static_cast<double>(step / c.step_size);
  return c.lr * std::pow(c.gamma, decays) * warmup_factor(step, c.warmup_steps);
}

double cosine_lr(const ScheduleConfig& c, std::int64_t step, std::int64_t decay_steps) {
  check_step(step, decay_steps);
  if (step < c.warmup_steps) return c.lr * warmup_factor(step, c.warmup_steps);
  if (step >= decay_steps) return c.min_lr;
  const double progress = static_cast<double>(step - c.warmup_steps) /
                          static_cast<double>(decay_steps - c.warmup_steps);
  return c.min_lr + 0.5 * (c.lr - c.min_lr) * (1.0 + std::cos(std::numbers::pi * progress));
}

std::int64_t wsd_decay_start(const ScheduleConfig& c, std::int64_t decay_steps) {
  check_step(0, decay_steps);
  const auto decaying =
      static_cast<std::int64_t>(std::llround(c.decay_fraction * static_cast<double>(decay_steps)));
  return std::max(c.warmup_steps, decay_steps - decaying);
}

double wsd_lr(const ScheduleConfig& c, std::int64_t step, std::int64_t decay_steps) {
  check_step(step, decay_steps);
  const std::int64_t start = wsd_decay_start(c, decay_steps);
  if (step < start) return c.lr * warmup_factor(step, c.warmup_steps);
  if (step >= decay_steps) return c.min_lr;
  return c.min_lr + (c.lr - c.min_lr) * static_cast<double>(decay_steps - step) /
                        static_cast<double>(decay_steps - start);
}

std::int64_t first_step_needing_length(const ScheduleConfig& c, std::int64_t decay_steps) {
  switch (c.kind) {
    case ScheduleKind::cosine:
      return c.warmup_steps + 1;  // η(N) = η for every D > N; η(N + 1) depends on D
    case ScheduleKind::wsd:
      return wsd_decay_start(c, decay_steps);
    default:
      return 0;
  }
}

Schedule::Schedule(const ScheduleConfig& config) : config_(config) {
  const auto check = [](std::string_view what, double value, bool ok, std::string_view expected) {
    KILN_CHECK(std::isfinite(value) && ok, "schedule: invalid {} {} (expected {})", what, value,
               expected);
  };
  check("lr", config.lr, config.lr >= 0.0, ">= 0");
  check("warmup_steps", static_cast<double>(config.warmup_steps), config.warmup_steps >= 0, ">= 0");
  check("step_size", static_cast<double>(config.step_size), config.step_size >= 1, ">= 1");
  check("gamma", config.gamma, config.gamma > 0.0, "> 0");
  check("min_lr", config.min_lr, config.min_lr >= 0.0 && config.min_lr <= config.lr,
        "0 <= min_lr <= lr");
  check("factor", config.factor, config.factor >= 1.0, ">= 1");
  check("patience", static_cast<double>(config.patience), config.patience >= 0, ">= 0");
  check("decay_fraction", config.decay_fraction,
        config.decay_fraction > 0.0 && config.decay_fraction <= 1.0, "in (0, 1]");
  state_ = {.lr = config.lr, .best_loss = std::numeric_limits<double>::infinity(), .bad_evals = 0};
}

double Schedule::lr(std::int64_t step, std::int64_t decay_steps) const {
  check_step(step, decay_steps);
  switch (config_.kind) {
    case ScheduleKind::constant:
      return constant_lr(config_, step);
    case ScheduleKind::step:
      return step_decay_lr(config_, step);
    case ScheduleKind::cosine:
      return cosine_lr(config_, step, decay_steps);
    case ScheduleKind::plateau:
      return state_.lr * warmup_factor(step, config_.warmup_steps);
    case ScheduleKind::wsd:
      return wsd_lr(config_, step, decay_steps);
  }
  return config_.lr;
}

bool Schedule::observe(double valid_loss) {
  if (valid_loss < state_.best_loss) {  // false for NaN: a NaN loss never improves
    state_.best_loss = valid_loss;
    state_.bad_evals = 0;
    return false;
  }
  ++state_.bad_evals;
  if (config_.kind != ScheduleKind::plateau || state_.bad_evals <= config_.patience) return false;
  state_.lr = std::max(state_.lr / config_.factor, config_.min_lr);
  state_.bad_evals = 0;
  return true;
}

void Schedule::load_state(const ScheduleState& state) {
  KILN_CHECK(std::isfinite(state.lr) && state.lr >= 0.0 && !std::isnan(state.best_loss) &&
                 state.bad_evals >= 0,
             "schedule: invalid saved state (lr {}, best_loss {}, bad_evals {})", state.lr,
             state.best_loss, state.bad_evals);
  state_ = state;
}

}  // namespace kiln
