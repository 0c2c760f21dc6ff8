// Files kiln writes by renaming a temporary file over them (checkpoints, the loss curve): the
// rename replaces whatever the path names. So the path must name a regular file or nothing yet;
// anything else there is refused before a byte is written. Run as root, `train_lm --save
// /dev/null` once replaced the device node with a checkpoint, and a save through a symbolic link
// replaced the link with a file.
//
//   check_output_file("runs/lm.safetensors", "--save");   // before training starts
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

// A kiln::Error "<what> <path>: ..." when the path exists and is not a regular file (a device, a
// FIFO, a socket, a folder or a symbolic link), or when its folder exists and is not a folder.
void check_output_file(const std::string& path, std::string_view what);

// A kiln::Error "<what> <path>: its folder F does not take new files: <reason>" unless a new file
// can be created in the folder of path (which exists): a probe file is created there and removed.
// A read-only folder or file system is then found before a run trains, not at its first save.
void check_folder_writable(const std::string& path, std::string_view what);

// The writer of such a file. Bytes go to a temporary file next to the target, named so that no
// other live writer has the name (pid and a counter; O_EXCL skips a stale one left by a dead
// process), and commit() fsyncs it, renames it over the target and fsyncs the folder: a crash
// leaves the old file or the new one, never part of one. Destroyed before commit(), it removes
// the temporary file. `what` names the writer in errors, with the path: "loss curve 'a.svg': ...".
//
//   AtomicFile file(path, "loss curve");
//   file.write(svg.data(), svg.size());
//   file.commit();
class AtomicFile {
 public:
  AtomicFile(const std::string& target, std::string_view what);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, std::uint64_t size);
  void commit();
  std::uint64_t bytes_written() const { return written_; }

 private:
  std::string target_;
  std::string what_;
  std::string name_;
  int fd_ = -1;
  bool committed_ = false;
  std::uint64_t written_ = 0;
};

// `contents` written to `path` through an AtomicFile.
void write_file_atomically(const std::string& path, std::string_view contents,
                           std::string_view what);

}  // namespace kiln
