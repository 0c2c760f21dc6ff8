#include "core/profiler.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <vector>

namespace kiln::profile {

namespace {

using Clock = std::chrono::steady_clock;

bool collecting = false;
GemmTotals gemm;
std::map<GemmShape, GemmTotals> gemm_by_shape;
std::array<double, static_cast<std::size_t>(Family::count)> seconds{};
// Open scopes of the thread that drives the model (kiln's ops are called from one thread).
thread_local std::vector<Family> open_scopes;
thread_local Clock::time_point last_switch;
std::unique_ptr<DeviceClock> device_clock;

// Charges the time since the last switch to `family`; with `switching` (the charged family
// changes now) the device clock marks its queue too.
void charge(Family family, Clock::time_point now, bool switching = true) {
  seconds[static_cast<std::size_t>(family)] +=
      std::chrono::duration<double>(now - last_switch).count();
  last_switch = now;
  if (switching && device_clock != nullptr) device_clock->mark(family);
}

bool is_region(Family f) {
  return f == Family::attention || f == Family::vocabulary || f == Family::optimizer;
}

}  // namespace

std::string_view name(Family family) {
  switch (family) {
    case Family::none:
      return "outside ops";
    case Family::gemm:
      return "GEMM";
    case Family::attention:
      return "attention";
    case Family::vocabulary:
      return "vocabulary softmax/cross-entropy (with its GEMMs)";
    case Family::layer_norm:
      return "layer_norm";
    case Family::embedding:
      return "embedding";
    case Family::optimizer:
      return "optimizer";
    case Family::allocation:
      return "allocation";
    case Family::other:
      return "elementwise, dropout, copies";
    case Family::count:
      break;
  }
  return "?";
}

void enable(bool on) {
  collecting = on;
  if (on) {
    seconds.fill(0.0);
    gemm = {};
    gemm_by_shape.clear();
    open_scopes.clear();
    last_switch = Clock::now();
    if (device_clock != nullptr) device_clock->restart();
  }
}

void time_device(std::unique_ptr<DeviceClock> clock) {
  device_clock = std::move(clock);
  if (device_clock != nullptr) device_clock->restart();
}

std::optional<DeviceClock::Totals> device_totals() {
  if (device_clock == nullptr) return std::nullopt;
  if (collecting) device_clock->mark(current());
  return device_clock->totals();
}

bool enabled() { return collecting; }

std::array<double, static_cast<std::size_t>(Family::count)> totals() {
  if (collecting) charge(current(), Clock::now());
  return seconds;
}

GemmTotals gemm_totals() { return gemm; }

std::vector<std::pair<GemmShape, GemmTotals>> gemm_shapes() {
  std::vector<std::pair<GemmShape, GemmTotals>> shapes(gemm_by_shape.begin(), gemm_by_shape.end());
  std::stable_sort(shapes.begin(), shapes.end(), [](const auto& a, const auto& b) {
    return a.second.seconds > b.second.seconds;
  });
  return shapes;
}

void add_gemm(const GemmShape& shape, double elapsed_seconds) {
  const double flops = 2.0 * shape.m * shape.n * shape.k * shape.batch;
  for (GemmTotals* totals : {&gemm, &gemm_by_shape[shape]}) {
    totals->seconds += elapsed_seconds;
    totals->flops += flops;
    ++totals->calls;
  }
}

Family current() { return open_scopes.empty() ? Family::none : open_scopes.back(); }

Family effective(Family requested) {
  if (requested == Family::allocation || is_region(requested)) return requested;
  for (auto it = open_scopes.rbegin(); it != open_scopes.rend(); ++it)
    if (is_region(*it)) return *it;
  return requested;
}

void Scope::enter(Family family) {
  const Family before = current();
  charge(before, Clock::now(), family != before);
  open_scopes.push_back(family);
  active_ = true;
}

void Scope::leave() {
  const Family leaving = current();
  open_scopes.pop_back();
  charge(leaving, Clock::now(), leaving != current());
}

}  // namespace kiln::profile
