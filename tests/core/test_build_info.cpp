// A build names the commit it compiled (cmake/KilnBuildInfo.cmake reads it at every build), so
// the banners of figures and the "git" field of checkpoints are not the commit the build folder
// happened to be configured at.
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "core/build_info.h"

namespace {

// `git rev-parse --short=12 HEAD` of the source tree; empty where there is no git or no checkout.
std::string head_commit() {
  const std::string command =
      "git -C '" KILN_TEST_SOURCE_DIR "' rev-parse --short=12 HEAD 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return "";
  char line[64] = {};
  const bool read = std::fgets(line, sizeof line, pipe) != nullptr;
  pclose(pipe);
  std::string commit = read ? line : "";
  while (!commit.empty() && (commit.back() == '\n' || commit.back() == '\r')) commit.pop_back();
  return commit;
}

}  // namespace

TEST_CASE("build_info names the commit checked out when kiln was built") {
  const std::string head = head_commit();
  if (head.empty()) {
    std::puts("skipped: the source tree is not a git checkout");
    return;
  }
  const std::string built = kiln::build_info().git;
  INFO("HEAD " << head << ", build_info " << built << " (a build older than HEAD: rebuild)");
  CHECK((built == head || built == head + "-dirty"));
}
