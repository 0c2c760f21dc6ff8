// Opening a file kiln reads (token shards, checkpoints, tokenizer.json, corpora and other text):
// the path must name a regular file, checked on the opened descriptor, and anything else is
// refused at once. Opened plainly, a FIFO blocks the reader forever waiting for a writer, and a
// folder or a device reads as garbage or as nothing.
//
//   const OpenedFile file = open_input_file(path, "token shard");   // file.fd, file.size
//   const FilePointer text = fopen_input_file(path, "corpus");     // for stdio reads
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

namespace kiln {

// "a FIFO", "a folder", "a character device", ... for a stat mode.
std::string_view file_kind(mode_t mode);

// An open descriptor of a regular file and its size; closed by the destructor.
class OpenedFile {
 public:
  OpenedFile(int fd, std::uint64_t size) : fd_(fd), size_(size) {}
  ~OpenedFile();
  OpenedFile(OpenedFile&& other) noexcept : fd_(other.fd_), size_(other.size_) { other.fd_ = -1; }
  OpenedFile(const OpenedFile&) = delete;
  OpenedFile& operator=(const OpenedFile&) = delete;
  OpenedFile& operator=(OpenedFile&&) = delete;

  int fd() const { return fd_; }
  std::uint64_t size() const { return size_; }
  // Hands the descriptor over (the caller closes it).
  int release();

 private:
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

// Opens path for reading (O_NONBLOCK for the open only, so that a FIFO does not wait for a
// writer; reads block as usual). A kiln::Error "<what> <path>: ..." when it cannot be opened or
// is not a regular file ("it is a FIFO, not a regular file").
OpenedFile open_input_file(const std::string& path, std::string_view what);

using FilePointer = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;
// open_input_file as a stdio stream ("rb").
FilePointer fopen_input_file(const std::string& path, std::string_view what);

}  // namespace kiln
