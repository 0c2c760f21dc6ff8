#include "core/host_memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <limits>
#include <optional>

#include "core/error.h"

namespace kiln {

namespace {

std::atomic<std::int64_t> testing_limit{0};

double gib(std::int64_t bytes) { return static_cast<double>(bytes) / (1u << 30); }

}  // namespace

std::int64_t host_memory_bytes() {
  if (const std::int64_t limit = testing_limit.load(); limit > 0) return limit;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0)
    return std::numeric_limits<std::int64_t>::max();  // unknown: no limit of ours
  return static_cast<std::int64_t>(pages) * page_size;
}

void check_host_memory(std::int64_t bytes, std::string_view what) {
  const std::int64_t limit = host_memory_bytes();
  KILN_CHECK(bytes <= limit,
             "{} needs {} bytes ({:.1f} GiB), more than this machine's {} bytes ({:.1f} GiB) of "
             "memory",
             what, bytes, gib(bytes), limit, gib(limit));
}

namespace {

// RLIMIT_AS's soft limit, or nothing.
std::optional<std::int64_t> address_space_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY ||
      limit.rlim_cur > static_cast<rlim_t>(std::numeric_limits<std::int64_t>::max()))
    return std::nullopt;
  return static_cast<std::int64_t>(limit.rlim_cur);
}

}  // namespace

std::int64_t address_space_left() {
  const std::optional<std::int64_t> limit = address_space_limit();
  if (!limit) return std::numeric_limits<std::int64_t>::max();
  std::int64_t pages = 0;
  std::ifstream("/proc/self/statm") >> pages;  // the first field: every page mapped
  const std::int64_t mapped = pages * ::sysconf(_SC_PAGE_SIZE);
  return std::max<std::int64_t>(0, *limit - mapped);
}

void check_address_space(std::int64_t bytes, std::string_view what) {
  const std::int64_t left = address_space_left();
  KILN_CHECK(bytes <= left,
             "{} needs {} bytes ({:.1f} GiB) of address space, but the process's limit (ulimit "
             "-v, RLIMIT_AS: {} bytes) leaves {} bytes ({:.1f} GiB)",
             what, bytes, gib(bytes), address_space_limit().value_or(0), left, gib(left));
}

void testing::set_host_memory_bytes(std::int64_t bytes) { testing_limit.store(bytes); }

}  // namespace kiln
