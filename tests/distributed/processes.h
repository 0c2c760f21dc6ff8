// Helpers for the multi-process tests of distributed/: start the ranks of a job as child processes
// and collect what each printed, how it ended and when.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace kiln::testing {

struct Finished {
  int status = 0;      // the exit status, or -N after death by signal N
  std::string output;  // stdout and stderr, interleaved
  double seconds = 0;  // from the start to the end of the process
};

// Starts `world` copies of argv (argv[0] a path), copy r with the variables env(r) added to this
// process's environment, and waits for all; a copy still running after kill_after_s seconds is
// killed with SIGKILL (status -9).
std::vector<Finished> run_ranks(const std::vector<std::string>& argv, int world,
                                const std::function<std::map<std::string, std::string>(int)>& env,
                                double kill_after_s);

// Runs a shell command, stdout and stderr together.
Finished run_command(const std::string& command);

// A TCP port that was free on the loopback a moment ago.
int free_tcp_port();

}  // namespace kiln::testing
