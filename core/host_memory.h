// The memory kiln may claim on this machine, checked before it builds something whose size came
// from outside (a checkpoint's config, a program's flags): a model that cannot fit is a clear
// kiln::Error naming what was sized, at once, rather than minutes of allocation ending in an
// out-of-memory error or the kernel's OOM killer.
//
//   check_host_memory(nn::model_bytes(config), "checkpoint runs/lm.safetensors: the model");
//
// The limit is the physical memory (sysconf), the most a process can hold without swapping: it
// forbids no model this machine could run.
#pragma once

#include <cstdint>
#include <string_view>

namespace kiln {

// The bytes of address space this process may still map under its RLIMIT_AS (`ulimit -v`): the
// limit less what is mapped now (/proc/self/statm); the largest int64 without a limit.
std::int64_t address_space_left();

// A kiln::Error "<what> needs N bytes (x GiB) of address space, but the process's limit
// (ulimit -v, RLIMIT_AS: L bytes) leaves M bytes (y GiB)" when bytes > address_space_left(). For
// reservations that a library makes by retrying mmap forever when it fails (OpenBLAS's buffers).
void check_address_space(std::int64_t bytes, std::string_view what);

// Bytes of physical memory, or the testing limit when one is set.
std::int64_t host_memory_bytes();

// A kiln::Error "<what> needs N bytes (x GiB), more than this machine's M bytes (y GiB) of
// memory" when bytes > host_memory_bytes().
void check_host_memory(std::int64_t bytes, std::string_view what);

}  // namespace kiln

namespace kiln::testing {

// Makes host_memory_bytes() return `bytes` (0: the real figure again), for tests and the fuzz
// targets, whose memory limit is smaller than the machine's.
void set_host_memory_bytes(std::int64_t bytes);

}  // namespace kiln::testing
