// The Philox4x32-10 generator: known-answer vectors from Random123, kiln's transforms, and
// reproducibility of the random factories.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "core/backend.h"
#include "core/kiln.h"
#include "core/philox.h"

using namespace kiln;

TEST_CASE("Philox4x32-10 matches the Random123 known-answer vectors", "[random]") {
  const philox::Words zero = philox::philox4x32_10(0, 0, 0, 0, 0, 0);
  REQUIRE(zero.w[0] == 0x6627e8d5u);
  REQUIRE(zero.w[1] == 0xe169c58du);
  REQUIRE(zero.w[2] == 0xbc57ac4cu);
  REQUIRE(zero.w[3] == 0x9b00dbd8u);
  const philox::Words ones = philox::philox4x32_10(~0u, ~0u, ~0u, ~0u, ~0u, ~0u);
  REQUIRE(ones.w[0] == 0x408f276du);
  REQUIRE(ones.w[1] == 0x41c83b0eu);
  REQUIRE(ones.w[2] == 0xa20bc7c6u);
  REQUIRE(ones.w[3] == 0x6d5451fdu);
  const philox::Words pi = philox::philox4x32_10(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u,
                                                 0xa4093822u, 0x299f31d0u);
  REQUIRE(pi.w[0] == 0xd16cfe09u);
  REQUIRE(pi.w[1] == 0x94fdccebu);
  REQUIRE(pi.w[2] == 0x5001e420u);
  REQUIRE(pi.w[3] == 0x24126ea1u);
}

TEST_CASE("rand follows the documented counter layout exactly", "[random]") {
  Generator gen(42);
  const Tensor u = rand({6}, {}, &gen);
  const std::vector<float> values = u.to_vector<float>();
  for (int i = 0; i < 6; ++i) {
    const philox::Words w = philox::draw(42, i / 4);
    REQUIRE(values[i] == static_cast<float>(w.w[i % 4] >> 8) / 16777216.0f);
  }
  REQUIRE(gen.offset() == 2);  // two counters reserved
}

TEST_CASE("the same seed gives the same numbers, and draws never overlap", "[random]") {
  Generator a(7), b(7);
  const Tensor x = randn({1000}, {}, &a);
  const Tensor y = randn({1000}, {}, &b);
  REQUIRE(x.to_vector<float>() == y.to_vector<float>());
  const Tensor z = randn({1000}, {}, &a);
  REQUIRE(z.to_vector<float>() != x.to_vector<float>());
  manual_seed(3);
  const std::vector<double> first = rand({5}, {.dtype = DType::f64}).to_vector<double>();
  manual_seed(3);
  REQUIRE(rand({5}, {.dtype = DType::f64}).to_vector<double>() == first);
}

TEST_CASE("uniform and normal have the right moments", "[random]") {
  Generator gen(123);
  const std::vector<double> u =
      uniform({200000}, -1.0, 3.0, {.dtype = DType::f64}, &gen).to_vector<double>();
  double mean = 0, lo = 1e9, hi = -1e9;
  for (double v : u) {
    mean += v;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  mean /= u.size();
  REQUIRE(std::fabs(mean - 1.0) < 0.01);
  REQUIRE(lo >= -1.0);
  REQUIRE(hi < 3.0);
  const std::vector<float> n = normal({200000}, 2.0, 0.5, {}, &gen).to_vector<float>();
  double m = 0, var = 0;
  for (float v : n) m += v;
  m /= n.size();
  for (float v : n) var += (v - m) * (v - m);
  var /= n.size();
  REQUIRE(std::fabs(m - 2.0) < 0.01);
  REQUIRE(std::fabs(std::sqrt(var) - 0.5) < 0.01);
}

TEST_CASE("the CPU kernels draw every element from its counter, across blocks and 2^32",
          "[random]") {
  // The kernels draw 16 counters at a time (vectorised): every element must still equal the
  // scalar Philox of its own counter, for offsets that are not block-aligned, counters whose
  // low word wraps, lengths that end mid-block, and every transform.
  Backend& cpu = backend_for(Device::cpu());
  const std::uint64_t seed = 0x0123456789abcdefull;
  const std::int64_t n = 1001;
  for (std::uint64_t offset : {std::uint64_t{0}, std::uint64_t{5}, (std::uint64_t{1} << 32) - 37}) {
    INFO("offset " << offset);
    const auto words = [&](std::int64_t i, std::int64_t per) {
      return philox::draw(seed, offset + static_cast<std::uint64_t>(i / per));
    };
    std::vector<float> f32(n), mask(n);
    std::vector<double> f64(n), normal64(n);
    cpu.random_uniform(DType::f32, f32.data(), n, -1.0, 3.0, seed, offset);
    cpu.random_uniform(DType::f64, f64.data(), n, -1.0, 3.0, seed, offset);
    cpu.random_normal(DType::f64, normal64.data(), n, 2.0, 0.5, seed, offset);
    cpu.dropout_mask(DType::f32, mask.data(), n, 0.25, seed, offset);
    const std::uint32_t threshold = philox::dropout_threshold(0.25);
    for (std::int64_t i = 0; i < n; ++i) {
      INFO("element " << i);
      const philox::Words w4 = words(i, 4), w2 = words(i, 2);
      const std::uint32_t a = w2.w[2 * (i % 2)], b = w2.w[2 * (i % 2) + 1];
      REQUIRE(f32[i] == -1.0f + 4.0f * philox::uniform_float(w4.w[i % 4]));
      REQUIRE(f64[i] == -1.0 + 4.0 * philox::uniform_double(a, b));
      REQUIRE(normal64[i] == 2.0 + 0.5 * philox::normal_from(a, b));
      REQUIRE(mask[i] == (philox::dropout_keep(w4.w[i % 4], threshold) ? 1.0f / 0.75f : 0.0f));
    }
  }
}

TEST_CASE("dropout_apply multiplies by dropout_mask's mask as it draws it", "[random]") {
  // The fused kernel must give x * mask exactly, element by element, in both dtypes, for offsets
  // and lengths that do not fall on the 16-counter blocks; a dropped inf becomes NaN, as 0 * inf.
  Backend& cpu = backend_for(Device::cpu());
  const std::int64_t n = 1003;
  for (std::uint64_t offset : {std::uint64_t{0}, std::uint64_t{9}}) {
    INFO("offset " << offset);
    std::vector<float> x32(n), mask32(n), y32(n);
    std::vector<double> x64(n), mask64(n), y64(n);
    for (std::int64_t i = 0; i < n; ++i) {
      x32[i] =
          i % 5 == 0 ? std::numeric_limits<float>::infinity() : static_cast<float>(i % 17) - 8.25f;
      x64[i] = 0.001 * static_cast<double>(i) - 0.4;
    }
    cpu.dropout_mask(DType::f32, mask32.data(), n, 0.5, 42, offset);
    cpu.dropout_mask(DType::f64, mask64.data(), n, 0.3, 42, offset);
    cpu.dropout_apply(DType::f32, y32.data(), x32.data(), n, 0.5, 42, offset);
    cpu.dropout_apply(DType::f64, y64.data(), x64.data(), n, 0.3, 42, offset);
    std::int64_t dropped = 0, dropped_inf = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      INFO("element " << i);
      const float want32 = x32[i] * mask32[i];
      if (std::isnan(want32)) {
        REQUIRE(std::isnan(y32[i]));
      } else {
        REQUIRE(y32[i] == want32);
      }
      REQUIRE(y64[i] == x64[i] * mask64[i]);
      dropped += mask32[i] == 0.0f;
      dropped_inf += mask32[i] == 0.0f && std::isinf(x32[i]);
    }
    REQUIRE(dropped > n / 3);  // the mask is not all ones: the product was tested on both values
    REQUIRE(dropped < 2 * n / 3);
    REQUIRE(dropped_inf > 0);  // the NaN case was met
  }
}
