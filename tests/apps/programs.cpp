#include "programs.h"

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

namespace kiln::testing {

namespace {

int decode_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return -1000;
}

}  // namespace

std::vector<std::string> RunResult::lines() const {
  std::vector<std::string> out;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

RunResult run(const std::string& command) {
  std::FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed: " + command);
  RunResult result{0, ""};
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
    result.output.append(buffer, n);
  result.status = decode_status(::pclose(pipe));
  return result;
}

void write_tiny_corpus(const std::string& dir) {
  // A fixed LCG (not a std:: distribution) so the corpus is the same everywhere.
  std::uint64_t state = 7;
  const auto pick = [&](const std::vector<const char*>& words) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return words[(state >> 33) % words.size()];
  };
  const std::vector<const char*> nouns = {"cat", "dog",   "bird", "fish",  "horse",
                                          "cow", "sheep", "goat", "mouse", "rat"};
  const std::vector<const char*> verbs = {"sees", "eats", "likes", "chases", "finds", "hears"};
  const std::vector<const char*> adjectives = {"big", "small", "red", "blue", "old", "young"};
  for (const auto& [name, lines] :
       {std::pair{"train.txt", 220}, {"valid.txt", 50}, {"test.txt", 50}}) {
    std::ofstream out(std::filesystem::path(dir) / name);
    for (int i = 0; i < lines; ++i)
      out << "the " << pick(adjectives) << ' ' << pick(nouns) << ' ' << pick(verbs) << " the "
          << pick(nouns) << " .\n";
  }
}

std::optional<std::string> line_after(const std::vector<std::string>& lines,
                                      const std::string& prefix) {
  for (const std::string& line : lines)
    if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
  return std::nullopt;
}

std::optional<std::string> logged_loss(const std::vector<std::string>& lines, long step) {
  for (const std::string& line : lines) {
    // "step N/TOTAL | ..." where the run's length is known, "step N | ..." where a time budget
    // bounds it.
    const std::string head = "step " + std::to_string(step);
    if (line.rfind(head + "/", 0) != 0 && line.rfind(head + " |", 0) != 0) continue;
    const std::size_t at = line.find("| loss ");
    if (at == std::string::npos) return std::nullopt;
    const std::size_t begin = at + 7;
    return line.substr(begin, line.find(' ', begin) - begin);
  }
  return std::nullopt;
}

Child::Child(const std::vector<std::string>& argv) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  out_ = ::fdopen(fds[0], "r");
}

Child::~Child() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (out_ != nullptr) std::fclose(out_);
}

std::optional<std::string> Child::read_line() {
  std::string line;
  for (int c; (c = std::fgetc(out_)) != EOF;) {
    if (c == '\n') return line;
    line += static_cast<char>(c);
  }
  if (line.empty()) return std::nullopt;
  return line;
}

int Child::wait(std::string* rest) {
  for (std::optional<std::string> line; (line = read_line());) *rest += *line + "\n";
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return decode_status(status);
}

void check_tensor_pairs(const SafetensorsFile& a, const SafetensorsFile& b,
                        const std::function<void(const Tensor&, const Tensor&)>& same_values) {
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    const auto& [name, x] = a.tensors[i];
    const auto& [name_b, y] = b.tensors[i];
    INFO(name);
    REQUIRE(name == name_b);
    REQUIRE(x.dtype() == y.dtype());
    REQUIRE(x.shape() == y.shape());
    same_values(x, y);
  }
}

void check_same_tensors(const SafetensorsFile& a, const SafetensorsFile& b) {
  check_tensor_pairs(a, b, [](const Tensor& x, const Tensor& y) {
    CHECK(std::memcmp(x.raw_data(), y.raw_data(), x.numel() * dtype_size(x.dtype())) == 0);
  });
}

}  // namespace kiln::testing
