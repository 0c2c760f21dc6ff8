// Learning-rate schedules. The lr for the update that follows `step` completed steps (step = 0 for
// the first update, i.e. the optimizer's step_count() before step()) is a pure function of step
// and decay_steps (the schedule's length) given the configuration; the plateau schedule adds a
// small state fed with validation losses. With peak lr η, warm-up N steps, floor η_min:
//
//   warm-up (every kind)  w(s) = min(1, (s + 1) / N)         (w = 1 when N = 0; η/N at s = 0)
//   constant              η(s) = η · w(s)
//   step                  η(s) = η · γ^⌊s / step_size⌋ · w(s)
//   cosine                η(s) = η · (s + 1) / N                                       s < N
//                         η(s) = η_min + ½ (η − η_min) (1 + cos(π (s − N) / (D − N)))  N ≤ s < D
//                         η(s) = η_min                                                 s ≥ D
//                         where D = decay_steps
//   wsd                   η(s) = η · w(s)                                              s < S
//   (warm-up, stable,     η(s) = η_min + (η − η_min) (D − s) / (D − S)                 S ≤ s < D
//    decay)               η(s) = η_min                                                 s ≥ D
//                         where S = max(N, D − round(f D)), f = decay_fraction: the last f of
//                         the run decays linearly (Hägele et al. 2024, "Scaling laws and
//                         compute-optimal training beyond fixed training durations"), and
//                         every step before S is independent of D
//   plateau               η(s) = η_p · w(s), where η_p starts at η and, when more than
//                         `patience` validation losses in a row fail to beat the best so far,
//                         becomes max(η_p / factor, η_min) (the classic word-language-model
//                         recipe is factor 4, patience 0: divide by 4 whenever validation does
//                         not improve)
//
//   Schedule schedule({.kind = ScheduleKind::cosine, .lr = 3e-4, .warmup_steps = 100,
//                      .min_lr = 3e-5});
//   opt.set_lr(schedule.lr(opt.step_count(), decay_steps));  // before every opt.step()
//   schedule.observe(valid_loss);                            // after every validation
//   save(schedule.state()); ... schedule.load_state(saved);   // three numbers, resumes exactly
#pragma once

#include <cstdint>
#include <string_view>

namespace kiln {

enum class ScheduleKind : std::uint8_t { constant, step, cosine, plateau, wsd };

// "constant", "step", "cosine", "plateau" or "wsd"; anything else is an error listing them.
ScheduleKind parse_schedule_kind(std::string_view name);
std::string_view schedule_kind_name(ScheduleKind kind);

struct ScheduleConfig {
  ScheduleKind kind = ScheduleKind::constant;
  double lr = 1e-3;               // η, the peak (reached at the end of warm-up); >= 0
  std::int64_t warmup_steps = 0;  // N >= 0
  std::int64_t step_size = 1000;  // step: decay every step_size steps (>= 1)
  double gamma = 0.1;             // step: γ > 0
  double min_lr = 0.0;            // cosine and plateau: η_min in [0, η]
  double factor = 4.0;            // plateau: divisor >= 1
  std::int64_t patience = 0;      // plateau: non-improving validations tolerated (>= 0)
  double decay_fraction = 0.2;    // wsd: f, the fraction of the run that decays, in (0, 1]
};

// The formulas above, one per kind (a negative step or decay_steps is an error).
double warmup_factor(std::int64_t step, std::int64_t warmup_steps);
double constant_lr(const ScheduleConfig& config, std::int64_t step);
double step_decay_lr(const ScheduleConfig& config, std::int64_t step);
double cosine_lr(const ScheduleConfig& config, std::int64_t step, std::int64_t decay_steps);
double wsd_lr(const ScheduleConfig& config, std::int64_t step, std::int64_t decay_steps);
// S, the first step of wsd's decay for a run of decay_steps.
std::int64_t wsd_decay_start(const ScheduleConfig& config, std::int64_t decay_steps);
// The first step whose lr depends on decay_steps, for a kind that needs a length (cosine: the end
// of warm-up; wsd: S): a run that learns its length as it goes fixes it before this step.
std::int64_t first_step_needing_length(const ScheduleConfig& config, std::int64_t decay_steps);

// Everything a resumed run needs to continue the plateau schedule exactly.
struct ScheduleState {
  double lr = 0.0;             // η_p, before warm-up
  double best_loss = 0.0;      // the best validation loss so far (+inf before the first)
  std::int64_t bad_evals = 0;  // validations since the best, or since the last division
};

class Schedule {
 public:
  explicit Schedule(const ScheduleConfig& config);  // checks the configuration

  // The lr for the update after `step` completed steps.
  double lr(std::int64_t step, std::int64_t decay_steps) const;
  // Records a validation loss; for plateau, divides η_p when patience runs out and returns true
  // then. Other kinds track the best loss only (their lr ignores it).
  bool observe(double valid_loss);

  ScheduleState state() const { return state_; }
  void load_state(const ScheduleState& state);  // checks the values
  const ScheduleConfig& config() const { return config_; }

 private:
  ScheduleConfig config_;
  ScheduleState state_;
};

}  // namespace kiln
