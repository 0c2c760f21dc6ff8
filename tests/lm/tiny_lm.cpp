#include "tests/lm/tiny_lm.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <atomic>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/generator.h"
#include "lm/checkpoint.h"

extern char** environ;

namespace kiln::testing {

Vocabulary tiny_vocabulary() {
  return Vocabulary({"<eos>", "the", "cat", "sat", "on", "mat", "<unk>", "@-@",
                     "&",     "\"",  "'s",  "<b>", "a",  "dog", "ran",   "to",
                     "house", ",",   ".",   "and", "it", "was", "big",   "small"});
}

nn::TransformerConfig tiny_config() {
  nn::TransformerConfig c;
  c.vocab = tiny_vocabulary().size();
  c.d_model = 16, c.heads = 2, c.layers = 2, c.ff = 32, c.max_seq_len = 12, c.dropout = 0.0;
  return c;
}

std::unique_ptr<nn::TransformerLM> tiny_model(const nn::TransformerConfig& config,
                                              std::uint64_t seed) {
  manual_seed(seed);
  auto model = std::make_unique<nn::TransformerLM>(config);
  model->eval();
  return model;
}

std::string write_tiny_checkpoint(const TempDir& dir) {
  const std::string path = dir.file("tiny.safetensors");
  lm::write_checkpoint(path, *tiny_model(tiny_config()), tiny_vocabulary(), {}, {});
  return path;
}

namespace {

ProgramRun spawn(const std::string& program, const std::vector<std::string>& args,
                 const TempDir& dir, int stdout_fd) {
  const std::string out_path = dir.file("stdout.txt"), err_path = dir.file("stderr.txt");
  std::vector<std::string> argv_strings{program};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (stdout_fd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, stdout_fd, 1);
  } else {
    posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
  }
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t default_signals;
  sigemptyset(&default_signals);
  sigaddset(&default_signals, SIGPIPE);
  posix_spawnattr_setsigdefault(&attributes, &default_signals);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF);

  pid_t pid = 0;
  const int spawned =
      posix_spawn(&pid, program.c_str(), &actions, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  KILN_CHECK(spawned == 0, "run_program: cannot start {}: error {}", program, spawned);
  int status = 0;
  KILN_CHECK(::waitpid(pid, &status, 0) == pid, "run_program: waitpid failed for {}", program);

  ProgramRun run;
  run.exited = WIFEXITED(status);
  run.code = run.exited ? WEXITSTATUS(status) : WTERMSIG(status);
  if (stdout_fd < 0) run.out = read_text(out_path);
  run.err = read_text(err_path);
  return run;
}

}  // namespace

ProgramRun run_program(const std::string& program, const std::vector<std::string>& args,
                       const TempDir& dir) {
  return spawn(program, args, dir, -1);
}

ProgramRun run_with_closed_stdout(const std::string& program, const std::vector<std::string>& args,
                                  const TempDir& dir) {
  int ends[2];
  KILN_CHECK(::pipe(ends) == 0, "run_with_closed_stdout: pipe failed");
  ::close(ends[0]);  // nobody will ever read
  const ProgramRun run = spawn(program, args, dir, ends[1]);
  ::close(ends[1]);
  return run;
}

std::string read_text(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

}  // namespace kiln::testing
