#include "core/io/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <system_error>

#include "core/error.h"

namespace kiln {

namespace {

std::string errno_message() { return std::error_code(errno, std::generic_category()).message(); }

}  // namespace

std::string_view file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a file";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

OpenedFile::~OpenedFile() {
  if (fd_ >= 0) ::close(fd_);
}

int OpenedFile::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

OpenedFile open_input_file(const std::string& path, std::string_view what) {
  KILN_CHECK(!path.empty(), "{}: the path is empty", what);
  // A folder opens with O_RDONLY too; fstat below refuses it with the rest.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  KILN_CHECK(fd >= 0, "{} {}: cannot open it: {}", what, path, errno_message());
  OpenedFile file(fd, 0);
  struct stat info {};
  KILN_CHECK(::fstat(fd, &info) == 0, "{} {}: cannot stat it: {}", what, path, errno_message());
  KILN_CHECK(S_ISREG(info.st_mode), "{} {}: it is {}, not a regular file; give a file", what, path,
             file_kind(info.st_mode));
  const int flags = ::fcntl(fd, F_GETFL);
  KILN_CHECK(flags >= 0 && ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0,
             "{} {}: cannot make its reads blocking: {}", what, path, errno_message());
  return OpenedFile(file.release(), static_cast<std::uint64_t>(info.st_size));
}

FilePointer fopen_input_file(const std::string& path, std::string_view what) {
  OpenedFile file = open_input_file(path, what);
  std::FILE* stream = ::fdopen(file.fd(), "rb");
  KILN_CHECK(stream != nullptr, "{} {}: cannot open it: {}", what, path, errno_message());
  file.release();
  return FilePointer(stream, &std::fclose);
}

}  // namespace kiln
