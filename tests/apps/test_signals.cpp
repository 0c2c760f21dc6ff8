// SIGTERM and SIGINT stop train_lm gracefully: it saves its state at the next step boundary,
// says it was interrupted and at which step, exits 0, and the checkpoint resumes.
#include <signal.h>

#include <catch2/catch.hpp>
#include <regex>

#include "programs.h"

using namespace kiln::testing;

TEST_CASE("SIGTERM and SIGINT make train_lm save its state and exit 0 and the state resumes") {
  const auto [signal, name] = GENERATE(std::pair{SIGTERM, "SIGTERM"}, std::pair{SIGINT, "SIGINT"});
  INFO(name);
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string checkpoint = dir.file("lm.safetensors");
  // Without the signal it would train for a minute.
  Child child({kTrainLm,
               "--data",
               dir.path().string(),
               "--d-model",
               "32",
               "--heads",
               "2",
               "--layers",
               "1",
               "--ff",
               "64",
               "--seq-len",
               "16",
               "--batch-size",
               "8",
               "--threads",
               "1",
               "--time-budget",
               "60",
               "--eval-every",
               "0",
               "--log-every",
               "1",
               "--save",
               checkpoint});
  std::string output;
  for (std::optional<std::string> line; (line = child.read_line());) {
    output += *line + "\n";
    if (line->rfind("step ", 0) == 0) break;  // training has started
  }
  REQUIRE(::kill(child.pid(), signal) == 0);
  const int status = child.wait(&output);
  INFO(output);
  CHECK(status == 0);
  std::smatch match;
  REQUIRE(std::regex_search(
      output, match, std::regex(std::string("interrupted by ") + name + " at step ([0-9]+)")));
  const long step = std::stol(match[1]);
  CHECK(step >= 1);

  const RunResult resumed =
      run(kTrainLm + " --resume " + checkpoint + " --data " + dir.path().string() + " --steps " +
          std::to_string(step + 5) + " --time-budget 0 --save " + checkpoint);
  INFO(resumed.output);
  CHECK(resumed.status == 0);
  CHECK(resumed.output.find("resumed from " + checkpoint + " at step " + std::to_string(step)) !=
        std::string::npos);
  CHECK(resumed.lines().back().find(" steps " + std::to_string(step + 5) + " ") !=
        std::string::npos);
}
