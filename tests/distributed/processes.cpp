#include "tests/distributed/processes.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tests/harness/temp_dir.h"

extern char** environ;

namespace kiln::testing {

namespace {

using Clock = std::chrono::steady_clock;

int decode_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return -1000;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

std::vector<Finished> run_ranks(const std::vector<std::string>& argv, int world,
                                const std::function<std::map<std::string, std::string>(int)>& env,
                                double kill_after_s) {
  const TempDir dir;
  const Clock::time_point start = Clock::now();
  std::vector<pid_t> pids;
  std::vector<Finished> results(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) {
    // Everything the child needs is built before fork: after it, only exec.
    std::vector<std::string> variables;
    const std::map<std::string, std::string> extra = env(r);
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      if (!extra.count(entry.substr(0, entry.find('=')))) variables.push_back(entry);
    }
    for (const auto& [name, value] : extra) variables.push_back(name + "=" + value);
    std::vector<char*> envp, args;
    for (std::string& v : variables) envp.push_back(v.data());
    envp.push_back(nullptr);
    std::vector<std::string> argv_copy = argv;
    for (std::string& a : argv_copy) args.push_back(a.data());
    args.push_back(nullptr);
    const int out = ::open(dir.file("rank" + std::to_string(r)).c_str(),
                           O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) throw std::runtime_error("cannot create an output file");
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(out, 1);
      ::dup2(out, 2);
      ::execve(args[0], args.data(), envp.data());
      ::_exit(127);
    }
    ::close(out);
    pids.push_back(pid);
  }
  std::size_t running = pids.size();
  while (running > 0) {
    for (std::size_t r = 0; r < pids.size(); ++r) {
      if (pids[r] < 0) continue;
      int status = 0;
      if (::waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        results[r].status = decode_status(status);
        results[r].seconds = seconds_since(start);
        pids[r] = -1;
        --running;
      } else if (seconds_since(start) > kill_after_s) {
        ::kill(pids[r], SIGKILL);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (int r = 0; r < world; ++r) {
    std::ifstream in(dir.file("rank" + std::to_string(r)));
    std::stringstream text;
    text << in.rdbuf();
    results[static_cast<std::size_t>(r)].output = text.str();
  }
  return results;
}

Finished run_command(const std::string& command) {
  const Clock::time_point start = Clock::now();
  std::FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed: " + command);
  Finished result;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
    result.output.append(buffer, n);
  result.status = decode_status(::pclose(pipe));
  result.seconds = seconds_since(start);
  return result;
}

int free_tcp_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0)
    throw std::runtime_error("no free TCP port");
  ::close(fd);
  return ntohs(address.sin_port);
}

}  // namespace kiln::testing
