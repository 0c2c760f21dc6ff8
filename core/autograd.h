// Reverse-mode automatic differentiation over a dynamic graph.
//
// An op whose inputs need a gradient (with grad mode on) records a Node on its output: the op's
// name, an edge to each input's node (leaves get an accumulator that adds into .grad), the
// tensors it saved, and its backward function. Every op defines that function right above its
// forward, through record():
//
//   Tensor out = ...forward...;
//   record("mul", out, {a, b}, /*saved=*/{a, b}, [](const Tensor& g, const Saved& s) -> Grads {
//     return {g * s[1], g * s[0]};   // d(a*b)/da = b, d(a*b)/db = a
//   });
//
// Backward gets the gradient of the output and returns one gradient per input (an undefined
// Tensor where an input needs none). Shapes are checked against the inputs. Saved tensors are
// stored detached (an output saved with its own node would be a reference cycle) and are checked
// against their version counter: a saved tensor modified in place is an error at backward time.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/profiler.h"
#include "core/tensor.h"

namespace kiln {

using Grads = std::vector<Tensor>;

// The tensors an op saved for its backward, unpacked after the version check, and which inputs
// need a gradient (so backward can skip the others).
class Saved {
 public:
  Saved(std::span<const Tensor> tensors, std::span<const bool> needs_grad)
      : tensors_(tensors), needs_grad_(needs_grad) {}
  const Tensor& operator[](std::size_t i) const { return tensors_[i]; }
  bool needs_grad(std::size_t input) const { return needs_grad_[input]; }

 private:
  std::span<const Tensor> tensors_;
  std::span<const bool> needs_grad_;
};

using BackwardFn = std::function<Grads(const Tensor& grad_output, const Saved& saved)>;
// Adds an op's gradient for its first input into `gradient`, an existing dense gradient of that
// input, in place (see record_sparse).
using AddIntoFn =
    std::function<void(const Tensor& grad_output, const Saved& saved, const Tensor& gradient)>;

// What backward checks a returned gradient against.
struct InputMeta {
  Shape shape;
  DType dtype;
  Device device;
};

struct Edge {
  std::shared_ptr<Node> node;  // null: this input needs no gradient
  InputMeta input;
};

class Node {
 public:
  Node(std::string_view name, std::vector<Edge> next_edges);
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  std::string_view name() const { return name_; }
  // The profiler family that was open when the op ran forward; backward is charged to it.
  profile::Family family() const { return family_; }
  const std::vector<Edge>& next_edges() const { return next_edges_; }
  // Gradients for the inputs, given the gradient of the output.
  virtual Grads apply(const Tensor& grad_output) = 0;
  // For a node whose only gradient is a sparse one for input 0: adds it into `gradient` (that
  // input's dense gradient so far, referenced by nothing else) and returns true; false when the
  // node cannot, and apply() must run.
  virtual bool add_into_first_input(const Tensor& /*grad_output*/, const Tensor& /*gradient*/) {
    return false;
  }
  // Frees what apply needs (after a backward without retain_graph).
  virtual void release() {}

  static std::int64_t live_count();  // Nodes alive now (leak tests)

 private:
  std::string_view name_;
  std::vector<Edge> next_edges_;
  profile::Family family_;
};

// Records the backward of an op on `output` when grad mode is on and an input requires grad.
// `name` must be a string literal (it is kept as a view).
void record(std::string_view name, const Tensor& output, std::initializer_list<Tensor> inputs,
            std::initializer_list<Tensor> saved, BackwardFn backward);
void record(std::string_view name, const Tensor& output, const std::vector<Tensor>& inputs,
            const std::vector<Tensor>& saved, BackwardFn backward);

// Like record(), for an op whose gradient for its first input touches few of that input's elements
// (a row gather: an embedding lookup). When another op has already given that input a dense
// gradient, backward calls add_into to add this op's gradient into it in place, instead of
// `backward` materialising a mostly-zero tensor the size of the input and adding it: for the
// tied embedding of a language model, a (V, d) zero fill and add per step. Only for ops whose
// other inputs never need a gradient.
void record_sparse(std::string_view name, const Tensor& output,
                   std::initializer_list<Tensor> inputs, std::initializer_list<Tensor> saved,
                   BackwardFn backward, AddIntoFn add_into);

// True when grad mode is on and some input requires grad: the op will record a node. Ops use it
// to skip saving work (e.g. a dropout mask) that only backward needs.
bool any_requires_grad(std::initializer_list<Tensor> inputs);

// Grad mode, per thread. Off inside NoGradGuard (evaluation, optimizer updates, backward).
bool grad_mode_enabled();

class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Runs backward from `root` (Tensor::backward calls this).
void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph);

}  // namespace kiln
