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

void charge(Family family, Clock::time_point now) {
  seconds[static_cast<std::size_t>(family)] +=
      std::chrono::duration<double>(now - last_switch).count();
  last_switch = now;
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
  }
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
  charge(current(), Clock::now());
  open_scopes.push_back(family);
  active_ = true;
}

void Scope::leave() {
  charge(current(), Clock::now());
  open_scopes.pop_back();
}

}  // namespace kiln::profile
