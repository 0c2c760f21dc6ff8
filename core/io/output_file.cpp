#include "core/io/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <system_error>
#include <utility>

#include "core/error.h"
#include "core/io/input_file.h"

namespace kiln {

namespace {

std::string errno_message() { return std::error_code(errno, std::generic_category()).message(); }

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
        what, path, file_kind(info.st_mode), hint);
  }
  // The nearest ancestor that exists must be a folder (the missing ones get created in it).
  for (std::filesystem::path folder = std::filesystem::path(path).parent_path(); !folder.empty();
       folder = folder.parent_path()) {
    if (::stat(folder.c_str(), &info) != 0) {
      if (folder == folder.parent_path()) break;
      continue;
    }
    KILN_CHECK(S_ISDIR(info.st_mode), "{} {}: {} is {}, not a folder", what, path, folder.string(),
               file_kind(info.st_mode));
    break;
  }
}

void check_folder_writable(const std::string& path, std::string_view what) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string folder = parent.empty() ? std::string(".") : parent.string();
  static std::atomic<std::uint64_t> counter{0};
  for (;;) {
    const std::string probe =
        fmt::format("{}/.kiln-write-probe.{}.{}", folder, ::getpid(), counter.fetch_add(1));
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
      ::close(fd);
      ::unlink(probe.c_str());
      return;
    }
    KILN_CHECK(errno == EEXIST, "{} {}: its folder {} does not take new files: {}", what, path,
               folder, errno_message());
  }
}

AtomicFile::AtomicFile(const std::string& target, std::string_view what)
    : target_(target), what_(fmt::format("{} '{}': ", what, target)) {
  check_output_file(target, what);
  static std::atomic<std::uint64_t> counter{0};
  for (;;) {
    name_ = fmt::format("{}.tmp.{}.{}", target, ::getpid(), counter.fetch_add(1));
    fd_ = ::open(name_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0) break;
    KILN_CHECK(errno == EEXIST, "{}cannot create the temporary file '{}': {}", what_, name_,
               errno_message());
  }
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(name_.c_str());
}

void AtomicFile::write(const void* data, std::uint64_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    // Linux transfers at most about 2 GiB per write call.
    const std::size_t chunk = std::min<std::uint64_t>(size, 1u << 30);
    const ssize_t n = ::write(fd_, p, chunk);
    if (n < 0 && errno == EINTR) continue;
    KILN_CHECK(n > 0, "{}writing '{}' failed: {}", what_, name_,
               n < 0 ? errno_message() : "no progress");
    p += n, size -= static_cast<std::uint64_t>(n), written_ += static_cast<std::uint64_t>(n);
  }
}

void AtomicFile::commit() {
  KILN_CHECK(::fsync(fd_) == 0, "{}fsync of '{}' failed: {}", what_, name_, errno_message());
  const int fd = std::exchange(fd_, -1);
  KILN_CHECK(::close(fd) == 0, "{}closing '{}' failed: {}", what_, name_, errno_message());
  KILN_CHECK(::rename(name_.c_str(), target_.c_str()) == 0, "{}renaming '{}' over it failed: {}",
             what_, name_, errno_message());
  committed_ = true;
  // The rename is durable only once the folder's entry is on disk.
  const std::filesystem::path parent = std::filesystem::path(target_).parent_path();
  const std::string folder = parent.empty() ? std::string(".") : parent.string();
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  KILN_CHECK(dir >= 0, "{}cannot open its folder '{}' to fsync it: {}", what_, folder,
             errno_message());
  const bool synced = ::fsync(dir) == 0;
  const std::string message = synced ? "" : errno_message();
  ::close(dir);
  KILN_CHECK(synced, "{}fsync of its folder '{}' failed: {}", what_, folder, message);
}

void write_file_atomically(const std::string& path, std::string_view contents,
                           std::string_view what) {
  AtomicFile file(path, what);
  file.write(contents.data(), contents.size());
  file.commit();
}

}  // namespace kiln
