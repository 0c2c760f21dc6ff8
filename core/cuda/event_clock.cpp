// The CUDA backend's device clock (profile::DeviceClock, core/profiler.h): a mark records a CUDA
// event on the backend's stream, the elapsed time between consecutive events is charged to the
// family marked at the later one. Events are taken from a pool and come back once resolved.
// Resolving never blocks until the totals are asked for: marks already reached by the device are
// folded in along the way (cudaEventQuery), so a long profile keeps at most kMaxPending events;
// only if the device falls that far behind does a mark wait for the oldest (a counted host wait).
// On the CUDA emulator every call is synchronous and an event holds the host clock of its record
// (cuda_emulator/include/cuda_runtime_api.h): the times are the emulator's, not a GPU's.
#include <cstddef>
#include <deque>
#include <memory>
#include <vector>

#include <cuda_runtime_api.h>

#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/host_wait.h"

namespace kiln {

namespace {

constexpr std::size_t kMaxPending = 4096;

class EventClock final : public profile::DeviceClock {
 public:
  EventClock(int device, cudaStream_t stream) : device_(device), stream_(stream) {}
  ~EventClock() override {
    // Destructors take no errors: a failure here leaves an event behind, nothing worse.
    cudaSetDevice(device_);
    if (last_ != nullptr) cudaEventDestroy(last_);
    for (const Mark& m : pending_) cudaEventDestroy(m.event);
    for (cudaEvent_t e : free_) cudaEventDestroy(e);
  }
  EventClock(const EventClock&) = delete;
  EventClock& operator=(const EventClock&) = delete;

  void restart() override {
    KILN_CUDA_CHECK(cudaSetDevice(device_));
    for (const Mark& m : pending_) free_.push_back(m.event);
    pending_.clear();
    if (last_ != nullptr) free_.push_back(last_);
    last_ = record();
    seconds_.fill(0.0);
  }

  void mark(profile::Family family) override {
    KILN_CUDA_CHECK(cudaSetDevice(device_));
    if (last_ == nullptr) {  // never restarted: this mark starts the first interval
      last_ = record();
      return;
    }
    pending_.push_back({record(), family});
    fold(/*wait=*/false);
    if (pending_.size() > kMaxPending) {  // the device is that far behind: wait for the oldest
      gpu::wait_for_event(pending_.front().event);
      fold(/*wait=*/false);
    }
  }

  Totals totals() override {
    KILN_CUDA_CHECK(cudaSetDevice(device_));
    fold(/*wait=*/true);
    return seconds_;
  }

 private:
  struct Mark {
    cudaEvent_t event;
    profile::Family family;
  };

  cudaEvent_t record() {
    cudaEvent_t event = nullptr;
    if (free_.empty()) {
      KILN_CUDA_CHECK(cudaEventCreate(&event));
    } else {
      event = free_.back();
      free_.pop_back();
    }
    KILN_CUDA_CHECK(cudaEventRecord(event, stream_));
    return event;
  }

  // Charges the intervals whose end the device has reached; with `wait`, all of them, after one
  // wait for the newest mark.
  void fold(bool wait) {
    if (pending_.empty()) return;
    if (wait) gpu::wait_for_event(pending_.back().event);
    while (!pending_.empty()) {
      const Mark m = pending_.front();
      if (!wait) {
        const cudaError_t state = cudaEventQuery(m.event);
        if (state == cudaErrorNotReady) {
          (void)cudaGetLastError();  // not an error: clear it, as PyTorch's CUDAEvent::query does
          return;
        }
        KILN_CUDA_CHECK(state);
      }
      float ms = 0.0f;
      KILN_CUDA_CHECK(cudaEventElapsedTime(&ms, last_, m.event));
      seconds_[static_cast<std::size_t>(m.family)] += 1e-3 * static_cast<double>(ms);
      free_.push_back(last_);
      last_ = m.event;
      pending_.pop_front();
    }
  }

  int device_;
  cudaStream_t stream_;
  cudaEvent_t last_ = nullptr;  // the mark that starts the next interval
  std::deque<Mark> pending_;    // recorded, not yet charged, oldest first
  std::vector<cudaEvent_t> free_;
  Totals seconds_{};
};

}  // namespace

std::unique_ptr<profile::DeviceClock> CudaBackend::device_clock() {
  return std::make_unique<EventClock>(index_, stream_);
}

}  // namespace kiln
