// CUDA elementwise kernels on what the op table's small samples do not reach: more elements than
// 65535 blocks of 256 threads, plans of several non-mergeable dims (with 32- and 64-bit
// indexing, the latter over 2^31 elements written into overlapping slots), int64
// fill/copy/arange/where/comparisons, dtype conversion, zero-size tensors, and the error for
// more than 8 non-mergeable dims. Poisoning is on: an unwritten element is NaN.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "core/ops/select.h"
#include "tests/cuda/cuda_testing.h"

using namespace kiln;
using namespace kiln::testing;

TEST_CASE("cuda/elementwise ops cover grids beyond 65535 blocks", "[cuda][elementwise]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  Generator gen(41);
  const std::int64_t n = 65535LL * 256 * 2 + 3;
  const Mirrored x = uniform_mirrored({n}, gen);
  REQUIRE(relative_error(exp(x.gpu), exp(x.cpu)) <= 1e-6);
  REQUIRE(relative_error(add(x.gpu, 1.5), add(x.cpu, 1.5)) <= 1e-6);
  const Tensor filled = full({n}, 3.0, {DType::f32, Device::cuda()});
  REQUIRE(near(filled.sum().item<double>(), 3.0 * static_cast<double>(n), 1e-6, 0.0));
}

TEST_CASE("cuda/broadcast and strided operands match the CPU", "[cuda][elementwise]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  Generator gen(42);
  const Mirrored a = uniform_mirrored({4, 1, 6, 1, 5}, gen),
                 b = uniform_mirrored({3, 1, 7, 5}, gen);
  REQUIRE(relative_error(mul(a.gpu, b.gpu), mul(a.cpu, b.cpu)) <= 1e-6);
  const Mirrored c = uniform_mirrored({8, 9, 10}, gen);
  const Tensor cpu_view = c.cpu.permute({2, 0, 1}).slice(1, 1, 8, 2);
  const Tensor gpu_view = c.gpu.permute({2, 0, 1}).slice(1, 1, 8, 2);
  REQUIRE_EXACT(gpu_view.contiguous(), cpu_view.contiguous());
  REQUIRE(relative_error(sub(gpu_view, 0.25), sub(cpu_view, 0.25)) <= 1e-6);
  REQUIRE(relative_error(gelu(gpu_view), gelu(cpu_view)) <= 1e-6);
  REQUIRE(relative_error(gelu(gpu_view, GeluApproximation::tanh),
                         gelu(cpu_view, GeluApproximation::tanh)) <= 1e-6);
}

TEST_CASE("cuda/plans with over 2^31 elements index in 64 bits", "[cuda][elementwise]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  // A column plus a row: (2^16 + 1) x (2^15 + 1) = 2^31 + 98305 elements in two dims that do not
  // merge, more than a 32-bit index holds. The output view has strides (1, 1), so element (r, c)
  // lands in slot r + c of rows + cols - 1 slots (no 8.6 GB buffer) with value r + c: every slot
  // holds its own index only if every linear index became its true (r, c).
  const std::int64_t rows = (1 << 16) + 1, cols = (1 << 15) + 1, slots = rows + cols - 1;
  const Tensor column = arange(0.0, static_cast<double>(rows), 1.0, {DType::f32, Device::cuda()});
  const Tensor row = arange(0.0, static_cast<double>(cols), 1.0, {DType::f32, Device::cuda()});
  const Tensor out = empty({slots}, {DType::f32, Device::cuda()});
  gpu_backend().binary(BinaryOp::add, {out.raw_data(), DType::f32, {rows, cols}, {1, 1}},
                       {column.raw_data(), DType::f32, {rows, cols}, {1, 0}},
                       {row.raw_data(), DType::f32, {rows, cols}, {0, 1}});
  REQUIRE_EXACT(out.to(Device::cpu()), arange(0.0, static_cast<double>(slots), 1.0));
}

TEST_CASE("cuda/int64 fill, copy, arange, where and comparisons match the CPU",
          "[cuda][elementwise]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  const Mirrored ids = mirrored(arange(0.0, 100000.0, 3.0, {DType::i64}));
  REQUIRE_EXACT(arange(0.0, 100000.0, 3.0, {DType::i64, Device::cuda()}), ids.cpu);
  REQUIRE_EXACT(full({5, 7}, -4.0, {DType::i64, Device::cuda()}), full({5, 7}, -4.0, {DType::i64}));
  REQUIRE_EXACT(ids.gpu.to(DType::f64), ids.cpu.to(DType::f64));
  REQUIRE_EXACT(ids.gpu.slice(0, 3, 900, 7).contiguous(), ids.cpu.slice(0, 3, 900, 7).contiguous());
  const Mirrored threshold = mirrored(full({}, 50001.0, {DType::i64}));
  REQUIRE_EXACT(lt(ids.gpu, threshold.gpu), lt(ids.cpu, threshold.cpu));
  REQUIRE_EXACT(eq(ids.gpu, threshold.gpu), eq(ids.cpu, threshold.cpu));
  Generator gen(43);
  const Mirrored x = uniform_mirrored({4, 6}, gen);
  const Mirrored cond = mirrored(gt(x.cpu, zeros({6})).to(DType::i64));
  const Mirrored y = uniform_mirrored({6}, gen);
  REQUIRE_EXACT(where(cond.gpu, x.gpu, y.gpu), where(cond.cpu, x.cpu, y.cpu));
  REQUIRE_EXACT(arange(0.5, 10.0, 0.25, {DType::f32, Device::cuda()}), arange(0.5, 10.0, 0.25));
  REQUIRE_EXACT(x.gpu.to(DType::f64).to(DType::f32), x.cpu);
}

TEST_CASE("cuda/zero-size tensors launch nothing and fail nothing", "[cuda][elementwise]") {
  if (!cuda_available_or_skip()) return;
  const Tensor none = zeros({0, 5}, {DType::f32, Device::cuda()});
  REQUIRE(exp(none).shape() == Shape{0, 5});
  REQUIRE(add(none, ones({5}, {DType::f32, Device::cuda()})).numel() == 0);
  REQUIRE_EXACT(sum(none, {0}).to(Device::cpu()), zeros({5}));
  REQUIRE(matmul(none, ones({5, 3}, {DType::f32, Device::cuda()})).shape() == Shape{0, 3});
  REQUIRE(rand({0}, {DType::f32, Device::cuda()}).numel() == 0);
  gpu_backend().synchronize();
}

TEST_CASE("cuda/more than 8 non-mergeable dims is an error naming the op", "[cuda][elementwise]") {
  if (!cuda_available_or_skip()) return;
  // Sizes 2 everywhere; a is broadcast along the odd dims and b along the even ones, so no two
  // neighbouring dims merge: 9 dims remain.
  const Tensor a = ones({2, 1, 2, 1, 2, 1, 2, 1, 2}, {DType::f32, Device::cuda()});
  const Tensor b = ones({1, 2, 1, 2, 1, 2, 1, 2, 1}, {DType::f32, Device::cuda()});
  REQUIRE_THROWS_WITH(add(a, b), Catch::Contains("add:") && Catch::Contains("at most 8"));
}

TEST_CASE("cuda/relu keeps NaN and passes its gradient, as the CPU", "[cuda][elementwise]") {
  if (!cuda_available_or_skip()) return;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x =
      from_vector<double>({nan, -0.5, 0.0, 2.0}, {4}).to(DType::f32).to(Device::cuda());
  const Tensor leaf = x.detach().requires_grad_();
  const Tensor y = relu(leaf);
  const std::vector<double> v = y.to(Device::cpu()).to_vector<double>();
  REQUIRE(std::isnan(v[0]));
  REQUIRE((v[1] == 0.0 && v[2] == 0.0 && v[3] == 2.0));
  y.backward(full({4}, 3.0, {DType::f32, Device::cuda()}));
  REQUIRE_EXACT(leaf.grad().to(Device::cpu()),
                from_vector<double>({3, 0, 0, 3}, {4}).to(DType::f32));
}
