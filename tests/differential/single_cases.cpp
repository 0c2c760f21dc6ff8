// Valid single-op cases, one generator per family: shapes, parameters and layouts a user could
// pass (tests/differential/builder.h).
#include <algorithm>
#include <cmath>

#include "tests/differential/builder.h"

namespace kiln::differential {

namespace {

void binary_case(Builder& b, const std::string& op) {
  const Shape s = random_shape(b.rng);
  if (b.rng.chance(0.3)) {  // the tensor-scalar form
    const double scalar = b.rng.pick<double>(
        {1.5, -2.5, 0.1, 3.0, 1.00390625, -0.0, 1e-3, 255.5, INFINITY, std::nan("")});
    const std::string x = b.input(s);
    b.node({{"op", op + "_scalar"}, {"args", {x}}, {"scalar", value_json(scalar)}});
    return;
  }
  Shape t = partner(b.rng, s);
  const bool swap = b.rng.chance(0.3);
  const std::string x = b.input(swap ? t : s);
  const std::string y = b.input(swap ? s : t, op == "div" ? Domain::nonzero : Domain::any);
  b.node({{"op", op}, {"args", {x, y}}});
}

void unary_case(Builder& b, const std::string& op, Domain domain = Domain::any) {
  const std::string x = b.input(random_shape(b.rng), b.rng.chance(0.85) ? domain : Domain::any);
  b.node({{"op", op}, {"args", {x}}});
}

void scalar_first_case(Builder& b, const std::string& op) {
  const double scalar = b.rng.pick<double>({3.0, -1.5, 0.0, 0.1, 1e4});
  const std::string x = b.input(random_shape(b.rng), op == "rdiv" ? Domain::nonzero : Domain::any);
  b.node({{"op", op}, {"args", {x}}, {"scalar", scalar}});
}

void pow_case(Builder& b) {
  const double e = b.rng.pick<double>({2.0, 3.0, 0.5, 2.5, -1.0, -0.5, 0.0, 1.0, -2.0});
  const bool integral = e == std::floor(e);
  const std::string x = b.input(random_shape(b.rng), integral ? Domain::any : Domain::positive);
  b.node({{"op", "pow"}, {"args", {x}}, {"exponent", e}});
}

void compare_case(Builder& b) {
  const Shape s = random_shape(b.rng);
  const std::string x = b.input(s, Domain::any, false);
  const std::string y = b.input(partner(b.rng, s), Domain::any, false);
  b.node({{"op", b.rng.pick<std::string>({"eq", "ne", "lt", "le", "gt", "ge"})}, {"args", {x, y}}});
}

void reduction_case(Builder& b, const std::string& op) {
  Shape s = random_shape(b.rng);
  const auto rank = static_cast<std::int64_t>(s.size());
  std::vector<std::int64_t> dims;
  if (rank > 0 && b.rng.chance(0.7)) dims = some_dims(b.rng, rank, b.rng.range(1, rank));
  if (op == "mean") {  // the mean over no elements is an error case
    if (dims.empty()) {
      for (auto& d : s) d = std::max<std::int64_t>(d, 1);
    } else {
      for (std::int64_t d : dims)
        s[(d + rank) % rank] = std::max<std::int64_t>(s[(d + rank) % rank], 1);
    }
  }
  const std::string x = b.input(s);
  b.node({{"op", op}, {"args", {x}}, {"dims", dims}, {"keepdim", b.rng.chance(0.4)}});
}

void max_case(Builder& b) {
  Shape s = random_shape(b.rng, 1);
  const std::int64_t dim = random_dim(b.rng, static_cast<std::int64_t>(s.size()));
  const auto rank = static_cast<std::int64_t>(s.size());
  auto& along = s[(dim + rank) % rank];
  along = std::max<std::int64_t>(along, 1);
  const std::string x = b.input(s);
  b.node({{"op", "max"}, {"args", {x}}, {"dim", dim}, {"keepdim", b.rng.chance(0.4)}});
}

void sum_to_case(Builder& b) {
  const Shape s = random_shape(b.rng, 1);
  Shape target(s.begin() + b.rng.below(static_cast<std::int64_t>(s.size()) + 1), s.end());
  for (auto& d : target)
    if (b.rng.chance(0.4)) d = 1;
  const std::string x = b.input(s);
  b.node({{"op", "sum_to"}, {"args", {x}}, {"shape", target}});
}

void matmul_case(Builder& b) {
  const auto dim = [&] { return b.rng.chance(0.08) ? 0 : b.rng.range(1, 4); };
  const std::int64_t n = dim(), k = dim(), m = dim();
  Shape sa{n, k}, sb{k, m};
  switch (b.rng.weighted({3, 1, 1, 1, 3})) {
    case 1:
      sa = {k};
      break;
    case 2:
      sb = {k};
      break;
    case 3:
      sa = {k}, sb = {k};
      break;
    case 4: {  // batched, the batch dims broadcast
      Shape batch = random_shape(b.rng, 1, 2);
      Shape other = partner(b.rng, batch);
      if (b.rng.chance(0.5)) std::swap(batch, other);
      sa.insert(sa.begin(), batch.begin(), batch.end());
      sb.insert(sb.begin(), other.begin(), other.end());
      break;
    }
    default:
      break;
  }
  const std::string x = b.input(sa), y = b.input(sb);
  b.node({{"op", "matmul"}, {"args", {x, y}}});
}

void linear_case(Builder& b) {
  const std::int64_t rows = b.rng.range(0, 4), in = b.rng.range(0, 4), out = b.rng.range(0, 4);
  json args = {b.input({rows, in}), b.input({out, in})};
  if (b.rng.chance(0.6))
    args.push_back(b.input({out}, Domain::any, true, false, compute_dtype(b.dtype)));
  b.node({{"op", "linear"}, {"args", args}});
}

void view_case(Builder& b, const std::string& op) {
  Shape s = random_shape(b.rng, op == "transpose" || op == "permute" || op == "narrow" ||
                                        op == "slice" || op == "select"
                                    ? 1
                                    : 0);
  const auto rank = static_cast<std::int64_t>(s.size());
  json view;
  if (op == "view" || op == "reshape") {
    view = {op, shape_of(b.rng, numel_of(s))};
  } else if (op == "transpose") {
    view = {op, random_dim(b.rng, rank), random_dim(b.rng, rank)};
  } else if (op == "permute") {
    std::vector<std::int64_t> p = some_dims(b.rng, rank, rank);
    view = {op, p};
  } else if (op == "narrow") {
    const std::int64_t d = random_dim(b.rng, rank), n = s[(d + rank) % rank];
    const std::int64_t start = b.rng.range(0, n);
    view = {op, d, start, b.rng.range(0, n - start)};
  } else if (op == "slice") {
    const std::int64_t d = random_dim(b.rng, rank), n = s[(d + rank) % rank];
    const std::int64_t start = b.rng.range(-1, n),
                       end = b.rng.range(start < 0 ? n - 1 : start, n + 2);
    view = {op, d, start, end, b.rng.range(1, 3)};
  } else if (op == "select") {
    const std::int64_t d = random_dim(b.rng, rank);
    auto& n = s[(d + rank) % rank];
    n = std::max<std::int64_t>(n, 1);
    view = {op, d, b.rng.range(-n, n - 1)};
  } else if (op == "expand") {
    Shape target = s;
    for (auto& d : s)
      if (b.rng.chance(0.5)) d = 1;
    target = s;
    for (auto& d : target)
      if (d == 1 && b.rng.chance(0.7)) d = b.rng.range(0, 3);
    if (b.rng.chance(0.4)) target.insert(target.begin(), b.rng.range(1, 3));
    json shape = target;
    if (!target.empty() && b.rng.chance(0.3)) shape[target.size() - 1] = -1;
    view = {op, shape};
  } else if (op == "squeeze") {
    if (rank == 0) s = {1};
    const auto r = static_cast<std::int64_t>(s.size());
    const std::int64_t d = random_dim(b.rng, r);
    if (b.rng.chance(0.7)) s[(d + r) % r] = 1;
    view = {op, d};
  } else {  // unsqueeze
    view = {op, b.rng.range(-rank - 1, rank)};
  }
  const std::string x = b.input(s, Domain::any, true, op == "view" && b.rng.chance(0.5));
  b.node({{"op", op}, {"args", {x}}, {"view", view}});
}

void softmax_case(Builder& b, const std::string& op) {
  const Shape s = random_shape(b.rng, 1);
  const std::string x = b.input(s);
  b.node(
      {{"op", op}, {"args", {x}}, {"dim", random_dim(b.rng, static_cast<std::int64_t>(s.size()))}});
}

void causal_softmax_case(Builder& b) {
  Shape s = random_shape(b.rng, 2, 4);
  const std::int64_t tq = s[s.size() - 2];
  const std::int64_t offset = b.rng.chance(0.5) ? 0 : b.rng.range(0, 2);
  s.back() = tq + offset + (b.rng.chance(0.3) ? 1 : 0);  // keys no query sees are allowed
  const std::string x = b.input(s);
  b.node({{"op", "causal_softmax"}, {"args", {x}}, {"offset", offset}});
}

void layer_norm_case(Builder& b) {
  Shape s = random_shape(b.rng, 1);
  s.back() = std::max<std::int64_t>(s.back(), 1);
  const std::int64_t c = s.back();
  // Parameters stay float32 under mixed precision: a bf16 x takes float32 gamma and beta.
  const std::string x = b.input(s);
  const DType params = compute_dtype(b.dtype);
  const std::string gamma = b.input({c}, Domain::any, true, false, params);
  const std::string beta = b.input({c}, Domain::any, true, false, params);
  b.node({{"op", "layer_norm"},
          {"args", {x, gamma, beta}},
          {"eps", b.rng.pick<double>({1e-5, 1e-2, 0.3})}});
}

void cross_entropy_case(Builder& b) {
  Shape s = random_shape(b.rng, 1, 3, false);
  s.back() = std::max<std::int64_t>(s.back(), 2);
  const std::int64_t classes = s.back();
  const std::int64_t ignore = b.rng.chance(0.7) ? -100 : b.rng.range(0, classes - 1);
  const std::string logits = b.input(s);
  const std::string t = targets(b, Shape(s.begin(), s.end() - 1), classes, ignore);
  b.node({{"op", "cross_entropy"}, {"args", {logits, t}}, {"ignore_index", ignore}});
}

void linear_cross_entropy_case(Builder& b) {
  const std::int64_t rows = b.rng.range(1, 4), d = b.rng.range(0, 4), classes = b.rng.range(2, 5);
  const std::int64_t ignore = b.rng.chance(0.7) ? -100 : b.rng.range(0, classes - 1);
  const std::string x = b.input({rows, d}), w = b.input({classes, d});
  const std::string t = targets(b, {rows}, classes, ignore);
  b.node({{"op", "linear_cross_entropy"}, {"args", {x, w, t}}, {"ignore_index", ignore}});
}

// An adaptive softmax (core/ops/adaptive_softmax.h): a shortlist of 1 to 3 ranks and 1 or 2
// clusters of width d_i 1 to 3 and 1 to 4 words each; the loss's targets spread over all V
// ranks, some ignored.
void adaptive_softmax_case(Builder& b, const std::string& op) {
  const std::int64_t rows = b.rng.range(1, 4), d = b.rng.range(1, 4);
  const std::int64_t shortlist = b.rng.range(1, 3), clusters = b.rng.range(1, 2);
  json args = {b.input({rows, d}), b.input({shortlist + clusters, d})};
  std::int64_t classes = shortlist;
  for (std::int64_t i = 0; i < clusters; ++i) {
    const std::int64_t width = b.rng.range(1, 3), words = b.rng.range(1, 4);
    args.push_back(b.input({width, d}));
    args.push_back(b.input({words, width}));
    classes += words;
  }
  if (op == "adaptive_log_softmax") {
    b.node({{"op", op}, {"args", args}});
    return;
  }
  const std::int64_t ignore = b.rng.chance(0.7) ? -100 : b.rng.range(0, classes - 1);
  args.push_back(targets(b, {rows}, classes, ignore));
  b.node({{"op", op}, {"args", args}, {"ignore_index", ignore}});
}

void index_select_case(Builder& b) {
  Shape s = random_shape(b.rng, 1);
  const auto rank = static_cast<std::int64_t>(s.size());
  const std::int64_t dim = random_dim(b.rng, rank);
  const std::int64_t n = s[(dim + rank) % rank];
  const std::string x = b.input(s);
  const std::string ids = b.ids({n == 0 ? 0 : b.rng.range(0, 5)}, 0, n - 1);
  b.node({{"op", "index_select"}, {"args", {x, ids}}, {"dim", dim}});
}

void embedding_case(Builder& b) {
  const std::int64_t rows = b.rng.range(1, 5), cols = b.rng.range(0, 4);
  const std::string table = b.input({rows, cols});
  const std::string ids = b.ids(random_shape(b.rng, 0, 2), 0, rows - 1);
  b.node({{"op", "embedding"}, {"args", {table, ids}}});
}

void dropout_case(Builder& b) {
  const std::string x = b.input(random_shape(b.rng));
  b.node({{"op", "dropout"},
          {"args", {x}},
          {"p", b.rng.pick<double>({0.1, 0.3, 0.5, 0.0})},
          {"seed", b.rng.range(0, 1000)}});
}

void where_case(Builder& b) {
  const Shape s = random_shape(b.rng);
  Shape sc = partner(b.rng, s), sa = partner(b.rng, s), sb = partner(b.rng, s);
  std::string cond;
  switch (b.rng.below(3)) {
    case 0:
      cond = b.mask(sc, true);
      break;
    case 1:
      cond = b.mask(sc, false);
      break;
    default:
      cond = b.input(sc, Domain::any, false);  // any nonzero value is true
  }
  const std::string x = b.input(sa), y = b.input(sb);
  b.node({{"op", "where"}, {"args", {cond, x, y}}});
}

void masked_fill_case(Builder& b) {
  const Shape s = random_shape(b.rng);
  Shape m = s;
  m.erase(m.begin(), m.begin() + b.rng.below(static_cast<std::int64_t>(s.size()) + 1));
  for (auto& d : m)
    if (b.rng.chance(0.4)) d = 1;
  const std::string x = b.input(s);
  const std::string mask = b.mask(m, b.rng.chance(0.5));
  b.node({{"op", "masked_fill"},
          {"args", {x, mask}},
          {"value", value_json(b.rng.pick<double>({-7.5, 0.0, 2.0, INFINITY, -INFINITY}))}});
}

void cat_case(Builder& b) {
  const Shape s = random_shape(b.rng, 1);
  const auto rank = static_cast<std::int64_t>(s.size());
  const std::int64_t dim = random_dim(b.rng, rank);
  json args = json::array();
  for (std::int64_t i = b.rng.range(1, 4); i > 0; --i) {
    Shape piece = s;
    piece[(dim + rank) % rank] = b.rng.range(0, 3);
    args.push_back(b.input(piece));
  }
  b.node({{"op", "cat"}, {"args", args}, {"dim", dim}});
}

void split_case(Builder& b) {
  const Shape s = random_shape(b.rng, 1);
  const auto rank = static_cast<std::int64_t>(s.size());
  const std::int64_t dim = random_dim(b.rng, rank), n = s[(dim + rank) % rank];
  const std::string x = b.input(s);
  json node = {{"op", "split"}, {"args", {x}}, {"dim", dim}};
  std::int64_t pieces = 0;
  if (b.rng.chance(0.5)) {
    std::vector<std::int64_t> sizes;
    for (std::int64_t left = n; left > 0;) {
      const std::int64_t size = b.rng.range(0, left);
      sizes.push_back(size);
      left -= size;
    }
    if (sizes.empty() || b.rng.chance(0.2)) sizes.push_back(0);
    node["sizes"] = sizes;
    pieces = static_cast<std::int64_t>(sizes.size());
  } else {
    const std::int64_t chunk = b.rng.range(1, 3);
    node["chunk"] = chunk;
    pieces = std::max<std::int64_t>(1, (n + chunk - 1) / chunk);
  }
  node["piece"] = b.rng.below(pieces);
  b.node(node);
}

void causal_attention_case(Builder& b) {
  const std::int64_t heads = b.rng.pick<std::int64_t>({1, 2, 4});
  std::vector<std::int64_t> kvs;
  for (std::int64_t kv = 1; kv <= heads; ++kv)
    if (heads % kv == 0) kvs.push_back(kv);
  const std::int64_t kv = b.rng.pick(kvs), d = b.rng.pick<std::int64_t>({1, 2, 3, 4});
  const std::int64_t B = b.rng.range(1, 2), T = b.rng.chance(0.1) ? 0 : b.rng.range(1, 4);
  const std::string x = b.input({B, T, (heads + 2 * kv) * d});
  const double p = b.rng.chance(0.3) ? 0.25 : 0.0;
  b.node({{"op", "causal_attention"},
          {"args", {x}},
          {"heads", heads},
          {"kv_heads", kv},
          {"p", p},
          {"seed", b.rng.range(0, 1000)},
          {"materialize", b.rng.chance(0.3)}});
}

void causal_attention_heads_case(Builder& b) {
  const std::int64_t heads = b.rng.pick<std::int64_t>({1, 2, 4});
  std::vector<std::int64_t> kvs;
  for (std::int64_t kv = 1; kv <= heads; ++kv)
    if (heads % kv == 0) kvs.push_back(kv);
  const std::int64_t kv = b.rng.pick(kvs), d = b.rng.pick<std::int64_t>({1, 2, 3, 4});
  const std::int64_t B = b.rng.range(1, 2), keys = b.rng.range(1, 4);
  const std::int64_t queries = b.rng.chance(0.1) ? 0 : b.rng.range(1, keys);
  const std::string q = b.input({B, heads, queries, d});
  const std::string k = b.input({B, kv, keys, d}), v = b.input({B, kv, keys, d});
  const double p = b.rng.chance(0.3) ? 0.25 : 0.0;
  b.node({{"op", "causal_attention_heads"},
          {"args", {q, k, v}},
          {"p", p},
          {"seed", b.rng.range(0, 1000)}});
}

}  // namespace

const std::map<std::string, Family>& single_cases() {
  static const std::map<std::string, Family> table = [] {
    std::map<std::string, Family> t;
    for (const char* op : {"add", "sub", "mul", "div"})
      t[op] = [op](Builder& b) { binary_case(b, op); };
    for (const char* op : {"rsub", "rdiv"}) t[op] = [op](Builder& b) { scalar_first_case(b, op); };
    for (const char* op : {"neg", "exp", "tanh", "sigmoid", "relu"})
      t[op] = [op](Builder& b) { unary_case(b, op); };
    for (const char* op : {"log", "sqrt"})
      t[op] = [op](Builder& b) { unary_case(b, op, Domain::positive); };
    t["pow"] = pow_case;
    t["gelu"] = [](Builder& b) {
      const std::string x = b.input(random_shape(b.rng));
      b.node({{"op", "gelu"}, {"args", {x}}, {"approximate", b.rng.chance(0.5) ? "tanh" : "none"}});
    };
    t["compare"] = compare_case;
    for (const char* op : {"sum", "mean"}) t[op] = [op](Builder& b) { reduction_case(b, op); };
    t["max"] = max_case;
    t["sum_to"] = sum_to_case;
    t["matmul"] = matmul_case;
    t["linear"] = linear_case;
    for (const char* op : {"view", "reshape", "transpose", "permute", "narrow", "slice", "select",
                           "expand", "squeeze", "unsqueeze"})
      t[op] = [op](Builder& b) { view_case(b, op); };
    t["clone"] = [](Builder& b) {
      const std::string x = b.input(random_shape(b.rng));
      b.node({{"op", "clone"}, {"args", {x}}});
    };
    for (const char* op : {"softmax", "log_softmax"})
      t[op] = [op](Builder& b) { softmax_case(b, op); };
    t["causal_softmax"] = causal_softmax_case;
    t["layer_norm"] = layer_norm_case;
    t["cross_entropy"] = cross_entropy_case;
    t["linear_cross_entropy"] = linear_cross_entropy_case;
    for (const char* op : {"adaptive_softmax_loss", "adaptive_log_softmax"})
      t[op] = [op](Builder& b) { adaptive_softmax_case(b, op); };
    t["index_select"] = index_select_case;
    t["embedding"] = embedding_case;
    t["dropout"] = dropout_case;
    t["where"] = where_case;
    t["masked_fill"] = masked_fill_case;
    t["cat"] = cat_case;
    t["split"] = split_case;
    t["causal_attention"] = causal_attention_case;
    t["causal_attention_heads"] = causal_attention_heads_case;
    return t;
  }();
  return table;
}

}  // namespace kiln::differential
