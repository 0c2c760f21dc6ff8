// train_lm --device cuda end to end (on the emulated device in CI): the tiny run trained on the
// GPU logs the losses the CPU logs, step by step, within the tolerance that a whole model's ten
// Adam steps meet in tests/cuda/test_model.cpp (1e-4 relative), and ends with the contract's
// RESULT line and the GPU's peak memory.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "programs.h"
#include "tests/harness/near.h"
#include "tests/harness/op_table.h"

using namespace kiln::testing;

namespace {

struct Training {
  RunResult result;
  std::vector<double> losses;  // one per step
};

Training train_on(const TempDir& dir, const std::string& device) {
  const std::string metrics = dir.file(device + ".metrics.jsonl");
  Training t;
  t.result = run(kTrainLm + " --data " + dir.path().string() + " " + kTinyFlags +
                 " --steps 20 --log-every 1 --eval-every 0 --threads 1 --device " + device +
                 " --metrics " + metrics);
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json row = nlohmann::json::parse(line);
    if (row["split"] == "train") t.losses.push_back(row["loss"].get<double>());
  }
  return t;
}

}  // namespace

TEST_CASE("cuda/train_lm --device cuda logs the CPU's losses step by step", "[cuda]") {
  if (!cuda_available_or_skip()) return;
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const Training cpu = train_on(dir, "cpu");
  const Training gpu = train_on(dir, "cuda");
  INFO("cpu:\n" << cpu.result.output << "\ncuda:\n" << gpu.result.output);
  REQUIRE(cpu.result.status == 0);
  REQUIRE(gpu.result.status == 0);
  REQUIRE(cpu.losses.size() == 20);
  REQUIRE(gpu.losses.size() == 20);
  for (std::size_t step = 0; step < cpu.losses.size(); ++step) {
    INFO("step " << step + 1 << ": cpu " << cpu.losses[step] << ", cuda " << gpu.losses[step]);
    CHECK(near(gpu.losses[step], cpu.losses[step], 1e-4, 0.0));
  }
  CHECK(cpu.losses.back() < cpu.losses.front());  // the steps did train
  CHECK(gpu.result.output.find("RESULT train_tokens_per_sec") != std::string::npos);
  CHECK(gpu.result.output.find("RESULT gpu_peak_bytes") != std::string::npos);
}
