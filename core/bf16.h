// bfloat16, kiln's storage type for mixed precision: the top 16 bits of an IEEE 754 binary32
// float, i.e. its sign, all 8 exponent bits and the top 7 of the 23 fraction bits. It has
// float32's range (so a float32 value never underflows or overflows to it more than rounding
// says) with 8 significant bits. kiln stores and converts bf16 but computes in float32:
//
//   bf16 b = to_bf16(1.0f / 3.0f);   // 0x3eab, the nearest bf16 (ties to even)
//   float f = to_float(b);           // 0.333984375, exactly the value b holds
//
// The conversions are plain bit arithmetic on the float32 encoding, shared by the CPU and CUDA
// backends (KILN_HOST_DEVICE), so both round every value the same way.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/host_device.h"

namespace kiln {

// One bfloat16 value as its 16 bits (sign, exponent, fraction from the top). A struct, not an
// integer, so that no arithmetic or integer conversion applies to it by accident.
struct bf16 {
  std::uint16_t bits = 0;
};

KILN_HOST_DEVICE inline std::uint32_t float_bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u;
}

KILN_HOST_DEVICE inline float float_from_bits(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
}

// bf16 -> float32 is exact: the bf16 bits are the float's top half, the dropped fraction bits 0.
KILN_HOST_DEVICE inline float to_float(bf16 x) {
  return float_from_bits(static_cast<std::uint32_t>(x.bits) << 16);
}

// float32 -> bf16, rounded to nearest with ties to even (IEEE 754's default rounding).
KILN_HOST_DEVICE inline bf16 to_bf16(float x) {
  const std::uint32_t u = float_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    // NaN: keep the sign and the top 7 payload bits, and set the quiet bit (the top fraction
    // bit), because a payload held only in the low 16 bits would otherwise truncate to the
    // encoding of infinity.
    return bf16{static_cast<std::uint16_t>((u >> 16) | 0x0040u)};
  }
  // Adding 0x7fff, plus 1 when the kept part is odd, carries into bit 16 exactly when the dropped
  // 16 bits are above half an ulp, or exactly half with an odd kept part: round to nearest, ties
  // to even. Encodings are ordered by magnitude, so the carry steps to the next bf16 across
  // binades, from subnormal to normal, and from the largest finite values to infinity, as IEEE
  // rounding does. Infinity has a zero low half and stays infinity; the sign bit is untouched.
  const std::uint32_t odd = (u >> 16) & 1u;
  return bf16{static_cast<std::uint16_t>((u + 0x7fffu + odd) >> 16)};
}

// float64 -> float32, rounded to odd: truncated toward zero, with the lowest fraction bit set when
// anything was cut off. Rounding to nearest twice (double -> float -> bf16) can go wrong when the
// first rounding lands on a bf16 tie; a value rounded to odd by a format with at least 2 more bits
// than the target never lands on a tie it was not already at, so the second rounding is correct
// (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms using
// rounding to odd", IEEE Trans. Computers 57(4), 2008). float32 has 16 more fraction bits than
// bf16, in normal and subnormal ranges alike (both share float32's exponent range).
KILN_HOST_DEVICE inline float to_float_round_to_odd(double x) {
  constexpr double kFloatMax = 3.4028234663852886e38;  // FLT_MAX, the largest finite float32
  constexpr std::uint64_t kExponent = 0x7ff0000000000000u;
  std::uint64_t d;
  std::memcpy(&d, &x, sizeof(d));
  // Infinity converts exactly; NaN keeps its sign and top payload bits as float32 NaN.
  if ((d & kExponent) == kExponent) return static_cast<float>(x);
  if (x > kFloatMax || x < -kFloatMax) {
    // Truncated, an overflow is the largest finite float (whose last fraction bit is already 1).
    return float_from_bits((x < 0 ? 0x80000000u : 0u) | 0x7f7fffffu);
  }
  const float nearest = static_cast<float>(x);
  if (static_cast<double>(nearest) == x) return nearest;
  std::uint32_t u = float_bits(nearest);
  const bool away_from_zero =
      x > 0 ? static_cast<double>(nearest) > x : static_cast<double>(nearest) < x;
  if (away_from_zero) --u;  // one step toward zero in magnitude: the truncated value
  return float_from_bits(u | 1u);
}

// float64 -> bf16, rounded once to nearest with ties to even (through float32 rounded to odd).
KILN_HOST_DEVICE inline bf16 to_bf16(double x) { return to_bf16(to_float_round_to_odd(x)); }

// int64 -> bf16, rounded once to nearest with ties to even: the magnitude keeps its top 24 bits
// with every lower bit folded into the last one (rounding to odd again), which a float32 holds
// exactly, and that float rounds to bf16.
KILN_HOST_DEVICE inline bf16 to_bf16(std::int64_t x) {
  std::uint64_t m = x < 0 ? 0 - static_cast<std::uint64_t>(x) : static_cast<std::uint64_t>(x);
  std::uint64_t sticky = 0;
  int shift = 0;
  while (m >= (std::uint64_t{1} << 24)) {
    sticky |= m & 1u;
    m >>= 1;
    ++shift;
  }
  const float magnitude =
      static_cast<float>(m | sticky) * static_cast<float>(std::uint64_t{1} << shift);
  return to_bf16(x < 0 ? -magnitude : magnitude);
}

}  // namespace kiln
