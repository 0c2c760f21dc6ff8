// The ops optimizers are made of (core/ops/optimizer_update.h): adam_update_ and sgd_update_ equal
// the closed-form updates and are what the optimizers run (bit for bit), sums_of_squares is Σ x²
// per tensor, and every argument the kernels cannot take is an error naming the op and the shapes.
#include <catch2/catch.hpp>

#include "core/kiln.h"
#include "core/ops/optimizer_update.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "tests/harness/near.h"
#include "tests/optim/reference.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

const Shape kUpdateShape{2, 3};
constexpr std::int64_t kUpdateNumel = 6;

template <typename T>
Tensor values_of(const std::vector<double>& values) {
  return tensor_of<T>(values, kUpdateShape);
}

}  // namespace

TEMPLATE_TEST_CASE("optimizer ops: adam_update_ steps p, m and v as the AdamW equations",
                   "[optim][optimizer_update]", float, double) {
  const Tensor p = values_of<TestType>(initial_values(kUpdateNumel));
  const Tensor m = zeros(kUpdateShape, {.dtype = p.dtype()});
  const Tensor v = zeros(kUpdateShape, {.dtype = p.dtype()});
  AdamReference reference{.lr = 0.01, .weight_decay = 0.1, .decoupled = true};
  std::vector<double> expected = initial_values(kUpdateNumel);
  for (int t = 1; t <= 3; ++t) {
    const std::vector<double> g = rounded<TestType>(gradient_at(t, kUpdateNumel));
    adam_update_(p, values_of<TestType>(g), m, v,
                 {.lr = 0.01, .weight_decay = 0.1, .decoupled_weight_decay = true, .step = t});
    reference.step(expected, g, t);
    INFO("step " << t);
    REQUIRE_NEAR(p, tensor_of<double>(expected, kUpdateShape), optim_rtol<TestType>,
                 optim_atol<TestType>);
    REQUIRE_NEAR(m, tensor_of<double>(reference.m, kUpdateShape), optim_rtol<TestType>,
                 optim_atol<TestType>);
    REQUIRE_NEAR(v, tensor_of<double>(reference.v, kUpdateShape), optim_rtol<TestType>,
                 optim_atol<TestType>);
  }
}

TEMPLATE_TEST_CASE(
    "optimizer ops: sgd_update_ steps p and the momentum buffer as the SGD equations",
    "[optim][optimizer_update]", float, double) {
  const Tensor p = values_of<TestType>(initial_values(kUpdateNumel));
  const Tensor buffer = zeros(kUpdateShape, {.dtype = p.dtype()});
  SgdReference reference{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true};
  std::vector<double> expected = initial_values(kUpdateNumel);
  for (int t = 1; t <= 3; ++t) {
    const std::vector<double> g = rounded<TestType>(gradient_at(t, kUpdateNumel));
    sgd_update_(p, values_of<TestType>(g), buffer,
                {.lr = 0.05,
                 .momentum = 0.9,
                 .weight_decay = 0.01,
                 .nesterov = true,
                 .first_step = t == 1});
    reference.step(expected, g, t);
    INFO("step " << t);
    REQUIRE_NEAR(p, tensor_of<double>(expected, kUpdateShape), optim_rtol<TestType>,
                 optim_atol<TestType>);
    REQUIRE_NEAR(buffer, tensor_of<double>(reference.buffer, kUpdateShape), optim_rtol<TestType>,
                 optim_atol<TestType>);
  }
}

TEST_CASE("optimizer ops: the optimizers' steps are the ops, bit for bit",
          "[optim][optimizer_update]") {
  const std::vector<double> g1 = rounded<float>(gradient_at(1, kUpdateNumel));
  const std::vector<double> g2 = rounded<float>(gradient_at(2, kUpdateNumel));
  SECTION("Adam") {
    const Tensor p = values_of<float>(initial_values(kUpdateNumel)).requires_grad_();
    Adam opt({{"w", p}}, {.lr = 0.01, .weight_decay = 0.1});
    const Tensor q = values_of<float>(initial_values(kUpdateNumel));
    const Tensor m = zeros(kUpdateShape), v = zeros(kUpdateShape);
    for (int t = 1; t <= 2; ++t) {
      const Tensor g = values_of<float>(t == 1 ? g1 : g2);
      p.set_grad(g);
      opt.step(0.5);
      adam_update_(q, g, m, v, {.lr = 0.01, .weight_decay = 0.1, .step = t, .grad_scale = 0.5});
      REQUIRE_EXACT(p.detach(), q);
    }
  }
  SECTION("SGD") {
    const Tensor p = values_of<float>(initial_values(kUpdateNumel)).requires_grad_();
    Sgd opt({{"w", p}}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.2});
    const Tensor q = values_of<float>(initial_values(kUpdateNumel));
    const Tensor buffer = zeros(kUpdateShape);
    for (int t = 1; t <= 2; ++t) {
      const Tensor g = values_of<float>(t == 1 ? g1 : g2);
      p.set_grad(g);
      opt.step();
      sgd_update_(q, g, buffer,
                  {.lr = 0.1, .momentum = 0.9, .dampening = 0.2, .first_step = t == 1});
      REQUIRE_EXACT(p.detach(), q);
    }
  }
}

TEST_CASE("optimizer ops: an update bumps the version of every tensor it writes",
          "[optim][optimizer_update]") {
  const Tensor p = ones(kUpdateShape), g = ones(kUpdateShape), m = zeros(kUpdateShape),
               v = zeros(kUpdateShape);
  const std::uint64_t pv = p.version(), mv = m.version(), vv = v.version(), gv = g.version();
  adam_update_(p, g, m, v, {});
  REQUIRE(p.version() == pv + 1);
  REQUIRE(m.version() == mv + 1);
  REQUIRE(v.version() == vv + 1);
  REQUIRE(g.version() == gv);
  sgd_update_(p, g, Tensor(), {});
  REQUIRE(p.version() == pv + 2);
}

TEST_CASE("optimizer ops: sums_of_squares gives each tensor's Σ x² in its own element",
          "[optim][optimizer_update]") {
  const Tensor a = from_vector<double>({1, -2, 3}, {3});
  const Tensor b = from_vector<double>({4, 5, 6, 7}, {2, 2}).transpose(0, 1);  // not contiguous
  const Tensor none = zeros({0}, {.dtype = DType::f64});
  const Tensor sums = sums_of_squares(std::vector<Tensor>{a, b, none});
  REQUIRE(sums.shape() == Shape{3});
  REQUIRE(sums.dtype() == DType::f64);
  REQUIRE(sums.to_vector<double>() == std::vector<double>{14, 126, 0});
}

TEST_CASE("errors/optimizer_update: arguments the kernels cannot take", "[optim][errors]") {
  const Tensor p = ones(kUpdateShape), g = ones(kUpdateShape), m = zeros(kUpdateShape),
               v = zeros(kUpdateShape);
  using Catch::Contains;
  SECTION("adam_update_") {
    REQUIRE_THROWS_WITH(adam_update_(p, ones({3, 2}), m, v, {}),
                        Contains("adam_update_") && Contains("grad has shape [3, 2]") &&
                            Contains("param has shape [2, 3]"));
    REQUIRE_THROWS_WITH(adam_update_(p, g, zeros({6}), v, {}),
                        Contains("adam_update_") && Contains("exp_avg has shape [6]"));
    REQUIRE_THROWS_WITH(adam_update_(p, g, m, zeros(kUpdateShape, {.dtype = DType::f64}), {}),
                        Contains("adam_update_") && Contains("float32 and float64"));
    REQUIRE_THROWS_WITH(adam_update_(zeros(kUpdateShape, {.dtype = DType::i64}), g, m, v, {}),
                        Contains("adam_update_") && Contains("int64"));
    REQUIRE_THROWS_WITH(
        adam_update_(ones({3, 2}).transpose(0, 1), g, m, v, {}),
        Contains("adam_update_") && Contains("param (shape [2, 3]") && Contains("not contiguous"));
    REQUIRE_THROWS_WITH(
        adam_update_(p, ones({3, 2}).transpose(0, 1), m, v, {}),
        Contains("adam_update_") && Contains("grad (shape [2, 3]") && Contains("not contiguous"));
    REQUIRE_THROWS_WITH(adam_update_(p, Tensor(), m, v, {}),
                        Contains("adam_update_") && Contains("grad is undefined"));
    const Tensor leaf = ones(kUpdateShape).requires_grad_();
    REQUIRE_THROWS_WITH(adam_update_(leaf, g, m, v, {}),
                        Contains("adam_update_") && Contains("requires grad"));
  }
  SECTION("sgd_update_") {
    REQUIRE_THROWS_WITH(sgd_update_(p, ones({6}), Tensor(), {}),
                        Contains("sgd_update_") && Contains("grad has shape [6]") &&
                            Contains("param has shape [2, 3]"));
    REQUIRE_THROWS_WITH(
        sgd_update_(p, g, Tensor(), {.momentum = 0.9}),
        Contains("sgd_update_") && Contains("momentum 0.9 needs a momentum buffer"));
    REQUIRE_THROWS_WITH(sgd_update_(p, g, m, {}),
                        Contains("sgd_update_") && Contains("momentum 0 takes no momentum buffer"));
    REQUIRE_THROWS_WITH(sgd_update_(p, g, zeros({2, 2}), {.momentum = 0.9}),
                        Contains("sgd_update_") && Contains("momentum_buffer has shape [2, 2]"));
  }
  SECTION("sums_of_squares") {
    REQUIRE_THROWS_WITH(sums_of_squares({}), Contains("sums_of_squares: got no tensors"));
    REQUIRE_THROWS_WITH(sums_of_squares(std::vector<Tensor>{p, zeros({2}, {.dtype = DType::f64})}),
                        Contains("sums_of_squares") && Contains("float32 and float64"));
    REQUIRE_THROWS_WITH(sums_of_squares(std::vector<Tensor>{zeros({2}, {.dtype = DType::i64})}),
                        Contains("sums_of_squares") && Contains("int64"));
  }
}

TEST_CASE("optimizer ops: step_guard_ writes the loss, norm, clip scale and non-finite rule",
          "[optim][optimizer_update]") {
  const Tensor ledger = step_ledger(Device::cpu());
  const auto slots = [&] { return ledger.to_vector<double>(); };
  // Two windows' losses, the gradients' Σ g² 9 and 16: norm 5, clipped to 1.
  step_guard_(ledger, tensor_of<float>({2.5, 3.5}, {2}), tensor_of<float>({9.0, 16.0}, {2}),
              {.clip = 1.0, .step = 1});
  std::vector<double> l = slots();
  CHECK(l[StepLedger::loss] == 3.0);
  CHECK(l[StepLedger::norm] == 5.0);
  CHECK(l[StepLedger::scale] == 1.0 / (5.0 + 1e-6));
  CHECK(l[StepLedger::apply] == 1.0);
  CHECK(l[StepLedger::interval_loss] == 3.0);
  CHECK(l[StepLedger::interval_finite] == 1.0);
  // Under the clip, and without one: scale 1. No gradients: norm 0.
  step_guard_(ledger, tensor_of<double>({1.0}, {1}), tensor_of<double>({0.25}, {1}),
              {.clip = 1.0, .step = 2});
  CHECK(slots()[StepLedger::scale] == 1.0);
  step_guard_(ledger, tensor_of<double>({1.0}, {1}), tensor_of<double>({}, {0}),
              {.clip = 0.0, .step = 3});
  l = slots();
  CHECK(l[StepLedger::norm] == 0.0);
  CHECK(l[StepLedger::scale] == 1.0);
  CHECK(l[StepLedger::interval_loss] == 5.0);  // 3 + 1 + 1
  CHECK(l[StepLedger::interval_finite] == 3.0);
  // A non-finite norm at step 4: skipped, kept as the first bad step, out of the interval sums.
  const double inf = std::numeric_limits<double>::infinity();
  step_guard_(ledger, tensor_of<double>({2.0}, {1}), tensor_of<double>({inf}, {1}),
              {.clip = 1.0, .step = 4});
  l = slots();
  CHECK(l[StepLedger::apply] == 0.0);
  CHECK(l[StepLedger::first_bad] == 4.0);
  CHECK(l[StepLedger::bad_loss] == 2.0);
  CHECK(l[StepLedger::bad_norm] == inf);
  CHECK(l[StepLedger::interval_finite] == 3.0);
  // Stopping: every later step is skipped too, and the first bad step stays 4. Skipping instead:
  // a later finite step goes ahead.
  step_guard_(ledger, tensor_of<double>({1.0}, {1}), tensor_of<double>({1.0}, {1}),
              {.clip = 1.0, .stop_on_nonfinite = true, .step = 5});
  CHECK(slots()[StepLedger::apply] == 0.0);
  CHECK(slots()[StepLedger::first_bad] == 4.0);
  step_guard_(ledger, tensor_of<double>({1.0}, {1}), tensor_of<double>({1.0}, {1}),
              {.clip = 1.0, .stop_on_nonfinite = false, .step = 6});
  CHECK(slots()[StepLedger::apply] == 1.0);
  CHECK_THROWS_WITH(
      step_guard_(ledger, tensor_of<double>({}, {0}), tensor_of<double>({}, {0}), {}),
      Catch::Matchers::Contains("step_guard_: a step needs at least one window loss"));
  CHECK_THROWS_WITH(step_guard_(zeros({3}, {.dtype = DType::f64}), tensor_of<double>({1.0}, {1}),
                                tensor_of<double>({}, {0}), {}),
                    Catch::Matchers::Contains("step_guard_: ledger must be"));
}

TEMPLATE_TEST_CASE("optimizer ops: a guarded update takes the ledger's scale or is skipped",
                   "[optim][optimizer_update]", float, double) {
  const std::vector<double> g = rounded<TestType>(gradient_at(1, kUpdateNumel));
  const Tensor ledger = step_ledger(Device::cpu());
  // Norm 2, clip 1: scale 1 / (2 + 1e-6), as the unguarded update with that grad_scale.
  step_guard_(ledger, tensor_of<double>({1.0}, {1}), tensor_of<double>({4.0}, {1}),
              {.clip = 1.0, .step = 1});
  const Tensor p = values_of<TestType>(initial_values(kUpdateNumel)), q = p.clone();
  const Tensor m = zeros(kUpdateShape, {.dtype = p.dtype()}),
               v = zeros(kUpdateShape, {.dtype = p.dtype()});
  const Tensor m2 = m.clone(), v2 = v.clone();
  adam_update_(p, values_of<TestType>(g), m, v, {.lr = 0.01, .grad_scale = 123.0}, ledger);
  adam_update_(q, values_of<TestType>(g), m2, v2, {.lr = 0.01, .grad_scale = 1.0 / (2.0 + 1e-6)});
  CHECK(p.to_vector<TestType>() == q.to_vector<TestType>());
  // A skipped step leaves everything as it was.
  step_guard_(ledger, tensor_of<double>({NAN}, {1}), tensor_of<double>({4.0}, {1}),
              {.clip = 1.0, .step = 2});
  const std::vector<TestType> before = p.to_vector<TestType>();
  adam_update_(p, values_of<TestType>(g), m, v, {.lr = 0.01, .step = 2}, ledger);
  sgd_update_(p, values_of<TestType>(g), Tensor(), {.lr = 0.1}, ledger);
  CHECK(p.to_vector<TestType>() == before);
  CHECK(m.to_vector<TestType>() == m2.to_vector<TestType>());
  CHECK_THROWS_WITH(
      adam_update_(p, values_of<TestType>(g), m, v, {}, zeros({3}, {.dtype = DType::f64})),
      Catch::Matchers::Contains("adam_update_: guard must be"));
}
