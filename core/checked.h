// Checked size arithmetic: every size kiln computes from numbers it did not choose (a file's
// header, a checkpoint's config, a flag) goes through these, so an absurd size is a kiln::Error
// naming what was being sized and the values, never a wrapped-around count that allocates too
// little and writes past it.
//
//   const std::int64_t n = checked_mul(max_len, d_model, "SinusoidalPositionalEncoding: table");
//   // max_len 2^62, d_model 16: "SinusoidalPositionalEncoding: table overflows int64
//   // (4611686018427387904 x 16)"
//
// Sizes are int64 (as Shape's are); a negative operand is the caller's bug to check first, but
// the helpers stay defined for it (they report overflow, never invoke undefined behaviour).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "core/error.h"

namespace kiln {

// a · b; a kiln::Error "<what> overflows int64 (a x b)" when it does not fit.
inline std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t out;
  KILN_CHECK(!__builtin_mul_overflow(a, b, &out), "{} overflows int64 ({} x {})", what, a, b);
  return out;
}

// a + b; a kiln::Error "<what> overflows int64 (a + b)" when it does not fit.
inline std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t out;
  KILN_CHECK(!__builtin_add_overflow(a, b, &out), "{} overflows int64 ({} + {})", what, a, b);
  return out;
}

// The product of sizes (the element count of a shape); a kiln::Error
// "<what> [s0, s1, ...] overflows int64" when it does not fit.
inline std::int64_t checked_product(std::span<const std::int64_t> sizes, std::string_view what) {
  std::int64_t n = 1;
  for (const std::int64_t s : sizes)
    KILN_CHECK(!__builtin_mul_overflow(n, s, &n), "{} [{}] overflows int64", what,
               fmt::join(sizes, ", "));
  return n;
}

// The bytes of count elements of element_size bytes each, a count that also fits int64 (so
// offsets into it do too); errors as checked_mul, and for a negative count.
inline std::size_t checked_bytes(std::int64_t count, std::size_t element_size,
                                 std::string_view what) {
  KILN_CHECK(count >= 0, "{}: negative element count {}", what, count);
  return static_cast<std::size_t>(
      checked_mul(count, static_cast<std::int64_t>(element_size), what));
}

}  // namespace kiln
