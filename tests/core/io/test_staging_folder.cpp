// core/io/staging_folder.h: a folder replaced whole. What would fail only at the swap (after
// hours of kiln-prepare) is refused at the start, a second run on the same folder is refused, and
// what a stopped run left is cleared, except the old folder a swap moved aside, which is moved
// back, never deleted.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "core/error.h"
#include "core/io/staging_folder.h"
#include "tests/core/io/files.h"

using namespace kiln;
using Catch::Contains;
using kiln::testing::ScratchDir;
namespace fs = std::filesystem;

namespace {

std::string read_all(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

constexpr std::string_view kFiles[] = {"a.txt", "b.txt"};

}  // namespace

TEST_CASE("a staged folder is swapped in whole and leaves nothing beside it", "[io][staging]") {
  ScratchDir dir;
  const fs::path out = dir.file("out");
  for (const char* text : {"first", "second"}) {
    StagingFolder staging(folder_to_replace(out.string(), "--out", kFiles), "--out", "tool");
    std::ofstream(staging.path() / "a.txt") << text;
    staging.replace();
  }
  CHECK(read_all(out / "a.txt") == "second");
  CHECK(dir.list() == std::vector<std::string>{"out"});
  {  // Not replaced: the new folder and the lock go, the old folder stays.
    StagingFolder staging(out, "--out", "tool");
    std::ofstream(staging.path() / "a.txt") << "third";
  }
  CHECK(read_all(out / "a.txt") == "second");
  CHECK(dir.list() == std::vector<std::string>{"out"});
}

TEST_CASE("a second run on the same folder is refused while the first holds the lock",
          "[io][staging]") {
  ScratchDir dir;
  const fs::path out = dir.file("out");
  StagingFolder first(out, "--out", "tool");
  CHECK_THROWS_WITH(StagingFolder(out, "--out", "tool"),
                    Contains("--out " + out.string() + ": another tool is writing it") &&
                        Contains(".out.tool.lock"));
  CHECK(fs::is_directory(first.path()));  // the first run's folder is left alone
}

TEST_CASE("a killed run's new folder is removed, its moved-aside old folder moved back",
          "[io][staging]") {
  // Found by review: killed between the two renames of a swap without RENAME_EXCHANGE, a run
  // left no --out, its old folder at .old and its new one; the next run took "PID.old" for a
  // dead PID and deleted both.
  ScratchDir dir;
  const fs::path out = dir.file("out");
  fs::create_directories(dir.file(".out.tool.old"));
  std::ofstream(dir.file(".out.tool.old/a.txt")) << "old";
  fs::create_directories(dir.file(".out.tool.999999999"));  // a killed run's new folder
  {
    StagingFolder staging(out, "--out", "tool");
    CHECK(read_all(out / "a.txt") == "old");
    CHECK_FALSE(fs::exists(dir.file(".out.tool.old")));
    CHECK_FALSE(fs::exists(dir.file(".out.tool.999999999")));
  }
  CHECK(dir.list() == std::vector<std::string>{"out"});
  // Beside an --out, the .old folder is refused with both paths, never deleted.
  fs::create_directories(dir.file(".out.tool.old"));
  CHECK_THROWS_WITH(StagingFolder(out, "--out", "tool"),
                    Contains(dir.file(".out.tool.old")) && Contains("never deleted") &&
                        Contains("move it back to " + out.string()));
  CHECK(fs::exists(dir.file(".out.tool.old")));
  CHECK(read_all(out / "a.txt") == "old");
  CHECK_FALSE(fs::exists(dir.file(".out.tool.lock")));
}

TEST_CASE("a mount point as the folder to replace is refused at the start", "[io][staging]") {
  // Found by review: rename(2) out of a mount point or across file systems fails (EBUSY, EXDEV),
  // which kiln-prepare met only at the swap, after all its work.
  struct stat shm, dev;
  if (::stat("/dev/shm", &shm) != 0 || ::stat("/dev", &dev) != 0 || shm.st_dev == dev.st_dev) {
    std::puts("skipped: /dev/shm is not a mount point here");
    return;
  }
  CHECK_THROWS_WITH(StagingFolder("/dev/shm", "--out", "tool"),
                    Contains("--out /dev/shm: it is a mount point") &&
                        Contains("give a folder inside it (e.g. /dev/shm/data)"));
  CHECK_FALSE(fs::exists("/dev/.shm.tool.lock"));
}

TEST_CASE("a parent folder the user cannot write is refused at the start", "[io][staging]") {
  // As root every folder is writable, so the check runs in a child that drops to nobody.
  ScratchDir dir;
  const fs::path parent = dir.file("read-only");
  fs::create_directories(parent);
  ::chmod(parent.c_str(), 0555);
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(fds[0]);
    std::string message = "no error";
    if (::geteuid() != 0 || (::setgid(65534) == 0 && ::setuid(65534) == 0)) {
      try {
        StagingFolder staging(parent / "out", "--out", "tool");
      } catch (const Error& e) {
        message = e.what();
      }
    } else {
      message = "cannot drop to nobody";
    }
    const ssize_t written = ::write(fds[1], message.data(), message.size());
    ::_exit(written == static_cast<ssize_t>(message.size()) ? 0 : 1);
  }
  ::close(fds[1]);
  std::string message;
  char buffer[512];
  for (ssize_t got; (got = ::read(fds[0], buffer, sizeof buffer)) > 0;) message.append(buffer, got);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  ::chmod(parent.c_str(), 0755);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  if (message == "cannot drop to nobody") {
    std::puts("skipped: cannot drop to nobody");
    return;
  }
  CHECK_THAT(message, Contains("cannot write in the folder " + parent.string()) &&
                          Contains("give a --out in a folder you can write"));
}

TEST_CASE("a folder to replace holds only the listed regular files", "[io][staging]") {
  ScratchDir dir;
  fs::create_directories(dir.file("out/b.txt"));
  CHECK_THROWS_WITH(folder_to_replace(dir.file("out"), "--out", kFiles),
                    Contains("b.txt (not a regular file)") && Contains("(a.txt, b.txt)"));
  CHECK_THROWS_WITH(folder_to_replace("", "--out", kFiles), "--out DIR is required");
}
