// Errors: every user mistake is a kiln::Error whose message names the operation and the values at
// fault, e.g. "matmul: shapes [2, 3] and [4, 5] do not match (3 != 4)".
//
//   KILN_CHECK(a.dim() >= 1, "sum: expected a tensor with at least one dim, got shape {}",
//   a.shape());
//
// KILN_ASSERT is for internal invariants (a bug in kiln, not in the caller): it aborts in debug
// builds and compiles away in release builds.
#pragma once

#include <cassert>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kiln {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace kiln

#define KILN_CHECK(cond, ...)    \
  do {                           \
    if (!(cond)) [[unlikely]]    \
      ::kiln::fail(__VA_ARGS__); \
  } while (0)

#define KILN_ASSERT(cond) assert(cond)
