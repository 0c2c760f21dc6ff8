// A property check for the fuzz targets: when a result the reader accepted breaks a property, the
// run stops and libFuzzer saves the input, as it does for a crash.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace kiln::fuzz {

inline void require(bool holds, const char* property) {
  if (holds) return;
  std::fprintf(stderr, "fuzz property violated: %s\n", property);
  std::abort();
}

}  // namespace kiln::fuzz
