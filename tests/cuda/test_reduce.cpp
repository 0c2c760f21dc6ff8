// CUDA reductions against the CPU backend on shapes that take every path: a warp per row, a
// block per row, chunked long rows, columns with and without chunking, empty reductions. Sums
// agree to 1e-5 relative; max values and indices (ties, NaN) exactly; every result is the same
// bits when run twice.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "tests/cuda/cuda_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

struct ReduceShape {
  std::int64_t outer, reduced, inner;
};

const ReduceShape kShapes[] = {
    {7, 5, 1},     {3, 1000, 1}, {2, 5000, 1}, {2, 100000, 1}, {1, 3000000, 1},
    {70000, 3, 1}, {4, 7, 9},    {1, 5000, 3}, {2, 70000, 5},  {1000, 300, 40},
    {3, 0, 1},     {2, 0, 4},    {1, 1, 1},    {5, 1, 7},
};

// Values in [-2, 2) rounded to quarters, so rows hold ties, with NaNs sprinkled in some rows.
Tensor max_input(const Shape& shape, Generator& gen, bool with_nan) {
  std::vector<float> values = uniform(shape, -2.0, 2.0, {}, &gen).to_vector<float>();
  for (std::size_t i = 0; i < values.size(); ++i) {
    values[i] = std::floor(values[i] * 4.0f) / 4.0f;
    if (with_nan && i % 97 == 13) values[i] = std::numeric_limits<float>::quiet_NaN();
  }
  return from_vector(values, shape);
}

}  // namespace

TEST_CASE("cuda/sum over (outer, reduced, inner) matches the CPU on every path", "[cuda][reduce]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  Generator gen(31);
  for (DType dtype : {DType::f32, DType::f64}) {
    for (const ReduceShape& s : kShapes) {
      INFO(dtype_name(dtype) << " outer " << s.outer << " reduced " << s.reduced << " inner "
                             << s.inner);
      const Mirrored x = uniform_mirrored({s.outer, s.reduced, s.inner}, gen, -1.0, 2.0, dtype);
      const Mirrored out = outputs({s.outer, s.inner}, dtype);
      const ReduceArgs args{
          .dtype = dtype, .outer = s.outer, .reduced = s.reduced, .inner = s.inner};
      cpu_backend_ref().sum(args, x.cpu.raw_data(), out.cpu.raw_data());
      gpu_backend().sum(args, x.gpu.raw_data(), out.gpu.raw_data());
      REQUIRE(relative_error(out.gpu, out.cpu) <= 1e-5);
      const Tensor again = empty({s.outer, s.inner}, {dtype, Device::cuda()});
      gpu_backend().sum(args, x.gpu.raw_data(), again.raw_data());
      REQUIRE_EXACT(again, out.gpu);
    }
  }
}

TEST_CASE("cuda/sum of squares matches the CPU, empty input included", "[cuda][reduce]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  Generator gen(32);
  for (std::int64_t n : {0, 1, 1000, 1025, 100000, 3000000}) {
    INFO("n " << n);
    const Mirrored x = uniform_mirrored({n}, gen);
    const Mirrored out = outputs({});
    const ReduceArgs args{.dtype = DType::f32, .reduced = n};
    cpu_backend_ref().sum_squares(args, x.cpu.raw_data(), out.cpu.raw_data());
    gpu_backend().sum_squares(args, x.gpu.raw_data(), out.gpu.raw_data());
    REQUIRE(relative_error(out.gpu, out.cpu) <= 1e-5);
  }
}

TEST_CASE("cuda/max takes the first index on ties and propagates NaN like the CPU",
          "[cuda][reduce]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  Generator gen(33);
  for (const ReduceShape& s : kShapes) {
    if (s.reduced == 0) continue;  // max over an empty dim is the op's error
    for (bool with_nan : {false, true}) {
      INFO("outer " << s.outer << " reduced " << s.reduced << " inner " << s.inner << " nan "
                    << with_nan);
      const Mirrored x = mirrored(max_input({s.outer, s.reduced, s.inner}, gen, with_nan));
      const Mirrored values = outputs({s.outer, s.inner});
      const Mirrored indices = outputs({s.outer, s.inner}, DType::i64);
      const ReduceArgs args{
          .dtype = DType::f32, .outer = s.outer, .reduced = s.reduced, .inner = s.inner};
      cpu_backend_ref().max(args, x.cpu.raw_data(), values.cpu.raw_data(),
                            ptr<std::int64_t>(indices.cpu));
      gpu_backend().max(args, x.gpu.raw_data(), values.gpu.raw_data(),
                        ptr<std::int64_t>(indices.gpu));
      REQUIRE_EXACT(indices.gpu, indices.cpu);
      REQUIRE_EXACT(values.gpu, values.cpu);
    }
  }
}

TEST_CASE("cuda/sum and max through the ops match the CPU", "[cuda][reduce]") {
  if (!cuda_available_or_skip()) return;
  Generator gen(34);
  const Mirrored x = uniform_mirrored({6, 50, 70}, gen);
  REQUIRE(relative_error(sum(x.gpu, {1}), sum(x.cpu, {1})) <= 1e-5);
  REQUIRE(relative_error(sum(x.gpu, {0, 2}), sum(x.cpu, {0, 2})) <= 1e-5);
  REQUIRE(relative_error(x.gpu.sum(), x.cpu.sum()) <= 1e-5);
  REQUIRE_EXACT(max(x.gpu, 2).indices, max(x.cpu, 2).indices);
}
