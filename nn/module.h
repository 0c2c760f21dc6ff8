// Module: the base of every layer. A module owns named parameters (tensors that train), buffers
// (tensors that do not) and submodules, each registered under a name without '.'; the full name
// of a parameter is its dotted path from the root, e.g. "blocks.0.attn.qkv.weight", listed in
// registration order. forward is an ordinary typed member function of each layer.
//
//   class Scale : public nn::Module {
//    public:
//     explicit Scale(std::int64_t n) { gain = register_parameter("gain", ones({n})); }
//     Tensor forward(const Tensor& x) { return x * gain; }
//     Tensor gain;
//   };
//
// to(device) and to(dtype) convert tensors in place, so handles such as `gain` stay valid.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace kiln::nn {

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Parameters, buffers and submodules, dotted paths from this module, in registration order.
  NamedTensors named_parameters() const;
  std::vector<Tensor> parameters() const;
  NamedTensors named_buffers() const;  // persistent buffers only
  std::int64_t num_parameters() const;

  // Training mode (dropout active) for this module and all submodules.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Moves or converts every parameter and buffer in place (float64 for gradient checks).
  void to(Device device);
  void to(DType dtype);

  // Sets every parameter's gradient to undefined.
  void zero_grad();

  // Parameters and persistent buffers by dotted path.
  NamedTensors state_dict() const;
  struct LoadResult {
    std::vector<std::string> missing;     // in the module, not in the state
    std::vector<std::string> unexpected;  // in the state, not in the module
  };
  // Copies values in by name. A shape mismatch is always an error; with strict, so is any
  // missing or unexpected name (the error lists them). Returns what did not match.
  LoadResult load_state_dict(const NamedTensors& state, bool strict = true);

 protected:
  // Registers a tensor that trains (it is made a leaf that requires grad); returns its handle.
  Tensor register_parameter(const std::string& name, const Tensor& value);
  // Registers a tensor that moves with the module but does not train; non-persistent buffers
  // (recomputable tables) are left out of state_dict.
  Tensor register_buffer(const std::string& name, const Tensor& value, bool persistent = true);
  // Called on every module, children first, after load_state_dict has copied the values in: a
  // module that derives state from its buffers (nn/adaptive_softmax.h) checks and rebuilds it.
  virtual void loaded() {}
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

 private:
  struct Buffer {
    Tensor tensor;
    bool persistent;
  };
  void check_name(const std::string& name) const;
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void collect(const std::string& prefix, NamedTensors& params, NamedTensors& buffers,
               bool persistent_only) const;
  void for_each_tensor(const std::function<void(const Tensor&)>& f) const;
  void notify_loaded();

  std::vector<std::pair<std::string, Tensor>> parameters_;
  std::vector<std::pair<std::string, Buffer>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// A module that maps one tensor to one tensor, such as a feed-forward sublayer: the interface
// a TransformerBlock calls, so users can swap in their own (examples/custom_module.cpp).
class UnaryModule : public Module {
 public:
  virtual Tensor forward(const Tensor& x) const = 0;
};

}  // namespace kiln::nn
