// Death tests for the emulator: a planted kernel bug stops the process, so the test that plants
// it is a hidden Catch2 case ("[.death]") that the visible test runs in a child process, checking
// that the child died of SIGABRT with the expected message on stderr.
#pragma once

#include <string>
#include <vector>

namespace kiln::testing {

struct ChildResult {
  int status = 0;  // the exit status, or -N after death by signal N
  std::string error_output;
};

// Runs the test case `name` of this test binary in a child process, with `environment` entries
// ("NAME=value") added to this process's environment.
ChildResult run_test_in_child(const std::string& name,
                              const std::vector<std::string>& environment = {});

}  // namespace kiln::testing

// Runs the hidden case `name` in a child and requires it to abort with every one of `messages`
// in its stderr.
#define REQUIRE_DIES_WITH(name, environment, ...)                                          \
  do {                                                                                     \
    const ::kiln::testing::ChildResult kiln_child_ =                                       \
        ::kiln::testing::run_test_in_child((name), (environment));                         \
    INFO("the child's stderr:\n" << kiln_child_.error_output);                             \
    REQUIRE(kiln_child_.status == -SIGABRT);                                               \
    for (const char* kiln_message_ : {__VA_ARGS__})                                        \
      REQUIRE_THAT(kiln_child_.error_output, Catch::Contains(std::string(kiln_message_))); \
  } while (0)
