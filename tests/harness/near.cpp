#include "tests/harness/near.h"

#include <cmath>
#include <cstring>

namespace kiln::testing {

NearResult compare(const Tensor& actual, const Tensor& expected, double rtol, double atol) {
  if (actual.shape() != expected.shape())
    return {false,
            fmt::format("shapes differ: {} vs expected {}", actual.shape(), expected.shape())};
  const std::vector<double> a = actual.to_vector<double>();
  const std::vector<double> e = expected.to_vector<double>();
  double worst = 0.0;
  std::size_t worst_index = 0;
  bool ok = true;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double diff = std::fabs(a[i] - e[i]);
    const double allowed = atol + rtol * std::fabs(e[i]);
    const bool bad = !(diff <= allowed) && !(std::isinf(a[i]) && a[i] == e[i]);
    const double excess = std::isnan(diff) ? INFINITY : diff - allowed;
    if (bad && (ok || excess > worst)) {
      worst = excess;
      worst_index = i;
    }
    ok = ok && !bad;
  }
  if (ok) return {};
  return {false, fmt::format("element {} of {} (shape {}): actual {:.17g}, expected {:.17g}, "
                             "|diff| {:.3g} > atol {:.3g} + rtol {:.3g} * |expected|",
                             worst_index, a.size(), actual.shape(), a[worst_index], e[worst_index],
                             std::fabs(a[worst_index] - e[worst_index]), atol, rtol)};
}

NearResult compare_exact(const Tensor& actual, const Tensor& expected) {
  if (actual.shape() != expected.shape() || actual.dtype() != expected.dtype())
    return {false, fmt::format("{} {} vs expected {} {}", actual.shape(), actual.dtype(),
                               expected.shape(), expected.dtype())};
  const std::vector<double> a = actual.to_vector<double>();
  const std::vector<double> e = expected.to_vector<double>();
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &e[i], sizeof(double)) != 0)
      return {false, fmt::format("element {} differs: {:.17g} vs {:.17g}", i, a[i], e[i])};
  }
  return {};
}

double relative_error(const Tensor& actual, const Tensor& expected) {
  const std::vector<double> a = actual.to_vector<double>();
  const std::vector<double> e = expected.to_vector<double>();
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - e[i]) * (a[i] - e[i]);
    norm += e[i] * e[i];
  }
  if (std::isnan(diff)) return INFINITY;
  return norm == 0.0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

}  // namespace kiln::testing
