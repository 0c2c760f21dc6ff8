#include "distributed/mpi_session.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "distributed/bootstrap.h"
#include "distributed/watchdog.h"

namespace kiln::dist {

namespace {

// The control channel's tag; MPI guarantees tags up to 32767.
constexpr int kControlTag = 27497;

void check(int code, const char* call) {
  KILN_CHECK(code == MPI_SUCCESS, "mpi: {} failed: {}", call, mpi_error_string(code));
}

// Waits for request without a watchdog (there is no control channel yet).
bool wait_for(MPI_Request& request, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    int done = 0;
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return fmt::format("error {}", code);
  return std::string(text, static_cast<std::size_t>(length));
}

MpiSession::MpiSession(double timeout_s) : timeout_s_(timeout_s) {
  int initialized = 0;
  check(MPI_Initialized(&initialized), "MPI_Initialized");
  if (!initialized) {
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    owns_mpi_ = true;
    check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  }
  check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, &world_size_), "MPI_Comm_size");
  MPI_Request request = MPI_REQUEST_NULL;
  check(MPI_Comm_idup(MPI_COMM_WORLD, &comm_, &request), "MPI_Comm_idup");
  if (!wait_for(request, timeout_s)) {
    abort_at_exit();
    fail(
        "mpi rank {} of {}: setup: not every rank reached MPI start-up within {:g} s (one hangs "
        "before it, or died)",
        rank_, world_size_, timeout_s);
  }
  check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  control_.comm = comm_;
}

MpiSession::~MpiSession() {
  if (!finished_) {
    abort_at_exit();  // some rank may wait for this one: end the job rather than hang it
    return;
  }
  MPI_Comm_free(&comm_);
  if (owns_mpi_) MPI_Finalize();
}

void MpiSession::finish() {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
  while (!control_.sends_done()) {
    if (std::chrono::steady_clock::now() > deadline) {
      abort_at_exit();
      fail("mpi rank {} of {}: shutdown: control messages were not delivered within {:g} s", rank_,
           world_size_, timeout_s_);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  finished_ = true;
}

void MpiSession::abort_at_exit() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::atexit([] {
      // MPI_Abort does not return: flush what the program printed first.
      std::cout.flush();
      std::fflush(nullptr);
      MPI_Abort(MPI_COMM_WORLD, 1);
    });
  });
}

void MpiSession::Control::send(int peer, const ControlMessage& message) {
  auto& [request, buffer] = sending_.emplace_back(MPI_REQUEST_NULL, message);
  check(MPI_Isend(&buffer, sizeof buffer, MPI_BYTE, peer, kControlTag, comm, &request),
        "MPI_Isend");
}

bool MpiSession::Control::sends_done() {
  for (auto it = sending_.begin(); it != sending_.end();) {
    int done = 0;
    check(MPI_Test(&it->first, &done, MPI_STATUS_IGNORE), "MPI_Test");
    it = done ? sending_.erase(it) : std::next(it);
  }
  return sending_.empty();
}

std::optional<ControlEvent> MpiSession::Control::poll() {
  sends_done();
  int arrived = 0;
  MPI_Status status;
  check(MPI_Iprobe(MPI_ANY_SOURCE, kControlTag, comm, &arrived, &status), "MPI_Iprobe");
  if (!arrived) return std::nullopt;
  ControlEvent event{.peer = status.MPI_SOURCE, .closed = false, .message = {}};
  check(MPI_Recv(&event.message, sizeof event.message, MPI_BYTE, status.MPI_SOURCE, kControlTag,
                 comm, MPI_STATUS_IGNORE),
        "MPI_Recv");
  return event;
}

}  // namespace kiln::dist

namespace kiln::dist {

namespace {

class MpiBootstrap final : public Bootstrap {
 public:
  MpiBootstrap(double timeout_s, const std::function<std::string()>& make_payload)
      : session_(timeout_s) {
    if (session_.rank() == 0) payload_ = make_payload();
    // The payload's size, then its bytes, from rank 0, waited for under a watchdog.
    Watchdog setup(fmt::format("mpi rank {} of {}", rank(), world_size()), rank(), world_size(),
                   timeout_s, session_.control(), &MpiSession::abort_at_exit);
    setup.begin(Activity::setup);
    const auto broadcast = [&](void* data, int bytes) {
      MPI_Request request = MPI_REQUEST_NULL;
      const int code = MPI_Ibcast(data, bytes, MPI_BYTE, 0, session_.comm(), &request);
      if (code != MPI_SUCCESS) setup.fail("MPI_Ibcast failed: " + mpi_error_string(code));
      setup.wait([&] {
        int done = 0;
        const int rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) setup.fail("MPI_Test failed: " + mpi_error_string(rc));
        return done != 0;
      });
    };
    std::int64_t size = static_cast<std::int64_t>(payload_.size());
    broadcast(&size, sizeof size);
    payload_.resize(static_cast<std::size_t>(size));
    broadcast(payload_.data(), static_cast<int>(size));
    setup.end();
  }

  int rank() const override { return session_.rank(); }
  int world_size() const override { return session_.world_size(); }
  ControlChannel& control() override { return session_.control(); }
  const std::string& payload() const override { return payload_; }
  void abort_job() override { MpiSession::abort_at_exit(); }
  void finish() override { session_.finish(); }

 private:
  MpiSession session_;
  std::string payload_;
};

}  // namespace

std::unique_ptr<Bootstrap> mpi_bootstrap(double timeout_s,
                                         const std::function<std::string()>& make_payload) {
  return std::make_unique<MpiBootstrap>(timeout_s, make_payload);
}

}  // namespace kiln::dist
