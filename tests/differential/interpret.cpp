#include "tests/differential/interpret.h"

#include <functional>
#include <map>
#include <stdexcept>

namespace kiln::differential {

namespace {

using Args = std::vector<Tensor>;

std::int64_t param(const json& node, const char* name) { return node.at(name).get<std::int64_t>(); }
double real(const json& node, const char* name) { return json_value(node.at(name)); }
Shape shape_param(const json& node, const char* name) { return node.at(name).get<Shape>(); }
std::vector<std::int64_t> dims_param(const json& node, const char* name) {
  return node.at(name).get<std::vector<std::int64_t>>();
}

// The op's inputs, checked for count: a malformed case is the generator's bug, not a kiln
// error (std::invalid_argument, which run_case does not catch).
const Args& arity(const Args& args, std::size_t least, std::size_t most, const json& node) {
  if (args.size() < least || args.size() > most)
    throw std::invalid_argument(fmt::format("differential: {} takes {} to {} arguments, not {}",
                                            node.at("op").get<std::string>(), least, most,
                                            args.size()));
  return args;
}

using OpFn = std::function<Tensor(const json&, const Args&, Tensor*)>;

Tensor unary(const json& node, const Args& a, const std::function<Tensor(const Tensor&)>& f) {
  return f(arity(a, 1, 1, node)[0]);
}

Tensor binary(const json& node, const Args& a,
              const std::function<Tensor(const Tensor&, const Tensor&)>& f) {
  arity(a, 2, 2, node);
  return f(a[0], a[1]);
}

// The dropout generator of a node: a fresh Generator(seed), so kiln and the replay agree on
// the mask (the case carries it for the replay).
Generator node_generator(const json& node) {
  return Generator(node.at("seed").get<std::uint64_t>());
}

// An adaptive softmax's weights from its arguments x, head, P_0, O_0, ..., P_n-1, O_n-1 (then
// the targets, for the loss: `clusters_end` is where the cluster pairs stop).
AdaptiveSoftmaxWeights adaptive_weights(const Args& a, std::size_t clusters_end, const json& node) {
  if (a.size() < 2 || clusters_end < 2 || clusters_end > a.size() || clusters_end % 2 != 0)
    throw std::invalid_argument(
        fmt::format("differential: {} takes x, head, then a projection and an output per "
                    "cluster, not {} arguments",
                    node.at("op").get<std::string>(), a.size()));
  AdaptiveSoftmaxWeights w{a[1], {}, {}};
  for (std::size_t i = 2; i < clusters_end; i += 2) {
    w.projections.push_back(a[i]);
    w.outputs.push_back(a[i + 1]);
  }
  return w;
}

const std::map<std::string, OpFn>& ops() {
  static const std::map<std::string, OpFn> table = [] {
    std::map<std::string, OpFn> t;
    const auto un = [&t](const std::string& name, Tensor (*f)(const Tensor&)) {
      t[name] = [f](const json& n, const Args& a, Tensor*) { return unary(n, a, f); };
    };
    un("neg", neg), un("exp", exp), un("log", log), un("sqrt", sqrt), un("tanh", tanh);
    un("sigmoid", sigmoid), un("relu", relu);
    const auto bin = [&t](const std::string& name, Tensor (*f)(const Tensor&, const Tensor&)) {
      t[name] = [f](const json& n, const Args& a, Tensor*) { return binary(n, a, f); };
    };
    bin("add", add), bin("sub", sub), bin("mul", mul), bin("div", div), bin("eq", eq);
    bin("ne", ne), bin("lt", lt), bin("le", le), bin("gt", gt), bin("ge", ge);
    bin("matmul", matmul);
    const auto scalar = [&t](const std::string& name, Tensor (*f)(const Tensor&, double)) {
      t[name] = [f](const json& n, const Args& a, Tensor*) {
        return f(arity(a, 1, 1, n)[0], real(n, "scalar"));
      };
    };
    scalar("add_scalar", add), scalar("sub_scalar", sub), scalar("mul_scalar", mul);
    scalar("div_scalar", div);
    t["rsub"] = [](const json& n, const Args& a, Tensor*) {
      return rsub(real(n, "scalar"), arity(a, 1, 1, n)[0]);
    };
    t["rdiv"] = [](const json& n, const Args& a, Tensor*) {
      return rdiv(real(n, "scalar"), arity(a, 1, 1, n)[0]);
    };
    t["pow"] = [](const json& n, const Args& a, Tensor*) {
      return pow(arity(a, 1, 1, n)[0], real(n, "exponent"));
    };
    t["gelu"] = [](const json& n, const Args& a, Tensor*) {
      const bool tanh_form = n.at("approximate").get<std::string>() == "tanh";
      return gelu(arity(a, 1, 1, n)[0],
                  tanh_form ? GeluApproximation::tanh : GeluApproximation::none);
    };
    t["sum"] = [](const json& n, const Args& a, Tensor*) {
      return sum(arity(a, 1, 1, n)[0], dims_param(n, "dims"), n.at("keepdim").get<bool>());
    };
    t["mean"] = [](const json& n, const Args& a, Tensor*) {
      return mean(arity(a, 1, 1, n)[0], dims_param(n, "dims"), n.at("keepdim").get<bool>());
    };
    t["max"] = [](const json& n, const Args& a, Tensor* indices) {
      MaxResult r = max(arity(a, 1, 1, n)[0], param(n, "dim"), n.at("keepdim").get<bool>());
      *indices = r.indices;
      return r.values;
    };
    t["sum_to"] = [](const json& n, const Args& a, Tensor*) {
      return sum_to(arity(a, 1, 1, n)[0], shape_param(n, "shape"));
    };
    t["linear"] = [](const json& n, const Args& a, Tensor*) {
      arity(a, 2, 3, n);
      return linear(a[0], a[1], a.size() == 3 ? a[2] : Tensor());
    };
    for (const char* view : {"transpose", "permute", "slice", "narrow", "select", "expand",
                             "squeeze", "unsqueeze", "view", "reshape"}) {
      t[view] = [view](const json& n, const Args& a, Tensor*) {
        const json& spec = n.at("view");
        if (spec.at(0).get<std::string>() != view)
          throw std::invalid_argument("differential: a view node's op and view differ");
        return apply_view(arity(a, 1, 1, n)[0], spec);
      };
    }
    t["clone"] = [](const json& n, const Args& a, Tensor*) { return arity(a, 1, 1, n)[0].clone(); };
    t["softmax"] = [](const json& n, const Args& a, Tensor*) {
      return softmax(arity(a, 1, 1, n)[0], param(n, "dim"));
    };
    t["log_softmax"] = [](const json& n, const Args& a, Tensor*) {
      return log_softmax(arity(a, 1, 1, n)[0], param(n, "dim"));
    };
    t["causal_softmax"] = [](const json& n, const Args& a, Tensor*) {
      return causal_softmax(arity(a, 1, 1, n)[0], param(n, "offset"));
    };
    t["layer_norm"] = [](const json& n, const Args& a, Tensor*) {
      arity(a, 3, 3, n);
      return layer_norm(a[0], a[1], a[2], real(n, "eps"));
    };
    t["cross_entropy"] = [](const json& n, const Args& a, Tensor*) {
      arity(a, 2, 2, n);
      return cross_entropy(a[0], a[1], param(n, "ignore_index"));
    };
    t["linear_cross_entropy"] = [](const json& n, const Args& a, Tensor*) {
      arity(a, 3, 3, n);
      return linear_cross_entropy(a[0], a[1], a[2], param(n, "ignore_index"));
    };
    t["adaptive_softmax_loss"] = [](const json& n, const Args& a, Tensor*) {
      const std::size_t targets = a.empty() ? 0 : a.size() - 1;
      return adaptive_softmax_loss(a.at(0), adaptive_weights(a, targets, n), a[targets],
                                   param(n, "ignore_index"));
    };
    t["adaptive_log_softmax"] = [](const json& n, const Args& a, Tensor*) {
      return adaptive_log_softmax(a.at(0), adaptive_weights(a, a.size(), n));
    };
    t["index_select"] = [](const json& n, const Args& a, Tensor*) {
      arity(a, 2, 2, n);
      return index_select(a[0], param(n, "dim"), a[1]);
    };
    t["embedding"] = [](const json& n, const Args& a, Tensor*) {
      return binary(n, a,
                    [](const Tensor& table, const Tensor& ids) { return embedding(table, ids); });
    };
    t["dropout"] = [](const json& n, const Args& a, Tensor*) {
      Generator gen = node_generator(n);
      return dropout(arity(a, 1, 1, n)[0], real(n, "p"), true, &gen);
    };
    t["causal_attention"] = [](const json& n, const Args& a, Tensor*) {
      Generator gen = node_generator(n);
      const double p = real(n, "p");
      Tensor probabilities;
      return causal_attention(arity(a, 1, 1, n)[0], param(n, "heads"), param(n, "kv_heads"), p,
                              p > 0, &gen,
                              n.value("materialize", false) ? &probabilities : nullptr);
    };
    t["causal_attention_heads"] = [](const json& n, const Args& a, Tensor*) {
      arity(a, 3, 3, n);
      Generator gen = node_generator(n);
      const double p = real(n, "p");
      return causal_attention_heads(a[0], a[1], a[2], p, p > 0, &gen);
    };
    t["where"] = [](const json& n, const Args& a, Tensor*) {
      arity(a, 3, 3, n);
      return where(a[0], a[1], a[2]);
    };
    t["masked_fill"] = [](const json& n, const Args& a, Tensor*) {
      arity(a, 2, 2, n);
      return masked_fill(a[0], a[1], real(n, "value"));
    };
    t["cat"] = [](const json& n, const Args& a, Tensor*) { return cat(a, param(n, "dim")); };
    t["split"] = [](const json& n, const Args& a, Tensor*) {
      const Tensor& x = arity(a, 1, 1, n)[0];
      const std::vector<Tensor> pieces = n.contains("sizes")
                                             ? split(x, dims_param(n, "sizes"), param(n, "dim"))
                                             : split(x, param(n, "chunk"), param(n, "dim"));
      const std::int64_t piece = param(n, "piece");
      KILN_CHECK(piece >= 0 && piece < static_cast<std::int64_t>(pieces.size()),
                 "split: piece {} of {}", piece, pieces.size());
      return pieces[piece];
    };
    return t;
  }();
  return table;
}

}  // namespace

void make_input(const json& in, Tensor& leaf, Tensor& value) {
  const DType dtype = dtype_named(in.at("dtype").get<std::string>());
  const Shape base = in.at("base").get<Shape>();
  if (dtype == DType::i64) {
    leaf = from_vector(in.at("values").get<std::vector<std::int64_t>>(), base);
    value = leaf;
  } else {
    leaf = from_vector(json_values(in.at("values")), base).to(compute_dtype(dtype));
    if (in.value("grad", false)) leaf.requires_grad_();
    value = dtype == DType::bf16 ? leaf.to(DType::bf16) : leaf;
  }
  for (const json& view : in.value("views", json::array())) value = apply_view(value, view);
}

Tensor apply_view(const Tensor& t, const json& v) {
  const std::string kind = v.at(0).get<std::string>();
  const auto i = [&](std::size_t k) { return v.at(k).get<std::int64_t>(); };
  if (kind == "transpose") return t.transpose(i(1), i(2));
  if (kind == "permute") return t.permute(v.at(1).get<std::vector<std::int64_t>>());
  if (kind == "slice") return t.slice(i(1), i(2), i(3), i(4));
  if (kind == "narrow") return t.narrow(i(1), i(2), i(3));
  if (kind == "select") return t.select(i(1), i(2));
  if (kind == "expand") return t.expand(v.at(1).get<Shape>());
  if (kind == "squeeze") return t.squeeze(i(1));
  if (kind == "unsqueeze") return t.unsqueeze(i(1));
  if (kind == "view") return t.view(v.at(1).get<Shape>());
  if (kind == "reshape") return t.reshape(v.at(1).get<Shape>());
  throw std::invalid_argument("differential: unknown view " + kind);
}

Tensor apply_node(const json& node, const std::vector<Tensor>& args, Tensor* indices) {
  const std::string op = node.at("op").get<std::string>();
  const auto found = ops().find(op);
  if (found == ops().end()) throw std::invalid_argument("differential: unknown op " + op);
  return found->second(node, args, indices);
}

std::vector<std::string> node_ops() {
  std::vector<std::string> names;
  for (const auto& [name, fn] : ops()) names.push_back(name);
  return names;
}

Answers run_case(const json& spec) {
  Answers answers;
  std::map<std::string, Tensor> named;
  std::vector<Tensor> leaves;
  const json& inputs = spec.at("inputs");
  try {
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      Tensor leaf, value;
      make_input(inputs[i], leaf, value);
      leaves.push_back(leaf);
      named[fmt::format("x{}", i)] = value;
    }
  } catch (const Error& e) {
    answers.error_node = -1;
    answers.error = e.what();
    return answers;
  }
  const json& nodes = spec.at("nodes");
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const json& node = nodes[i];
    Args args;
    for (const json& ref : node.at("args")) args.push_back(named.at(ref.get<std::string>()));
    Tensor indices;
    try {
      const Tensor out = apply_node(node, args, &indices);
      answers.nodes.push_back(out);
      answers.indices.push_back(indices);
      named[fmt::format("n{}", i)] = out;
    } catch (const Error& e) {
      answers.error_node = static_cast<int>(i);
      answers.error = e.what();
      return answers;
    }
  }
  answers.grads.resize(inputs.size());
  if (answers.nodes.empty()) return answers;
  const Tensor& y = answers.nodes.back();
  if (!y.requires_grad()) return answers;
  try {
    const Tensor w = upstream_weights(y.shape(), compute_dtype(y.dtype()));
    sum(mul(y, w)).backward();
    for (std::size_t i = 0; i < leaves.size(); ++i)
      if (leaves[i].requires_grad()) {
        // An input the loss does not reach has no gradient: zeros, as PyTorch's
        // torch.autograd.grad(..., allow_unused) materialized.
        answers.grads[i] = leaves[i].grad().defined()
                               ? leaves[i].grad()
                               : zeros(leaves[i].shape(), {leaves[i].dtype()});
      }
  } catch (const Error& e) {
    answers.backward_error = e.what();
  }
  return answers;
}

json answers_json(const Answers& a) {
  json nodes = json::array();
  for (std::size_t i = 0; i < a.nodes.size(); ++i) {
    json node = tensor_json(a.nodes[i]);
    if (a.indices[i].defined()) node["indices"] = tensor_json(a.indices[i])["values"];
    nodes.push_back(node);
  }
  json grads = json::array();
  for (const Tensor& g : a.grads) grads.push_back(g.defined() ? tensor_json(g) : json());
  json out = {{"nodes", nodes}, {"grads", grads}};
  if (a.error_node) {
    out["error_node"] = *a.error_node;
    out["error"] = a.error;
  }
  if (!a.backward_error.empty()) out["backward_error"] = a.backward_error;
  return out;
}

}  // namespace kiln::differential
