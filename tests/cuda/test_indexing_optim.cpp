// Indexing and optimizer kernels on CUDA against the CPU backend: the id check, row gather, the
// sort-based scatter-add (bit-identical to the CPU, which adds in the same order), and the Adam
// and SGD updates over several steps.
#include <catch2/catch.hpp>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/ops/linear_cross_entropy.h"
#include "core/ops/optimizer_update.h"
#include "tests/cuda/cuda_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// n ids in [0, rows) with many repeats, one id (rows - 1) never used and id 0 used most.
Tensor repeated_ids(std::int64_t n, std::int64_t rows, Generator& gen) {
  std::vector<std::int64_t> ids(n);
  const std::vector<double> u = uniform({n}, 0.0, 1.0, {DType::f64}, &gen).to_vector<double>();
  for (std::int64_t i = 0; i < n; ++i)
    ids[i] = i % 3 == 0 ? 0 : static_cast<std::int64_t>(u[i] * static_cast<double>(rows - 1));
  return from_vector(ids, {n});
}

// The bit patterns of a float64 tensor's values (NaNs compare equal when their bits do).
std::vector<std::uint64_t> bits(const Tensor& t) {
  std::vector<std::uint64_t> out;
  for (const double x : t.to_vector<double>()) out.push_back(std::bit_cast<std::uint64_t>(x));
  return out;
}

}  // namespace

TEST_CASE("cuda/an invalid id is raised at the next synchronisation, naming the first one",
          "[cuda][indexing]") {
  if (!cuda_available_or_skip()) return;
  Generator gen(61);
  for (std::int64_t n : {1, 1000, 300000}) {
    INFO("n " << n);
    std::vector<std::int64_t> ids = repeated_ids(n, 50, gen).to_vector<std::int64_t>();
    const Tensor valid = from_vector(ids, {n}, Device::cuda());
    const IndexArgs args{.n = n, .table_rows = 50, .op = "embedding"};
    // The check queues its kernels and returns without waiting; a clean one raises nothing.
    const std::int64_t waits = cuda_host_synchronizations();
    REQUIRE(gpu_backend().find_invalid_id(args, ptr<const std::int64_t>(valid)) == -1);
    REQUIRE(cuda_host_synchronizations() == waits);
    REQUIRE_NOTHROW(gpu_backend().synchronize());
    ids[n - 1] = 50;
    if (n > 3) ids[3] = -1;
    const Tensor invalid = from_vector(ids, {n}, Device::cuda());
    REQUIRE(gpu_backend().find_invalid_id(args, ptr<const std::int64_t>(invalid)) == -1);
    // A later clean check does not hide it; the first find is the one raised.
    REQUIRE(gpu_backend().find_invalid_id(args, ptr<const std::int64_t>(valid)) == -1);
    const std::string expected = n > 3 ? "embedding: id -1 at position 3 is out of range for a "
                                         "table of 50 rows"
                                       : "embedding: id 50 at position 0 is out of range for a "
                                         "table of 50 rows";
    REQUIRE_THROWS_WITH(gpu_backend().synchronize(), Catch::Matchers::Contains(expected));
    REQUIRE_NOTHROW(gpu_backend().synchronize());  // raised once, then cleared
  }
  REQUIRE(gpu_backend().find_invalid_id({.n = 0, .table_rows = 50}, nullptr) == -1);
}

TEST_CASE("cuda/an embedding with a bad id fails at the loss's read, not with a fault",
          "[cuda][indexing]") {
  if (!cuda_available_or_skip()) return;
  const Tensor table = ones({4, 3}, {.device = Device::cuda()}).requires_grad_(true);
  const Tensor ids = from_vector<std::int64_t>({1, 7, 2}, {3}, Device::cuda());
  Tensor loss;
  REQUIRE_NOTHROW(loss = embedding(table, ids).sum());
  loss.backward();  // the bad row is skipped in the gradient: no out-of-bounds write
  REQUIRE_THROWS_WITH(loss.item<double>(),
                      Catch::Matchers::Contains(
                          "embedding: id 7 at position 1 is out of range for a table of 4 rows"));
}

TEST_CASE("cuda/the LM head's targets are checked on the device, raised at the loss's read",
          "[cuda][indexing]") {
  if (!cuda_available_or_skip()) return;
  const Tensor x = ones({3, 4}, {.device = Device::cuda()}).requires_grad_(true);
  const Tensor w = ones({5, 4}, {.device = Device::cuda()}).requires_grad_(true);
  // -100 (ignore_index) is a valid target; 9 is not.
  const Tensor targets = from_vector<std::int64_t>({1, -100, 9}, {3}, Device::cuda());
  const std::int64_t waits = cuda_host_synchronizations();
  Tensor loss;
  REQUIRE_NOTHROW(loss = linear_cross_entropy(x, w, targets, -100));
  loss.backward();
  CHECK(cuda_host_synchronizations() == waits);  // neither the count nor the check waited
  REQUIRE_THROWS_WITH(loss.item<double>(),
                      Catch::Matchers::Contains("linear_cross_entropy: target 9 at position 2 is "
                                                "out of range for 5 classes"));
  // Valid targets: the loss and gradients are the CPU's, with the count kept on the device.
  const Tensor valid = from_vector<std::int64_t>({1, -100, 4}, {3});
  const Tensor x_cpu = uniform({3, 4}, -1.0, 1.0).requires_grad_(true);
  const Tensor w_cpu = uniform({5, 4}, -1.0, 1.0).requires_grad_(true);
  const Tensor x_gpu = x_cpu.detach().to(Device::cuda()).requires_grad_(true);
  const Tensor w_gpu = w_cpu.detach().to(Device::cuda()).requires_grad_(true);
  const Tensor cpu = linear_cross_entropy(x_cpu, w_cpu, valid, -100);
  const Tensor gpu = linear_cross_entropy(x_gpu, w_gpu, valid.to(Device::cuda()), -100);
  (cpu * 3.0).backward();
  (gpu * 3.0).backward();
  CHECK(near(gpu.item<double>(), cpu.item<double>(), 1e-6, 1e-6));
  CHECK(relative_error(x_gpu.grad(), x_cpu.grad()) <= 1e-5);
  CHECK(relative_error(w_gpu.grad(), w_cpu.grad()) <= 1e-5);
}

TEST_CASE("cuda/gather_rows copies the selected rows of every dtype", "[cuda][indexing]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  Generator gen(62);
  const Mirrored ids = mirrored(repeated_ids(700, 40, gen));
  for (DType dtype : {DType::f32, DType::f64}) {
    const Mirrored table = uniform_mirrored({40, 33}, gen, -1.0, 1.0, dtype);
    const Mirrored out = outputs({700, 33}, dtype);
    const IndexArgs args{.dtype = dtype, .n = 700, .table_rows = 40, .cols = 33};
    cpu_backend_ref().gather_rows(args, table.cpu.raw_data(), ptr<const std::int64_t>(ids.cpu),
                                  out.cpu.raw_data());
    gpu_backend().gather_rows(args, table.gpu.raw_data(), ptr<const std::int64_t>(ids.gpu),
                              out.gpu.raw_data());
    REQUIRE_EXACT(out.gpu, out.cpu);
  }
}

TEST_CASE("cuda/scatter_add_rows equals the CPU bit for bit, in position order",
          "[cuda][indexing]") {
  if (!cuda_available_or_skip()) return;
  Generator gen(63);
  for (DType dtype : {DType::f32, DType::f64}) {
    for (auto [n, rows, cols] : {std::array<std::int64_t, 3>{1, 1, 1},
                                 {700, 40, 33},
                                 {20000, 33278, 256},
                                 {5000, 3, 700}}) {
      INFO(dtype_name(dtype) << " n " << n << " rows " << rows << " cols " << cols);
      const Mirrored ids = mirrored(repeated_ids(n, rows, gen));
      const Mirrored grad = uniform_mirrored({n, cols}, gen, -1.0, 1.0, dtype);
      // Start from non-zero values: the kernels add into what is there.
      const Mirrored table = uniform_mirrored({rows, cols}, gen, -1.0, 1.0, dtype);
      const IndexArgs args{.dtype = dtype, .n = n, .table_rows = rows, .cols = cols};
      cpu_backend_ref().scatter_add_rows(args, grad.cpu.raw_data(),
                                         ptr<const std::int64_t>(ids.cpu), table.cpu.raw_data());
      gpu_backend().scatter_add_rows(args, grad.gpu.raw_data(), ptr<const std::int64_t>(ids.gpu),
                                     table.gpu.raw_data());
      REQUIRE_EXACT(table.gpu, table.cpu);
    }
  }
}

TEST_CASE("cuda/adam and sgd updates match the CPU over several steps", "[cuda][optim]") {
  if (!cuda_available_or_skip()) return;
  Generator gen(64);
  const std::int64_t n = 100003;
  for (DType dtype : {DType::f32, DType::f64}) {
    for (bool decoupled : {false, true}) {
      INFO(dtype_name(dtype) << " decoupled " << decoupled);
      const Mirrored param = uniform_mirrored({n}, gen, -1.0, 1.0, dtype);
      const Mirrored m = mirrored(zeros({n}, {dtype})), v = mirrored(zeros({n}, {dtype}));
      AdamArgs args;
      args.lr = 1e-2;
      args.weight_decay = 0.1;
      args.decoupled_weight_decay = decoupled;
      args.grad_scale = 0.5;
      for (std::int64_t step = 1; step <= 5; ++step) {
        args.step = step;
        const Mirrored grad = uniform_mirrored({n}, gen, -1.0, 1.0, dtype);
        cpu_backend_ref().adam_update(dtype, n, param.cpu.raw_data(), grad.cpu.raw_data(),
                                      m.cpu.raw_data(), v.cpu.raw_data(), args);
        gpu_backend().adam_update(dtype, n, param.gpu.raw_data(), grad.gpu.raw_data(),
                                  m.gpu.raw_data(), v.gpu.raw_data(), args);
      }
      const double tolerance = dtype == DType::f32 ? 1e-5 : 1e-12;
      REQUIRE(relative_error(param.gpu, param.cpu) <= tolerance);
      REQUIRE(relative_error(m.gpu, m.cpu) <= tolerance);
      REQUIRE(relative_error(v.gpu, v.cpu) <= tolerance);
    }
    for (bool nesterov : {false, true}) {
      INFO(dtype_name(dtype) << " nesterov " << nesterov);
      const Mirrored param = uniform_mirrored({n}, gen, -1.0, 1.0, dtype);
      const Mirrored buffer = mirrored(zeros({n}, {dtype}));
      SgdArgs args;
      args.momentum = 0.9;
      args.dampening = nesterov ? 0.0 : 0.1;
      args.weight_decay = 0.01;
      args.nesterov = nesterov;
      for (int step = 0; step < 5; ++step) {
        args.first_step = step == 0;
        const Mirrored grad = uniform_mirrored({n}, gen, -1.0, 1.0, dtype);
        cpu_backend_ref().sgd_update(dtype, n, param.cpu.raw_data(), grad.cpu.raw_data(),
                                     buffer.cpu.raw_data(), args);
        gpu_backend().sgd_update(dtype, n, param.gpu.raw_data(), grad.gpu.raw_data(),
                                 buffer.gpu.raw_data(), args);
      }
      const double tolerance = dtype == DType::f32 ? 1e-5 : 1e-12;
      REQUIRE(relative_error(param.gpu, param.cpu) <= tolerance);
      REQUIRE(relative_error(buffer.gpu, buffer.cpu) <= tolerance);
    }
  }
}

TEST_CASE("cuda/the step ledger equals the CPU's bit for bit, and skips the updates it stops",
          "[cuda][optim]") {
  if (!cuda_available_or_skip()) return;
  Generator gen(65);
  const std::int64_t n = 4099;
  const Mirrored ledger = {step_ledger(Device::cpu()), step_ledger(Device::cuda())};
  const Mirrored param = uniform_mirrored({n}, gen, -1.0, 1.0);
  const Mirrored m = mirrored(zeros({n})), v = mirrored(zeros({n}));
  // Finite, then a NaN loss (skipped, and every later update with it), then finite again.
  const std::vector<std::vector<double>> losses = {{2.5, 2.25}, {NAN, 1.0}, {1.5, 1.75}};
  for (std::int64_t step = 1; step <= 3; ++step) {
    INFO("step " << step);
    const Mirrored window_losses = mirrored(from_vector(losses[step - 1], {2}));
    const Mirrored grad = uniform_mirrored({n}, gen, -3.0, 3.0);
    const Mirrored sums = mirrored(sums_of_squares(std::array{grad.cpu, grad.cpu * 0.5}));
    const StepGuardArgs args{.clip = 1.0, .stop_on_nonfinite = true, .step = step};
    step_guard_(ledger.cpu, window_losses.cpu, sums.cpu, args);
    step_guard_(ledger.gpu, window_losses.gpu, sums.gpu, args);
    REQUIRE(bits(ledger.gpu.to(Device::cpu())) == bits(ledger.cpu));  // NaN slots too
    NoGradGuard no_grad;
    const AdamArgs adam{.lr = 1e-2, .step = step};
    const std::vector<float> before = param.gpu.to(Device::cpu()).to_vector<float>();
    adam_update_(param.cpu, grad.cpu, m.cpu, v.cpu, adam, ledger.cpu);
    adam_update_(param.gpu, grad.gpu, m.gpu, v.gpu, adam, ledger.gpu);
    // The update itself is the CPU's within float32 rounding (whether a * b + c becomes an FMA is
    // each compiler's choice, nvcc's or GCC's, and differs with the optimisation level); what the
    // ledger decides is exact: a skipped update leaves every bit of the parameter as it was.
    const std::vector<float> after = param.gpu.to(Device::cpu()).to_vector<float>();
    if (step == 1) {
      REQUIRE(after != before);
      REQUIRE(relative_error(param.gpu, param.cpu) <= 1e-6);
    } else {
      REQUIRE(after == before);
    }
  }
  const std::vector<double> last = ledger.cpu.to_vector<double>();
  CHECK(last[StepLedger::first_bad] == 2.0);
  CHECK(last[StepLedger::apply] == 0.0);
}
