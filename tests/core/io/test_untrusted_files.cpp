// Files a hostile or careless user hands kiln (issue 22): a FIFO where a checkpoint should be, a
// save target that is not a regular file, a checkpoint another writer laid out in another order,
// and the Python checker on an interpreter without numpy. Each case failed before its fix.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "core/io/output_file.h"
#include "core/io/safetensors.h"
#include "core/kiln.h"
#include "tests/core/io/files.h"
#include "tests/harness/paths.h"

using namespace kiln;
using Catch::Contains;
using kiln::testing::Bytes;
using kiln::testing::read_file;
using kiln::testing::ScratchDir;
using kiln::testing::write_file;

namespace {

NamedTensors mixed_tensors() {
  return {{"zeta.weight", arange(0.0, 6.0, 1.0).reshape({2, 3})},
          {"alpha.ids", arange(4, {.dtype = DType::i64})},
          {"mid.bias", full({3}, -0.5)},
          {"beta.f64", full({2}, 1e-300, {.dtype = DType::f64})},
          {"empty", full({0, 4}, 1.0)}};
}

std::vector<std::string> names_of(const SafetensorsFile& file) {
  std::vector<std::string> names;
  for (const auto& [name, tensor] : file.tensors) names.push_back(name);
  return names;
}

}  // namespace

// Before: open(2) on a FIFO blocks until a writer appears, so eval_ppl --checkpoint FIFO hung.
TEST_CASE("a FIFO given as a checkpoint is refused at once, without waiting for a writer",
          "[io][untrusted]") {
  ScratchDir dir;
  const std::string fifo = dir.file("ckpt.safetensors");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // A reader stuck in open() would wait forever: after 3 s a writer opens the FIFO to free it,
  // and the test fails on the flag.
  std::atomic<bool> done{false}, rescued{false};
  std::thread watchdog([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (!done && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (done) return;
    rescued = true;
    const int fd = ::open(fifo.c_str(), O_WRONLY);
    if (fd >= 0) ::close(fd);
  });
  std::string message;
  try {
    load_safetensors(fifo);
  } catch (const Error& e) {
    message = e.what();
  }
  done = true;
  watchdog.join();
  CHECK_FALSE(rescued);
  CHECK_THAT(message, Contains(fifo) && Contains("not a regular file"));
  // Named as the safetensors reader's error, whoever the caller (a Hugging Face folder's
  // model.safetensors is no kiln checkpoint).
  CHECK_THAT(message, Contains("load_safetensors: " + fifo) && !Contains("checkpoint " + fifo));
}

// Before: the rename of the temporary file replaced whatever the path named: a FIFO, a symbolic
// link, or (as root) /dev/null itself.
TEST_CASE("save_safetensors refuses a target that exists and is not a regular file",
          "[io][untrusted]") {
  ScratchDir dir;
  const NamedTensors tensors = {{"w", ones({2})}};
  const std::string fifo = dir.file("fifo"), link = dir.file("link"), folder = dir.file("folder");
  const std::string real = dir.file("real.safetensors");
  save_safetensors(real, tensors);
  const Bytes real_bytes = read_file(real);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::filesystem::create_symlink(real, link);
  std::filesystem::create_directory(folder);
  for (const auto& [path, kind] :
       {std::pair{fifo, "a FIFO"}, {link, "a symbolic link"}, {folder, "a folder"}}) {
    INFO(path);
    REQUIRE_THROWS_WITH(save_safetensors(path, tensors),
                        Contains(path) && Contains(kind) && Contains("not a regular file"));
  }
  CHECK(std::filesystem::is_fifo(fifo));
  CHECK(std::filesystem::is_symlink(link));
  CHECK(read_file(real) == real_bytes);
  // A device, by the check alone: a regression must not get the chance to replace /dev/null.
  REQUIRE_THROWS_WITH(check_output_file("/dev/null", "--save"),
                      Contains("--save /dev/null: it is a character device"));
  // The link's message names the file to give instead.
  REQUIRE_THROWS_WITH(save_safetensors(link, tensors), Contains("give the file it points to"));
  // A file where a folder should be.
  write_file(dir.file("plain"), Bytes{1, 2, 3});
  REQUIRE_THROWS_WITH(
      check_output_file(dir.file("plain/sub/x.safetensors"), "--save"),
      Contains("--save") && Contains(dir.file("plain") + " is a file, not a folder"));
  REQUIRE_NOTHROW(check_output_file(dir.file("new/sub/x.safetensors"), "--save"));
  REQUIRE_NOTHROW(check_output_file(real, "--save"));
}

// Before: the checksum was the CRC-32 of the data buffer in file order, and Python's safetensors
// (save_file(load_file(f), g, metadata=same)) orders the data by dtype and name: "checksum
// mismatch ... the file is corrupt" for identical tensors.
TEST_CASE("the checksum does not depend on the order of the tensors in the file",
          "[io][untrusted]") {
  ScratchDir dir;
  const std::string path = dir.file("kiln.safetensors");
  save_safetensors(path, mixed_tensors(), {{"format", "kiln-1"}});
  const Bytes kiln_file = read_file(path);
  const SafetensorsFile original = load_safetensors(path);

  // Python's order: 8-byte dtypes first, each group by name; and the reverse of kiln's.
  std::vector<std::string> python = {"alpha.ids", "beta.f64", "empty", "mid.bias", "zeta.weight"};
  std::vector<std::string> reversed = names_of(original);
  std::reverse(reversed.begin(), reversed.end());
  for (const auto& order : {python, reversed}) {
    INFO(fmt::format("data order {}", order));
    write_file(dir.file("other.safetensors"),
               kiln::testing::relayout_safetensors(kiln_file, order));
    const SafetensorsFile other = load_safetensors(dir.file("other.safetensors"));
    CHECK(names_of(other) == order);
    CHECK(other.metadata == original.metadata);
    for (const auto& [name, tensor] : other.tensors) {
      const auto it = std::find_if(original.tensors.begin(), original.tensors.end(),
                                   [&name = name](const auto& e) { return e.first == name; });
      REQUIRE(it != original.tensors.end());
      CHECK(tensor.to(DType::f64).to_vector<double>() ==
            it->second.to(DType::f64).to_vector<double>());
    }
    // A flipped bit is still found, in any order.
    Bytes corrupt = kiln::testing::relayout_safetensors(kiln_file, order);
    corrupt[corrupt.size() - 3] ^= 0x10;
    write_file(dir.file("corrupt.safetensors"), corrupt);
    REQUIRE_THROWS_WITH(load_safetensors(dir.file("corrupt.safetensors")),
                        Contains("checksum mismatch") && Contains("tensors by name"));
  }
  // Files written before, with the file-order CRC, still load.
  write_file(dir.file("old.safetensors"), kiln::testing::with_file_order_checksum(kiln_file));
  REQUIRE(names_of(load_safetensors(dir.file("old.safetensors"))) == names_of(original));
}

// Before: tools/check_safetensors.py imported numpy, so a python3 without it (a venv or pyenv
// interpreter first on PATH) ended in a traceback. python3 -S leaves out every site package,
// numpy included: only the standard library remains.
TEST_CASE("tools/check_safetensors.py needs only the standard library", "[io][untrusted][python]") {
  if (std::system("/usr/bin/python3 -S -c 'import zlib, json, array' > /dev/null 2>&1") != 0) {
    std::puts("skipped: no /usr/bin/python3");
    return;
  }
  REQUIRE(std::system("/usr/bin/python3 -S -c 'import numpy' > /dev/null 2>&1") != 0);
  ScratchDir dir;
  const std::string path = dir.file("kiln.safetensors");
  save_safetensors(path, mixed_tensors(), {{"format", "kiln-1"}});
  const Bytes kiln_file = read_file(path);
  const auto check = [&](const Bytes& bytes) {
    write_file(dir.file("checked.safetensors"), bytes);
    const std::string command =
        fmt::format("/usr/bin/python3 -S '{}' '{}' > '{}' 2>&1",
                    kiln::testing::source_path("tools/check_safetensors.py"),
                    dir.file("checked.safetensors"), dir.file("out.txt"));
    const int status = std::system(command.c_str());
    const Bytes out = read_file(dir.file("out.txt"));
    UNSCOPED_INFO(std::string(out.begin(), out.end()));
    REQUIRE(WIFEXITED(status));
    return std::pair(WEXITSTATUS(status), std::string(out.begin(), out.end()));
  };
  const auto [status, report] = check(kiln_file);
  CHECK(status == 0);
  CHECK_THAT(report, Contains("zeta.weight F32 [2, 3]") && Contains("empty F32 [0, 4]") &&
                         Contains("5 tensors, 15 elements") && Contains("verified"));
  CHECK(check(kiln::testing::relayout_safetensors(
                  kiln_file, {"alpha.ids", "beta.f64", "empty", "mid.bias", "zeta.weight"}))
            .first == 0);
  CHECK(check(kiln::testing::with_file_order_checksum(kiln_file)).first == 0);
  Bytes corrupt = kiln_file;
  corrupt.back() ^= 0x01;
  const auto [bad_status, bad_report] = check(corrupt);
  CHECK(bad_status == 1);
  CHECK_THAT(bad_report, Contains("INVALID") && Contains("checksum mismatch"));
}
