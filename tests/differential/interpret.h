// A differential case run through kiln (docs/differential-testing.md). A case is JSON:
//   {"inputs": [{"dtype", "base": shape, "values", "views": [[view, args..], ..], "grad"}, ..],
//    "nodes": [{"op", "args": ["x0", "n1", ..], parameters..}, ..]}
// Input i is "x<i>": its base tensor (a bf16 input is a float32 leaf converted to bf16, so that
// its gradient exists) with its views applied in order; node i is "n<i>", the op applied to its
// arguments. The gradient is that of L = sum(w * y) for the last node's y (upstream_weights),
// with respect to every input base marked "grad".
#pragma once

#include <string>
#include <vector>

#include "tests/differential/case_json.h"

namespace kiln::differential {

struct Answers {
  std::vector<Tensor> nodes;    // each node's value, until an error
  std::vector<Tensor> indices;  // max's indices; undefined for other nodes
  // Where kiln raised: -1 while building the inputs, i at node i, none when it did not.
  std::optional<int> error_node;
  std::string error;
  std::vector<Tensor> grads;  // per input: dL/d(base), undefined when not asked for
  std::string backward_error;
};

Answers run_case(const json& spec);

// One node's op on its arguments (max's indices into *indices). Raises kiln's errors.
Tensor apply_node(const json& node, const std::vector<Tensor>& args, Tensor* indices);

// An input's base tensor (float32 for bf16, requiring grad when the input says so) and the
// tensor the nodes read: the base in the input's dtype with its views applied.
void make_input(const json& in, Tensor& leaf, Tensor& value);

// The op names apply_node knows.
std::vector<std::string> node_ops();

// {"nodes": [tensor_json.., with "indices" for max], "grads": [tensor_json or null],
//  "error_node", "error", "backward_error"} (the error keys only when kiln raised).
json answers_json(const Answers& answers);

// The view ops shared by inputs' "views" and nodes: ["transpose", i, j], ["permute", dims],
// ["slice", dim, start, end, step], ["narrow", dim, start, length], ["select", dim, index],
// ["expand", shape], ["squeeze", dim], ["unsqueeze", dim], ["view", shape], ["reshape", shape].
Tensor apply_view(const Tensor& t, const json& view);

}  // namespace kiln::differential
