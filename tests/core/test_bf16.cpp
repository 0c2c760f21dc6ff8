// bfloat16 scalar conversions (core/bf16.h): every bf16 survives bf16 -> float32 -> bf16; float32,
// float64 and int64 round to nearest, ties to even, as an independent reference says. The
// reference decodes bf16 values from their fields with ldexp and picks the nearer of the two
// neighbours by subtraction in long double; it shares no bit arithmetic with the implementation.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/bf16.h"

using namespace kiln;

namespace {

// x86's 80-bit long double holds every float32, float64 and int64 value exactly, and the
// differences the reference takes between them and bf16 values.
static_assert(std::numeric_limits<long double>::digits >= 64);

constexpr std::uint16_t kInf = 0x7f80;  // +inf's bits; the sign is 0x8000

// The magnitude of the non-negative bf16 encoding `bits` <= 0x7f80, from its fields: subnormal
// fraction * 2^-133, normal (1 + fraction/128) * 2^(exponent - 127). 0x7f80 gives 2^128, the
// value the next binade would start at: IEEE rounding compares with it, then overflows to inf.
long double magnitude(std::uint16_t bits) {
  const int exponent = bits >> 7;
  const int fraction = bits & 0x7f;
  if (exponent == 0) return std::ldexp(static_cast<long double>(fraction), -133);
  return std::ldexp(static_cast<long double>(128 + fraction), exponent - 134);
}

// The bits of the bf16 nearest to finite v, ties to the even encoding, beyond the largest finite
// value rounded as IEEE says (to inf from halfway to 2^128 up).
std::uint16_t reference_bits(long double v) {
  const std::uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const long double a = std::fabs(v);
  if (a >= magnitude(kInf)) return sign | kInf;
  std::uint16_t lo = 0, hi = kInf;  // magnitude(lo) <= a < magnitude(hi)
  while (hi - lo > 1) {
    const auto mid = static_cast<std::uint16_t>((lo + hi) / 2);
    (magnitude(mid) <= a ? lo : hi) = mid;
  }
  const long double below = a - magnitude(lo), above = magnitude(hi) - a;
  const std::uint16_t nearest = below < above ? lo : above < below ? hi : (lo % 2 == 0 ? lo : hi);
  return sign | nearest;
}

bool is_nan_bits(std::uint16_t bits) { return (bits & 0x7fff) > kInf; }

float float_of(std::uint32_t bits) { return std::bit_cast<float>(bits); }

}  // namespace

TEST_CASE("every bf16 survives bf16 -> float32 -> bf16", "[bf16]") {
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const bf16 b{static_cast<std::uint16_t>(bits)};
    const float f = to_float(b);
    const bf16 back = to_bf16(f);
    INFO("bits 0x" << std::hex << bits);
    if (is_nan_bits(b.bits)) {
      REQUIRE(std::isnan(f));
      REQUIRE(is_nan_bits(back.bits));
      REQUIRE(std::signbit(f) == ((bits & 0x8000) != 0));
      REQUIRE((back.bits & 0x8000) == (bits & 0x8000));
    } else if ((bits & 0x7fff) == kInf) {
      REQUIRE(back.bits == bits);
      REQUIRE(std::isinf(f));
      REQUIRE(std::signbit(f) == ((bits & 0x8000) != 0));
    } else {
      REQUIRE(back.bits == bits);
      // The float is the bf16's value, by the fields (the sign by hand).
      const long double value = magnitude(bits & 0x7fff);
      REQUIRE(static_cast<long double>(f) == ((bits & 0x8000) ? -value : value));
    }
  }
}

TEST_CASE("float32 -> bf16 rounds to nearest even like the reference, over every binade",
          "[bf16]") {
  // Each bf16 pattern with low halves at, below and above the tie, at both ends, and random ones
  // (mt19937's sequence is fixed by the C++ standard).
  std::mt19937 rng(20);
  std::vector<std::uint32_t> lows = {0x0000, 0x0001, 0x3fff, 0x7ffe, 0x7fff,
                                     0x8000, 0x8001, 0xc000, 0xfffe, 0xffff};
  for (std::uint32_t high = 0; high <= 0xffff; ++high) {
    lows.resize(10);
    for (int k = 0; k < 2; ++k) lows.push_back(rng() & 0xffff);
    for (const std::uint32_t low : lows) {
      const std::uint32_t u = high << 16 | low;
      const float f = float_of(u);
      const std::uint16_t got = to_bf16(f).bits;
      INFO("float bits 0x" << std::hex << u << " -> 0x" << got);
      if (std::isnan(f)) {
        REQUIRE(is_nan_bits(got));
        REQUIRE((got & 0x8000) == (high & 0x8000));
        REQUIRE((got & 0x003f) == (high & 0x003f));  // the top payload bits below the quiet bit
      } else if (std::isinf(f)) {
        REQUIRE(got == (high & 0x8000 ? 0x8000 | kInf : kInf));
      } else {
        REQUIRE(got == reference_bits(f));
      }
    }
  }
}

TEST_CASE("float32 -> bf16: ties go to even, just off a tie to the nearer value", "[bf16]") {
  // 1 + 2^-8 lies halfway between 1 (0x3f80, even) and 1 + 2^-7 (0x3f81): down to even.
  REQUIRE(to_bf16(1.0f + 0x1p-8f).bits == 0x3f80);
  // 1 + 3 * 2^-8 lies halfway between 0x3f81 (odd) and 0x3f82: up to even.
  REQUIRE(to_bf16(1.0f + 0x3p-8f).bits == 0x3f82);
  REQUIRE(to_bf16(-(1.0f + 0x1p-8f)).bits == 0xbf80);
  REQUIRE(to_bf16(-(1.0f + 0x3p-8f)).bits == 0xbf82);
  // One float ulp (2^-23) off the first tie.
  REQUIRE(to_bf16(1.0f + 0x1p-8f + 0x1p-23f).bits == 0x3f81);
  REQUIRE(to_bf16(1.0f + 0x1p-8f - 0x1p-23f).bits == 0x3f80);
  // 1/3 = 0x3eaaaaab: the dropped 0xaaab is above half, up to 0x3eab.
  REQUIRE(to_bf16(1.0f / 3.0f).bits == 0x3eab);
}

TEST_CASE("float32 -> bf16 at the top of the range: largest finite, overflow to inf", "[bf16]") {
  const float largest = float_of(0x7f7f0000);  // (2 - 2^-7) * 2^127, the largest finite bf16
  REQUIRE(to_bf16(largest).bits == 0x7f7f);
  REQUIRE(to_float(bf16{0x7f7f}) == std::ldexp(255.0f, 120));
  // Halfway to 2^128 is a tie between 0x7f7f (odd) and 0x7f80 (even: inf).
  REQUIRE(to_bf16(float_of(0x7f7f8000)).bits == kInf);
  REQUIRE(to_bf16(float_of(0x7f7f7fff)).bits == 0x7f7f);
  REQUIRE(to_bf16(std::numeric_limits<float>::max()).bits == kInf);
  REQUIRE(to_bf16(-std::numeric_limits<float>::max()).bits == (0x8000 | kInf));
  REQUIRE(to_bf16(std::numeric_limits<float>::infinity()).bits == kInf);
  REQUIRE(to_bf16(-std::numeric_limits<float>::infinity()).bits == (0x8000 | kInf));
}

TEST_CASE("float32 -> bf16 subnormals, zeros and the smallest normal", "[bf16]") {
  REQUIRE(to_bf16(0.0f).bits == 0x0000);
  REQUIRE(to_bf16(-0.0f).bits == 0x8000);
  // The smallest bf16 subnormal, 2^-133, is exact; the smallest float32 one, 2^-149, rounds to 0.
  REQUIRE(to_bf16(0x1p-133f).bits == 0x0001);
  REQUIRE(to_bf16(0x1p-149f).bits == 0x0000);
  REQUIRE(to_bf16(-0x1p-149f).bits == 0x8000);
  // Half of 2^-133 is a tie between 0 (even) and 0x0001; just above it rounds up.
  REQUIRE(to_bf16(0x1p-134f).bits == 0x0000);
  REQUIRE(to_bf16(0x1p-134f + 0x1p-149f).bits == 0x0001);
  // 3 * 2^-134 is halfway between 0x0001 and 0x0002 (even), 5 * 2^-134 between 0x0002 (even)
  // and 0x0003.
  REQUIRE(to_bf16(0x3p-134f).bits == 0x0002);
  REQUIRE(to_bf16(0x5p-134f).bits == 0x0002);
  // The largest subnormal, rounded up by a tie, becomes the smallest normal 2^-126 (0x0080).
  REQUIRE(to_bf16(float_of(0x007f8000)).bits == 0x0080);
  REQUIRE(to_bf16(std::numeric_limits<float>::min()).bits == 0x0080);
}

TEST_CASE("float32 -> bf16 keeps NaN a NaN, with its sign and top payload bits", "[bf16]") {
  REQUIRE(to_bf16(float_of(0x7fc00000)).bits == 0x7fc0);  // the default quiet NaN
  REQUIRE(to_bf16(float_of(0xffc00000)).bits == 0xffc0);
  REQUIRE(to_bf16(float_of(0x7fc12345)).bits == 0x7fc1);  // quiet, payload in both halves
  // Signalling NaNs come out quiet; a payload only in the low 16 bits must not become inf.
  REQUIRE(to_bf16(float_of(0x7f800001)).bits == 0x7fc0);
  REQUIRE(to_bf16(float_of(0xff80ffff)).bits == 0xffc0);
  REQUIRE(to_bf16(float_of(0x7fa00000)).bits == 0x7fe0);
  REQUIRE(to_bf16(float_of(0x7f81ffff)).bits == 0x7fc1);  // 0xffff does not round the payload up
}

TEST_CASE("float64 -> bf16 rounds once, not twice through float32", "[bf16]") {
  // 1 + 2^-8 + 2^-40 is above the tie between 1 and 1 + 2^-7; rounded to float32 first it would
  // be the tie itself and go down to even.
  REQUIRE(to_bf16(1.0 + 0x1p-8 + 0x1p-40).bits == 0x3f81);
  REQUIRE(to_bf16(1.0 + 0x1p-8 - 0x1p-40).bits == 0x3f80);
  REQUIRE(to_bf16(1.0 + 0x1p-8).bits == 0x3f80);
  REQUIRE(to_bf16(-(1.0 + 0x3p-8 - 0x1p-45)).bits == 0xbf81);
  // Just below halfway to 2^128: float32 would round it to the tie, then to inf.
  const double overflow_tie = std::ldexp(511.0, 119);  // (2^128 + largest finite) / 2
  REQUIRE(to_bf16(overflow_tie).bits == kInf);
  REQUIRE(to_bf16(std::nextafter(overflow_tie, 0.0)).bits == 0x7f7f);
  REQUIRE(to_bf16(1e300).bits == kInf);
  REQUIRE(to_bf16(-1e300).bits == (0x8000 | kInf));
  REQUIRE(to_bf16(static_cast<double>(std::numeric_limits<float>::max())).bits == kInf);
  // Far below the smallest subnormal: signed zero; just above half of it: the smallest subnormal.
  REQUIRE(to_bf16(1e-300).bits == 0x0000);
  REQUIRE(to_bf16(-1e-300).bits == 0x8000);
  // Rounded to float32 first, 2^-134 + 2^-180 would be the tie 2^-134 and go down to 0.
  REQUIRE(to_bf16(0x1p-134 + 0x1p-180).bits == 0x0001);
  REQUIRE(to_bf16(-0.0).bits == 0x8000);
  REQUIRE(to_bf16(std::numeric_limits<double>::infinity()).bits == kInf);
  REQUIRE(is_nan_bits(to_bf16(std::numeric_limits<double>::quiet_NaN()).bits));
  REQUIRE(is_nan_bits(to_bf16(-std::numeric_limits<double>::quiet_NaN()).bits));
  REQUIRE((to_bf16(-std::numeric_limits<double>::quiet_NaN()).bits & 0x8000) != 0);
  REQUIRE(is_nan_bits(to_bf16(std::numeric_limits<double>::signaling_NaN()).bits));
}

TEST_CASE("float64 -> bf16 matches the reference near ties and over the whole range", "[bf16]") {
  std::mt19937_64 rng(20);
  for (int k = 0; k < 200000; ++k) {
    // A random finite positive bf16 below the largest, and the tie above it.
    const auto bits = static_cast<std::uint16_t>(rng() % 0x7f7f);
    const long double tie = (magnitude(bits) + magnitude(bits + 1)) / 2;
    const auto d = static_cast<double>(tie);  // exact: 9 significant bits
    const double sign = rng() % 2 ? -1.0 : 1.0;
    for (const double x : {d, std::nextafter(d, 0.0), std::nextafter(d, 1e300), d * (1 + 0x1p-30),
                           d * (1 - 0x1p-30), d + d * 0x1p-24}) {
      INFO("x = " << x << ", bf16 below 0x" << std::hex << bits);
      REQUIRE(to_bf16(sign * x).bits == reference_bits(sign * x));
    }
  }
  for (int k = 0; k < 200000; ++k) {
    const double x = std::bit_cast<double>(rng());
    if (!std::isfinite(x)) continue;
    INFO("x = " << x);
    REQUIRE(to_bf16(x).bits == reference_bits(x));
  }
}

TEST_CASE("int64 -> bf16 rounds once to nearest even", "[bf16]") {
  // 257 is halfway between 256 (0x4380) and 258 (0x4381): even is 256; 259 is halfway between 258
  // and 260: even is 260.
  REQUIRE(to_bf16(std::int64_t{257}).bits == 0x4380);
  REQUIRE(to_bf16(std::int64_t{259}).bits == 0x4382);
  REQUIRE(to_bf16(std::int64_t{-257}).bits == 0xc380);
  REQUIRE(to_bf16(std::int64_t{0}).bits == 0x0000);
  // 2^32 + 2^24 + 1 is above the tie between 2^32 and 2^32 + 2^25; rounded to float32 first, the
  // +1 would vanish and the tie go down to even.
  const std::int64_t above_tie = (std::int64_t{1} << 32) + (1 << 24) + 1;
  REQUIRE(to_bf16(above_tie).bits == reference_bits(static_cast<long double>(above_tie)));
  REQUIRE(to_float(to_bf16(above_tie)) == 0x1p32f + 0x1p25f);
  std::mt19937_64 rng(21);
  std::vector<std::int64_t> values = {std::numeric_limits<std::int64_t>::min(),
                                      std::numeric_limits<std::int64_t>::max(),
                                      -1,
                                      1,
                                      255,
                                      256};
  for (int k = 0; k < 100000; ++k) {
    const auto r = static_cast<std::int64_t>(rng());
    values.push_back(r >> (rng() % 63));  // every magnitude
  }
  for (const std::int64_t v : values) {
    INFO("v = " << v);
    REQUIRE(to_bf16(v).bits == reference_bits(static_cast<long double>(v)));
  }
}
