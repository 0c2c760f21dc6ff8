// Crash safety of save_safetensors: whatever point a save stops at, the checkpoint path holds
// either the previous complete file or the new one, never a mixture or a torn file.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <random>
#include <string>
#include <vector>

#include "core/io/safetensors.h"
#include "core/kiln.h"
#include "tests/core/io/files.h"

using namespace kiln;
using kiln::testing::arm_save_fault;
using kiln::testing::read_file;
using kiln::testing::ScratchDir;

namespace {

// Version v of a small model: values and the "step" metadata both say v, and every version has
// the same file size.
NamedTensors version_tensors(int v) {
  return {{"embed.weight", full({64, 32}, v)},
          {"blocks.0.bias", full({32}, -v, {.dtype = DType::f64})},
          {"ids", full({16}, v, {.dtype = DType::i64})}};
}
Metadata version_metadata(int v) {
  return {{"format", "kiln-1"}, {"step", fmt::format("{:04}", v)}};
}

// The version held by the file at path; fails the test unless it loads and is self-consistent.
int loaded_version(const std::string& path) {
  const SafetensorsFile file = load_safetensors(path);
  const int v = std::stoi(file.metadata.at("step"));
  REQUIRE(file.tensors.size() == 3);
  for (const auto& [name, t] : file.tensors) {
    INFO(name);
    REQUIRE(t.to(DType::f64).to_vector<double>() ==
            std::vector<double>(t.numel(), name == "blocks.0.bias" ? -v : v));
  }
  return v;
}

}  // namespace

TEST_CASE("a save that fails mid-write removes its temporary file and keeps the old file",
          "[io][safetensors][crash]") {
  ScratchDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  save_safetensors(path, version_tensors(1), version_metadata(1));
  const std::uint64_t size = read_file(path).size();
  for (const std::uint64_t after : {std::uint64_t{0}, std::uint64_t{3}, std::uint64_t{8},
                                    std::uint64_t{100}, size / 2, size - 1, size}) {
    INFO("fault after " << after << " of " << size << " bytes");
    int crashes = 0;
    arm_save_fault({.after_bytes = after, .crash = [&] { ++crashes; }});
    REQUIRE_THROWS_WITH(save_safetensors(path, version_tensors(2), version_metadata(2)),
                        Catch::Contains(path) && Catch::Contains("injected fault"));
    REQUIRE(crashes == 1);
    REQUIRE(loaded_version(path) == 1);
    REQUIRE(dir.list() == std::vector<std::string>{"ckpt.safetensors"});
  }
  // A fault past the end of the file never fires, and is disarmed by that save.
  int crashes = 0;
  arm_save_fault({.after_bytes = size + 1, .crash = [&] { ++crashes; }});
  save_safetensors(path, version_tensors(3), version_metadata(3));
  save_safetensors(path, version_tensors(4), version_metadata(4));
  REQUIRE(crashes == 0);
  REQUIRE(loaded_version(path) == 4);
  REQUIRE(dir.list() == std::vector<std::string>{"ckpt.safetensors"});
}

TEST_CASE("a writer killed mid-save leaves the previous or the new complete file",
          "[io][safetensors][crash]") {
  ScratchDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  save_safetensors(path, version_tensors(0), version_metadata(0));
  const std::uint64_t size = read_file(path).size();
  // The child writes version v; tensors are built here, so the child runs only the save.
  std::mt19937_64 rng(2024);
  int expected = 0, kills = 0, completions = 0;
  constexpr int kTrials = 60;
  for (int v = 1; v <= kTrials; ++v) {
    const NamedTensors tensors = version_tensors(v);
    const Metadata metadata = version_metadata(v);
    // Every fourth trial may finish (a point past the end); the others die at a byte of the
    // length field and header (first 1/4 of those) or anywhere in the file, the end included.
    std::uint64_t after;
    if (v % 4 == 0) {
      after = std::uniform_int_distribution<std::uint64_t>(size - 16, size + 16)(rng);
    } else if (v % 4 == 1) {
      after = std::uniform_int_distribution<std::uint64_t>(0, 300)(rng);
    } else {
      after = std::uniform_int_distribution<std::uint64_t>(0, size)(rng);
    }
    INFO("trial " << v << ": killed after " << after << " of " << size << " bytes");
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      arm_save_fault({.after_bytes = after, .crash = [] { std::raise(SIGKILL); }});
      try {
        save_safetensors(path, tensors, metadata);
      } catch (...) {
        ::_exit(2);
      }
      ::_exit(0);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    if (after <= size) {
      REQUIRE(WIFSIGNALED(status));
      REQUIRE(WTERMSIG(status) == SIGKILL);
      ++kills;
    } else {
      REQUIRE(WIFEXITED(status));
      REQUIRE(WEXITSTATUS(status) == 0);
      expected = v;
      ++completions;
    }
    REQUIRE(loaded_version(path) == expected);
  }
  REQUIRE(kills >= 40);
  REQUIRE(completions >= 5);
  // Each killed writer left its temporary file, named after the target; nothing else is there.
  const std::vector<std::string> names = dir.list();
  REQUIRE(names.size() == static_cast<std::size_t>(kills) + 1);
  for (const std::string& name : names) {
    INFO(name);
    REQUIRE((name == "ckpt.safetensors" || name.starts_with("ckpt.safetensors.tmp.")));
  }
}
