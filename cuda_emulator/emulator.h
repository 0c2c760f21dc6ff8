// kiln's CUDA emulator (KILN_CUDA=EMULATE; a test tool, not a product feature): the CUDA
// backend's own .cu sources compiled as C++ for the CPU against a small runtime of kiln's own,
// so its kernels, and every test that needs a device, run on machines without a GPU.
// docs/cuda-emulator.md says how to build and run it, what it checks and what it cannot see.
//
// This header is the emulator's test interface: how threads are ordered, the emulated memory
// limit, and the caching allocator's notes of which block bytes are in use. Every setting also
// has an environment variable, read once at the first CUDA call:
//   KILN_EMULATOR_ORDER       forward (default) | reverse | shuffle[:seed] | check
//   KILN_EMULATOR_MEMORY      device memory, in bytes or with a K, M or G suffix (default 8G)
//   KILN_EMULATOR_PROTECTION  pkey (default where the CPU has protection keys) | mprotect
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::emulator {

// The order in which a block's ready threads run between barriers, and the blocks of a grid.
// A correct kernel gives the same bits in every order; `check` runs each launch forward, then
// again in reverse from the same device memory, and stops with the kernel's name when any byte
// differs (a missing barrier or a race between a block's threads).
enum class ThreadOrder { forward, reverse, shuffle, check };

void set_thread_order(ThreadOrder order, std::uint64_t seed = 0);
ThreadOrder thread_order();

// Emulated device memory: cudaMalloc beyond the limit fails with cudaErrorMemoryAllocation.
void set_memory_limit(std::size_t bytes);
std::size_t memory_limit();
std::size_t bytes_allocated();  // cudaMalloc'd and not freed

// True when host code is kept out of device memory with protection keys (one register write per
// switch); false when with mprotect over every live allocation (slower, same checks).
bool uses_protection_keys();

std::int64_t kernel_launches();  // kernels run so far
// Calls that would block the host on a GPU, so far: cudaDeviceSynchronize, cudaStreamSynchronize,
// cudaEventSynchronize, cudaMemcpy (any direction) and cudaMemcpyAsync from device to host
// (pageable memory, as kiln's host buffers are). A test counts a training step's waits with it
// (docs/cuda-emulator.md).
std::int64_t host_synchronizations();

// From the caching allocator: the first `used` bytes of `block` (a cudaMalloc'd pointer) are
// handed out: they are filled with NaN (0xFF bytes), and the rest of the block becomes a red zone
// that a kernel must not write. note_block_cached: the block went back to the cache; a kernel that
// touches it stops (a use after free).
void note_block_in_use(void* block, std::size_t used);
void note_block_cached(void* block);

}  // namespace kiln::emulator
