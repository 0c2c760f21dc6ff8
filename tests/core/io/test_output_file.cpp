// AtomicFile (core/output_file.h), the one writer of files kiln renames into place: a committed
// file is whole, an abandoned one leaves the old file, and no temporary stays behind.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "core/io/output_file.h"
#include "tests/core/io/files.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

std::string text_of(const std::string& path) {
  const Bytes bytes = read_file(path);
  return std::string(bytes.begin(), bytes.end());
}

}  // namespace

TEST_CASE("write_file_atomically replaces a file whole and leaves only the file", "[io]") {
  ScratchDir dir;
  const std::string path = dir.file("curve.svg");
  write_file_atomically(path, "first version", "test file");
  write_file_atomically(path, "second", "test file");
  CHECK(text_of(path) == "second");
  CHECK(dir.list() == std::vector<std::string>{"curve.svg"});
}

TEST_CASE("an AtomicFile destroyed before commit leaves the old file and no temporary", "[io]") {
  ScratchDir dir;
  const std::string path = dir.file("lm.safetensors");
  write_file_atomically(path, "old", "test file");
  {
    AtomicFile file(path, "test file");
    file.write("new contents", 12);
    CHECK(file.bytes_written() == 12);
  }
  CHECK(text_of(path) == "old");
  CHECK(dir.list() == std::vector<std::string>{"lm.safetensors"});
}

TEST_CASE("two AtomicFiles open on one path do not share a temporary", "[io]") {
  ScratchDir dir;
  const std::string path = dir.file("a.svg");
  // A folder where a fixed temporary name ("a.svg.tmp") would go does not stop a write either.
  std::filesystem::create_directory(path + ".tmp");
  AtomicFile first(path, "test file"), second(path, "test file");
  first.write("from the first", 14);
  second.write("from the second", 15);
  first.commit();
  CHECK(text_of(path) == "from the first");
  second.commit();
  CHECK(text_of(path) == "from the second");
  CHECK(std::filesystem::is_directory(path + ".tmp"));
}

TEST_CASE("an AtomicFile refuses a target that is not a regular file, naming the writer", "[io]") {
  ScratchDir dir;
  std::filesystem::create_directory(dir.file("folder"));
  REQUIRE_THROWS_WITH(AtomicFile(dir.file("folder"), "loss curve"),
                      Catch::Contains("loss curve") && Catch::Contains("a folder"));
}
