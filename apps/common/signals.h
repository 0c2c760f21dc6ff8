// Graceful stopping on SIGINT, SIGTERM and SIGUSR1: the handler only records the signal, and the
// training loop polls stop_signal() at step boundaries, saves its state and exits 0.
//
//   install_stop_handlers();   // first thing in main: handlers on, the signals blocked
//   ...                        // read flags and checkpoints; set_num_threads(n)
//   release_stop_signals();    // OpenMP's workers start with the signals blocked, main unblocks
//   while (...) { if (stop_signal() != 0) break; ... }
//
// The handler runs on the main thread only: a thread inherits its creator's signal mask, so
// OpenMP's worker threads, created while the signals are blocked, keep them blocked and a signal
// never lands in a kernel. A signal that arrives while they are blocked waits, and is recorded
// when release_stop_signals unblocks it.
#pragma once

namespace kiln {

// Installs handlers for SIGINT, SIGTERM and SIGUSR1 that record which arrived (and nothing else),
// and blocks them in the calling thread (and so in every thread it creates until release). Ignores
// SIGPIPE: output to a closed pipe is lost, rather than the run killed.
void install_stop_handlers();

// Starts OpenMP's worker threads (an empty parallel region, at the current thread count) while
// the signals are still blocked, then unblocks them in the calling thread. Call it after
// set_num_threads, before training.
void release_stop_signals();

// The signal that asked to stop (SIGINT, SIGTERM or SIGUSR1), or 0.
int stop_signal();

// "SIGINT", "SIGTERM", "SIGUSR1", or "a signal".
const char* signal_name(int signal);

}  // namespace kiln
