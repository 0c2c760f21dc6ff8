// Indexing and optimizer kernels on CUDA against the CPU backend: the id check, row gather, the
// sort-based scatter-add (bit-identical to the CPU, which adds in the same order), and the Adam
// and SGD updates over several steps.
#include <catch2/catch.hpp>

#include <array>
#include <vector>

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

}  // namespace

TEST_CASE("cuda/find_invalid_id returns the first bad position or -1", "[cuda][indexing]") {
  if (!cuda_available_or_skip()) return;
  Generator gen(61);
  for (std::int64_t n : {1, 1000, 300000}) {
    INFO("n " << n);
    std::vector<std::int64_t> ids = repeated_ids(n, 50, gen).to_vector<std::int64_t>();
    const Tensor valid = from_vector(ids, {n}, Device::cuda());
    const IndexArgs args{.n = n, .table_rows = 50};
    REQUIRE(gpu_backend().find_invalid_id(args, ptr<const std::int64_t>(valid)) == -1);
    ids[n - 1] = 50;
    if (n > 3) ids[3] = -1;
    const Tensor invalid = from_vector(ids, {n}, Device::cuda());
    REQUIRE(gpu_backend().find_invalid_id(args, ptr<const std::int64_t>(invalid)) ==
            (n > 3 ? 3 : n - 1));
  }
  REQUIRE(gpu_backend().find_invalid_id({.n = 0, .table_rows = 50}, nullptr) == -1);
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
