// Learning-rate schedules at chosen steps: warm-up start and end, cosine midpoint and end,
// step-decay boundaries, the plateau division after patience (not before), and a resumed plateau
// schedule continuing exactly.
#include <cmath>
#include <limits>
#include <numbers>

#include <catch2/catch.hpp>

#include "optim/schedule.h"
#include "tests/harness/near.h"

using namespace kiln;
using kiln::testing::near;

namespace {

constexpr double kTol = 1e-15;  // relative: the formulas are evaluated in double

}  // namespace

TEST_CASE("optim: constant schedule holds the lr after a linear warm-up", "[optim][schedule]") {
  const Schedule none({.kind = ScheduleKind::constant, .lr = 0.5});
  REQUIRE(none.lr(0, 100) == 0.5);
  REQUIRE(none.lr(1000, 100) == 0.5);
  const Schedule warm({.kind = ScheduleKind::constant, .lr = 0.5, .warmup_steps = 10});
  REQUIRE(near(warm.lr(0, 100), 0.05, kTol, 0));  // η/N at the first update, never 0
  REQUIRE(near(warm.lr(4, 100), 0.25, kTol, 0));
  REQUIRE(warm.lr(9, 100) == 0.5);  // the last warm-up step reaches the peak
  REQUIRE(warm.lr(10, 100) == 0.5);
  REQUIRE(warmup_factor(0, 0) == 1.0);
}

TEST_CASE("optim: step decay multiplies by gamma every step_size steps", "[optim][schedule]") {
  const ScheduleConfig c{.kind = ScheduleKind::step, .lr = 1.0, .step_size = 3, .gamma = 0.5};
  const Schedule s(c);
  REQUIRE(s.lr(0, 0) == 1.0);
  REQUIRE(s.lr(2, 0) == 1.0);  // last step before the first boundary
  REQUIRE(s.lr(3, 0) == 0.5);
  REQUIRE(s.lr(5, 0) == 0.5);
  REQUIRE(s.lr(6, 0) == 0.25);
  REQUIRE(s.lr(9, 0) == 0.125);
  REQUIRE(step_decay_lr(c, 9) == 0.125);
}

TEST_CASE("optim: warm-up then cosine decay reaches the floor at decay_steps",
          "[optim][schedule]") {
  const double peak = 3e-4, floor = 3e-5;
  const std::int64_t warmup = 100, decay = 1100;
  const ScheduleConfig c{
      .kind = ScheduleKind::cosine, .lr = peak, .warmup_steps = warmup, .min_lr = floor};
  const Schedule s(c);
  REQUIRE(near(s.lr(0, decay), peak / warmup, kTol, 0));         // warm-up start
  REQUIRE(near(s.lr(49, decay), peak * 50 / warmup, kTol, 0));   // halfway up
  REQUIRE(s.lr(warmup - 1, decay) == peak);                      // warm-up end
  REQUIRE(s.lr(warmup, decay) == peak);                          // cosine start: cos(0) = 1
  REQUIRE(near(s.lr(600, decay), (peak + floor) / 2, kTol, 0));  // cosine midpoint
  const double quarter = floor + 0.5 * (peak - floor) * (1 + std::cos(std::numbers::pi / 4));
  REQUIRE(near(s.lr(350, decay), quarter, kTol, 0));
  REQUIRE(s.lr(decay - 1, decay) > floor);  // almost at the floor
  REQUIRE(near(s.lr(decay - 1, decay), floor, 1e-4, 0));
  REQUIRE(s.lr(decay, decay) == floor);        // end
  REQUIRE(s.lr(decay + 500, decay) == floor);  // and after
  REQUIRE(cosine_lr(c, 600, decay) == s.lr(600, decay));
  // A schedule shorter than its warm-up goes straight to the floor afterwards.
  REQUIRE(s.lr(warmup, warmup / 2) == floor);
}

TEST_CASE("optim: wsd holds the peak, then decays linearly over the last fraction to the floor",
          "[optim][schedule]") {
  const double peak = 1e-3, floor = 1e-4;
  const ScheduleConfig c{.kind = ScheduleKind::wsd,
                         .lr = peak,
                         .warmup_steps = 10,
                         .min_lr = floor,
                         .decay_fraction = 0.25};
  const Schedule s(c);
  const std::int64_t decay = 1000;  // S = 1000 - round(0.25 * 1000) = 750
  REQUIRE(wsd_decay_start(c, decay) == 750);
  REQUIRE(near(s.lr(0, decay), peak / 10, kTol, 0));  // warm-up as every kind's
  REQUIRE(s.lr(9, decay) == peak);
  REQUIRE(s.lr(10, decay) == peak);
  REQUIRE(s.lr(749, decay) == peak);                             // stable up to S
  REQUIRE(s.lr(750, decay) == peak);                             // (D - S) / (D - S) = 1
  REQUIRE(near(s.lr(875, decay), (peak + floor) / 2, kTol, 0));  // halfway down
  REQUIRE(near(s.lr(999, decay), floor + (peak - floor) / 250, kTol, 0));
  REQUIRE(s.lr(1000, decay) == floor);
  REQUIRE(s.lr(5000, decay) == floor);
  REQUIRE(wsd_lr(c, 875, decay) == s.lr(875, decay));
  // Every step before S is independent of the length: what a run that learns its length from the
  // time budget needs (first_step_needing_length).
  for (const std::int64_t d : {800, 1000, 4000}) {
    REQUIRE(first_step_needing_length(c, d) == wsd_decay_start(c, d));
    for (std::int64_t step = 0; step < wsd_decay_start(c, d); step += 37)
      REQUIRE(s.lr(step, d) == s.lr(step, std::int64_t{1} << 52));
  }
  // The decay never starts inside the warm-up; a fraction of 1 decays from the warm-up's end.
  REQUIRE(wsd_decay_start(c, 12) == 10);
  const ScheduleConfig all{.kind = ScheduleKind::wsd, .lr = 1.0, .decay_fraction = 1.0};
  REQUIRE(wsd_decay_start(all, 100) == 0);
  REQUIRE(near(Schedule(all).lr(50, 100), 0.5, kTol, 0));
  // Cosine's first step that depends on the length is the one after warm-up: η(N) = η for any D.
  const ScheduleConfig cos{.kind = ScheduleKind::cosine, .lr = 1.0, .warmup_steps = 20};
  REQUIRE(first_step_needing_length(cos, 500) == 21);
  REQUIRE(Schedule(cos).lr(20, 500) == Schedule(cos).lr(20, 90));
  REQUIRE(Schedule(cos).lr(21, 500) != Schedule(cos).lr(21, 90));
}

TEST_CASE("optim: plateau divides the lr only after patience runs out", "[optim][schedule]") {
  Schedule s({.kind = ScheduleKind::plateau, .lr = 20.0, .factor = 4.0, .patience = 1});
  REQUIRE_FALSE(s.observe(5.0));  // best 5
  REQUIRE_FALSE(s.observe(4.0));  // improves
  REQUIRE_FALSE(s.observe(4.5));  // one bad validation: within patience
  REQUIRE(s.lr(100, 0) == 20.0);
  REQUIRE(s.observe(4.0));  // not better than 4: the second bad one divides
  REQUIRE(s.lr(100, 0) == 5.0);
  REQUIRE_FALSE(s.observe(3.9));           // improves: counter reset
  REQUIRE_FALSE(s.observe(std::nan("")));  // a NaN never improves
  REQUIRE(s.observe(3.95));
  REQUIRE(s.lr(100, 0) == 1.25);
  REQUIRE(s.state().best_loss == 3.9);
  REQUIRE(s.state().bad_evals == 0);
}

TEST_CASE("optim: plateau with patience 0 is the word-language-model recipe", "[optim][schedule]") {
  Schedule s({.kind = ScheduleKind::plateau, .lr = 20.0, .warmup_steps = 4, .min_lr = 0.5});
  REQUIRE(s.lr(0, 0) == 5.0);  // warm-up applies to the current plateau lr
  REQUIRE_FALSE(s.observe(6.0));
  REQUIRE(s.observe(6.0));  // no improvement: divide by 4 at once
  REQUIRE(s.lr(10, 0) == 5.0);
  REQUIRE(s.observe(7.0));
  REQUIRE(s.lr(10, 0) == 1.25);
  REQUIRE(s.observe(7.0));
  REQUIRE(s.lr(10, 0) == 0.5);  // floored at min_lr
}

TEST_CASE("optim: other kinds ignore validation losses", "[optim][schedule]") {
  Schedule s({.kind = ScheduleKind::constant, .lr = 1.0});
  REQUIRE_FALSE(s.observe(2.0));
  REQUIRE_FALSE(s.observe(3.0));
  REQUIRE_FALSE(s.observe(3.0));
  REQUIRE(s.lr(5, 10) == 1.0);
}

TEST_CASE("optim: a plateau schedule restored from its state continues exactly",
          "[optim][schedule]") {
  const ScheduleConfig c{.kind = ScheduleKind::plateau, .lr = 1.0, .factor = 3.0, .patience = 1};
  const std::vector<double> losses{5, 4, 4.2, 4.1, 3, 3.5, 3.2, 3.1, 2.9, 3.0, 3.0, 3.0};
  Schedule straight(c), first(c);
  for (double loss : losses) straight.observe(loss);
  for (std::size_t i = 0; i < 6; ++i) first.observe(losses[i]);
  const ScheduleState saved = first.state();
  Schedule resumed(c);
  resumed.load_state(saved);
  for (std::size_t i = 6; i < losses.size(); ++i) resumed.observe(losses[i]);
  REQUIRE(resumed.state().lr == straight.state().lr);
  REQUIRE(resumed.state().best_loss == straight.state().best_loss);
  REQUIRE(resumed.state().bad_evals == straight.state().bad_evals);
  REQUIRE(resumed.lr(1, 1) == straight.lr(1, 1));
  REQUIRE(straight.state().lr < 1.0);  // the sequence did divide
  // A fresh schedule's best is +inf: any first loss improves on it.
  REQUIRE(Schedule(c).state().best_loss == std::numeric_limits<double>::infinity());
}

TEST_CASE("optim: schedule names parse and invalid configurations are errors",
          "[optim][schedule]") {
  REQUIRE(parse_schedule_kind("cosine") == ScheduleKind::cosine);
  REQUIRE(parse_schedule_kind("plateau") == ScheduleKind::plateau);
  REQUIRE(schedule_kind_name(ScheduleKind::step) == "step");
  REQUIRE_THROWS_WITH(parse_schedule_kind("linear"),
                      Catch::Contains("'linear'") && Catch::Contains("cosine"));
  REQUIRE_THROWS_WITH(Schedule({.lr = -1.0}), Catch::Contains("lr -1"));
  REQUIRE_THROWS_WITH(Schedule({.warmup_steps = -5}), Catch::Contains("warmup_steps -5"));
  REQUIRE_THROWS_WITH(Schedule({.step_size = 0}), Catch::Contains("step_size"));
  REQUIRE_THROWS_WITH(Schedule({.gamma = 0.0}), Catch::Contains("gamma"));
  REQUIRE_THROWS_WITH(Schedule({.lr = 1.0, .min_lr = 2.0}), Catch::Contains("min_lr 2"));
  REQUIRE_THROWS_WITH(Schedule({.factor = 0.5}), Catch::Contains("factor 0.5"));
  REQUIRE_THROWS_WITH(Schedule({.patience = -1}), Catch::Contains("patience -1"));
  REQUIRE_THROWS_WITH(Schedule({.decay_fraction = 0.0}), Catch::Contains("decay_fraction 0"));
  REQUIRE_THROWS_WITH(Schedule({.decay_fraction = 1.5}), Catch::Contains("decay_fraction 1.5"));
  REQUIRE(parse_schedule_kind("wsd") == ScheduleKind::wsd);
  REQUIRE(schedule_kind_name(ScheduleKind::wsd) == "wsd");
  const Schedule s({});
  REQUIRE_THROWS_WITH(s.lr(-1, 10), Catch::Contains("step -1"));
  REQUIRE_THROWS_WITH(s.lr(1, -10), Catch::Contains("decay_steps -10"));
  Schedule t({});
  REQUIRE_THROWS_WITH(t.load_state({.lr = -1.0, .best_loss = 1.0, .bad_evals = 0}),
                      Catch::Contains("lr -1"));
}
