// The pieces the differential test's case generators share (tests/differential/generate.h):
// kiln's own random numbers, values by mode and domain, shapes, operand layouts, and the
// Builder that adds a case's inputs and nodes, running each node in kiln as it is added. The
// generators themselves: single_cases.cpp (one op per family), bad_calls.cpp, chains.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tests/differential/case_json.h"
#include "tests/differential/interpret.h"

namespace kiln::differential {

// Random numbers from the standard's specified engine through kiln's own distributions (the
// standard library's distributions differ between implementations).
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : engine_(seed) {}
  std::int64_t below(std::int64_t n) {
    return n <= 0 ? 0 : static_cast<std::int64_t>(engine_() % static_cast<std::uint64_t>(n));
  }
  std::int64_t range(std::int64_t lo, std::int64_t hi) { return lo + below(hi - lo + 1); }
  double unit() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  bool chance(double p) { return unit() < p; }
  template <typename T>
  T pick(const std::vector<T>& v) {
    return v[static_cast<std::size_t>(below(static_cast<std::int64_t>(v.size())))];
  }
  // An index drawn with the given weights.
  std::size_t weighted(const std::vector<int>& weights) {
    std::int64_t r = below(std::accumulate(weights.begin(), weights.end(), 0));
    for (std::size_t i = 0; i < weights.size(); ++i) {
      if (r < weights[i]) return i;
      r -= weights[i];
    }
    return weights.size() - 1;
  }

 private:
  std::mt19937_64 engine_;
};

enum class Values { grid, random, wide, special };
enum class Domain { any, positive, nonzero };

// n values of the mode and domain, exact in dtype.
std::vector<double> draw(Rng& rng, std::int64_t n, Values mode, Domain domain, DType dtype);

// A random shape: rank min_rank to max_rank, dims mostly 1 to 4, sometimes 0, at most 48
// elements.
Shape random_shape(Rng& rng, std::int64_t min_rank = 0, std::int64_t max_rank = 4,
                   bool allow_zero = true);

// A shape that broadcasts with s: s itself, a suffix of it, some dims set to 1, 0-dim, or s with
// leading dims added.
Shape partner(Rng& rng, const Shape& s);

// How an input of `shape` is laid out: a base tensor and the views that make `shape` of it.
struct Layout {
  Shape base;
  json views = json::array();
};

// A random layout of an operand of `shape` (nested: no further nesting).
Layout random_layout(Rng& rng, const Shape& shape, bool nested = false);

// Builds one case: inputs, then nodes, each evaluated by kiln as it is added (so that the next
// step knows its shape).
class Builder {
 public:
  Builder(Rng& r, DType d, Values v) : rng(r), dtype(d), values(v) {}

  // A floating input of `shape` in the case's dtype (or `as`), laid out by a random view unless
  // plain.
  std::string input(const Shape& shape, Domain domain = Domain::any, bool grad = true,
                    bool plain = false, std::optional<DType> as = std::nullopt) {
    const DType d = as.value_or(dtype);
    const Layout layout = plain || rng.chance(0.5) ? Layout{shape} : random_layout(rng, shape);
    json in = {{"dtype", short_name(d)},
               {"base", layout.base},
               {"views", layout.views},
               {"grad", grad && d != DType::i64}};
    json values_json = json::array();
    if (d == DType::i64) {
      for (std::int64_t i = 0; i < numel_of(layout.base); ++i)
        values_json.push_back(rng.range(-3, 3));
    } else {
      for (double x : draw(rng, numel_of(layout.base), values, domain, d))
        values_json.push_back(value_json(x));
    }
    in["values"] = values_json;
    return add_input(in);
  }

  // int64 ids of `shape` in [low, high], plain.
  std::string ids(const Shape& shape, std::int64_t low, std::int64_t high) {
    std::vector<std::int64_t> v(static_cast<std::size_t>(numel_of(shape)));
    for (auto& x : v) x = rng.range(low, high);
    return ids_of(shape, v);
  }
  std::string ids_of(const Shape& shape, const std::vector<std::int64_t>& v) {
    return add_input({{"dtype", "i64"},
                      {"base", shape},
                      {"views", json::array()},
                      {"values", v},
                      {"grad", false}});
  }

  // A 0/1 mask of `shape` (float in the case's dtype, or int64), no gradient.
  std::string mask(const Shape& shape, bool integer) {
    json v = json::array();
    for (std::int64_t i = 0; i < numel_of(shape); ++i) v.push_back(rng.below(2));
    return add_input({{"dtype", integer ? "i64" : short_name(dtype)},
                      {"base", shape},
                      {"views", json::array()},
                      {"values", v},
                      {"grad", false}});
  }

  // Adds a node and runs it in kiln; false (and the case ends) when kiln raises.
  bool node(json n) {
    std::vector<Tensor> args;
    for (const json& ref : n.at("args")) args.push_back(value(ref.get<std::string>()));
    nodes.push_back(n);
    ops.push_back(n.at("op").get<std::string>());
    try {
      NoGradGuard no_grad;
      Tensor indices;
      const Tensor out = apply_node(n, args, &indices);
      last = fmt::format("n{}", nodes.size() - 1);
      values_[last] = out;
      attach_mask(nodes.back(), args);
      return true;
    } catch (const Error&) {
      failed = true;
      return false;
    }
  }

  const Tensor& value(const std::string& ref) const { return values_.at(ref); }
  const Shape& shape(const std::string& ref) const { return value(ref).shape(); }

  json spec() const { return {{"inputs", inputs}, {"nodes", nodes}}; }

  Rng& rng;
  DType dtype;
  Values values;
  json inputs = json::array(), nodes = json::array();
  std::vector<std::string> ops;
  std::string last, why;
  bool failed = false;

 private:
  std::string add_input(const json& in) {
    const std::string ref = fmt::format("x{}", inputs.size());
    inputs.push_back(in);
    NoGradGuard no_grad;
    Tensor leaf;
    make_input(in, leaf, values_[ref]);
    return ref;
  }

  // The dropout mask (0/1 per element, row-major) a dropout node draws, for the replay: the
  // mask dropout() draws from Generator(seed) for the node's input, or for attention the one it
  // draws for the (B, heads, T_q, T_k) probabilities.
  void attach_mask(json& n, const std::vector<Tensor>& args) {
    const std::string op = n.at("op").get<std::string>();
    const double p = n.value("p", 0.0);
    if (p <= 0.0) return;
    Shape shape;
    if (op == "dropout") {
      shape = args[0].shape();
    } else if (op == "causal_attention") {
      const std::int64_t B = args[0].size(0), T = args[0].size(1);
      shape = {B, n.at("heads").get<std::int64_t>(), T, T};
    } else if (op == "causal_attention_heads") {
      shape = {args[0].size(0), args[0].size(1), args[0].size(2), args[1].size(2)};
    } else {
      return;
    }
    Generator gen(n.at("seed").get<std::uint64_t>());
    const Tensor kept = dropout(ones(shape), p, true, &gen);
    json mask = json::array();
    for (double k : kept.to_vector<double>()) mask.push_back(k != 0.0 ? 1 : 0);
    n["mask"] = mask;
  }

  std::map<std::string, Tensor> values_;
};

using Family = std::function<void(Builder&)>;

// A dim of a tensor of `rank` (>= 1), as often negative as not.
std::int64_t random_dim(Rng& rng, std::int64_t rank);
// `count` distinct dims of a tensor of `rank`, each maybe negative.
std::vector<std::int64_t> some_dims(Rng& rng, std::int64_t rank, std::int64_t count);
// A shape of `numel` elements: its factors spread over 1 to 3 dims, one maybe -1.
Shape shape_of(Rng& rng, std::int64_t numel);
// Targets for rows of `classes` classes: ids in range, some equal to ignore; at least one
// counted.
std::string targets(Builder& b, const Shape& shape, std::int64_t classes, std::int64_t ignore);

// The generators, by family: valid single-op cases, and bad calls (each sets Builder::why).
const std::map<std::string, Family>& single_cases();
const std::map<std::string, std::vector<Family>>& error_cases();
// A chain of 2 to 6 ops, each reading the previous result.
void chain_case(Builder& b);

}  // namespace kiln::differential
