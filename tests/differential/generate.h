// Random differential cases (docs/differential-testing.md): case `index` of `seed` is a function
// of the two numbers alone (its own Mersenne Twister, kiln's own distributions), so any case can
// be made again from its id "<seed>:<index>". A case is one op of a family on random shapes
// (size-0 and size-1 dims, broadcasting, inputs laid out as transposed, permuted, stepped,
// narrowed, selected or expanded views, values on a grid, random, of wide range or special:
// 0, -0, inf, -inf, NaN, huge, tiny), a chain of 2 to 6 ops, or a bad call ("error"). Each case
// is the JSON of tests/differential/interpret.h plus "id", "family", "kind", "dtype", the
// dropout masks the replay needs ("mask") and, for a bad call, "why" (what is wrong).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tests/differential/case_json.h"

namespace kiln::differential {

// The families: every op of the op table (tests/core/ops_core.cpp, ops_fused.cpp), the
// comparisons and sum_to.
const std::vector<std::string>& families();

// Case `index` of `seed`; restricted to `only` families when not empty.
json generate_case(std::uint64_t seed, std::int64_t index, const std::vector<std::string>& only);

}  // namespace kiln::differential
