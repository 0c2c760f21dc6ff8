// Kernel launches on the CPU: every block of the grid in turn, on the launching OS thread, each of
// its threads a fiber (fiber.h). A thread runs until it ends or reaches a barrier or a warp-level
// operation. The scheduler takes the block warp by warp, releasing each warp operation whose
// lanes have all arrived, until no warp can go on; then it releases a __syncthreads that the whole
// block waits at, and stops with a message when it cannot (a deadlock, or behaviour the hardware
// leaves undefined). A kernel without barriers costs one switch into and out of each thread.
// Orders: forward runs warps and lanes in increasing order, reverse in decreasing order, shuffle
// in an order drawn for each block from the seed and the launch.
// Warp-collective operations (ldmatrix, mma.sync) wait like a full-mask shuffle and then run
// their `complete` once for the whole warp; a launch's dynamic shared memory is one buffer,
// refilled with 0xFF bytes for each block.
#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cuda_emulator/faults.h"
#include "cuda_emulator/fiber.h"
#include "cuda_emulator/include/cuda_runtime.h"
#include "cuda_emulator/memory.h"
#include "cuda_emulator/report.h"
#include "cuda_emulator/runtime.h"
#include "cuda_emulator/settings.h"

namespace kiln::emulator {

namespace {

enum class State : std::uint8_t { ready, block_wait, warp_wait, done };

struct Thread {
  uint3 index{0, 0, 0};
  State state = State::ready;
  bool started = false;
  Context context;
  std::unique_ptr<FiberStack> stack;
  std::source_location where;  // the barrier or warp operation it waits at
  WarpOp op = WarpOp::sync;
  unsigned mask = 0;
  std::uint64_t value = 0, result = 0;
  int arg = 0, width = kWarpSize;
  const WarpCollective* collective = nullptr;  // with op == WarpOp::collective
  void* operands = nullptr;
};

struct AlignedDelete {
  void operator()(unsigned char* p) const { ::operator delete[](p, std::align_val_t{128}); }
};

// The launch that runs on this OS thread.
struct Run {
  const char* kernel = nullptr;
  dim3 grid, block;
  KernelBody body{};
  uint3 block_index{0, 0, 0};
  int thread_count = 0;
  std::vector<Thread> threads;
  int running = -1;  // the thread that runs now, or -1 when the scheduler does
  int done = 0;
  Context scheduler;
  std::size_t shared_bytes = 0;  // dynamic shared memory per block
  std::unique_ptr<unsigned char[], AlignedDelete> shared;
};

thread_local Run* current = nullptr;
thread_local std::vector<std::unique_ptr<FiberStack>> free_stacks;
std::int64_t launch_count = 0;  // under the runtime lock

std::string coords(uint3 v) { return fmt::format("({},{},{})", v.x, v.y, v.z); }
std::string coords(dim3 v) { return fmt::format("({},{},{})", v.x, v.y, v.z); }

// "core/cuda/block_reduce.cuh:58": the path from the checkout's top folder on.
std::string site(const std::source_location& where) {
  std::string_view file = where.file_name();
  for (std::string_view top : {"/core/", "/tests/"}) {
    const std::size_t at = file.rfind(top);
    if (at != std::string_view::npos) {
      file = file.substr(at + 1);
      break;
    }
  }
  return fmt::format("{}:{}", file, where.line());
}

bool same_site(const std::source_location& a, const std::source_location& b) {
  return a.line() == b.line() && a.column() == b.column() &&
         (a.file_name() == b.file_name() || std::strcmp(a.file_name(), b.file_name()) == 0);
}

const char* op_name(WarpOp op) {
  switch (op) {
    case WarpOp::sync:
      return "__syncwarp";
    case WarpOp::shfl_idx:
      return "__shfl_sync";
    case WarpOp::shfl_up:
      return "__shfl_up_sync";
    case WarpOp::shfl_down:
      return "__shfl_down_sync";
    case WarpOp::shfl_xor:
      return "__shfl_xor_sync";
    case WarpOp::ballot:
      return "__ballot_sync";
    case WarpOp::any:
      return "__any_sync";
    case WarpOp::all:
      return "__all_sync";
    case WarpOp::collective:
      return "a warp-collective operation";
  }
  return "a warp operation";
}

const char* op_name(const Thread& t) {
  return t.op == WarpOp::collective ? t.collective->name : op_name(t.op);
}

std::string launch_text(const Run& r) {
  return fmt::format("kernel {} (grid {}, block {}), block {}", r.kernel, coords(r.grid),
                     coords(r.block), coords(r.block_index));
}

std::string thread_text(const Run& r, int i) {
  return fmt::format("thread {} (warp {}, lane {})", coords(r.threads[i].index), i / kWarpSize,
                     i % kWarpSize);
}

std::string waiting_text(const Thread& t) {
  if (t.state == State::block_wait)
    return fmt::format("waits at __syncthreads at {}", site(t.where));
  if (t.state == State::warp_wait)
    return fmt::format("waits at {}(mask {:#010x}) at {}", op_name(t), t.mask, site(t.where));
  if (t.state == State::done) return "has exited";
  return "is running";
}

[[noreturn]] void stop(const Run& r, const std::string& what) {
  fatal(fmt::format("{}: {}", launch_text(r), what));
}

KILN_EMULATOR_NO_ASAN void thread_main(void* arg) {
  Run& r = *current;
  Thread& t = *static_cast<Thread*>(arg);
  fiber_started(t.context, r.scheduler);
  try {
    r.body.run(r.body.context);
  } catch (const std::exception& e) {
    stop(r, fmt::format("{} threw an exception: {}", thread_text(r, r.running), e.what()));
  } catch (...) {
    stop(r, fmt::format("{} threw an exception", thread_text(r, r.running)));
  }
  t.state = State::done;
  switch_context(t.context, r.scheduler);
  __builtin_unreachable();
}

void resume(Run& r, int i) {
  Thread& t = r.threads[i];
  threadIdx = t.index;
  r.running = i;
  if (!t.started) {
    t.started = true;
    if (free_stacks.empty()) {
      t.stack = std::make_unique<FiberStack>();
    } else {
      t.stack = std::move(free_stacks.back());
      free_stacks.pop_back();
    }
    prepare_context(t.context, *t.stack, &thread_main, &t);
  }
  switch_context(r.scheduler, t.context);
  r.running = -1;
  if (t.state == State::done) {
    ++r.done;
    t.stack->fake_stack = t.context.fake_stack;
    free_stacks.push_back(std::move(t.stack));
  }
}

// Suspends the running thread; returns when the scheduler resumes it.
void suspend(Run& r) {
  Thread& t = r.threads[r.running];
  switch_context(t.context, r.scheduler);
}

// The error paths of the functions every barrier and shuffle calls, kept out of line: their
// strings would make those functions allocate a stack frame (a fake one under ASan) every call.
[[noreturn, gnu::noinline]] void outside_kernel(const char* what) {
  fatal(fmt::format("{} called outside a kernel", what));
}

[[noreturn, gnu::noinline]] void bad_warp_op(const Run& r, WarpOp op, unsigned mask, int width,
                                             const std::source_location& where) {
  const int i = r.running, warp = i / kWarpSize;
  const int lanes_here = std::min(kWarpSize, r.thread_count - warp * kWarpSize);
  const std::string call =
      fmt::format("{} calls {} at {}", thread_text(r, i), op_name(op), site(where));
  if (!(mask >> (i % kWarpSize) & 1u))
    stop(r, fmt::format("{} with mask {:#010x}, which leaves out its own lane", call, mask));
  if (lanes_here < kWarpSize && (mask >> lanes_here) != 0)
    stop(r, fmt::format("{} with mask {:#010x}, which names lanes its warp of {} does not have",
                        call, mask, lanes_here));
  stop(r, fmt::format("{} with width {}, not a power of 2 up to 32", call, width));
}

Run& running_kernel(const char* what) {
  if (current == nullptr || current->running < 0) [[unlikely]]
    outside_kernel(what);
  return *current;
}

// The lane a shuffle of lane `lane` reads (CUDA's rules for each variant and width).
int source_lane(const Thread& t, int lane) {
  const int first = lane & ~(t.width - 1), last = first + t.width - 1;
  switch (t.op) {
    case WarpOp::shfl_idx:
      return first + (t.arg & (t.width - 1));
    case WarpOp::shfl_up:
      return lane - t.arg < first ? lane : lane - t.arg;
    case WarpOp::shfl_down:
      return lane + t.arg > last ? lane : lane + t.arg;
    case WarpOp::shfl_xor:
      return (lane ^ t.arg) > last ? lane : lane ^ t.arg;
    default:
      return lane;
  }
}

// Completes a warp-collective operation that all 32 lanes of warp `warp` wait at.
void complete_collective(Run& r, int warp) {
  Thread& first = r.threads[warp * kWarpSize];
  void* operands[kWarpSize];
  for (int j = 0; j < kWarpSize; ++j) operands[j] = r.threads[warp * kWarpSize + j].operands;
  const std::string problem = first.collective->complete(operands);
  if (!problem.empty())
    stop(r, fmt::format("warp {} at {}: {}: {}", warp, site(first.where), first.collective->name,
                        problem));
  for (int j = 0; j < kWarpSize; ++j) r.threads[warp * kWarpSize + j].state = State::ready;
}

// Completes the warp operation of the lanes of `mask` in warp `warp`, all waiting at it.
void complete_warp_op(Run& r, int warp, unsigned mask) {
  if (r.threads[warp * kWarpSize].op == WarpOp::collective) return complete_collective(r, warp);
  Thread* lanes[kWarpSize] = {};
  for (int j = 0; j < kWarpSize; ++j)
    if (mask >> j & 1u) lanes[j] = &r.threads[warp * kWarpSize + j];
  std::uint64_t ballot = 0;
  for (int j = 0; j < kWarpSize; ++j)
    if (lanes[j] != nullptr && lanes[j]->value != 0) ballot |= std::uint64_t{1} << j;
  for (int j = 0; j < kWarpSize; ++j) {
    Thread* t = lanes[j];
    if (t == nullptr) continue;
    switch (t->op) {
      case WarpOp::sync:
        t->result = 0;
        break;
      case WarpOp::ballot:
        t->result = ballot;
        break;
      case WarpOp::any:
        t->result = ballot != 0;
        break;
      case WarpOp::all:
        t->result = ballot == mask;
        break;
      default: {
        const int from = source_lane(*t, j);
        if (lanes[from] == nullptr)
          stop(r, fmt::format("{} reads lane {} with {} at {}, which is not in its mask {:#010x} "
                              "(undefined on a GPU)",
                              thread_text(r, warp * kWarpSize + j), from, op_name(t->op),
                              site(t->where), mask));
        t->result = lanes[from]->value;
      }
    }
  }
  for (int j = 0; j < kWarpSize; ++j)
    if (lanes[j] != nullptr) lanes[j]->state = State::ready;
}

// Completes every warp operation of warp `warp` whose lanes have all arrived; true if any did.
bool release_warp(Run& r, int warp) {
  bool progress = false;
  const int first = warp * kWarpSize, end = std::min(first + kWarpSize, r.thread_count);
  for (int i = first; i < end; ++i) {
    const Thread& t = r.threads[i];
    if (t.state != State::warp_wait) continue;
    bool complete = true;
    for (int j = 0; j < kWarpSize && complete; ++j) {
      if (!(t.mask >> j & 1u)) continue;
      const Thread& u = r.threads[first + j];
      complete = u.state == State::warp_wait && u.op == t.op && u.mask == t.mask &&
                 u.collective == t.collective && same_site(u.where, t.where);
    }
    if (complete) {
      complete_warp_op(r, warp, t.mask);
      progress = true;
    }
  }
  return progress;
}

// Releases a __syncthreads that every thread of the block waits at; true if it did.
bool release_block(Run& r) {
  int first = -1;
  for (int i = 0; i < r.thread_count; ++i) {
    const Thread& t = r.threads[i];
    if (t.state == State::warp_wait) return false;
    if (t.state == State::block_wait && first < 0) first = i;
  }
  if (first < 0) return false;
  const Thread& waiting = r.threads[first];
  for (int i = 0; i < r.thread_count; ++i) {
    const Thread& t = r.threads[i];
    if (t.state == State::done)
      stop(r, fmt::format("__syncthreads at {} is reached by {} of the block's {} threads: {} "
                          "exited without reaching it (undefined on a GPU)",
                          site(waiting.where), r.thread_count - r.done, r.thread_count,
                          thread_text(r, i)));
    if (!same_site(t.where, waiting.where))
      stop(r, fmt::format("the block's threads wait at different __syncthreads: {} at {}, {} at {}",
                          thread_text(r, first), site(waiting.where), thread_text(r, i),
                          site(t.where)));
  }
  for (Thread& t : r.threads) t.state = State::ready;
  return true;
}

// No thread can run, and no barrier can be released: says why, and stops.
[[noreturn]] void report_stuck(const Run& r) {
  for (int i = 0; i < r.thread_count; ++i) {
    const Thread& t = r.threads[i];
    if (t.state != State::warp_wait) continue;
    const int warp = i / kWarpSize;
    for (int j = 0; j < kWarpSize; ++j) {
      if (!(t.mask >> j & 1u)) continue;
      const Thread& u = r.threads[warp * kWarpSize + j];
      if (u.state == State::warp_wait && u.op == t.op && u.mask == t.mask &&
          u.collective == t.collective && same_site(u.where, t.where))
        continue;
      std::string reason = waiting_text(u);
      if (u.state == State::warp_wait && same_site(u.where, t.where))
        reason = u.collective != t.collective
                     ? fmt::format("calls {} there (every lane must use the same qualifiers)",
                                   op_name(u))
                     : fmt::format("calls it with mask {:#010x}", u.mask);
      stop(r, fmt::format("{} waits at {}(mask {:#010x}) at {} for lane {}, which never arrives: "
                          "{} {}",
                          thread_text(r, i), op_name(t), t.mask, site(t.where), j,
                          thread_text(r, warp * kWarpSize + j), reason));
    }
  }
  stop(r, "no thread can run and no barrier can be released");
}

// Runs the block warp by warp: a warp's ready lanes run, its completed warp operations are
// released, and so on until each of its lanes has ended or waits at __syncthreads (or at a warp
// operation that cannot complete yet); then the next warp. When no warp can go on, a
// __syncthreads the whole block waits at is released.
void run_block(Run& r, const std::vector<int>& warps, const std::vector<int>& lanes) {
  for (Thread& t : r.threads) {
    t.state = State::ready;
    t.started = false;
  }
  r.done = 0;
  while (true) {
    for (int w : warps) {
      do {
        for (int lane : lanes) {
          const int i = w * kWarpSize + lane;
          if (i < r.thread_count && r.threads[i].state == State::ready) resume(r, i);
        }
      } while (release_warp(r, w));
    }
    if (r.done == r.thread_count) return;
    if (!release_block(r)) report_stuck(r);
  }
}

// 0, 1, ..., n - 1 in the order of `order` (a shuffle seeded by the launch and block).
std::vector<int> permutation(int n, ThreadOrder order, std::uint64_t seed) {
  std::vector<int> p(n);
  std::iota(p.begin(), p.end(), 0);
  if (order == ThreadOrder::reverse) std::reverse(p.begin(), p.end());
  if (order == ThreadOrder::shuffle) {
    std::mt19937_64 rng(seed);
    std::shuffle(p.begin(), p.end(), rng);
  }
  return p;
}

void run_grid(Run& r, ThreadOrder order) {
  const DeviceAccess access;
  gridDim = r.grid;
  blockDim = r.block;
  const std::uint64_t blocks = std::uint64_t{r.grid.x} * r.grid.y * r.grid.z;
  const std::uint64_t seed = settings().seed * 0x9E3779B97F4A7C15ull + launch_count;
  std::vector<std::uint64_t> block_order(blocks);
  std::iota(block_order.begin(), block_order.end(), 0);
  if (order == ThreadOrder::reverse) std::reverse(block_order.begin(), block_order.end());
  if (order == ThreadOrder::shuffle) {
    std::mt19937_64 rng(seed);
    std::shuffle(block_order.begin(), block_order.end(), rng);
  }
  const int warps = (r.thread_count + kWarpSize - 1) / kWarpSize;
  for (std::uint64_t b : block_order) {
    r.block_index = {static_cast<unsigned>(b % r.grid.x),
                     static_cast<unsigned>(b / r.grid.x % r.grid.y),
                     static_cast<unsigned>(b / (std::uint64_t{r.grid.x} * r.grid.y))};
    blockIdx = r.block_index;
    if (r.shared_bytes > 0) std::memset(r.shared.get(), 0xFF, r.shared_bytes);
    run_block(r, permutation(warps, order, seed + 2 * b + 1),
              permutation(kWarpSize, order, seed + 2 * b + 2));
  }
}

std::optional<std::string> bad_configuration(dim3 grid, dim3 block) {
  const std::uint64_t threads = std::uint64_t{block.x} * block.y * block.z;
  if (threads == 0 || threads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64)
    return fmt::format("block {} is not 1 to 1024 threads within (1024, 1024, 64)", coords(block));
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 2147483647u || grid.y > 65535 ||
      grid.z > 65535)
    return fmt::format("grid {} is not 1 to (2^31 - 1, 65535, 65535) blocks", coords(grid));
  return std::nullopt;
}

}  // namespace

std::string kernel_context() {
  if (current == nullptr) return {};
  if (current->running < 0) return launch_text(*current);
  return fmt::format("{}, {}", launch_text(*current), thread_text(*current, current->running));
}

std::string kernel_name_from_signature(const char* signature) {
  std::string_view s = signature;
  const std::size_t at = s.find("Kernel = ");
  if (at == std::string_view::npos) return std::string(s);
  s = s.substr(at + 9);
  if (!s.empty() && s.back() == ']') s.remove_suffix(1);
  if (!s.empty() && s.front() == '&') s.remove_prefix(1);
  std::string name(s);
  for (const char* anonymous : {"{anonymous}::", "(anonymous namespace)::"})
    for (std::size_t at; (at = name.find(anonymous)) != std::string::npos;)
      name.erase(at, std::strlen(anonymous));
  return name;
}

void block_barrier(const std::source_location& where) {
  Run& r = running_kernel("__syncthreads");
  Thread& t = r.threads[r.running];
  t.state = State::block_wait;
  t.where = where;
  suspend(r);
}

void warp_collective(const WarpCollective& op, void* operands, const std::source_location& where) {
  Run& r = running_kernel(op.name);
  const int i = r.running, warp = i / kWarpSize;
  if (r.thread_count - warp * kWarpSize < kWarpSize) [[unlikely]]
    stop(r, fmt::format("{} calls {} at {}, which needs a whole warp, in a block of {} threads",
                        thread_text(r, i), op.name, site(where), r.thread_count));
  Thread& t = r.threads[i];
  t.state = State::warp_wait;
  t.where = where;
  t.op = WarpOp::collective;
  t.mask = 0xffffffffu;
  t.collective = &op;
  t.operands = operands;
  suspend(r);
  t.collective = nullptr;
}

unsigned char* dynamic_shared_memory(std::size_t* bytes) {
  if (current == nullptr) [[unlikely]]  // a collective's `complete` runs in the scheduler
    outside_kernel("dynamic shared memory");
  if (bytes != nullptr) *bytes = current->shared_bytes;
  return current->shared.get();
}

std::uint64_t warp_op(WarpOp op, unsigned mask, std::uint64_t value, int arg, int width,
                      const std::source_location& where) {
  Run& r = running_kernel(op_name(op));
  const int i = r.running;
  const int lane = i % kWarpSize, warp = i / kWarpSize;
  const int lanes_here = std::min(kWarpSize, r.thread_count - warp * kWarpSize);
  if (!(mask >> lane & 1u) || (lanes_here < kWarpSize && (mask >> lanes_here) != 0) || width < 1 ||
      width > kWarpSize || (width & (width - 1)) != 0) [[unlikely]]
    bad_warp_op(r, op, mask, width, where);
  Thread& t = r.threads[i];
  t.state = State::warp_wait;
  t.where = where;
  t.op = op;
  t.mask = mask;
  t.value = value;
  t.arg = arg;
  t.width = width;
  suspend(r);
  return t.result;
}

void launch(const char* kernel, const void* function, dim3 grid, dim3 block,
            std::size_t shared_bytes, cudaStream_t stream, KernelBody body,
            const void* const* pointer_args, int pointer_count) {
  const std::lock_guard<std::recursive_mutex> lock(runtime_lock());
  install_fault_handler();  // the alternate signal stack of this OS thread
  if (current != nullptr)
    stop(*current,
         fmt::format("a thread launches kernel {} (dynamic parallelism is not emulated)", kernel));
  if (!is_valid_stream(stream)) {
    set_last_error(fail_call(cudaErrorInvalidResourceHandle,
                             fmt::format("launch of {}: {} is not a stream", kernel, hex(stream))));
    return;
  }
  if (const auto problem = bad_configuration(grid, block)) {
    set_last_error(fail_call(cudaErrorInvalidConfiguration,
                             fmt::format("launch of {}: {}", kernel, *problem)));
    return;
  }
  if (const std::size_t limit = max_dynamic_shared_bytes(function); shared_bytes > limit) {
    set_last_error(fail_call(
        cudaErrorInvalidValue,
        fmt::format("launch of {}: {} bytes of dynamic shared memory, above the kernel's {} (more "
                    "than 48 KB needs cudaFuncSetAttribute("
                    "cudaFuncAttributeMaxDynamicSharedMemorySize) first)",
                    kernel, shared_bytes, limit)));
    return;
  }
  for (int i = 0; i < pointer_count; ++i)
    if (pointer_args[i] != nullptr && !is_device_address(pointer_args[i]))
      fatal(
          fmt::format("kernel {} is launched with a host pointer argument, {}: a kernel can only "
                      "read device memory",
                      kernel, hex(pointer_args[i])));
  Run r;
  r.kernel = kernel;
  r.grid = grid;
  r.block = block;
  r.body = body;
  r.thread_count = static_cast<int>(block.x * block.y * block.z);
  r.threads.resize(r.thread_count);
  r.shared_bytes = shared_bytes;
  if (shared_bytes > 0)
    r.shared.reset(
        static_cast<unsigned char*>(::operator new[](shared_bytes, std::align_val_t{128})));
  for (int i = 0; i < r.thread_count; ++i)
    r.threads[i].index = {i % block.x, i / block.x % block.y, i / (block.x * block.y)};
  ++launch_count;
  current = &r;
  if (settings().order == ThreadOrder::check) {
    const Snapshot before = take_snapshot();
    run_grid(r, ThreadOrder::forward);
    const Snapshot forward = take_snapshot();
    restore_snapshot(before);
    run_grid(r, ThreadOrder::reverse);
    if (const auto difference = compare_with_snapshot(forward))
      fatal(
          fmt::format("kernel {}: its results depend on the order its threads run (a missing "
                      "__syncthreads or __syncwarp, or a race between threads): device memory at "
                      "{}",
                      kernel, *difference));
  } else {
    run_grid(r, settings().order);
  }
  current = nullptr;
  check_red_zones(kernel);
}

void set_thread_order(ThreadOrder order, std::uint64_t seed) {
  const std::lock_guard<std::recursive_mutex> lock(runtime_lock());
  settings().order = order;
  settings().seed = seed;
}

ThreadOrder thread_order() { return settings().order; }

std::int64_t kernel_launches() {
  const std::lock_guard<std::recursive_mutex> lock(runtime_lock());
  return launch_count;
}

}  // namespace kiln::emulator
