// The CUDA backend's device clock (core/cuda/event_clock.cpp): CUDA events at each mark, the time
// between marks charged to the family of the later mark, and the host waiting for the device
// only when the totals are read, never at a mark. On the profiler: a profiled training step
// charges device time to the families its ops open.
#include <catch2/catch.hpp>

#include <cstddef>
#include <memory>

#include "core/profiler.h"
#include "nn/transformer_lm.h"
#include "optim/adam.h"
#include "tests/cuda/cuda_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

double of(const profile::DeviceClock::Totals& totals, profile::Family family) {
  return totals[static_cast<std::size_t>(family)];
}

}  // namespace

TEST_CASE("cuda/the device clock charges the time between marks and waits only for totals",
          "[cuda][profile]") {
  if (!cuda_available_or_skip()) return;
  const std::unique_ptr<profile::DeviceClock> clock = gpu_backend().device_clock();
  REQUIRE(clock != nullptr);
  REQUIRE(backend_for(Device::cpu()).device_clock() == nullptr);  // the host clock is the CPU's
  const Tensor x = ones({512, 512}, {DType::f32, Device::cuda()});
  const std::int64_t waits = cuda_host_synchronizations();
  clock->restart();
  (void)matmul(x, x);
  clock->mark(profile::Family::gemm);
  clock->mark(profile::Family::attention);  // nothing queued since the last mark
  (void)(x * 2.0);
  clock->mark(profile::Family::other);
  CHECK(cuda_host_synchronizations() == waits);  // marks never wait
  const profile::DeviceClock::Totals totals = clock->totals();
  // At most one wait, for the last mark (none on the emulator: its events complete when recorded,
  // and the marks already charged them).
  CHECK(cuda_host_synchronizations() <= waits + 1);
  CHECK(of(totals, profile::Family::gemm) > 0.0);
  CHECK(of(totals, profile::Family::other) > 0.0);
  CHECK(of(totals, profile::Family::attention) < of(totals, profile::Family::gemm));
  CHECK(of(totals, profile::Family::layer_norm) == 0.0);
  clock->restart();  // forgets the totals
  CHECK(of(clock->totals(), profile::Family::gemm) == 0.0);
}

TEST_CASE("cuda/a profiled training step charges device time to its families", "[cuda][profile]") {
  if (!cuda_available_or_skip()) return;
  nn::TransformerConfig config;
  config.vocab = 31, config.d_model = 16, config.heads = 2, config.layers = 1, config.ff = 32;
  config.max_seq_len = 8;
  manual_seed(5);
  nn::TransformerLM model(config);
  model.to(Device::cuda());
  Adam optimizer(model.named_parameters(), {.lr = 1e-3});
  const Tensor ids = from_vector<std::int64_t>({1, 2, 3, 4, 5, 6, 7, 8}, {1, 8}, Device::cuda());
  profile::enable(true);
  profile::time_device(gpu_backend().device_clock());
  model.loss(ids, ids).backward();
  optimizer.step();
  const auto totals = profile::device_totals();
  profile::time_device(nullptr);
  profile::enable(false);
  REQUIRE(totals.has_value());
  for (profile::Family family :
       {profile::Family::attention, profile::Family::vocabulary, profile::Family::optimizer}) {
    INFO(profile::name(family));
    CHECK(of(*totals, family) > 0.0);
  }
  CHECK(!profile::device_totals().has_value());  // stopped
}
