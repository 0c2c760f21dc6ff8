// Chains of 2 to 6 ops: each step takes the chain's current value and adds one node that reads
// it, with fresh operands of the dtype it needs; a chain may end in a loss.
#include <cmath>

#include "tests/differential/builder.h"

namespace kiln::differential {

namespace {

using Step = std::function<bool(Builder&, const std::string&)>;

// A fresh input for a chain step: in the dtype of the chain's current value c (kiln promotes
// only bf16 with float32, and only elementwise).
std::string fresh(Builder& b, const std::string& c, const Shape& shape,
                  Domain domain = Domain::any) {
  return b.input(shape, domain, true, false, b.value(c).dtype());
}

// Whether a ref's values are all > 0 (log, sqrt and fractional powers stay in their domain).
bool positive(const Builder& b, const std::string& ref) {
  const Tensor v = b.value(ref);
  if (v.dtype() == DType::i64 || v.numel() == 0) return v.numel() == 0;
  for (double x : v.to_vector<double>())
    if (!(x > 0.0)) return false;
  return true;
}

std::vector<Step> chain_steps() {
  std::vector<Step> s;
  for (const char* op : {"neg", "exp", "tanh", "sigmoid", "relu"})
    s.push_back([op](Builder& b, const std::string& c) {
      return b.node({{"op", op}, {"args", {c}}});
    });
  for (const char* op : {"log", "sqrt"})
    s.push_back([op](Builder& b, const std::string& c) {
      return positive(b, c) && b.node({{"op", op}, {"args", {c}}});
    });
  s.push_back([](Builder& b, const std::string& c) {
    const double e = b.rng.pick<double>({2.0, 0.5, -1.0, 3.0});
    return (e == std::floor(e) || positive(b, c)) &&
           b.node({{"op", "pow"}, {"args", {c}}, {"exponent", e}});
  });
  s.push_back([](Builder& b, const std::string& c) {
    return b.node(
        {{"op", "gelu"}, {"args", {c}}, {"approximate", b.rng.chance(0.5) ? "tanh" : "none"}});
  });
  for (const char* op : {"add_scalar", "sub_scalar", "mul_scalar", "div_scalar", "rsub"})
    s.push_back([op](Builder& b, const std::string& c) {
      return b.node({{"op", op}, {"args", {c}}, {"scalar", b.rng.pick<double>({1.5, -0.5, 3.0})}});
    });
  for (const char* op : {"add", "sub", "mul", "div"})
    s.push_back([op](Builder& b, const std::string& c) {
      const std::string other = fresh(b, c, partner(b.rng, b.shape(c)),
                                      std::string(op) == "div" ? Domain::nonzero : Domain::any);
      return b.node({{"op", op}, {"args", b.rng.chance(0.7) ? json{c, other} : json{other, c}}});
    });
  for (const char* op : {"sum", "mean"})
    s.push_back([op](Builder& b, const std::string& c) {
      const auto rank = static_cast<std::int64_t>(b.shape(c).size());
      if (rank == 0) return false;
      return b.node({{"op", op},
                     {"args", {c}},
                     {"dims", some_dims(b.rng, rank, b.rng.range(1, rank))},
                     {"keepdim", b.rng.chance(0.5)}});
    });
  s.push_back([](Builder& b, const std::string& c) {
    const Shape& sh = b.shape(c);
    const auto rank = static_cast<std::int64_t>(sh.size());
    if (rank == 0) return false;
    const std::int64_t dim = random_dim(b.rng, rank);
    return sh[(dim + rank) % rank] > 0 &&
           b.node({{"op", "max"}, {"args", {c}}, {"dim", dim}, {"keepdim", b.rng.chance(0.5)}});
  });
  for (const char* op : {"softmax", "log_softmax"})
    s.push_back([op](Builder& b, const std::string& c) {
      const auto rank = static_cast<std::int64_t>(b.shape(c).size());
      return rank > 0 && b.node({{"op", op}, {"args", {c}}, {"dim", random_dim(b.rng, rank)}});
    });
  s.push_back([](Builder& b, const std::string& c) {
    const Shape& sh = b.shape(c);
    return sh.size() >= 2 && sh.back() >= sh[sh.size() - 2] &&
           b.node({{"op", "causal_softmax"},
                   {"args", {c}},
                   {"offset", sh.back() - sh[sh.size() - 2]}});
  });
  s.push_back([](Builder& b, const std::string& c) {
    const Shape& sh = b.shape(c);
    if (sh.empty() || sh.back() == 0) return false;
    const DType params = compute_dtype(b.value(c).dtype());
    const std::string gamma = b.input({sh.back()}, Domain::any, true, false, params);
    const std::string beta = b.input({sh.back()}, Domain::any, true, false, params);
    return b.node({{"op", "layer_norm"}, {"args", {c, gamma, beta}}, {"eps", 1e-5}});
  });
  s.push_back([](Builder& b, const std::string& c) {
    const Shape& sh = b.shape(c);
    if (sh.empty()) return false;
    const std::string w = fresh(b, c, {sh.back(), b.rng.range(1, 3)});
    return b.node({{"op", "matmul"}, {"args", {c, w}}});
  });
  s.push_back([](Builder& b, const std::string& c) {
    const Shape& sh = b.shape(c);
    if (sh.size() != 2) return false;
    const std::int64_t out = b.rng.range(1, 3);
    const std::string w = fresh(b, c, {out, sh[1]});
    const std::string bias =
        b.input({out}, Domain::any, true, false, compute_dtype(b.value(c).dtype()));
    return b.node({{"op", "linear"}, {"args", {c, w, bias}}});
  });
  s.push_back([](Builder& b, const std::string& c) {
    const auto rank = static_cast<std::int64_t>(b.shape(c).size());
    return rank >= 2 &&
           b.node({{"op", "transpose"},
                   {"args", {c}},
                   {"view", {"transpose", random_dim(b.rng, rank), random_dim(b.rng, rank)}}});
  });
  s.push_back([](Builder& b, const std::string& c) {
    const Shape& sh = b.shape(c);
    const auto rank = static_cast<std::int64_t>(sh.size());
    if (rank == 0) return false;
    const std::int64_t d = b.rng.below(rank), n = sh[d];
    const std::int64_t start = b.rng.range(0, std::max<std::int64_t>(n - 1, 0));
    return b.node(
        {{"op", "slice"}, {"args", {c}}, {"view", {"slice", d, start, n, b.rng.range(1, 2)}}});
  });
  s.push_back([](Builder& b, const std::string& c) {
    const Shape& sh = b.shape(c);
    const auto rank = static_cast<std::int64_t>(sh.size());
    if (rank == 0 || sh[0] == 0) return false;
    return b.node({{"op", "select"}, {"args", {c}}, {"view", {"select", 0, b.rng.below(sh[0])}}});
  });
  s.push_back([](Builder& b, const std::string& c) {
    const auto rank = static_cast<std::int64_t>(b.shape(c).size());
    return b.node(
        {{"op", "unsqueeze"}, {"args", {c}}, {"view", {"unsqueeze", b.rng.range(0, rank)}}});
  });
  s.push_back([](Builder& b, const std::string& c) {
    Shape target = b.shape(c);
    target.insert(target.begin(), b.rng.range(1, 3));
    return b.node({{"op", "expand"}, {"args", {c}}, {"view", {"expand", target}}});
  });
  s.push_back([](Builder& b, const std::string& c) {
    return b.node({{"op", "reshape"},
                   {"args", {c}},
                   {"view", {"reshape", shape_of(b.rng, b.value(c).numel())}}});
  });
  s.push_back([](Builder& b, const std::string& c) {
    const Shape& sh = b.shape(c);
    const auto rank = static_cast<std::int64_t>(sh.size());
    if (rank == 0) return false;
    Shape other = sh;
    const std::int64_t d = b.rng.below(rank);
    other[d] = b.rng.range(1, 2);
    return b.node({{"op", "cat"}, {"args", {c, fresh(b, c, other)}}, {"dim", d}});
  });
  s.push_back([](Builder& b, const std::string& c) {
    const std::string cond = b.mask(partner(b.rng, b.shape(c)), true);
    const std::string other = fresh(b, c, partner(b.rng, b.shape(c)));
    return b.node({{"op", "where"}, {"args", {cond, c, other}}});
  });
  s.push_back([](Builder& b, const std::string& c) {
    Shape m = b.shape(c);
    for (auto& d : m)
      if (b.rng.chance(0.5)) d = 1;
    return b.node({{"op", "masked_fill"}, {"args", {c, b.mask(m, false)}}, {"value", -1.25}});
  });
  s.push_back([](Builder& b, const std::string& c) {
    const Shape& sh = b.shape(c);
    if (sh.empty() || sh[0] == 0) return false;
    const std::string ids = b.ids({b.rng.range(1, 4)}, 0, sh[0] - 1);
    return b.node({{"op", "index_select"}, {"args", {c, ids}}, {"dim", 0}});
  });
  s.push_back([](Builder& b, const std::string& c) {
    return b.node({{"op", "dropout"}, {"args", {c}}, {"p", 0.3}, {"seed", b.rng.range(0, 1000)}});
  });
  s.push_back([](Builder& b, const std::string& c) {
    const Shape& sh = b.shape(c);
    if (sh.empty()) return false;
    Shape target(sh.begin() + 1, sh.end());
    return b.node({{"op", "sum_to"}, {"args", {c}}, {"shape", target}});
  });
  return s;
}

// The loss steps a chain may end with.
std::vector<Step> final_steps() {
  return {
      [](Builder& b, const std::string& c) {
        const Shape& sh = b.shape(c);
        if (sh.empty() || sh.back() < 2 || numel_of(sh) == 0) return false;
        const std::string t = targets(b, Shape(sh.begin(), sh.end() - 1), sh.back(), -100);
        return b.node({{"op", "cross_entropy"}, {"args", {c, t}}, {"ignore_index", -100}});
      },
      [](Builder& b, const std::string& c) {
        const Shape& sh = b.shape(c);
        if (sh.size() != 2 || sh[0] == 0) return false;
        const std::int64_t classes = b.rng.range(2, 4);
        const std::string w = fresh(b, c, {classes, sh[1]});
        const std::string t = targets(b, {sh[0]}, classes, -100);
        return b.node(
            {{"op", "linear_cross_entropy"}, {"args", {c, w, t}}, {"ignore_index", -100}});
      },
      [](Builder& b, const std::string& c) {  // a shortlist of 1 or 2 and one cluster
        const Shape& sh = b.shape(c);
        if (sh.size() != 2 || sh[0] == 0) return false;
        const std::int64_t shortlist = b.rng.range(1, 2), width = b.rng.range(1, 2),
                           words = b.rng.range(1, 3);
        const std::string head = fresh(b, c, {shortlist + 1, sh[1]});
        const std::string p = fresh(b, c, {width, sh[1]}), o = fresh(b, c, {words, width});
        const std::string t = targets(b, {sh[0]}, shortlist + words, -100);
        return b.node({{"op", "adaptive_softmax_loss"},
                       {"args", {c, head, p, o, t}},
                       {"ignore_index", -100}});
      },
  };
}

}  // namespace

void chain_case(Builder& b) {
  std::string current = b.input(random_shape(b.rng, 1, 3, false));
  const std::int64_t length = b.rng.range(2, 6);
  static const std::vector<Step> steps = chain_steps();
  static const std::vector<Step> finals = final_steps();
  for (int tries = 0; static_cast<std::int64_t>(b.nodes.size()) < length && tries < 60; ++tries) {
    const bool last = static_cast<std::int64_t>(b.nodes.size()) + 1 == length;
    const Step& step = last && b.rng.chance(0.3) ? b.rng.pick(finals) : b.rng.pick(steps);
    const std::size_t before = b.nodes.size();
    if (!step(b, current)) {
      if (b.failed) return;
      // A step that added inputs but no node leaves them unused: harmless.
      continue;
    }
    if (b.nodes.size() > before) current = b.last;
    if (numel_of(b.shape(current)) > 64) return;  // keep the cases small
  }
}

}  // namespace kiln::differential
