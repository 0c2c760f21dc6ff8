// A step profiler: wall time per op family, for bench_train --profile. Off by default; when off,
// each scope costs one branch. On a GPU, whose kernels run asynchronously, the host clock says
// when work was queued, not how long it ran: a DeviceClock (time_device below) then times the
// device's own queue per family as well.
//
// Families are regions: an op or module opens a scope, nested scopes charge their own family
// and pause the enclosing one (exclusive time), and a region opened by a module (attention, the
// vocabulary head, the optimizer) absorbs the generic ops inside it (a matmul inside attention
// counts as attention). Backward nodes run in the region that was open when they were
// recorded, so a family's time includes its backward.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::profile {

enum class Family : std::uint8_t {
  none,        // no scope open (time outside any op)
  gemm,        // matmul outside the regions below
  attention,   // S = QK^T, causal softmax, AV
  vocabulary,  // logits = X E^T, softmax and cross-entropy over the vocabulary
  layer_norm,
  embedding,
  optimizer,   // gradient norm and parameter updates
  allocation,  // getting and returning tensor memory
  other,       // elementwise ops, dropout, copies, reductions
  count
};

std::string_view name(Family family);

// Enables or disables collection (and clears the totals when enabling).
void enable(bool on);
bool enabled();

// Seconds charged to each family since enable(true).
std::array<double, static_cast<std::size_t>(Family::count)> totals();

// The family a new scope of `requested` charges: requested, unless a module region (attention,
// vocabulary, optimizer) is open and requested is a generic op family.
Family effective(Family requested);
// The innermost open family (recorded by autograd nodes for their backward).
Family current();

// Time and arithmetic inside the backend's GEMM calls, across all families: the share of the
// step that is matrix multiplication, and the rate it runs at, in total and per GEMM shape (to
// compare with the BLAS alone on the same shapes: bench_ops).
struct GemmTotals {
  double seconds = 0.0;
  double flops = 0.0;
  std::int64_t calls = 0;
};
struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  bool trans_a = false, trans_b = false;
  auto operator<=>(const GemmShape&) const = default;
};
GemmTotals gemm_totals();
// Per shape, the most time first.
std::vector<std::pair<GemmShape, GemmTotals>> gemm_shapes();
void add_gemm(const GemmShape& shape, double elapsed_seconds);

// The device's own time per family. At every switch of the charged family the clock marks the
// device's queue (CUDA: an event recorded on the backend's stream, core/cuda/event_clock.cpp), and
// the device time between two consecutive marks is charged to the family charged between them:
// the time the device spent on the work queued then (and any time it sat idle waiting for the
// host to queue more). It waits for the device only when asked for its totals (the report), never
// per scope.
class DeviceClock {
 public:
  using Totals = std::array<double, static_cast<std::size_t>(Family::count)>;
  virtual ~DeviceClock() = default;
  // Forgets every mark and total, then marks the queue: the start of the first interval.
  virtual void restart() = 0;
  // Marks the queue: the device time since the previous mark is `family`'s.
  virtual void mark(Family family) = 0;
  // Seconds charged to each family since restart(); waits for the device's last mark.
  virtual Totals totals() = 0;
};

// Times a device's queue with `clock` (from Backend::device_clock(), core/backend.h) beside the
// host clock, from now on (restarted by enable(true)); nullptr stops it.
void time_device(std::unique_ptr<DeviceClock> clock);
// The device clock's seconds per family since it started, or nullopt without one.
std::optional<DeviceClock::Totals> device_totals();

// Charges the time until destruction to `family` (exclusive of nested scopes).
class Scope {
 public:
  explicit Scope(Family family) {
    if (enabled()) enter(effective(family));
  }
  ~Scope() {
    if (active_) leave();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  void enter(Family family);
  void leave();
  bool active_ = false;
};

}  // namespace kiln::profile
