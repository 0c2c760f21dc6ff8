// Fibers for the emulator's kernel threads: a stack and a saved context each, switched by hand
// (a few instructions on x86-64, ucontext elsewhere), and annotated for AddressSanitizer, which
// must be told when the stack changes. A thread only ever switches at a barrier, a shuffle, or
// when it ends.
#pragma once

#include <cstddef>
#include <cstdint>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

// For a fiber's entry function, whose frame is never left (see prepare_context).
#define KILN_EMULATOR_NO_ASAN __attribute__((no_sanitize("address")))

namespace kiln::emulator {

// A fiber's stack: mmap'd on demand, its lowest page a guard page that stops an overflow.
class FiberStack {
 public:
  FiberStack();
  ~FiberStack();
  FiberStack(const FiberStack&) = delete;
  FiberStack& operator=(const FiberStack&) = delete;

  void* bottom() const { return usable_; }    // the lowest usable address
  std::size_t size() const { return size_; }  // usable bytes
  static std::size_t usable_size();

  // Under AddressSanitizer: the fake stack (for use-after-return checks) of the last fiber that
  // ran here, handed to the next one: making one for every fiber costs an mmap and a munmap.
  void* fake_stack = nullptr;

 private:
  void* mapping_ = nullptr;
  void* usable_ = nullptr;
  std::size_t size_ = 0;
};

// A context to switch to: a fiber's, or the scheduler's on its OS thread.
struct Context {
#if defined(__x86_64__)
  void* sp = nullptr;  // the stack pointer the last switch away from it saved
#else
  ucontext_t uc;
#endif
  // Under AddressSanitizer: the context's stack, and its fake stack while it is switched out.
  const void* stack_bottom = nullptr;
  std::size_t stack_size = 0;
  void* fake_stack = nullptr;
};

// Makes `context` start entry(arg) on `stack` when it is first switched to. entry must not
// return, and must not be instrumented by AddressSanitizer (KILN_EMULATOR_NO_ASAN): it ends with
// a last switch_context, after which its stack and fake stack serve the next fiber.
void prepare_context(Context& context, FiberStack& stack, void (*entry)(void*), void* arg);

// Saves what runs now in `from` and runs `to`; returns when something switches back to `from`.
void switch_context(Context& from, Context& to);

// The first call of a fiber's entry (`self`): finishes the switch that started it, and learns
// the stack of `from` (the scheduler) for the switches back.
void fiber_started(Context& self, Context& from);

// True when address lies in the guard page of a fiber stack (a kernel thread's stack overflow).
bool is_fiber_stack_guard(std::uintptr_t address);

}  // namespace kiln::emulator
