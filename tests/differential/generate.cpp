#include "tests/differential/generate.h"

#include "tests/differential/builder.h"

namespace kiln::differential {

namespace {

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

const std::vector<std::string>& families() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& [name, fn] : single_cases()) n.push_back(name);
    return n;
  }();
  return names;
}

json generate_case(std::uint64_t seed, std::int64_t index, const std::vector<std::string>& only) {
  Rng rng(splitmix(splitmix(seed) ^ static_cast<std::uint64_t>(index)));
  const std::vector<std::string>& pool = only.empty() ? families() : only;
  const DType dtype =
      std::vector<DType>{DType::f32, DType::f64, DType::bf16}[rng.weighted({9, 6, 5})];
  const Values values = std::vector<Values>{Values::grid, Values::random, Values::wide,
                                            Values::special}[rng.weighted({9, 5, 2, 4})];
  Builder b(rng, dtype, values);
  std::string kind, family;
  const std::size_t which = only.empty() ? rng.weighted({13, 5, 3}) : rng.weighted({8, 0, 2});
  if (which == 1) {
    kind = family = "chain";
    chain_case(b);
  } else {
    family = rng.pick(pool);
    const auto errors = error_cases().find(family);
    if (which == 2 && errors != error_cases().end() && !errors->second.empty()) {
      kind = "error";
      rng.pick(errors->second)(b);
    } else {
      kind = "single";
      single_cases().at(family)(b);
    }
  }
  json c = b.spec();
  c["id"] = fmt::format("{}:{}", seed, index);
  c["family"] = family;
  c["kind"] = kind;
  c["dtype"] = short_name(dtype);
  c["ops"] = b.ops;
  if (kind == "error") c["why"] = b.why;
  return c;
}

}  // namespace kiln::differential
