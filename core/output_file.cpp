#include "core/output_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

#include "core/error.h"

namespace kiln {

namespace {

std::string_view kind_of(mode_t mode) {
  if (S_ISREG(mode)) return "a file";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

}  // namespace

void check_output_file(const std::string& path, std::string_view what) {
  KILN_CHECK(!path.empty(), "{}: the path is empty", what);
  struct stat info {};
  if (::lstat(path.c_str(), &info) == 0) {
    if (S_ISREG(info.st_mode)) return;
    std::string hint;
    if (S_ISLNK(info.st_mode)) {
      std::error_code ec;
      const std::filesystem::path target = std::filesystem::read_symlink(path, ec);
      hint = fmt::format(" (give the file it points to, {}, instead)",
                         ec ? std::string("its target") : target.string());
    }
    fail(
        "{} {}: it is {}, not a regular file; kiln writes a temporary file and renames it over "
        "the path, which would replace it{}",
        what, path, kind_of(info.st_mode), hint);
  }
  // The nearest ancestor that exists must be a folder (the missing ones get created in it).
  for (std::filesystem::path folder = std::filesystem::path(path).parent_path(); !folder.empty();
       folder = folder.parent_path()) {
    if (::stat(folder.c_str(), &info) != 0) {
      if (folder == folder.parent_path()) break;
      continue;
    }
    KILN_CHECK(S_ISDIR(info.st_mode), "{} {}: {} is {}, not a folder", what, path, folder.string(),
               kind_of(info.st_mode));
    break;
  }
}

}  // namespace kiln
