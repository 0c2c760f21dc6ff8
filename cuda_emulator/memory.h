// Emulated device memory: one arena of address space that the emulator owns. Each cudaMalloc gets
// pages of its own, placed so that the allocation ends where a guard page (never accessible)
// begins; the bytes before it on its first page, and the bytes of a caching-allocator block past
// what its tensor uses, are a red zone filled with 0xCD and checked after every launch. Fresh
// memory is NaN (0xFF bytes). Freed pages are never handed out again, so a stale pointer faults.
//
// Host code cannot touch the arena: with protection keys the pages carry a key that only a thread
// inside DeviceAccess (a kernel, a copy, the cuBLAS and CUB stand-ins) may use; without them every
// live allocation is mprotect'ed open for the length of a DeviceAccess. A fault in the arena stops
// the process with what was touched and by whom (a kernel's thread, or host code).
//
// Every function here is called with the emulator's lock held (runtime_lock()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace kiln::emulator {

// One lock for every runtime call and launch: the emulated device runs one thing at a time.
std::recursive_mutex& runtime_lock();

// Device memory may be read and written by this thread while one is alive.
class DeviceAccess {
 public:
  DeviceAccess();
  ~DeviceAccess();
  DeviceAccess(const DeviceAccess&) = delete;
  DeviceAccess& operator=(const DeviceAccess&) = delete;
};

// A cudaMalloc'd pointer, or nullptr when the memory limit would be exceeded.
void* device_malloc(std::size_t size);
// Frees a pointer from device_malloc; false (with why in *problem) for any other pointer.
bool device_free(void* ptr, std::string* problem);

// True when p lies in the arena (device memory, live or not).
bool is_device_address(const void* p);
// Nothing when [p, p + bytes) lies in the used bytes of one live allocation; else what is wrong.
std::optional<std::string> check_device_range(const void* p, std::size_t bytes);

std::size_t device_bytes_allocated();
std::size_t device_memory_limit();
void set_device_memory_limit(std::size_t bytes);
bool device_uses_protection_keys();

// Stops with the kernel's name when a red zone has changed.
void check_red_zones(const char* kernel);

// The used bytes of every live allocation, to run a launch twice from the same memory.
struct Snapshot {
  std::vector<std::uintptr_t> begins;
  std::vector<std::vector<unsigned char>> bytes;
};
Snapshot take_snapshot();
void restore_snapshot(const Snapshot& snapshot);
// The first byte at which live memory differs from the snapshot, described; nothing if none.
std::optional<std::string> compare_with_snapshot(const Snapshot& snapshot);

}  // namespace kiln::emulator

namespace kiln::emulator {

// What an arena address is, for a fault's message ("12 bytes past the end of the 4096-byte
// allocation at 0x..."); nothing for an address outside the arena. Safe to call from the fault
// handler of a thread that may hold the lock.
std::optional<std::string> describe_device_address(std::uintptr_t address);

}  // namespace kiln::emulator
