// Replacing a folder of files whole (kiln-prepare's dataset, kiln-export's Hugging Face folder):
// the new files are written to a hidden folder beside it and swapped in once complete
// (renameat2's RENAME_EXCHANGE, atomic), so a run stopped at any point, by an error, a full disk or
// a signal, leaves the old folder or the new one, never a mix.
//
//   constexpr std::string_view kFiles[] = {"a.bin", "b.json"};
//   const fs::path out = folder_to_replace(flag_value, "--out", kFiles);
//   StagingFolder staging(out, "--out", "kiln-prepare");   // checks, locks, cleans up
//   ... write the files into staging.path() ...
//   staging.replace();
//
// Beside TARGET in its parent folder: .TARGET.TOOL.lock (held with flock while a run works: a
// second run on the same TARGET is refused at once; removed at the end), .TARGET.TOOL.PID (the new
// folder; one a killed run left is removed by the next run, which holds the lock, so no run owns
// it), and, on a file system without RENAME_EXCHANGE, .TARGET.TOOL.old (the old folder moved aside
// for the moment between two renames). A .old folder is never deleted by the next run: with
// TARGET missing it is moved back (it is the last complete folder), and beside a TARGET it is
// refused with both paths named.
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace kiln {

// flag_value as the folder to replace: absolute, without a trailing slash, a symbolic link
// resolved (the folder it names is replaced, not the link). When it exists, it must be a folder
// that holds only regular files named in `files`: the whole folder is replaced, so anything else
// in it would go. Errors name flag ("--out") and the value.
std::filesystem::path folder_to_replace(const std::string& flag_value, std::string_view flag,
                                        std::span<const std::string_view> files);

class StagingFolder {
 public:
  // Checks up front what would otherwise fail only at the swap: the parent folder must be
  // writable, and an existing target must be on the parent's file system and not a mount point
  // (a rename cannot cross file systems). Then takes the lock and clears what killed runs left.
  StagingFolder(std::filesystem::path target, std::string flag, std::string tool);
  // Removes the new folder unless replace() swapped it in; releases the lock.
  ~StagingFolder();
  StagingFolder(const StagingFolder&) = delete;
  StagingFolder& operator=(const StagingFolder&) = delete;

  // The folder to write the new files into.
  const std::filesystem::path& path() const { return path_; }
  // Swaps the new folder in for the target (or renames it there), then removes the old one.
  void replace();

 private:
  void lock();
  void recover_old_folder();

  std::filesystem::path target_, path_, old_, lock_path_;
  std::string flag_, tool_;
  int lock_fd_ = -1;
  bool replaced_ = false;
};

}  // namespace kiln
