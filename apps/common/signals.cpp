#include "apps/common/signals.h"

#include <pthread.h>

#include <csignal>

namespace kiln {

namespace {

// SIGUSR1 is the stop request that mpirun forwards to every rank without killing the job
// (scripts/kiln-mpirun turns SIGINT and SIGTERM into it); batch schedulers send it too (Slurm's
// --signal) ahead of a time limit.
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGUSR1};

volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void record_signal(int signal) { g_stop_signal = signal; }

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (const int signal : kStopSignals) sigaddset(&set, signal);
  return set;
}

}  // namespace

void install_stop_handlers() {
  struct sigaction action = {};
  action.sa_handler = record_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a system call in progress continues; the loop polls the flag
  for (const int signal : kStopSignals) sigaction(signal, &action, nullptr);
  // Output to a closed pipe (train_lm | head) is then lost while the run goes on to its end and
  // saves, instead of SIGPIPE killing it.
  std::signal(SIGPIPE, SIG_IGN);
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void release_stop_signals() {
  // The workers start here, if they have not yet, and keep the blocked mask for good.
#pragma omp parallel
  {}
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

int stop_signal() { return g_stop_signal; }

const char* signal_name(int signal) {
  switch (signal) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    default:
      return "a signal";
  }
}

}  // namespace kiln
