// Fiber stacks and context switches (see fiber.h).
#include "cuda_emulator/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "cuda_emulator/report.h"

#if defined(__SANITIZE_ADDRESS__)
#define KILN_EMULATOR_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_EMULATOR_ASAN 1
#endif
#endif

#if defined(KILN_EMULATOR_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(__x86_64__)
// kiln_emulator_switch(save, load): pushes the callee-saved registers, stores the stack pointer in
// *save, loads `load` and pops the same from there. The SSE and x87 control words are the OS
// thread's, shared by its fibers (no kernel changes rounding or exception masks).
// kiln_emulator_fiber_start: where a prepared context's first switch returns to; calls
// r13(r12), which never returns.
asm(R"(
  .text
  .globl kiln_emulator_switch
  .type kiln_emulator_switch, @function
kiln_emulator_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size kiln_emulator_switch, .-kiln_emulator_switch

  .globl kiln_emulator_fiber_start
  .type kiln_emulator_fiber_start, @function
kiln_emulator_fiber_start:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size kiln_emulator_fiber_start, .-kiln_emulator_fiber_start
)");

extern "C" void kiln_emulator_switch(void** save, void* load);
extern "C" void kiln_emulator_fiber_start();
#endif

namespace kiln::emulator {

namespace {

std::size_t page_size() {
  static const std::size_t size = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

// Guard pages of every fiber stack, for the fault handler (written under the runtime lock).
std::vector<std::uintptr_t>& guard_pages() {
  static auto* pages = new std::vector<std::uintptr_t>;
  return *pages;
}

#if !defined(__x86_64__)
void ucontext_entry(unsigned hi_entry, unsigned lo_entry, unsigned hi_arg, unsigned lo_arg) {
  const auto entry = reinterpret_cast<void (*)(void*)>((std::uintptr_t{hi_entry} << 32) | lo_entry);
  entry(reinterpret_cast<void*>((std::uintptr_t{hi_arg} << 32) | lo_arg));
}
#endif

}  // namespace

std::size_t FiberStack::usable_size() {
#if defined(KILN_EMULATOR_ASAN)
  return std::size_t{1} << 20;  // instrumented frames are larger
#else
  return std::size_t{256} << 10;
#endif
}

FiberStack::FiberStack() : size_(usable_size()) {
  const std::size_t page = page_size();
  mapping_ = mmap(nullptr, size_ + page, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (mapping_ == MAP_FAILED)
    fatal(fmt::format("fiber stack: mmap failed: {}", std::strerror(errno)));
  if (mprotect(mapping_, page, PROT_NONE) != 0)
    fatal(fmt::format("fiber stack: mprotect failed: {}", std::strerror(errno)));
  usable_ = static_cast<char*>(mapping_) + page;
  guard_pages().push_back(reinterpret_cast<std::uintptr_t>(mapping_));
}

FiberStack::~FiberStack() {
  auto& pages = guard_pages();
  std::erase(pages, reinterpret_cast<std::uintptr_t>(mapping_));
  munmap(mapping_, size_ + page_size());
}

bool is_fiber_stack_guard(std::uintptr_t address) {
  for (std::uintptr_t page : guard_pages())
    if (address >= page && address < page + page_size()) return true;
  return false;
}

void prepare_context(Context& context, FiberStack& stack, void (*entry)(void*), void* arg) {
  context.stack_bottom = stack.bottom();
  context.stack_size = stack.size();
  context.fake_stack = stack.fake_stack;
#if defined(__x86_64__)
  // The frame kiln_emulator_switch pops, from the stack pointer up: r15, r14, r13 = entry,
  // r12 = arg, rbx, rbp = 0 (the end of the frame chain), and the return address
  // kiln_emulator_fiber_start, which then runs with a 16-byte aligned stack.
  auto top = reinterpret_cast<std::uintptr_t>(stack.bottom()) + stack.size();
  top &= ~std::uintptr_t{15};
  auto* frame = reinterpret_cast<std::uint64_t*>(top - 16 - 56);
  frame[0] = 0;                                        // r15
  frame[1] = 0;                                        // r14
  frame[2] = reinterpret_cast<std::uintptr_t>(entry);  // r13
  frame[3] = reinterpret_cast<std::uintptr_t>(arg);    // r12
  frame[4] = 0;                                        // rbx
  frame[5] = 0;                                        // rbp
  frame[6] = reinterpret_cast<std::uintptr_t>(&kiln_emulator_fiber_start);
  context.sp = frame;
#else
  if (getcontext(&context.uc) != 0) fatal("getcontext failed");
  context.uc.uc_stack.ss_sp = stack.bottom();
  context.uc.uc_stack.ss_size = stack.size();
  context.uc.uc_link = nullptr;
  const auto e = reinterpret_cast<std::uintptr_t>(entry), a = reinterpret_cast<std::uintptr_t>(arg);
  makecontext(&context.uc, reinterpret_cast<void (*)()>(&ucontext_entry), 4,
              static_cast<unsigned>(e >> 32), static_cast<unsigned>(e),
              static_cast<unsigned>(a >> 32), static_cast<unsigned>(a));
#endif
}

KILN_EMULATOR_NO_ASAN void switch_context(Context& from, Context& to) {
#if defined(KILN_EMULATOR_ASAN)
  __sanitizer_start_switch_fiber(&from.fake_stack, to.stack_bottom, to.stack_size);
#endif
#if defined(__x86_64__)
  kiln_emulator_switch(&from.sp, to.sp);
#else
  if (swapcontext(&from.uc, &to.uc) != 0) fatal("swapcontext failed");
#endif
#if defined(KILN_EMULATOR_ASAN)
  __sanitizer_finish_switch_fiber(from.fake_stack, nullptr, nullptr);
#endif
}

void fiber_started(Context& self, Context& from) {
#if defined(KILN_EMULATOR_ASAN)
  __sanitizer_finish_switch_fiber(self.fake_stack, &from.stack_bottom, &from.stack_size);
#else
  (void)self;
  (void)from;
#endif
}

}  // namespace kiln::emulator
