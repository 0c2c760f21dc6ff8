// The fault handler (see faults.h). It formats its message with the heap, which is not
// async-signal-safe in general; the faults it reports happen in kernel code or in host code that
// dereferenced a device pointer, not inside the allocator, and the process ends right after.
#include "cuda_emulator/faults.h"

#include <execinfo.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include <fmt/format.h>

#include "cuda_emulator/fiber.h"
#include "cuda_emulator/memory.h"
#include "cuda_emulator/report.h"

namespace kiln::emulator {

namespace {

struct sigaction previous_action;

void write_all(const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(STDERR_FILENO, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

void on_fault(int signal, siginfo_t* info, void* context) {
  const auto address = reinterpret_cast<std::uintptr_t>(info->si_addr);
  std::string message;
  const std::string kernel = kernel_context();
  if (const auto what = describe_device_address(address)) {
    message = kernel.empty()
                  ? fmt::format(
                        "host code accessed device memory at {}: only kernels, cudaMemcpy "
                        "and cudaMemset may touch it (read a tensor with "
                        "Tensor::to(Device::cpu()))",
                        *what)
                  : fmt::format("{}: invalid device memory access at {}", kernel, *what);
  } else if (!kernel.empty() && is_fiber_stack_guard(address)) {
    message = fmt::format("{}: the thread overflowed its emulated stack of {} KiB", kernel,
                          FiberStack::usable_size() >> 10);
  } else {
    // Not ours: let the previous handler see the fault when the instruction runs again.
    sigaction(signal, &previous_action, nullptr);
    (void)context;
    return;
  }
  write_all("kiln CUDA emulator: " + message + "\nbacktrace:\n");
  void* frames[64];
  const int depth = backtrace(frames, 64);
  backtrace_symbols_fd(frames, depth, STDERR_FILENO);
  std::abort();
}

}  // namespace

void install_fault_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    void* warm[1];
    backtrace(warm, 1);  // loads the unwinder now, not inside the handler
    struct sigaction action {};
    action.sa_sigaction = &on_fault;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &previous_action);
  });
  thread_local bool has_stack = false;
  if (has_stack) return;
  has_stack = true;
  stack_t current{};
  if (sigaltstack(nullptr, &current) == 0 && !(current.ss_flags & SS_DISABLE)) return;
  stack_t alternate{};
  alternate.ss_size = std::size_t{256} << 10;
  // Kept for the thread's lifetime (mmap'd: it is no leak for LeakSanitizer to report).
  alternate.ss_sp =
      mmap(nullptr, alternate.ss_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (alternate.ss_sp != MAP_FAILED) sigaltstack(&alternate, nullptr);
}

}  // namespace kiln::emulator
