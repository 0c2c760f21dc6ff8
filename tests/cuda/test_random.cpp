// Philox streams on CUDA: the same seed and offset give the CPU's numbers and dropout masks, bit
// for bit, for every element count (whole counters or not) and counter offset.
#include <catch2/catch.hpp>

#include "tests/cuda/cuda_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

const std::int64_t kCounts[] = {1, 3, 4, 5, 1001, 100003};

// A generator with seed 1234 that has already handed out 7 counters.
Generator used_generator() {
  Generator gen(1234);
  gen.reserve(7);
  return gen;
}

}  // namespace

TEST_CASE("cuda/rand and randn equal the CPU's bit for bit", "[cuda][random]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  for (DType dtype : {DType::f32, DType::f64}) {
    for (std::int64_t n : kCounts) {
      INFO(dtype_name(dtype) << " n " << n);
      Generator cpu_gen = used_generator(), gpu_gen = used_generator();
      REQUIRE_EXACT(rand({n}, {dtype, Device::cuda()}, &gpu_gen), rand({n}, {dtype}, &cpu_gen));
      REQUIRE(gpu_gen.offset() == cpu_gen.offset());
      const Tensor cpu_normal = randn({n}, {dtype}, &cpu_gen);
      const Tensor gpu_normal = randn({n}, {dtype, Device::cuda()}, &gpu_gen);
      if (dtype == DType::f32) {
        REQUIRE_EXACT(gpu_normal, cpu_normal);
      } else {
        // In double, CUDA's log and cos may differ from glibc's in the last bit or two.
        REQUIRE_NEAR(gpu_normal, cpu_normal, 1e-14, 1e-15);
      }
    }
  }
}

TEST_CASE("cuda/uniform and normal with a range or scale agree with the CPU's to rounding",
          "[cuda][random]") {
  if (!cuda_available_or_skip()) return;
  for (DType dtype : {DType::f32, DType::f64}) {
    Generator cpu_gen(9), gpu_gen(9);
    const double tolerance = dtype == DType::f32 ? 1e-6 : 1e-14;
    REQUIRE_NEAR(uniform({4099}, -2.0, 3.0, {dtype, Device::cuda()}, &gpu_gen),
                 uniform({4099}, -2.0, 3.0, {dtype}, &cpu_gen), tolerance, tolerance);
    REQUIRE_NEAR(normal({4099}, 0.5, 0.02, {dtype, Device::cuda()}, &gpu_gen),
                 normal({4099}, 0.5, 0.02, {dtype}, &cpu_gen), tolerance, tolerance);
  }
}

TEST_CASE("cuda/dropout masks equal the CPU's bit for bit", "[cuda][random]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  for (DType dtype : {DType::f32, DType::f64}) {
    for (double p : {0.0, 0.1, 0.5, 1.0}) {
      for (std::int64_t n : kCounts) {
        INFO(dtype_name(dtype) << " p " << p << " n " << n);
        const Mirrored mask = outputs({n}, dtype);
        cpu_backend_ref().dropout_mask(dtype, mask.cpu.raw_data(), n, p, 77, 5);
        gpu_backend().dropout_mask(dtype, mask.gpu.raw_data(), n, p, 77, 5);
        REQUIRE_EXACT(mask.gpu, mask.cpu);
      }
    }
  }
}

TEST_CASE("cuda/dropout applied as it is drawn equals the CPU's bit for bit", "[cuda][random]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  for (DType dtype : {DType::f32, DType::f64}) {
    for (double p : {0.1, 0.5}) {
      for (std::int64_t n : kCounts) {
        INFO(dtype_name(dtype) << " p " << p << " n " << n);
        Generator gen(3);
        const Mirrored x = uniform_mirrored({n}, gen, -2.0, 2.0, dtype);
        const Mirrored y = outputs({n}, dtype);
        cpu_backend_ref().dropout_apply(dtype, y.cpu.raw_data(), x.cpu.raw_data(), n, p, 77, 5);
        gpu_backend().dropout_apply(dtype, y.gpu.raw_data(), x.gpu.raw_data(), n, p, 77, 5);
        REQUIRE_EXACT(y.gpu, y.cpu);
      }
    }
  }
}
