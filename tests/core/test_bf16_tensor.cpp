// bfloat16 tensors on the CPU: a storage dtype. Conversion to and from float32, float64 and int64
// equals the scalar conversions of core/bf16.h element by element; factories, views, copies,
// indexing, where and printing keep the bits; the ops that do not read bf16 (random factories,
// in-place updates, layer_norm's parameters) refuse it by name. The ops that read it: the matrix
// products (tests/core/test_bf16_products.cpp), elementwise ops, reductions, softmax, layer_norm,
// cross-entropy, dropout and attention (tests/core/test_bf16_activations.cpp).
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/kiln.h"
#include "tests/harness/near.h"

using namespace kiln;

namespace {

std::vector<std::uint16_t> bits_of(const Tensor& t) {
  std::vector<std::uint16_t> out;
  for (const bf16 b : t.to_vector<bf16>()) out.push_back(b.bits);
  return out;
}

// float32 values that exercise the rounding: every 257th bf16 pattern with low halves at, below
// and above the tie, plus signed zeros, infinities, NaN payloads, subnormals and FLT_MAX.
std::vector<float> awkward_floats() {
  std::vector<float> out;
  for (std::uint32_t high = 0; high <= 0xffff; high += 257)
    for (const std::uint32_t low : {0x0000u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu})
      out.push_back(std::bit_cast<float>(high << 16 | low));
  for (const std::uint32_t u : {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7f800001u,
                                0x7fc12345u, 0x00000001u, 0x00018000u, 0x7f7fffffu})
    out.push_back(std::bit_cast<float>(u));
  return out;
}

}  // namespace

TEST_CASE("float32 -> bf16 -> float32 tensors equal the scalar conversions", "[bf16][tensor]") {
  const std::vector<float> values = awkward_floats();
  const auto n = static_cast<std::int64_t>(values.size());
  const Tensor x = from_vector(values, {n});
  const Tensor b = x.to(DType::bf16);
  REQUIRE(b.dtype() == DType::bf16);
  REQUIRE(b.shape() == x.shape());
  const std::vector<std::uint16_t> got = bits_of(b);
  const std::vector<float> back = b.to(DType::f32).to_vector<float>();
  for (std::size_t i = 0; i < values.size(); ++i) {
    INFO("element " << i << ", float bits 0x" << std::hex
                    << std::bit_cast<std::uint32_t>(values[i]));
    REQUIRE(got[i] == to_bf16(values[i]).bits);
    REQUIRE(std::bit_cast<std::uint32_t>(back[i]) ==
            std::bit_cast<std::uint32_t>(to_float(bf16{got[i]})));
  }
}

TEST_CASE("float64 and int64 tensors convert to bf16 rounding once", "[bf16][tensor]") {
  const std::vector<double> doubles = {
      1.0 + 0x1p-8 + 0x1p-40, 1.0 + 0x1p-8, -1e300, 1e-300, -0.0, 0.1, 65504.0,
      std::ldexp(511.0, 119)};
  const Tensor d = from_vector(doubles, {2, 4}).to(DType::bf16);
  const std::vector<std::uint16_t> d_bits = bits_of(d);
  for (std::size_t i = 0; i < doubles.size(); ++i) REQUIRE(d_bits[i] == to_bf16(doubles[i]).bits);
  const std::vector<std::int64_t> ints = {257, 259, -257, (std::int64_t{1} << 32) + (1 << 24) + 1,
                                          std::numeric_limits<std::int64_t>::min()};
  const Tensor i = from_vector(ints, {5}).to(DType::bf16);
  const std::vector<std::uint16_t> i_bits = bits_of(i);
  for (std::size_t k = 0; k < ints.size(); ++k) REQUIRE(i_bits[k] == to_bf16(ints[k]).bits);
  // Back from bf16: exact in float64, truncated toward zero in int64 (as float32 converts).
  const Tensor third = full({3}, 1.0 / 3.0, {.dtype = DType::bf16});
  REQUIRE(third.to(DType::f64).to_vector<double>() == std::vector<double>(3, 0.333984375));
  REQUIRE(full({2}, -2.75, {.dtype = DType::bf16}).to(DType::i64).to_vector<std::int64_t>() ==
          std::vector<std::int64_t>{-2, -2});
}

TEST_CASE("bf16 factories, accessors and printing", "[bf16][tensor]") {
  const Tensor z = zeros({2, 3}, {.dtype = DType::bf16});
  REQUIRE(z.dtype() == DType::bf16);
  REQUIRE(bits_of(z) == std::vector<std::uint16_t>(6, 0x0000));
  REQUIRE(bits_of(ones({2}, {.dtype = DType::bf16})) == std::vector<std::uint16_t>{0x3f80, 0x3f80});
  // arange computes in double and rounds each element once: 1/3 steps.
  const Tensor r = arange(0.0, 1.0, 1.0 / 3.0, {.dtype = DType::bf16});
  REQUIRE(bits_of(r) ==
          std::vector<std::uint16_t>{0x0000, to_bf16(1.0 / 3.0).bits, to_bf16(2.0 / 3.0).bits});
  const Tensor v =
      from_vector<bf16>({bf16{0x3f80}, bf16{0xc000}, bf16{0x7fc0}, bf16{0x0001}}, {2, 2});
  REQUIRE(v.dtype() == DType::bf16);
  REQUIRE(v.at<bf16>({1, 0}).bits == 0x7fc0);
  REQUIRE(v.at<float>({0, 1}) == -2.0f);
  REQUIRE(v.at<double>({1, 1}) == 0x1p-133);
  REQUIRE(v.data<bf16>()[1].bits == 0xc000);
  REQUIRE(full({}, 0.5, {.dtype = DType::bf16}).item<bf16>().bits == 0x3f00);
  REQUIRE(full({}, 0.5, {.dtype = DType::bf16}).item<float>() == 0.5f);
  REQUIRE_THROWS_WITH(v.data<float>(), Catch::Contains("bfloat16"));
  REQUIRE(full({2}, 1.0 / 3.0, {.dtype = DType::bf16}).str() ==
          "tensor([0.3340, 0.3340], shape=[2], dtype=bfloat16, device=cpu)");
  REQUIRE(fmt::format("{}", DType::bf16) == "bfloat16");
  REQUIRE(dtype_size(DType::bf16) == 2);
  REQUIRE(is_floating(DType::bf16));
}

TEST_CASE("bf16 views, copies, indexing and where keep the bits", "[bf16][tensor]") {
  std::vector<bf16> values;
  for (std::uint16_t k = 0; k < 12; ++k)
    values.push_back(bf16{static_cast<std::uint16_t>(0x3f80 + 3 * k)});
  const Tensor base = from_vector(values, {3, 4});
  const auto element = [&](std::int64_t r, std::int64_t c) { return values[r * 4 + c].bits; };
  const Tensor t = base.transpose(0, 1);
  REQUIRE_FALSE(t.is_contiguous());
  const Tensor c = t.contiguous();
  REQUIRE(c.is_contiguous());
  REQUIRE(bits_of(c)[1] == element(1, 0));  // t[0][1] = base[1][0]
  REQUIRE(bits_of(base.narrow(1, 1, 2)) ==
          std::vector<std::uint16_t>{element(0, 1), element(0, 2), element(1, 1), element(1, 2),
                                     element(2, 1), element(2, 2)});
  REQUIRE(bits_of(base.clone()) == bits_of(base));
  REQUIRE(bits_of(base.reshape({12})) == bits_of(base));
  const Tensor rows = index_select(base, 0, from_vector<std::int64_t>({2, 0}, {2}));
  REQUIRE(bits_of(rows) == std::vector<std::uint16_t>{element(2, 0), element(2, 1), element(2, 2),
                                                      element(2, 3), element(0, 0), element(0, 1),
                                                      element(0, 2), element(0, 3)});
  const Tensor joined = cat({base.narrow(0, 2, 1), base.narrow(0, 0, 1)}, 0);
  REQUIRE(bits_of(joined) == bits_of(rows));
  REQUIRE(bits_of(embedding(base, from_vector<std::int64_t>({2, 0}, {2}))) == bits_of(rows));

  const Tensor mask = from_vector<float>({1, 0, 0, 1}, {4});
  const Tensor other = full({3, 4}, -1.0, {.dtype = DType::bf16});
  const std::vector<std::uint16_t> chosen = bits_of(where(mask, base, other));
  for (std::int64_t r = 0; r < 3; ++r)
    for (std::int64_t k = 0; k < 4; ++k)
      REQUIRE(chosen[r * 4 + k] == (k == 0 || k == 3 ? element(r, k) : 0xbf80));
  // A bf16 condition: -0 is false, NaN and the smallest subnormal are true.
  const Tensor cond = from_vector<bf16>({bf16{0x8000}, bf16{0x7fc0}, bf16{0x0001}, bf16{0}}, {4});
  REQUIRE(where(cond, ones({4}), zeros({4})).to_vector<float>() == std::vector<float>{0, 1, 1, 0});

  // copy_ converts into bf16 storage; fill_ rounds its double once.
  const Tensor dst = empty({2}, {.dtype = DType::bf16});
  {
    NoGradGuard no_grad;
    dst.copy_(from_vector<double>({1.0 + 0x1p-8 + 0x1p-40, -3.0}, {2}));
    REQUIRE(bits_of(dst) == std::vector<std::uint16_t>{0x3f81, 0xc040});
    dst.fill_(1.0 + 0x1p-8);
    REQUIRE(bits_of(dst) == std::vector<std::uint16_t>{0x3f80, 0x3f80});
  }
}

TEST_CASE("ops that do not read bf16 refuse it with the op's name", "[bf16][tensor]") {
  const Tensor b = ones({2, 2}, {.dtype = DType::bf16});
  const auto refused = [](const std::string& op) {
    return Catch::Contains(op + ": bfloat16 is not supported yet");
  };
  const Tensor gamma = ones({2}, {.dtype = DType::bf16});
  REQUIRE_THROWS_WITH(layer_norm(b, gamma, gamma),
                      Catch::Contains("layer_norm: x is bfloat16, so gamma and beta must be "
                                      "float32, got bfloat16"));
  REQUIRE_THROWS_WITH(uniform({2}, 0.0, 1.0, {.dtype = DType::bf16}), refused("uniform"));
  REQUIRE_THROWS_WITH(randn({2}, {.dtype = DType::bf16}), refused("normal"));
  REQUIRE_THROWS_WITH(b.requires_grad_(),
                      Catch::Contains("requires_grad_") && Catch::Contains("bfloat16"));
  NoGradGuard no_grad;
  REQUIRE_THROWS_WITH(b.add_(b), refused("add_"));
  REQUIRE_THROWS_WITH(b.mul_(2.0), refused("mul_"));
}

TEST_CASE("gradients flow through conversions to bf16 and back", "[bf16][tensor][autograd]") {
  const Tensor x = from_vector<float>({1.0f, 2.5f, -3.0f}, {3}).requires_grad_();
  const Tensor y = x.to(DType::bf16).to(DType::f32);
  mul(y, from_vector<float>({0.5f, 1.0f + 0x1p-8f, 4.0f}, {3})).sum().backward();
  // A bf16 tensor's gradient is float32: it comes back unrounded (1 + 2^-8 is not a bf16 value).
  REQUIRE(x.grad().to_vector<float>() == std::vector<float>{0.5f, 1.0f + 0x1p-8f, 4.0f});
}
