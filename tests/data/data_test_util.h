// Helpers for the data/ tests: the message of an expected error (and TempDir for corpus folders).
#pragma once

#include <catch2/catch.hpp>
#include <string>

#include "core/error.h"
#include "tests/harness/temp_dir.h"

namespace kiln::testing {

// The message of the kiln::Error that f throws; the test fails if f throws nothing or something
// else.
template <typename F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const kiln::Error& e) {
    return e.what();
  }
  FAIL("expected a kiln::Error, but nothing was thrown");
  return {};
}

}  // namespace kiln::testing
