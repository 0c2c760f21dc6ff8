// Paths of files in the source tree that tests read (golden data, tools/).
#pragma once

#include <string>

namespace kiln::testing {

// The absolute path of `relative` (e.g. "tests/golden/tiny_lm.safetensors") in the source tree
// the tests were built from.
inline std::string source_path(const std::string& relative) {
  return std::string(KILN_TEST_SOURCE_DIR) + "/" + relative;
}

}  // namespace kiln::testing
