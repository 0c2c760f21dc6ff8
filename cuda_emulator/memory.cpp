// The emulated device memory (see memory.h).
#include "cuda_emulator/memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "cuda_emulator/faults.h"
#include "cuda_emulator/report.h"
#include "cuda_emulator/settings.h"

namespace kiln::emulator {

namespace {

constexpr std::size_t kReserve = std::size_t{1} << 38;  // 256 GiB of addresses, never all used
constexpr std::size_t kAlignment = 256;                 // cudaMalloc's alignment
constexpr unsigned char kRedZone = 0xCD;
constexpr unsigned char kFresh = 0xFF;  // NaN in float32 and float64, -1 in int64

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

enum class State : std::uint8_t { live, cached, freed };

struct Allocation {
  std::uintptr_t begin = 0;                       // the pointer cudaMalloc returned
  std::size_t size = 0;                           // bytes asked of cudaMalloc
  std::size_t used = 0;                           // bytes in use (note_block_in_use), at most size
  std::uintptr_t pages_begin = 0, pages_end = 0;  // its pages; a guard page follows
  State state = State::live;
};

class Arena {
 public:
  static Arena& get() {
    static Arena* arena = new Arena;  // never destroyed: device pointers may outlive main
    return *arena;
  }

  void* allocate(std::size_t size) {
    const std::size_t rounded = round_up(std::max<std::size_t>(size, 1), kAlignment);
    if (allocated_ + rounded > limit_) return nullptr;
    const std::size_t page = page_size();
    const std::size_t bytes = round_up(rounded, page);
    if (cursor_ + bytes + page > end_) return nullptr;
    Allocation a;
    a.pages_begin = cursor_;
    a.pages_end = cursor_ + bytes;
    a.begin = a.pages_end - rounded;
    a.size = size;
    a.used = size;
    cursor_ = a.pages_end + page;  // the guard page stays PROT_NONE
    with_pages(a, [&] {
      std::memset(reinterpret_cast<void*>(a.pages_begin), kRedZone, a.begin - a.pages_begin);
      std::memset(reinterpret_cast<void*>(a.begin), kFresh, size);
      std::memset(reinterpret_cast<void*>(a.begin + size), kRedZone, a.pages_end - a.begin - size);
    });
    allocated_ += rounded;
    allocations_.emplace(a.begin, a);
    return reinterpret_cast<void*>(a.begin);
  }

  bool free(void* ptr, std::string* problem) {
    auto it = allocations_.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it == allocations_.end() || it->second.state == State::freed) {
      *problem = it == allocations_.end()
                     ? fmt::format("{} is not a pointer cudaMalloc returned", hex(ptr))
                     : fmt::format("{} was freed already", hex(ptr));
      return false;
    }
    Allocation& a = it->second;
    a.state = State::freed;
    allocated_ -= round_up(std::max<std::size_t>(a.size, 1), kAlignment);
    // Fresh PROT_NONE pages in place: the memory goes back to the system and the addresses stay
    // reserved, so a stale pointer faults instead of reaching a later allocation.
    void* pages = reinterpret_cast<void*>(a.pages_begin);
    if (mmap(pages, a.pages_end - a.pages_begin, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED)
      fatal(fmt::format("cudaFree: mmap failed: {}", std::strerror(errno)));
    return true;
  }

  bool contains(std::uintptr_t p) const { return p >= base_ && p < end_; }

  // The allocation whose pages or following guard page hold p, or null.
  const Allocation* around(std::uintptr_t p) const {
    auto it = allocations_.upper_bound(p + page_size());
    while (it != allocations_.begin()) {
      --it;
      const Allocation& a = it->second;
      if (p >= a.pages_begin && p < a.pages_end + page_size()) return &a;
      if (a.pages_end + page_size() <= p) break;
    }
    return nullptr;
  }

  std::optional<std::string> check_range(std::uintptr_t p, std::size_t bytes) const {
    const Allocation* a = around(p);
    if (!contains(p)) return fmt::format("{} is host memory, not device memory", hex(p));
    if (a == nullptr || a->state == State::freed)
      return fmt::format("{} is device memory that is not allocated (freed, or never handed out)",
                         hex(p));
    if (a->state == State::cached)
      return fmt::format(
          "{} lies in a block that the caching allocator holds free (a freed tensor's memory)",
          hex(p));
    if (p < a->begin || p + bytes > a->begin + a->used)
      return fmt::format("[{}, {} + {}) is outside the {} bytes in use of the allocation at {}",
                         hex(p), hex(p), bytes, a->used, hex(a->begin));
    return std::nullopt;
  }

  std::string describe(std::uintptr_t p) const {
    const Allocation* a = around(p);
    if (a == nullptr) return fmt::format("{} (device memory that was never allocated)", hex(p));
    const char* state = a->state == State::freed    ? " (freed by cudaFree)"
                        : a->state == State::cached ? " (held free by the caching allocator)"
                                                    : "";
    if (p < a->begin)
      return fmt::format("{}: {} bytes before the {}-byte allocation at {}{}", hex(p), a->begin - p,
                         a->used, hex(a->begin), state);
    if (p >= a->begin + a->used)
      return fmt::format(
          "{}: {} bytes past the end of the {} bytes in use of the allocation at {}{}", hex(p),
          p - (a->begin + a->used), a->used, hex(a->begin), state);
    return fmt::format("{}: byte {} of the {}-byte allocation at {}{}", hex(p), p - a->begin,
                       a->used, hex(a->begin), state);
  }

  void note_in_use(void* block, std::size_t used) {
    Allocation& a = live(block, "note_block_in_use");
    if (used > a.size)
      fatal(fmt::format("note_block_in_use: {} bytes of a {}-byte block", used, a.size));
    a.state = State::live;
    a.used = used;
    with_pages(a, [&] {
      std::memset(reinterpret_cast<void*>(a.begin), kFresh, used);
      std::memset(reinterpret_cast<void*>(a.begin + used), kRedZone, a.pages_end - a.begin - used);
    });
  }

  void note_cached(void* block) {
    Allocation& a = live(block, "note_block_cached");
    a.state = State::cached;
    protect(a.pages_begin, a.pages_end - a.pages_begin, PROT_NONE);
  }

  void enter() {
    if (depth_++ > 0) return;
    if (keys()) {
      pkey_set(pkey_, 0);
    } else {
      for (auto& [begin, a] : allocations_)
        if (a.state == State::live) open_pages(a, true);
    }
  }

  void leave() {
    if (--depth_ > 0) return;
    if (keys()) {
      pkey_set(pkey_, PKEY_DISABLE_ACCESS);
    } else {
      for (auto& [begin, a] : allocations_)
        if (a.state == State::live) open_pages(a, false);
    }
  }

  void check_red_zones(const char* kernel) const {
    for (const auto& [begin, a] : allocations_) {
      if (a.state != State::live) continue;
      const std::uintptr_t front = first_changed(a.pages_begin, a.begin);
      const std::uintptr_t tail = first_changed(a.begin + a.used, a.pages_end);
      const std::uintptr_t bad = front != 0 ? front : tail;
      if (bad != 0)
        fatal(
            fmt::format("kernel {} wrote out of bounds: device memory at {} changed (it is a red "
                        "zone no kernel may write)",
                        kernel, describe(bad)));
    }
  }

  Snapshot snapshot() const {
    Snapshot s;
    for (const auto& [begin, a] : allocations_) {
      if (a.state != State::live) continue;
      const auto* p = reinterpret_cast<const unsigned char*>(a.begin);
      s.begins.push_back(a.begin);
      s.bytes.emplace_back(p, p + a.used);
    }
    return s;
  }

  void restore(const Snapshot& s) const {
    for (std::size_t i = 0; i < s.begins.size(); ++i)
      std::memcpy(reinterpret_cast<void*>(s.begins[i]), s.bytes[i].data(), s.bytes[i].size());
  }

  std::optional<std::string> compare(const Snapshot& s) const {
    for (std::size_t i = 0; i < s.begins.size(); ++i) {
      const auto* p = reinterpret_cast<const unsigned char*>(s.begins[i]);
      const auto mismatch = std::mismatch(s.bytes[i].begin(), s.bytes[i].end(), p);
      if (mismatch.first == s.bytes[i].end()) continue;
      const std::uintptr_t at = s.begins[i] + (mismatch.first - s.bytes[i].begin());
      return fmt::format("{} is {:#04x} run forward and {:#04x} in reverse", describe(at),
                         *mismatch.first, *mismatch.second);
    }
    return std::nullopt;
  }

  std::size_t allocated() const { return allocated_; }
  std::size_t limit() const { return limit_; }
  void set_limit(std::size_t bytes) { limit_ = bytes; }
  bool keys() const { return pkey_ >= 0; }

 private:
  Arena() : limit_(settings().memory_limit) {
    void* base =
        mmap(nullptr, kReserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED)
      fatal(fmt::format("cannot reserve {} bytes of address space: {}", kReserve,
                        std::strerror(errno)));
    base_ = reinterpret_cast<std::uintptr_t>(base);
    end_ = base_ + kReserve;
    cursor_ = base_ + page_size();  // a guard page before the first allocation
    if (settings().protection_keys) pkey_ = pkey_alloc(0, PKEY_DISABLE_ACCESS);
    install_fault_handler();
  }

  static std::size_t page_size() {
    static const std::size_t size = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    return size;
  }

  Allocation& live(void* block, const char* what) {
    auto it = allocations_.find(reinterpret_cast<std::uintptr_t>(block));
    if (it == allocations_.end() || it->second.state == State::freed)
      fatal(fmt::format("{}: {} is not a live cudaMalloc'd block", what, hex(block)));
    return it->second;
  }

  // Runs fill with allocation a's pages open to this thread, and leaves them as a live
  // allocation's pages are outside DeviceAccess (with mprotect, only a's pages are opened).
  template <typename Fill>
  void with_pages(const Allocation& a, const Fill& fill) {
    open_pages(a, true);
    if (keys()) {
      enter();
      fill();
      leave();
    } else {
      fill();
      if (depth_ == 0) open_pages(a, false);
    }
  }

  // Makes a live allocation's pages accessible (to DeviceAccess, with keys) or not.
  void open_pages(const Allocation& a, bool open) const {
    const std::size_t bytes = a.pages_end - a.pages_begin;
    if (!open) {
      protect(a.pages_begin, bytes, PROT_NONE);
    } else if (keys()) {
      if (pkey_mprotect(reinterpret_cast<void*>(a.pages_begin), bytes, PROT_READ | PROT_WRITE,
                        pkey_) != 0)
        fatal(fmt::format("pkey_mprotect failed: {}", std::strerror(errno)));
    } else {
      protect(a.pages_begin, bytes, PROT_READ | PROT_WRITE);
    }
  }

  static void protect(std::uintptr_t p, std::size_t bytes, int prot) {
    if (mprotect(reinterpret_cast<void*>(p), bytes, prot) != 0)
      fatal(fmt::format("mprotect failed: {}", std::strerror(errno)));
  }

  // The first byte in [begin, end) that is not kRedZone, or 0.
  static std::uintptr_t first_changed(std::uintptr_t begin, std::uintptr_t end) {
    std::uintptr_t p = begin;
    for (; p < end && p % 8 != 0; ++p)
      if (*reinterpret_cast<const unsigned char*>(p) != kRedZone) return p;
    constexpr std::uint64_t kWord = 0x0101010101010101ull * kRedZone;
    for (; p + 8 <= end; p += 8)
      if (*reinterpret_cast<const std::uint64_t*>(p) != kWord) break;
    for (; p < end; ++p)
      if (*reinterpret_cast<const unsigned char*>(p) != kRedZone) return p;
    return 0;
  }

  std::uintptr_t base_ = 0, end_ = 0, cursor_ = 0;
  int pkey_ = -1;
  int depth_ = 0;  // DeviceAccess scopes open (under the runtime lock)
  std::size_t limit_ = 0, allocated_ = 0;
  std::map<std::uintptr_t, Allocation> allocations_;  // by begin; freed ones kept for messages
};

}  // namespace

std::recursive_mutex& runtime_lock() {
  static std::recursive_mutex* lock = new std::recursive_mutex;
  return *lock;
}

DeviceAccess::DeviceAccess() { Arena::get().enter(); }
DeviceAccess::~DeviceAccess() { Arena::get().leave(); }

void* device_malloc(std::size_t size) { return Arena::get().allocate(size); }
bool device_free(void* ptr, std::string* problem) { return Arena::get().free(ptr, problem); }

bool is_device_address(const void* p) {
  return Arena::get().contains(reinterpret_cast<std::uintptr_t>(p));
}

std::optional<std::string> check_device_range(const void* p, std::size_t bytes) {
  return Arena::get().check_range(reinterpret_cast<std::uintptr_t>(p), bytes);
}

std::size_t device_bytes_allocated() { return Arena::get().allocated(); }
std::size_t device_memory_limit() { return Arena::get().limit(); }
void set_device_memory_limit(std::size_t bytes) { Arena::get().set_limit(bytes); }
bool device_uses_protection_keys() { return Arena::get().keys(); }

void check_red_zones(const char* kernel) {
  const DeviceAccess access;
  Arena::get().check_red_zones(kernel);
}

Snapshot take_snapshot() {
  const DeviceAccess access;
  return Arena::get().snapshot();
}

void restore_snapshot(const Snapshot& snapshot) {
  const DeviceAccess access;
  Arena::get().restore(snapshot);
}

std::optional<std::string> compare_with_snapshot(const Snapshot& snapshot) {
  const DeviceAccess access;
  return Arena::get().compare(snapshot);
}

std::optional<std::string> describe_device_address(std::uintptr_t address) {
  Arena& arena = Arena::get();
  if (!arena.contains(address)) return std::nullopt;
  return arena.describe(address);
}

void note_block_in_use(void* block, std::size_t used) {
  const std::lock_guard<std::recursive_mutex> lock(runtime_lock());
  Arena::get().note_in_use(block, used);
}

void note_block_cached(void* block) {
  const std::lock_guard<std::recursive_mutex> lock(runtime_lock());
  Arena::get().note_cached(block);
}

}  // namespace kiln::emulator
