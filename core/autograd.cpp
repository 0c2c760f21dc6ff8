#include "core/autograd.h"

#include <algorithm>
#include <atomic>
#include <unordered_map>
#include <unordered_set>

#include "core/autocast.h"
#include "core/ops/elementwise.h"
#include "core/ops/factories.h"
#include "core/storage.h"
#include "core/tensor_impl.h"

namespace kiln {

namespace {

std::atomic<std::int64_t> live_nodes{0};
thread_local bool grad_enabled = true;

// A tensor saved for backward, with the version of its storage at the time it was saved.
struct SavedTensor {
  Tensor tensor;
  std::uint64_t version;
};

// The node of a differentiable op: its backward function and saved tensors.
class FunctionNode final : public Node {
 public:
  FunctionNode(std::string_view name, std::vector<Edge> edges, std::vector<SavedTensor> saved,
               const std::vector<bool>& needs_grad, BackwardFn backward, AddIntoFn add_into)
      : Node(name, std::move(edges)),
        saved_(std::move(saved)),
        inputs_(needs_grad.size()),
        needs_grad_(new bool[needs_grad.size()]),
        backward_(std::move(backward)),
        add_into_(std::move(add_into)) {
    std::copy(needs_grad.begin(), needs_grad.end(), needs_grad_.get());
  }

  Grads apply(const Tensor& grad_output) override {
    KILN_CHECK(backward_ != nullptr,
               "{}: backward through a graph that was already freed; call the first backward() "
               "with retain_graph = true to backpropagate through it twice",
               name());
    const std::vector<Tensor> unpacked = unpack();
    return backward_(grad_output, saved_view(unpacked));
  }

  bool add_into_first_input(const Tensor& grad_output, const Tensor& gradient) override {
    if (add_into_ == nullptr || backward_ == nullptr) return false;
    const std::vector<Tensor> unpacked = unpack();
    add_into_(grad_output, saved_view(unpacked), gradient);
    return true;
  }

  void release() override {
    saved_.clear();
    saved_.shrink_to_fit();
    backward_ = nullptr;
    add_into_ = nullptr;
  }

 private:
  // The saved tensors, after checking that none was modified in place since the forward.
  std::vector<Tensor> unpack() const {
    std::vector<Tensor> unpacked;
    unpacked.reserve(saved_.size());
    for (const SavedTensor& s : saved_) {
      KILN_CHECK(!s.tensor.defined() || s.tensor.version() == s.version,
                 "{}: a tensor of shape {} saved for backward was modified in place (version {} "
                 "-> {}); clone() it before modifying it",
                 name(), s.tensor.shape(), s.version, s.tensor.version());
      unpacked.push_back(s.tensor);
    }
    return unpacked;
  }

  Saved saved_view(const std::vector<Tensor>& unpacked) const {
    return Saved(unpacked, std::span<const bool>(needs_grad_.get(), inputs_));
  }

  std::vector<SavedTensor> saved_;
  std::size_t inputs_;
  std::unique_ptr<bool[]> needs_grad_;  // bool[], not vector<bool>: Saved takes a span of it
  BackwardFn backward_;
  AddIntoFn add_into_;
};

bool exclusively_owned(const Tensor& t) {
  return t.impl_ptr().use_count() == 1 && t.storage().use_count() == 1 && t.is_contiguous() &&
         t.offset() == 0;
}

// The node that adds incoming gradients into a leaf's .grad.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf)
      : Node("AccumulateGrad", {}), leaf_(std::move(leaf)) {}

  Grads apply(const Tensor& grad) override {
    AutogradMeta& meta = leaf_->autograd_meta();
    if (!meta.grad.defined()) {
      meta.grad = exclusively_owned(grad) ? grad : grad.clone();
    } else {
      meta.grad.add_(grad);
    }
    return {};
  }

 private:
  std::shared_ptr<TensorImpl> leaf_;
};

std::shared_ptr<Node> accumulator_of(const Tensor& leaf) {
  AutogradMeta& meta = leaf.impl()->autograd_meta();
  std::shared_ptr<Node> node = meta.grad_accumulator.lock();
  if (!node) {
    node = std::make_shared<AccumulateGrad>(leaf.impl_ptr());
    meta.grad_accumulator = node;
  }
  return node;
}

// The node an edge to `input` points at: its grad_fn, a leaf's accumulator, or null.
std::shared_ptr<Node> gradient_edge(const Tensor& input) {
  if (!input.defined() || !input.requires_grad()) return nullptr;
  if (input.grad_fn()) return input.grad_fn();
  return accumulator_of(input);
}

template <typename Inputs, typename SavedList>
void record_impl(std::string_view name, const Tensor& output, const Inputs& inputs,
                 const SavedList& saved, BackwardFn backward, AddIntoFn add_into = nullptr) {
  if (!grad_enabled) return;
  std::vector<Edge> edges;
  std::vector<bool> needs;
  bool any = false;
  for (const Tensor& input : inputs) {
    std::shared_ptr<Node> node = gradient_edge(input);
    any = any || node != nullptr;
    needs.push_back(node != nullptr);
    InputMeta meta = input.defined() ? InputMeta{input.shape(), input.dtype(), input.device()}
                                     : InputMeta{{}, DType::f32, Device::cpu()};
    edges.push_back(Edge{std::move(node), std::move(meta)});
  }
  if (!any) return;
  std::vector<SavedTensor> saved_tensors;
  for (const Tensor& t : saved) {
    saved_tensors.push_back(t.defined() ? SavedTensor{t.detach(), t.version()}
                                        : SavedTensor{Tensor(), 0});
  }
  AutogradMeta& meta = output.impl()->autograd_meta();
  meta.grad_fn = std::make_shared<FunctionNode>(name, std::move(edges), std::move(saved_tensors),
                                                needs, std::move(backward), std::move(add_into));
}

}  // namespace

Node::Node(std::string_view name, std::vector<Edge> next_edges)
    : name_(name), next_edges_(std::move(next_edges)), family_(profile::current()) {
  live_nodes.fetch_add(1, std::memory_order_relaxed);
}

Node::~Node() { live_nodes.fetch_sub(1, std::memory_order_relaxed); }

std::int64_t Node::live_count() { return live_nodes.load(); }

void record(std::string_view name, const Tensor& output, std::initializer_list<Tensor> inputs,
            std::initializer_list<Tensor> saved, BackwardFn backward) {
  record_impl(name, output, inputs, saved, std::move(backward));
}

void record(std::string_view name, const Tensor& output, const std::vector<Tensor>& inputs,
            const std::vector<Tensor>& saved, BackwardFn backward) {
  record_impl(name, output, inputs, saved, std::move(backward));
}

void record_sparse(std::string_view name, const Tensor& output,
                   std::initializer_list<Tensor> inputs, std::initializer_list<Tensor> saved,
                   BackwardFn backward, AddIntoFn add_into) {
  record_impl(name, output, inputs, saved, std::move(backward), std::move(add_into));
}

bool any_requires_grad(std::initializer_list<Tensor> inputs) {
  if (!grad_enabled) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

bool grad_mode_enabled() { return grad_enabled; }

NoGradGuard::NoGradGuard() : previous_(grad_enabled) { grad_enabled = false; }
NoGradGuard::~NoGradGuard() { grad_enabled = previous_; }

namespace {

// Lets a node with a sparse gradient for input 0 (record_sparse) add it in place into that input's
// pending gradient, when one has arrived and nothing else references it.
bool add_into_pending(Node& node, const Tensor& grad_output,
                      std::unordered_map<Node*, Tensor>& pending) {
  const std::vector<Edge>& edges = node.next_edges();
  if (edges.empty() || !edges[0].node) return false;
  for (std::size_t i = 1; i < edges.size(); ++i)
    if (edges[i].node) return false;
  const auto it = pending.find(edges[0].node.get());
  if (it == pending.end() || !it->second.defined() || !exclusively_owned(it->second) ||
      it->second.shape() != edges[0].input.shape ||
      it->second.dtype() != compute_dtype(edges[0].input.dtype))
    return false;
  return node.add_into_first_input(grad_output, it->second);
}

}  // namespace

void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph) {
  KILN_CHECK(root.defined(), "backward: called on an undefined tensor");
  KILN_CHECK(root.requires_grad(),
             "backward: the tensor (shape {}) does not require grad; call requires_grad_() on a "
             "leaf it depends on",
             root.shape());
  NoGradGuard no_grad;
  // Each backward follows the dtypes its forward saved, whatever autocast says now.
  const Autocast full_precision(Precision::f32);
  Tensor seed = gradient;
  if (!seed.defined()) {
    KILN_CHECK(root.numel() == 1,
               "backward: a gradient can be implied only for a one-element tensor, got shape {}; "
               "pass the gradient explicitly",
               root.shape());
    seed = ones(root.shape(), {compute_dtype(root.dtype()), root.device()});
  } else {
    KILN_CHECK(seed.shape() == root.shape() && seed.dtype() == compute_dtype(root.dtype()) &&
                   seed.device() == root.device(),
               "backward: gradient {} {} on {} does not match the tensor {} {} on {}", seed.shape(),
               seed.dtype(), seed.device(), root.shape(), compute_dtype(root.dtype()),
               root.device());
  }
  const std::shared_ptr<Node> root_node = root.grad_fn() ? root.grad_fn() : accumulator_of(root);

  // Count, for every reachable node, the edges that lead into it (iterative: no recursion limit).
  std::unordered_map<Node*, int> dependencies;
  std::vector<Node*> stack{root_node.get()};
  std::unordered_set<Node*> seen{root_node.get()};
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const Edge& edge : node->next_edges()) {
      if (!edge.node) continue;
      ++dependencies[edge.node.get()];
      if (seen.insert(edge.node.get()).second) stack.push_back(edge.node.get());
    }
  }

  // Run nodes once all their incoming gradients have arrived, summing fan-in.
  std::unordered_map<Node*, Tensor> pending{{root_node.get(), seed}};
  std::vector<Node*> ready{root_node.get()};
  while (!ready.empty()) {
    Node* node = ready.back();
    ready.pop_back();
    Tensor grad_output = std::move(pending[node]);
    pending.erase(node);
    Grads grads;
    if (grad_output.defined()) {
      profile::Scope scope(node->family());
      if (!add_into_pending(*node, grad_output, pending)) grads = node->apply(grad_output);
      grad_output = Tensor();
    }
    if (!retain_graph) node->release();
    const std::vector<Edge>& edges = node->next_edges();
    // record() is public: a user's backward that returns the wrong number of gradients is an
    // error in any build, not a debug assertion (a release build would drop the missing ones).
    KILN_CHECK(grads.empty() || grads.size() == edges.size(),
               "{}: backward returned {} gradients for {} inputs", node->name(), grads.size(),
               edges.size());
    for (std::size_t i = 0; i < edges.size(); ++i) {
      const Edge& edge = edges[i];
      if (!edge.node) continue;
      Node* next = edge.node.get();
      if (i < grads.size() && grads[i].defined()) {
        const Tensor& g = grads[i];
        KILN_CHECK(g.shape() == edge.input.shape && g.dtype() == compute_dtype(edge.input.dtype),
                   "{}: backward produced a gradient {} {} for input {} of shape {} {} (its "
                   "gradient is {})",
                   node->name(), g.shape(), g.dtype(), i, edge.input.shape, edge.input.dtype,
                   compute_dtype(edge.input.dtype));
        Tensor& slot = pending[next];
        if (!slot.defined()) {
          slot = g;
        } else if (exclusively_owned(slot)) {
          slot.add_(g);  // no other handle sees this buffer: accumulate without a copy
        } else {
          slot = add(slot, g);
        }
      }
      if (--dependencies[next] == 0) ready.push_back(next);
    }
  }
}

}  // namespace kiln
