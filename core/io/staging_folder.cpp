#include "core/io/staging_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace kiln {

namespace fs = std::filesystem;

fs::path folder_to_replace(const std::string& flag_value, std::string_view flag,
                           std::span<const std::string_view> files) {
  KILN_CHECK(!flag_value.empty(), "{} DIR is required", flag);
  std::error_code ec;
  fs::path out = fs::absolute(flag_value, ec).lexically_normal();
  KILN_CHECK(!ec, "{} {}: {}", flag, flag_value, ec.message());
  if (!out.has_filename()) out = out.parent_path();
  if (fs::is_symlink(fs::symlink_status(out, ec))) {
    out = fs::canonical(out, ec);
    KILN_CHECK(!ec, "{} {}: cannot follow the symbolic link: {}", flag, flag_value, ec.message());
  }
  const fs::file_status status = fs::status(out, ec);
  if (!fs::exists(status)) return out;
  KILN_CHECK(fs::is_directory(status), "{} {}: it exists and is not a folder", flag, flag_value);
  std::vector<std::string> foreign;
  for (const fs::directory_entry& entry : fs::directory_iterator(out, ec)) {
    const std::string name = entry.path().filename().string();
    std::error_code type_ec;
    // A file the folder is made of is a regular file: a folder or a link named so is not one.
    const bool regular = entry.is_regular_file(type_ec) && !entry.is_symlink(type_ec);
    if (!regular || std::find(files.begin(), files.end(), name) == files.end())
      foreign.push_back(regular ? name : fmt::format("{} (not a regular file)", name));
  }
  KILN_CHECK(!ec, "{} {}: cannot list the folder: {}", flag, flag_value, ec.message());
  std::sort(foreign.begin(), foreign.end());
  KILN_CHECK(foreign.empty(),
             "{} {}: the folder holds {}, which {} not among the files written there ({}); the "
             "whole folder is replaced (a new one is swapped in, so that it is never half old "
             "and half new): give a folder of its own",
             flag, flag_value, fmt::join(foreign, ", "), foreign.size() == 1 ? "is" : "are",
             fmt::join(files, ", "));
  return out;
}

namespace {

void sync_folder(const fs::path& folder, std::string_view flag) {
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  KILN_CHECK(fd >= 0, "{}: cannot open the folder {}: {}", flag, folder.string(),
             std::strerror(errno));
  const bool synced = ::fsync(fd) == 0;
  const int sync_errno = errno;
  ::close(fd);
  KILN_CHECK(synced, "{}: cannot sync the folder {}: {}", flag, folder.string(),
             std::strerror(sync_errno));
}

// Whether path is the root of a mount: its device differs from its parent's, or (a bind mount
// of a folder of the same file system) statx says so.
bool mount_root(const fs::path& path, const struct stat& info, const struct stat& parent) {
  if (info.st_dev != parent.st_dev) return true;
#ifdef STATX_ATTR_MOUNT_ROOT
  struct statx x;
  if (::statx(AT_FDCWD, path.c_str(), AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &x) == 0 &&
      (x.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) != 0)
    return (x.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
#endif
  return false;
}

}  // namespace

StagingFolder::StagingFolder(fs::path target, std::string flag, std::string tool)
    : target_(std::move(target)), flag_(std::move(flag)), tool_(std::move(tool)) {
  const fs::path parent = target_.parent_path();
  const std::string where = fmt::format("{} {}", flag_, target_.string());
  std::error_code ec;
  fs::create_directories(parent, ec);
  KILN_CHECK(!ec, "{}: cannot create the folder {}: {}", where, parent.string(), ec.message());
  struct stat info, parent_info;
  KILN_CHECK(::stat(parent.c_str(), &parent_info) == 0, "{}: cannot stat the folder {}: {}", where,
             parent.string(), std::strerror(errno));
  if (::stat(target_.c_str(), &info) == 0 && mount_root(target_, info, parent_info)) {
    fail(
        "{}: it is a mount point (or on another file system than the folder {} that holds it); {} "
        "writes the new folder beside it and swaps it in, and a rename cannot cross file "
        "systems: give a folder inside it (e.g. {})",
        where, parent.string(), tool_, (target_ / "data").string());
  }
  KILN_CHECK(::access(parent.c_str(), W_OK | X_OK) == 0,
             "{}: cannot write in the folder {} ({}); {} writes the new folder beside {} and "
             "swaps it in: give a {} in a folder you can write",
             where, parent.string(), std::strerror(errno), tool_, flag_, flag_);
  // fmt, not "." + string: GCC 12's -Wrestrict misfires on that (its bug 105651).
  const std::string prefix = fmt::format(".{}.{}.", target_.filename().string(), tool_);
  lock_path_ = parent / (prefix + "lock");
  old_ = parent / (prefix + "old");
  lock();
  try {
    recover_old_folder();
    // Under the lock no other run is writing a new folder: any left beside the target is a
    // killed run's (.TARGET.TOOL.PID; the lock and the old folder are not).
    for (const fs::directory_entry& entry : fs::directory_iterator(parent, ec)) {
      const std::string name = entry.path().filename().string();
      if (!name.starts_with(prefix)) continue;
      const std::string_view rest = std::string_view(name).substr(prefix.size());
      if (!rest.empty() &&
          std::all_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; }))
        fs::remove_all(entry.path(), ec);
    }
    path_ = parent / (prefix + std::to_string(::getpid()));
    fs::remove_all(path_, ec);
    KILN_CHECK(fs::create_directory(path_, ec) && !ec, "{}: cannot create the folder {}: {}", where,
               path_.string(), ec ? ec.message() : "it exists");
  } catch (...) {
    ::unlink(lock_path_.c_str());
    ::close(lock_fd_);
    throw;
  }
}

// flock on .TARGET.TOOL.lock. The file is removed when the run ends, so a run that opened it
// just before may lock a file no longer there: it checks that the path still names what it
// locked, and tries again if not.
void StagingFolder::lock() {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    KILN_CHECK(fd >= 0, "{} {}: cannot create the lock file {}: {}", flag_, target_.string(),
               lock_path_.string(), std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int lock_errno = errno;
      ::close(fd);
      KILN_CHECK(lock_errno != EWOULDBLOCK,
                 "{} {}: another {} is writing it (it holds {}); wait for it to end", flag_,
                 target_.string(), tool_, lock_path_.string());
      fail("{} {}: cannot lock {}: {}", flag_, target_.string(), lock_path_.string(),
           std::strerror(lock_errno));
    }
    struct stat held, named;
    if (::fstat(fd, &held) == 0 && ::stat(lock_path_.c_str(), &named) == 0 &&
        held.st_ino == named.st_ino && held.st_dev == named.st_dev) {
      lock_fd_ = fd;
      return;
    }
    ::close(fd);
  }
  fail("{} {}: cannot lock {}: it keeps being replaced", flag_, target_.string(),
       lock_path_.string());
}

// A run stopped between the two renames of a swap without RENAME_EXCHANGE left the old folder
// at .old and no target: that folder is the last complete one, so it goes back.
void StagingFolder::recover_old_folder() {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(old_, ec))) return;
  if (fs::exists(fs::symlink_status(target_, ec))) {
    fail(
        "{} {}: {} holds the folder an earlier run moved aside and was stopped before removing; "
        "it is never deleted for you: remove it (or move it back to {} in place of the folder "
        "there) and run again",
        flag_, target_.string(), old_.string(), target_.string());
  }
  KILN_CHECK(::rename(old_.c_str(), target_.c_str()) == 0,
             "{} {}: an earlier run was stopped while swapping, leaving the old folder at {}; "
             "cannot move it back to {}: {}",
             flag_, target_.string(), old_.string(), target_.string(), std::strerror(errno));
  std::fprintf(stderr,
               "%s: %s %s: an earlier run was stopped while swapping; moved the old folder back "
               "from %s\n",
               tool_.c_str(), flag_.c_str(), target_.c_str(), old_.c_str());
}

StagingFolder::~StagingFolder() {
  std::error_code ec;
  if (!replaced_) fs::remove_all(path_, ec);
  ::unlink(lock_path_.c_str());
  ::close(lock_fd_);
}

void StagingFolder::replace() {
  const std::string where = fmt::format("{} {}", flag_, target_.string());
  sync_folder(path_, flag_);
  std::error_code ec;
  const bool existed = fs::exists(target_, ec);
  if (!existed) {
    KILN_CHECK(::rename(path_.c_str(), target_.c_str()) == 0, "{}: cannot rename {} to it: {}",
               where, path_.string(), std::strerror(errno));
  } else if (::renameat2(AT_FDCWD, path_.c_str(), AT_FDCWD, target_.c_str(), RENAME_EXCHANGE) !=
             0) {
    // A file system without RENAME_EXCHANGE: the old folder is moved aside first, so that for
    // a moment there is no folder rather than a mixed one (the next run moves it back if this
    // one is stopped there).
    KILN_CHECK(errno == EINVAL || errno == ENOSYS, "{}: cannot swap the new folder {} in: {}",
               where, path_.string(), std::strerror(errno));
    KILN_CHECK(::rename(target_.c_str(), old_.c_str()) == 0,
               "{}: cannot move the old folder aside to {}: {}", where, old_.string(),
               std::strerror(errno));
    if (::rename(path_.c_str(), target_.c_str()) != 0) {
      const int rename_errno = errno;
      KILN_CHECK(::rename(old_.c_str(), target_.c_str()) == 0,
                 "{}: cannot move the new folder {} in ({}), nor the old one back from {} ({}): "
                 "move {} back to {} by hand",
                 where, path_.string(), std::strerror(rename_errno), old_.string(),
                 std::strerror(errno), old_.string(), target_.string());
      fail("{}: cannot move the new folder {} in: {}", where, path_.string(),
           std::strerror(rename_errno));
    }
    fs::remove_all(old_, ec);
  }
  replaced_ = true;
  sync_folder(target_.parent_path(), flag_);
  if (existed) fs::remove_all(path_, ec);  // the old folder, swapped out
}

}  // namespace kiln
