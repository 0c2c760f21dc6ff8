// The emulator's SIGSEGV handler: a fault in device memory or in a kernel thread's stack guard
// stops the process with what was touched, by which kernel thread or by host code, and a
// backtrace; any other fault goes to the handler that was there before (the default, or a
// sanitizer's).
#pragma once

namespace kiln::emulator {

// Installs the handler once, and an alternate signal stack for the calling thread (a kernel
// thread's stack overflow cannot be handled on that stack).
void install_fault_handler();

}  // namespace kiln::emulator
