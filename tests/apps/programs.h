// Helpers for the tests of the example programs: run a built program (train_lm, train_custom,
// eval_ppl, generate, attention_maps) as a user would and capture what it prints, write a tiny
// corpus, and pick lines out of the output. The programs' paths come from the build (KILN_TRAIN_LM,
// KILN_TRAIN_CUSTOM, KILN_EVAL_PPL, KILN_GENERATE, KILN_ATTENTION_MAPS, KILN_PREPARE, KILN_EXPORT).
#pragma once

#include <sys/types.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/io/safetensors.h"
#include "tests/harness/temp_dir.h"

namespace kiln::testing {

inline const std::string kTrainLm = KILN_TRAIN_LM;
inline const std::string kTrainCustom = KILN_TRAIN_CUSTOM;
inline const std::string kEvalPpl = KILN_EVAL_PPL;
inline const std::string kGenerate = KILN_GENERATE;
inline const std::string kAttentionMaps = KILN_ATTENTION_MAPS;
inline const std::string kPrepare = KILN_PREPARE;
inline const std::string kExport = KILN_EXPORT;

// A tiny model and run (9k parameters, B 8 × T 16) that trains in well under a second, with
// torch_ref.py's regularization, window order and constant lr (train_lm's defaults are the
// 15-minute recipe, whose 200 warm-up steps outlast a test's run) and the default precision
// (--precision auto: bf16 where the CPU multiplies it natively)...
inline const std::string kTinyRun =
    "--d-model 32 --heads 2 --layers 1 --ff 64 --seq-len 16 --batch-size 8 --lr 3e-3 "
    "--dropout 0.1 --word-dropout 0 --no-shuffle --schedule constant --warmup 0 --time-budget 0";
// ... and in float32 on every machine, for the tests whose figures depend on the precision (a
// later --precision wins; on --resume the flag overrides the checkpoint's).
inline const std::string kTinyFlags = kTinyRun + " --precision f32";

// train_lm on the tiny corpus in `dir` with the tiny model, one thread; callers append flags.
inline std::string tiny_train(const TempDir& dir) {
  return kTrainLm + " --data " + dir.path().string() + " " + kTinyFlags + " --threads 1";
}

// The whole content of a file, or "" when it cannot be read.
std::string file_bytes(const std::string& path);

struct RunResult {
  int status;          // the exit status, or −N after death by signal N
  std::string output;  // stdout and stderr, interleaved
  std::vector<std::string> lines() const;
};

// Runs `command` through the shell, stdout and stderr captured together.
RunResult run(const std::string& command);

// Writes train.txt (220 lines, 1,760 tokens: 14 windows of B 8 × T 16), valid.txt and test.txt
// (50 lines each) of a small grammar ("the big cat sees the dog .") that a tiny model learns
// quickly, into dir.
void write_tiny_corpus(const std::string& dir);

// The first line that starts with prefix, without it; nothing if none does.
std::optional<std::string> line_after(const std::vector<std::string>& lines,
                                      const std::string& prefix);

// The loss of the log line of `step` ("step 20/30 | epoch 2 (43%) | loss 2.7613 | ...").
std::optional<std::string> logged_loss(const std::vector<std::string>& lines, long step);

// Every tensor of a and b pairs up by position with the same name, dtype and shape, and then
// same_values(x, y) checks their values (Catch checks, naming the tensor that differs).
void check_tensor_pairs(const SafetensorsFile& a, const SafetensorsFile& b,
                        const std::function<void(const Tensor&, const Tensor&)>& same_values);
// check_tensor_pairs with the same bytes.
void check_same_tensors(const SafetensorsFile& a, const SafetensorsFile& b);

// A program started with its stdout and stderr in a pipe, for tests that signal it.
class Child {
 public:
  explicit Child(const std::vector<std::string>& argv);
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  pid_t pid() const { return pid_; }
  // The next line of output (without '\n'); nothing at the end of the output.
  std::optional<std::string> read_line();
  // Reads the rest of the output, waits, and returns the status (as RunResult::status).
  int wait(std::string* rest);

 private:
  pid_t pid_ = -1;
  std::FILE* out_ = nullptr;
};

}  // namespace kiln::testing
