// Checked size arithmetic (core/checked.h) and the sizes built on it: a size whose product
// overflows int64 is a kiln::Error naming what was sized and the values, never a wrapped count.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>

#include "core/checked.h"
#include "core/kiln.h"

using namespace kiln;
using Catch::Contains;

namespace {
constexpr std::int64_t k2to62 = std::int64_t{1} << 62;
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
}  // namespace

TEST_CASE("checked_mul and checked_add give the exact result or an error naming the operands",
          "[checked]") {
  REQUIRE(checked_mul(3, 7, "x") == 21);
  REQUIRE(checked_mul(-3, 7, "x") == -21);
  REQUIRE(checked_mul(k2to62, 1, "x") == k2to62);
  REQUIRE(checked_mul(std::int64_t{1} << 31, std::int64_t{1} << 31, "x") == std::int64_t{1} << 62);
  REQUIRE_THROWS_WITH(checked_mul(k2to62, 2, "the table"),
                      "the table overflows int64 (4611686018427387904 x 2)");
  REQUIRE_THROWS_WITH(checked_mul(-k2to62, 4, "the table"), Contains("overflows int64"));
  REQUIRE(checked_add(kMax - 1, 1, "x") == kMax);
  REQUIRE_THROWS_WITH(checked_add(kMax, 1, "the count"),
                      "the count overflows int64 (9223372036854775807 + 1)");
}

TEST_CASE("checked_product and checked_bytes size shapes", "[checked]") {
  const Shape shape{2, 3, 4};
  REQUIRE(checked_product(shape, "s") == 24);
  REQUIRE(checked_product(Shape{}, "s") == 1);
  REQUIRE(checked_product(Shape{0, kMax}, "s") == 0);
  REQUIRE_THROWS_WITH(checked_product(Shape{k2to62, 16, 33278}, "shape"),
                      "shape [4611686018427387904, 16, 33278] overflows int64");
  REQUIRE(checked_bytes(6, 4, "b") == 24);
  REQUIRE_THROWS_WITH(checked_bytes(k2to62, 4, "the bytes"), Contains("the bytes overflows int64"));
  REQUIRE_THROWS_WITH(checked_bytes(-1, 4, "the bytes"), "the bytes: negative element count -1");
}

// Before: numel_of and empty() multiplied unchecked, so 2^62 x 16 elements of 4 bytes wrapped to a
// count of 0 bytes and a tensor claiming 2^66 elements over no memory.
TEST_CASE("a tensor whose size overflows is an error, not a wrapped allocation", "[checked]") {
  REQUIRE_THROWS_WITH(numel_of({k2to62, 16}), "shape [4611686018427387904, 16] overflows int64");
  REQUIRE_THROWS_WITH(empty({k2to62, 16}), Contains("empty: shape") && Contains("overflows int64"));
  // The element count fits, its bytes do not.
  REQUIRE_THROWS_WITH(empty({k2to62}),
                      "empty: the tensor's bytes overflows int64 "
                      "(4611686018427387904 x 4)");
  REQUIRE_THROWS_WITH(contiguous_strides({0, k2to62, 4}), Contains("overflows int64"));
  REQUIRE(empty({0, k2to62}).numel() == 0);
}
