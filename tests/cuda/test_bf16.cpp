// bfloat16 on the CUDA backend: the conversion kernels round like core/bf16.h's scalar functions
// (the CPU backend's), bit for bit, from float32, float64 and int64 and back, contiguous and
// strided; fill, arange, gather and where keep the bits; ops that do not read bf16 refuse it by
// name; bf16 matrix products (cublasGemmStridedBatchedEx) and the ops that read bf16 activations
// match the CPU.
// Poisoning is on: an unwritten element is NaN.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/ops/select.h"
#include "tests/cuda/cuda_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

std::vector<std::uint16_t> bits_of(const Tensor& t) {
  std::vector<std::uint16_t> out;
  for (const bf16 b : t.to_vector<bf16>()) out.push_back(b.bits);
  return out;
}

std::vector<std::uint32_t> float_bits_of(const Tensor& t) {
  std::vector<std::uint32_t> out;
  for (const float f : t.to_vector<float>()) out.push_back(std::bit_cast<std::uint32_t>(f));
  return out;
}

}  // namespace

TEST_CASE("cuda/float32 -> bf16 -> float32 rounds like the scalar conversion, every pattern",
          "[cuda][bf16]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  // Each bf16 pattern with the low halves at, around and off the tie: (65536, 6) floats.
  std::vector<float> values;
  for (std::uint32_t high = 0; high <= 0xffff; ++high)
    for (const std::uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu})
      values.push_back(std::bit_cast<float>(high << 16 | low));
  const Mirrored x = mirrored(from_vector(values, {65536, 6}));
  const Tensor b = x.gpu.to(DType::bf16);
  REQUIRE(b.device() == Device::cuda());
  const std::vector<std::uint16_t> got = bits_of(b);
  for (std::size_t i = 0; i < values.size(); ++i) {
    INFO("float bits 0x" << std::hex << std::bit_cast<std::uint32_t>(values[i]));
    REQUIRE(got[i] == to_bf16(values[i]).bits);
  }
  REQUIRE(got == bits_of(x.cpu.to(DType::bf16)));
  REQUIRE(float_bits_of(b.to(DType::f32)) == float_bits_of(b.to(Device::cpu()).to(DType::f32)));
  // Strided: a transposed view converts element by element as its contiguous copy does.
  REQUIRE(bits_of(x.gpu.t().to(DType::bf16)) == bits_of(x.cpu.t().contiguous().to(DType::bf16)));
}

TEST_CASE("cuda/float64 and int64 convert to bf16 as the CPU does", "[cuda][bf16]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  const std::vector<double> doubles = {1.0 + 0x1p-8 + 0x1p-40,
                                       1.0 + 0x1p-8,
                                       -1e300,
                                       1e-300,
                                       -0.0,
                                       0.1,
                                       std::ldexp(511.0, 119),
                                       std::nextafter(std::ldexp(511.0, 119), 0.0)};
  const Mirrored d = mirrored(from_vector(doubles, {8}));
  const std::vector<std::uint16_t> d_bits = bits_of(d.gpu.to(DType::bf16));
  for (std::size_t i = 0; i < doubles.size(); ++i) REQUIRE(d_bits[i] == to_bf16(doubles[i]).bits);
  const std::vector<std::int64_t> ints = {257, 259, (std::int64_t{1} << 32) + (1 << 24) + 1,
                                          std::numeric_limits<std::int64_t>::min(), -1};
  const Mirrored i = mirrored(from_vector(ints, {5}));
  const std::vector<std::uint16_t> i_bits = bits_of(i.gpu.to(DType::bf16));
  for (std::size_t k = 0; k < ints.size(); ++k) REQUIRE(i_bits[k] == to_bf16(ints[k]).bits);
  const Tensor third = full({4}, 1.0 / 3.0, {DType::bf16, Device::cuda()});
  REQUIRE(third.to(DType::f64).to_vector<double>() == std::vector<double>(4, 0.333984375));
  REQUIRE(third.to(DType::i64).to_vector<std::int64_t>() == std::vector<std::int64_t>(4, 0));
}

TEST_CASE("cuda/bf16 fill, arange, copies, gather and where keep the bits", "[cuda][bf16]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  REQUIRE(bits_of(full({3}, -1.0 / 3.0, {DType::bf16, Device::cuda()})) ==
          std::vector<std::uint16_t>(3, to_bf16(-1.0 / 3.0).bits));
  REQUIRE(bits_of(arange(0.0, 2.0, 0.3, {DType::bf16, Device::cuda()})) ==
          bits_of(arange(0.0, 2.0, 0.3, {DType::bf16})));
  std::vector<bf16> patterns;
  for (std::uint32_t k = 0; k < 5 * 7; ++k)
    patterns.push_back(bf16{static_cast<std::uint16_t>(k * 1871)});
  const Mirrored table = mirrored(from_vector(patterns, {5, 7}));
  REQUIRE(bits_of(table.gpu) == bits_of(table.cpu));
  REQUIRE(bits_of(table.gpu.t().contiguous()) == bits_of(table.cpu.t().contiguous()));
  const Mirrored ids = mirrored(from_vector<std::int64_t>({4, 0, 4, 2}, {4}));
  REQUIRE(bits_of(embedding(table.gpu, ids.gpu)) == bits_of(embedding(table.cpu, ids.cpu)));
  REQUIRE(bits_of(index_select(table.gpu, 1, ids.gpu)) ==
          bits_of(index_select(table.cpu, 1, ids.cpu)));
  const Mirrored cond = mirrored(from_vector<bf16>(
      {bf16{0x8000}, bf16{0x7fc0}, bf16{0x0001}, bf16{0}, bf16{0x3f80}, bf16{0}, bf16{0xff80}},
      {7}));
  const Mirrored other = mirrored(full({7}, 2.0, {DType::bf16}));
  REQUIRE(bits_of(where(cond.gpu, table.gpu, other.gpu)) ==
          bits_of(where(cond.cpu, table.cpu, other.cpu)));
}

TEST_CASE("cuda/ops that do not read bf16 refuse it with the op's name", "[cuda][bf16]") {
  if (!cuda_available_or_skip()) return;
  const Tensor b = ones({2, 2}, {DType::bf16, Device::cuda()});
  REQUIRE_THROWS_WITH(
      layer_norm(b, ones({2}, {DType::bf16, Device::cuda()}),
                 ones({2}, {DType::bf16, Device::cuda()})),
      Catch::Contains("layer_norm: x is bfloat16, so gamma and beta must be float32"));
  REQUIRE_THROWS_WITH(rand({2}, {DType::bf16, Device::cuda()}),
                      Catch::Contains("uniform: bfloat16 is not supported yet"));
  NoGradGuard no_grad;
  REQUIRE_THROWS_WITH(b.add_(b), Catch::Contains("add_: bfloat16 is not supported yet"));
}

TEST_CASE("cuda/bf16 products match the CPU: matmul, linear and the LM head, under autocast",
          "[cuda][bf16][gemm]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  Generator gen(31);
  // Both devices sum the same exact bf16 products in float32, in different orders.
  constexpr double kTolerance = 1e-5;
  // Two results rounded to bf16 apart, each by at most u = 2^-8 relative.
  constexpr double kTwoRoundings = 2.0 / 256.0;
  const Mirrored a = mirrored(randn({3, 20, 48}, {}, &gen).to(DType::bf16));
  const Mirrored b = mirrored(randn({48, 24}, {}, &gen).to(DType::bf16));
  REQUIRE(relative_error(matmul(a.gpu, b.gpu), matmul(a.cpu, b.cpu)) <= kTolerance);
  REQUIRE(relative_error(matmul(a.gpu.transpose(-1, -2), a.gpu),
                         matmul(a.cpu.transpose(-1, -2), a.cpu)) <= kTolerance);

  const Tensor x = randn({40, 48}, {}, &gen), w = randn({24, 48}, {}, &gen) * 0.2;
  const Tensor bias = randn({24}, {}, &gen), vocab = randn({90, 48}, {}, &gen) * 0.3;
  const Tensor targets = from_vector<std::int64_t>(std::vector<std::int64_t>(40, 7), {40});
  struct Result {
    Tensor y, loss, dx, dw, dbias, dvocab;
  };
  const auto run = [&](Device device) {
    // Fresh leaves on the device (to(Device::cpu()) would return x itself).
    const auto leaf = [&](const Tensor& t) { return t.to(device).detach().requires_grad_(); };
    const Tensor xd = leaf(x), wd = leaf(w), bd = leaf(bias), vd = leaf(vocab);
    Tensor y, loss;
    {
      const Autocast bf16(Precision::bf16);
      y = linear(xd, wd, bd);
      loss = linear_cross_entropy(xd, vd, targets.to(device)) + sum(y * y) * 1e-3;
    }
    loss.backward();
    return Result{y.detach(), loss.detach(), xd.grad(), wd.grad(), bd.grad(), vd.grad()};
  };
  const Result cpu = run(Device::cpu()), gpu = run(Device::cuda());
  REQUIRE(gpu.y.dtype() == DType::bf16);  // autocast rounds the result: compare the sums' roundings
  CHECK(relative_error(gpu.y.to(DType::f32), cpu.y.to(DType::f32)) <= kTwoRoundings);
  // The GPU's linear adds a bf16 copy of the bias (cuBLASLt takes the bias in the bf16 output's
  // type; tests/cuda/test_linear_epilogue.cpp bounds each element), the CPU the float32 bias: y
  // moves by up to u |b|, and with it the loss's sum(y y) term and dy = 2e-3 y, which dw and dbias
  // sum. They agree to 2u, not to float32's sums.
  CHECK(relative_error(gpu.loss, cpu.loss) <= kTwoRoundings);
  CHECK(relative_error(gpu.dw, cpu.dw) <= kTwoRoundings);
  CHECK(relative_error(gpu.dbias, cpu.dbias) <= kTwoRoundings);
  // The LM head saves P' = exp(logits - shift) in bf16, each backend with its own shift (and
  // exp): the two round P' apart, each by at most u = 2^-8 relative, so its gradients (dx gets
  // one from each head) agree to 2u, not to float32's sums.
  CHECK(relative_error(gpu.dx, cpu.dx) <= kTwoRoundings);
  CHECK(relative_error(gpu.dvocab, cpu.dvocab) <= kTwoRoundings);
}

TEST_CASE(
    "cuda/bf16 activations match the CPU: elementwise, dropout, softmax, layer_norm, "
    "cross-entropy, attention",
    "[cuda][bf16]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  Generator gen(32);
  // Both backends run their float32 kernels on the same widened values; a bf16 result can then
  // round two float32 values that differ in their last bits apart, by one bf16 step (2u).
  constexpr double kFloat32 = 1e-5, kTwoRoundings = 2.0 / 256.0;
  const auto compare = [&](const Tensor& gpu, const Tensor& cpu) {
    REQUIRE(gpu.device() == Device::cuda());
    REQUIRE(gpu.dtype() == cpu.dtype());
    const double tolerance = cpu.dtype() == DType::bf16 ? kTwoRoundings : kFloat32;
    CHECK(relative_error(gpu.to(DType::f32), cpu.to(DType::f32)) <= tolerance);
  };
  const Tensor x = randn({6, 40}, {}, &gen), other = randn({6, 40}, {}, &gen);
  const Tensor gamma = randn({40}, {}, &gen), beta = randn({40}, {}, &gen);
  const Tensor targets = from_vector<std::int64_t>({3, 0, 39, 7, 7, 12}, {6});
  const Tensor projected = randn({2, 9, 4 * 8}, {}, &gen);  // 2 heads, 1 kv head, d_head 8
  struct Result {
    std::vector<Tensor> outputs, grads;
  };
  const auto run = [&](Device device) {
    const auto leaf = [&](const Tensor& t) { return t.to(device).detach().requires_grad_(); };
    const Tensor xd = leaf(x), od = leaf(other), gd = leaf(gamma), bd = leaf(beta),
                 pd = leaf(projected);
    Generator masks(5);
    Result r;
    Tensor loss;
    {
      const Autocast bf16(Precision::bf16);
      const Tensor xb = xd.to(DType::bf16), ob = od.to(DType::bf16);
      const Tensor activated = gelu(relu(xb) + ob * 0.5);             // bf16
      const Tensor dropped = dropout(activated, 0.25, true, &masks);  // bf16
      const Tensor mixed = dropped + od;                              // float32
      const Tensor normed = layer_norm(xb, gd, bd);                   // float32
      const Tensor probs = softmax(xb * ob, -1);                      // bf16
      const Tensor ce = cross_entropy(ob, targets.to(device));        // float32
      const Tensor attended = causal_attention(pd, 2, 1);             // bf16
      r.outputs = {activated, dropped, mixed, normed, probs, ce, attended};
      loss = sum(mixed * normed) + sum(probs * ob) + ce + sum(attended * attended);
    }
    loss.backward();
    r.grads = {xd.grad(), od.grad(), gd.grad(), bd.grad(), pd.grad()};
    return r;
  };
  const Result cpu = run(Device::cpu()), gpu = run(Device::cuda());
  for (std::size_t i = 0; i < cpu.outputs.size(); ++i) {
    INFO("output " << i);
    compare(gpu.outputs[i], cpu.outputs[i]);
  }
  // The gradients flow through bf16 results that may differ by a rounding: within 2u.
  for (std::size_t i = 0; i < cpu.grads.size(); ++i) {
    INFO("gradient " << i);
    REQUIRE(gpu.grads[i].dtype() == DType::f32);
    CHECK(relative_error(gpu.grads[i], cpu.grads[i]) <= kTwoRoundings);
  }
}
