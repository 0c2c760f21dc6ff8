// The device side of kiln's CUDA emulator (see emulator.h): what a .cu file sees of CUDA when it
// is compiled as C++. The function qualifiers are defined away, a kernel is an ordinary function,
// and KILN_LAUNCH runs it for every thread of every block, each thread a fiber of the launching
// OS thread:
//   threadIdx, blockIdx, blockDim, gridDim    set by the emulator before it resumes a thread
//   __shared__                                one copy per kernel per OS thread; the blocks of a
//                                             launch run one after the other, so each has it alone
//   __syncthreads, __syncwarp, __shfl_*_sync, __ballot_sync, __any_sync, __all_sync
//                                             suspend the thread until every thread they name has
//                                             arrived; the emulator stops (kernel, block, thread,
//                                             source line) where the hardware is undefined: a
//                                             barrier that part of the block or warp never reaches,
//                                             a lane named in a mask that has exited or waits
//                                             elsewhere, threads of one barrier at different lines
//   KILN_LAUNCH_SHARED, dynamic_shared_memory   a launch's dynamic shared memory, one buffer per
//                                               block (0xFF bytes when the block starts)
//   warp_collective                             a whole warp's operation (ldmatrix, mma.sync:
//                                               warp_matrix.h), run once all 32 lanes arrive
// Each barrier records its call site through a defaulted std::source_location argument.
#pragma once

#include <cstdint>
#include <cstring>
#include <source_location>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cuda_emulator/include/cuda_runtime_api.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static thread_local
#define __constant__

// The emulator's grid cap for kiln::gpu::blocks_for (core/cuda/launch.h): small, so every
// grid-stride loop takes several turns, and odd, so strides do not line up with sizes.
#define KILN_EMULATOR_MAX_BLOCKS 7

struct uint3 {
  unsigned x, y, z;
};

// CUDA's 16-byte vector type (vector_types.h): a 16-byte load or store.
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};

// The built-in variables of the thread that runs (written by the emulator between threads).
inline constinit thread_local uint3 threadIdx{0, 0, 0};
inline constinit thread_local uint3 blockIdx{0, 0, 0};
inline constinit thread_local dim3 blockDim{1, 1, 1};
inline constinit thread_local dim3 gridDim{1, 1, 1};

namespace kiln::emulator {

constexpr int kWarpSize = 32;

enum class WarpOp : std::uint8_t {
  sync,
  shfl_idx,
  shfl_up,
  shfl_down,
  shfl_xor,
  ballot,
  any,
  all,
  collective
};

// Suspends the calling thread at a warp-level operation until the lanes of `mask` have all
// arrived there; returns this lane's result (a shuffled value, a ballot, a vote).
std::uint64_t warp_op(WarpOp op, unsigned mask, std::uint64_t value, int arg, int width,
                      const std::source_location& where);
// Suspends the calling thread until every thread of its block waits at the same __syncthreads.
void block_barrier(const std::source_location& where);

// ---- Warp-collective operations and dynamic shared memory (tensor cores: warp_matrix.h)
// An operation of the whole warp, `.sync.aligned` in PTX: each of the 32 lanes arrives with a
// pointer to its operands; once every lane waits at the same line with the same operation,
// `complete` runs once with the operands in lane order and returns what is wrong, if anything
// (the emulator then stops, naming the kernel, the block, the warp and the line). A lane that
// never arrives (it exited, or waits elsewhere), or arrives with other qualifiers, stops the
// kernel as a shuffle's missing lane does.
struct WarpCollective {
  const char* name;  // the PTX instruction with its qualifiers
  std::string (*complete)(void* const lanes[kWarpSize]);
};
void warp_collective(const WarpCollective& op, void* operands, const std::source_location& where);

// The running block's dynamic shared memory and its size in bytes (the launch's shared bytes;
// nullptr and 0 without). 128-byte aligned, and 0xFF bytes (NaN in float32 and bf16) when the
// block starts, so a tile read before it is written shows.
unsigned char* dynamic_shared_memory(std::size_t* bytes = nullptr);

template <typename T>
std::uint64_t to_bits(T v) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "shuffles move up to 8 bytes");
  std::uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}

template <typename T>
T from_bits(std::uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}

// A kernel's body for one thread: calls the kernel with a copy of the launch's arguments.
struct KernelBody {
  void (*run)(const void* context);
  const void* context;
};

// Runs body for every thread of the grid; a bad configuration or stream, or more dynamic shared
// memory than the kernel may use (48 KB unless cudaFuncSetAttribute raised it), becomes the
// thread's last error (cudaGetLastError), as a failed launch does on a GPU. `function` is the
// kernel's address, cudaFuncSetAttribute's key.
void launch(const char* kernel, const void* function, dim3 grid, dim3 block,
            std::size_t shared_bytes, cudaStream_t stream, KernelBody body,
            const void* const* pointer_args, int pointer_count);

// The kernel's name with its template arguments, from the compiler's signature of this function.
std::string kernel_name_from_signature(const char* signature);

template <auto Kernel>
const char* kernel_name() {
  static const std::string name = kernel_name_from_signature(__PRETTY_FUNCTION__);
  return name.c_str();
}

// KILN_LAUNCH(grid, block, stream, kernel)(args...): the arguments are converted to the kernel's
// parameter types once, as a launch does, and every thread receives its own copy. Pointer
// arguments are checked to be device memory. KILN_LAUNCH_SHARED adds dynamic shared memory.
template <auto Kernel>
class Launch {
 public:
  Launch(dim3 grid, dim3 block, cudaStream_t stream, std::size_t shared_bytes = 0)
      : grid_(grid), block_(block), stream_(stream), shared_bytes_(shared_bytes) {}

  template <typename... A>
  void operator()(A&&... args) const {
    run(Kernel, std::forward<A>(args)...);
  }

 private:
  template <typename... P, typename... A>
  void run(void (*kernel)(P...), A&&... args) const {
    static_assert(sizeof...(P) == sizeof...(A), "KILN_LAUNCH: wrong number of kernel arguments");
    const std::tuple<std::decay_t<P>...> params(std::forward<A>(args)...);
    const auto body = [&params, kernel] { std::apply(kernel, params); };
    const void* pointers[sizeof...(P) + 1] = {};
    int count = 0;
    std::apply([&](const auto&... p) { (note_pointer(p, pointers, count), ...); }, params);
    launch(kernel_name<Kernel>(), reinterpret_cast<const void*>(kernel), grid_, block_,
           shared_bytes_, stream_,
           KernelBody{[](const void* c) { (*static_cast<const decltype(body)*>(c))(); }, &body},
           pointers, count);
  }

  template <typename T>
  static void note_pointer(const T& v, const void** pointers, int& count) {
    if constexpr (std::is_pointer_v<T>) pointers[count++] = v;
  }

  dim3 grid_, block_;
  cudaStream_t stream_;
  std::size_t shared_bytes_;
};

}  // namespace kiln::emulator

#define KILN_LAUNCH(grid, block, stream, ...) \
  ::kiln::emulator::Launch<&__VA_ARGS__>((grid), (block), (stream))
#define KILN_LAUNCH_SHARED(grid, block, shared_bytes, stream, ...) \
  ::kiln::emulator::Launch<&__VA_ARGS__>((grid), (block), (stream), (shared_bytes))

inline void __syncthreads(std::source_location where = std::source_location::current()) {
  kiln::emulator::block_barrier(where);
}

inline void __syncwarp(unsigned mask = 0xffffffffu,
                       std::source_location where = std::source_location::current()) {
  kiln::emulator::warp_op(kiln::emulator::WarpOp::sync, mask, 0, 0, kiln::emulator::kWarpSize,
                          where);
}

template <typename T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = kiln::emulator::kWarpSize,
              std::source_location where = std::source_location::current()) {
  using namespace kiln::emulator;
  return from_bits<T>(warp_op(WarpOp::shfl_idx, mask, to_bits(var), src_lane, width, where));
}

template <typename T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = kiln::emulator::kWarpSize,
                 std::source_location where = std::source_location::current()) {
  using namespace kiln::emulator;
  return from_bits<T>(
      warp_op(WarpOp::shfl_up, mask, to_bits(var), static_cast<int>(delta), width, where));
}

template <typename T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = kiln::emulator::kWarpSize,
                   std::source_location where = std::source_location::current()) {
  using namespace kiln::emulator;
  return from_bits<T>(
      warp_op(WarpOp::shfl_down, mask, to_bits(var), static_cast<int>(delta), width, where));
}

template <typename T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = kiln::emulator::kWarpSize,
                  std::source_location where = std::source_location::current()) {
  using namespace kiln::emulator;
  return from_bits<T>(warp_op(WarpOp::shfl_xor, mask, to_bits(var), lane_mask, width, where));
}

inline unsigned __ballot_sync(unsigned mask, int predicate,
                              std::source_location where = std::source_location::current()) {
  using namespace kiln::emulator;
  return static_cast<unsigned>(warp_op(WarpOp::ballot, mask, predicate != 0, 0, kWarpSize, where));
}

inline int __any_sync(unsigned mask, int predicate,
                      std::source_location where = std::source_location::current()) {
  using namespace kiln::emulator;
  return static_cast<int>(warp_op(WarpOp::any, mask, predicate != 0, 0, kWarpSize, where));
}

inline int __all_sync(unsigned mask, int predicate,
                      std::source_location where = std::source_location::current()) {
  using namespace kiln::emulator;
  return static_cast<int>(warp_op(WarpOp::all, mask, predicate != 0, 0, kWarpSize, where));
}

// A few device intrinsics, with the CPU's math (no fast-math approximations).
template <typename T>
T __ldg(const T* p) {
  return *p;
}
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
