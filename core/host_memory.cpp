#include "core/host_memory.h"

#include <unistd.h>

#include <atomic>
#include <limits>

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

void testing::set_host_memory_bytes(std::int64_t bytes) { testing_limit.store(bytes); }

}  // namespace kiln
