// A fresh folder for a test's files, under the system's temporary directory.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace kiln::testing {

// Unique to this process and object; removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // The path of `name` inside the folder.
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  // Writes bytes to the file `name` in the folder and returns its path.
  std::filesystem::path write(const std::string& name, std::string_view bytes) const;

 private:
  std::filesystem::path path_;
};

}  // namespace kiln::testing
