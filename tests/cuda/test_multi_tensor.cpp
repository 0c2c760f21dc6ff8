// The multi-tensor optimizer kernels on CUDA (core/cuda/optim.cu): Adam over many parameters in
// one launch equals the per-tensor kernel bit for bit; the sums of squares of many tensors equal
// the CPU's within one rounding and the same bits on every run; and an optimizer step and the
// gradient norm make as many launches for 30 parameters as for 3 (counted by the emulator).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "core/ops/optimizer_update.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "tests/cuda/cuda_testing.h"

#if defined(KILN_CUDA_EMULATE)
#include "cuda_emulator/emulator.h"
#endif

using namespace kiln;
using namespace kiln::testing;

namespace {

// Odd sizes: empty, one element, under a warp, and across the kernels' chunks of 65536.
const std::vector<std::int64_t> kSizes = {0, 1, 31, 1000, 65536, 65537, 140001, 257};

struct AdamState {
  Tensor param, exp_avg, exp_avg_sq;
};

AdamState adam_state(std::int64_t n, DType dtype, Generator& gen) {
  return {uniform({n}, -1.0, 1.0, {dtype, Device::cuda()}, &gen),
          zeros({n}, {dtype, Device::cuda()}), zeros({n}, {dtype, Device::cuda()})};
}

AdamState clone_state(const AdamState& s) {
  return {s.param.clone(), s.exp_avg.clone(), s.exp_avg_sq.clone()};
}

}  // namespace

TEST_CASE("cuda/multi-tensor adam equals the per-tensor kernel bit for bit", "[cuda][optim]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  Generator gen(71);
  for (DType dtype : {DType::f32, DType::f64}) {
    for (bool decoupled : {false, true}) {
      // guard: none, a ledger that applies with scale 0.25, a ledger that skips the update.
      for (int guarded : {0, 1, 2}) {
        INFO(dtype_name(dtype) << " decoupled " << decoupled << " guard " << guarded);
        Tensor guard;
        if (guarded > 0) {
          std::vector<double> ledger(StepLedger::slots, 0.0);
          ledger[StepLedger::scale] = 0.25;
          ledger[StepLedger::apply] = guarded == 1 ? 1.0 : 0.0;
          guard = from_vector(ledger, {StepLedger::slots}, Device::cuda());
        }
        std::vector<AdamState> single, many;
        for (std::int64_t n : kSizes) {
          single.push_back(adam_state(n, dtype, gen));
          many.push_back(clone_state(single.back()));
        }
        for (std::int64_t step = 1; step <= 3; ++step) {
          std::vector<AdamParamUpdate> updates;
          for (std::size_t i = 0; i < kSizes.size(); ++i) {
            const Tensor grad = uniform({kSizes[i]}, -1.0, 1.0, {dtype, Device::cuda()}, &gen);
            // Each parameter its own lr and weight decay, as parameter groups give.
            const AdamArgs args{.lr = 1e-2 * static_cast<double>(i + 1),
                                .weight_decay = i % 2 == 0 ? 0.1 : 0.0,
                                .decoupled_weight_decay = decoupled,
                                .step = step,
                                .grad_scale = 0.5};
            adam_update_(single[i].param, grad, single[i].exp_avg, single[i].exp_avg_sq, args,
                         guard);
            updates.push_back({.param = many[i].param,
                               .grad = grad,
                               .exp_avg = many[i].exp_avg,
                               .exp_avg_sq = many[i].exp_avg_sq,
                               .args = args});
          }
          adam_update_many_(updates, guard);
        }
        for (std::size_t i = 0; i < kSizes.size(); ++i) {
          INFO("size " << kSizes[i]);
          REQUIRE_EXACT(many[i].param, single[i].param);
          REQUIRE_EXACT(many[i].exp_avg, single[i].exp_avg);
          REQUIRE_EXACT(many[i].exp_avg_sq, single[i].exp_avg_sq);
        }
      }
    }
  }
}

TEST_CASE("cuda/adam_update_many_ rejects mixed devices and mismatched state", "[cuda][optim]") {
  if (!cuda_available_or_skip()) return;
  const Tensor p = zeros({3}, {DType::f32, Device::cuda()});
  const Tensor q = zeros({3});
  std::vector<AdamParamUpdate> mixed = {{p, p.clone(), p.clone(), p.clone(), {}},
                                        {q, q.clone(), q.clone(), q.clone(), {}}};
  REQUIRE_THROWS_WITH(adam_update_many_(mixed),
                      Catch::Matchers::Contains("adam_update_many_: every param must share"));
  std::vector<AdamParamUpdate> shapes = {
      {p, p.clone(), zeros({4}, {DType::f32, Device::cuda()}), p.clone(), {}}};
  REQUIRE_THROWS_WITH(adam_update_many_(shapes),
                      Catch::Matchers::Contains("adam_update_many_ (update 0): exp_avg has shape"));
}

TEST_CASE("cuda/sums of squares of many tensors: the CPU's within one rounding, same bits again",
          "[cuda][optim]") {
  if (!cuda_available_or_skip()) return;
  Generator gen(72);
  for (DType dtype : {DType::f32, DType::f64}) {
    INFO(dtype_name(dtype));
    std::vector<Tensor> cpu, gpu;
    for (std::int64_t n : kSizes) {
      cpu.push_back(uniform({n}, -3.0, 3.0, {dtype}, &gen));
      gpu.push_back(cpu.back().to(Device::cuda()));
    }
    const std::vector<double> expected = sums_of_squares(cpu).to_vector<double>();
    const Tensor first = sums_of_squares(gpu);
    REQUIRE_EXACT(sums_of_squares(gpu), first);  // no atomics: the same bits every run
    const std::vector<double> actual = first.to_vector<double>();
    // Both sum in float64 (n ε64 apart at most) and round once to the dtype: one rounding apart.
    const double bound = dtype == DType::f32 ? std::ldexp(1.0, -23) : 1e-12;
    for (std::size_t i = 0; i < kSizes.size(); ++i) {
      INFO("size " << kSizes[i] << " gpu " << actual[i] << " cpu " << expected[i]);
      CHECK(std::abs(actual[i] - expected[i]) <= bound * std::abs(expected[i]));
    }
    CHECK(actual[0] == 0.0);  // the empty tensor
  }
}

TEST_CASE("cuda/an Adam step and the gradient norm launch as often for 30 parameters as for 3",
          "[cuda][optim]") {
  if (!cuda_available_or_skip()) return;
  Generator gen(73);
  // Launches of one guarded training step's optimizer part: the sums, the guard, the update.
  const auto launches_of_step = [&](int parameters) {
    NamedTensors params;
    for (int i = 0; i < parameters; ++i) {
      const Tensor p = uniform({7 + 1000 * i}, -1.0, 1.0, {DType::f32, Device::cuda()}, &gen);
      p.requires_grad_(true);
      p.set_grad(uniform({7 + 1000 * i}, -1.0, 1.0, {DType::f32, Device::cuda()}, &gen));
      params.emplace_back(fmt::format("p{}", i), p);
    }
    AdamW opt(weight_decay_groups(params, 0.1), {.lr = 1e-3});
    const Tensor ledger = step_ledger(Device::cuda());
    const Tensor loss = ones({1}, {DType::f32, Device::cuda()});
#if defined(KILN_CUDA_EMULATE)
    const std::int64_t before = emulator::kernel_launches();
#endif
    step_guard_(ledger, loss, grad_sums_of_squares(opt.parameters(), Device::cuda()),
                {.clip = 1.0});
    opt.step(ledger);
    // The step went ahead with a finite norm.
    const std::vector<double> slots = ledger.to_vector<double>();
    CHECK(slots[StepLedger::apply] == 1.0);
    CHECK(std::isfinite(slots[StepLedger::norm]));
#if defined(KILN_CUDA_EMULATE)
    return emulator::kernel_launches() - before;
#else
    return std::int64_t{0};  // a GPU counts no launches; the emulator holds the count
#endif
  };
  const std::int64_t few = launches_of_step(3), many = launches_of_step(30);
  CHECK(few == many);
#if defined(KILN_CUDA_EMULATE)
  // Two for the sums, one to copy the loss into float64, one for the guard, one for Adam.
  CHECK(few <= 6);
#endif
}
