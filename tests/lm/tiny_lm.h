// What the generate and attention_maps tests share: a tiny TransformerLM with random weights and a
// small vocabulary full of the tokens that need escaping, written as a checkpoint into a
// temporary folder, and a way to run the example programs and capture what they print.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "data/vocabulary.h"
#include "nn/transformer_lm.h"
#include "tests/harness/temp_dir.h"

namespace kiln::testing {

// 24 words: "<eos>", "<unk>", WikiText-like tokens ("@-@", "&", "\"", "'s", "<b>") and plain
// words ("the", "cat", ...).
Vocabulary tiny_vocabulary();

// d_model 16, 2 heads, 2 layers, ff 32, max_seq_len 12 (short, so generation runs past it),
// no dropout, vocabulary of tiny_vocabulary(); weights drawn from `seed`. Other positions and
// attention layouts by changing the config.
nn::TransformerConfig tiny_config();
std::unique_ptr<nn::TransformerLM> tiny_model(const nn::TransformerConfig& config,
                                              std::uint64_t seed = 3);

// Writes tiny_model(tiny_config()) with tiny_vocabulary() to dir/tiny.safetensors; returns the
// path.
std::string write_tiny_checkpoint(const TempDir& dir);

// What a program printed and how it ended.
struct ProgramRun {
  bool exited = false;  // false: killed by a signal
  int code = -1;        // the exit status when exited; the signal's number otherwise
  std::string out, err;
};

// Runs program with args (no shell: arguments are passed as they are), stdout and stderr
// captured through files in dir. SIGPIPE has its default action in the child, as in a shell.
ProgramRun run_program(const std::string& program, const std::vector<std::string>& args,
                       const TempDir& dir);

// Runs program with its stdout a pipe whose reading end is already closed (as in
// `program | head` once head has quit): every write fails.
ProgramRun run_with_closed_stdout(const std::string& program, const std::vector<std::string>& args,
                                  const TempDir& dir);

std::string read_text(const std::string& path);

}  // namespace kiln::testing
