// Helpers for the data/ tests: a temporary corpus folder, and the message of an expected error.
#pragma once

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include <unistd.h>

#include "core/error.h"

namespace kiln::testing {

// A fresh folder under the system's temporary directory, removed with everything in it when
// the object goes out of scope.
class TempDir {
 public:
  TempDir() {
    static int count = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("kiln_test_data_" + std::to_string(::getpid()) + "_" + std::to_string(count++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Writes bytes to the file `name` in the folder and returns its path.
  std::filesystem::path write(const std::string& name, std::string_view bytes) const {
    const std::filesystem::path file = path_ / name;
    std::ofstream out(file, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    REQUIRE(out.good());
    return file;
  }

 private:
  std::filesystem::path path_;
};

// The message of the kiln::Error that f throws; the test fails if f throws nothing or something
// else.
template <typename F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const kiln::Error& e) {
    return e.what();
  }
  FAIL("expected a kiln::Error, but nothing was thrown");
  return {};
}

}  // namespace kiln::testing
