#include "tests/differential/builder.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kiln::differential {

namespace {

// Special values in `dtype`: signed zeros, infinities, NaN, huge and tiny (subnormal) numbers.
std::vector<double> specials(DType dtype) {
  const double nan = std::nan("");
  if (dtype == DType::f64)
    return {0.0, -0.0, INFINITY, -INFINITY, nan, 1e300, -1e300, 1e200, 1e-310, -1e-300};
  return {0.0, -0.0, INFINITY, -INFINITY, nan, 3e38, -3e38, 1e30, 1e-40, -1e-30};
}

}  // namespace

// n values of the mode and domain, exact in dtype.
std::vector<double> draw(Rng& rng, std::int64_t n, Values mode, Domain domain, DType dtype) {
  std::vector<double> v(static_cast<std::size_t>(n));
  const std::vector<double> special = specials(dtype);
  for (double& x : v) {
    switch (mode) {
      case Values::grid:  // k / 64, |k| <= 128: exact in bf16 too
        x = static_cast<double>(rng.range(-128, 128)) / 64.0;
        break;
      case Values::random:
        x = 4.0 * rng.unit() - 2.0;
        break;
      case Values::wide:
        x = (rng.chance(0.5) ? -1.0 : 1.0) * std::pow(10.0, 16.0 * rng.unit() - 8.0);
        break;
      case Values::special:
        x = rng.chance(0.35) ? rng.pick(special) : static_cast<double>(rng.range(-128, 128)) / 64.0;
        break;
    }
    if (domain == Domain::positive) {
      x = std::fabs(x);
      if (x == 0.0 && mode != Values::special) x = 1.0 / 64;
    } else if (domain == Domain::nonzero && std::isfinite(x) && std::fabs(x) < 0.25) {
      x = (std::signbit(x) ? -1.0 : 1.0) * (0.25 + std::fabs(x));
    }
  }
  if (dtype == DType::f64) return v;
  return from_vector(v, {n}).to(dtype).to(DType::f64).to_vector<double>();
}

// A random shape: rank 0 to max_rank, dims mostly 1 to 4, sometimes 0, at most 48 elements.
Shape random_shape(Rng& rng, std::int64_t min_rank, std::int64_t max_rank, bool allow_zero) {
  for (;;) {
    const std::int64_t rank = std::clamp<std::int64_t>(
        static_cast<std::int64_t>(rng.weighted({1, 3, 4, 3, 1})), min_rank, max_rank);
    Shape s;
    for (std::int64_t i = 0; i < rank; ++i)
      s.push_back(allow_zero && rng.chance(0.05) ? 0 : rng.chance(0.25) ? 1 : rng.range(2, 4));
    if (numel_of(s) <= 48) return s;
  }
}

// A shape that broadcasts with s: s itself, a suffix of it, some dims set to 1, 0-dim, or s with
// leading dims added.
Shape partner(Rng& rng, const Shape& s) {
  Shape t = s;
  switch (rng.weighted({3, 2, 3, 1, 2})) {
    case 0:
      break;
    case 1:
      t.erase(t.begin(), t.begin() + rng.below(static_cast<std::int64_t>(s.size()) + 1));
      break;
    case 2:
      for (auto& d : t)
        if (rng.chance(0.5)) d = 1;
      break;
    case 3:
      t.clear();
      break;
    default:
      t.insert(t.begin(), rng.range(1, 3));
      break;
  }
  return t;
}

Layout random_layout(Rng& rng, const Shape& shape, bool nested) {
  const auto rank = static_cast<std::int64_t>(shape.size());
  Layout l{shape};
  const std::size_t kind = rng.weighted({nested ? 0 : 6, 2, 1, 2, 1, 2, 1, nested ? 0 : 1});
  if (kind == 1 && rank >= 2) {  // transposed
    const std::int64_t i = rng.below(rank), j = rng.below(rank);
    std::swap(l.base[i], l.base[j]);
    l.views.push_back({"transpose", i, j});
  } else if (kind == 2 && rank >= 3) {  // permuted
    std::vector<std::int64_t> p(rank);
    std::iota(p.begin(), p.end(), 0);
    for (std::int64_t i = rank - 1; i > 0; --i) std::swap(p[i], p[rng.below(i + 1)]);
    for (std::int64_t k = 0; k < rank; ++k) l.base[p[k]] = shape[k];
    l.views.push_back({"permute", p});
  } else if (kind == 3 && rank >= 1) {  // stepped
    const std::int64_t d = rng.below(rank), step = rng.range(2, 3), start = rng.below(3);
    l.base[d] = start + shape[d] * step;
    l.views.push_back({"slice", d, start, start + shape[d] * step, step});
  } else if (kind == 4 && rank >= 1) {  // narrowed
    const std::int64_t d = rng.below(rank), before = rng.below(3);
    l.base[d] = shape[d] + before + rng.below(3);
    l.views.push_back({"narrow", d, before, shape[d]});
  } else if (kind == 5 && rank >= 1) {  // expanded from size-1 dims, maybe from fewer dims
    bool any = false;
    for (std::int64_t d = 0; d < rank; ++d)
      if (shape[d] >= 2 && rng.chance(0.6)) l.base[d] = 1, any = true;
    if (rng.chance(0.3)) l.base.erase(l.base.begin()), any = true;
    if (any) l.views.push_back({"expand", shape});
  } else if (kind == 6) {  // selected from a larger tensor
    const std::int64_t d = rng.below(rank + 1), n = rng.range(2, 3);
    l.base.insert(l.base.begin() + d, n);
    l.views.push_back({"select", d, rng.below(n)});
  } else if (kind == 7) {  // two layouts, one on the other
    const Layout inner = random_layout(rng, shape, true);
    const Layout outer = random_layout(rng, inner.base, true);
    l.base = outer.base;
    l.views = outer.views;
    for (const json& v : inner.views) l.views.push_back(v);
  }
  return l;
}

std::int64_t random_dim(Rng& rng, std::int64_t rank) {
  // A dim of a tensor of `rank` (>= 1), as often negative as not.
  const std::int64_t d = rng.below(rank);
  return rng.chance(0.3) ? d - rank : d;
}

// Distinct dims of a tensor of `rank` (each maybe negative), `count` of them.
std::vector<std::int64_t> some_dims(Rng& rng, std::int64_t rank, std::int64_t count) {
  std::vector<std::int64_t> all(rank);
  std::iota(all.begin(), all.end(), 0);
  for (std::int64_t i = rank - 1; i > 0; --i) std::swap(all[i], all[rng.below(i + 1)]);
  all.resize(count);
  for (auto& d : all)
    if (rng.chance(0.3)) d -= rank;
  return all;
}

// A shape of `numel` elements: its factors spread over 1 to 3 dims, one maybe -1.
Shape shape_of(Rng& rng, std::int64_t numel) {
  Shape s;
  std::int64_t left = numel;
  const std::int64_t dims = rng.range(1, 3);
  for (std::int64_t i = 0; i + 1 < dims; ++i) {
    std::vector<std::int64_t> divisors;
    for (std::int64_t d = 1; d <= std::max<std::int64_t>(left, 1); ++d)
      if (left == 0 || left % d == 0) divisors.push_back(d);
    const std::int64_t d = rng.pick(divisors);
    s.push_back(d);
    left = left == 0 ? 0 : left / d;
  }
  s.push_back(left);
  if (numel > 0 && rng.chance(0.3)) s[rng.below(static_cast<std::int64_t>(s.size()))] = -1;
  return s;
}

// Targets for rows of `classes` classes: ids in range, some equal to ignore_index; at least one
// counted.
std::string targets(Builder& b, const Shape& shape, std::int64_t classes, std::int64_t ignore) {
  std::vector<std::int64_t> t(static_cast<std::size_t>(numel_of(shape)));
  for (auto& x : t) x = b.rng.chance(0.2) ? ignore : b.rng.range(0, classes - 1);
  if (!t.empty() && std::all_of(t.begin(), t.end(), [&](std::int64_t x) { return x == ignore; }))
    t[0] = ignore == 0 ? classes - 1 : 0;
  return b.ids_of(shape, t);
}

}  // namespace kiln::differential
