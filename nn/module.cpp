#include "nn/module.h"

#include <algorithm>
#include <functional>
#include <set>

#include "core/autograd.h"
#include "core/tensor_impl.h"

namespace kiln::nn {

namespace {

// Replaces t's data with `source`'s (same shape) keeping the TensorImpl, so every handle to the
// parameter sees the converted tensor.
void set_data(const Tensor& t, const Tensor& source) {
  TensorImpl& impl = *t.impl();
  const TensorImpl& src = *source.impl();
  impl.storage = src.storage;
  impl.strides = src.strides;
  impl.offset = src.offset;
  impl.dtype = src.dtype;
  if (impl.autograd) impl.autograd->grad = Tensor();
}

}  // namespace

void Module::check_name(const std::string& name) const {
  KILN_CHECK(!name.empty() && name.find('.') == std::string::npos,
             "register: name '{}' must be non-empty and contain no '.'", name);
  auto taken = [&](const auto& list) {
    return std::any_of(list.begin(), list.end(), [&](const auto& e) { return e.first == name; });
  };
  KILN_CHECK(!taken(parameters_) && !taken(buffers_) && !taken(children_),
             "register: name '{}' is already registered in this module", name);
}

Tensor Module::register_parameter(const std::string& name, const Tensor& value) {
  check_name(name);
  KILN_CHECK(value.defined() && is_floating(value.dtype()),
             "register_parameter: '{}' must be a float32 or float64 tensor", name);
  Tensor parameter = value.detach();
  parameter.requires_grad_();
  parameters_.emplace_back(name, parameter);
  return parameter;
}

Tensor Module::register_buffer(const std::string& name, const Tensor& value, bool persistent) {
  check_name(name);
  KILN_CHECK(value.defined(), "register_buffer: '{}' is undefined", name);
  buffers_.emplace_back(name, Buffer{value.detach(), persistent});
  return buffers_.back().second.tensor;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_name(name);
  KILN_CHECK(module != nullptr, "register_module: '{}' is null", name);
  module->train(training_);
  children_.emplace_back(name, std::move(module));
}

void Module::collect(const std::string& prefix, NamedTensors& params, NamedTensors& buffers,
                     bool persistent_only) const {
  for (const auto& [name, t] : parameters_) params.emplace_back(prefix + name, t);
  for (const auto& [name, b] : buffers_)
    if (b.persistent || !persistent_only) buffers.emplace_back(prefix + name, b.tensor);
  for (const auto& [name, child] : children_)
    child->collect(prefix + name + ".", params, buffers, persistent_only);
}

NamedTensors Module::named_parameters() const {
  NamedTensors params, buffers;
  collect("", params, buffers, true);
  return params;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (const auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

NamedTensors Module::named_buffers() const {
  NamedTensors params, buffers;
  collect("", params, buffers, true);
  return buffers;
}

std::int64_t Module::num_parameters() const {
  std::int64_t n = 0;
  for (const auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (const auto& [name, child] : children_) child->train(on);
}

void Module::for_each_tensor(const std::function<void(const Tensor&)>& f) const {
  NamedTensors params, buffers;
  collect("", params, buffers, false);
  for (const auto& [name, t] : params) f(t);
  for (const auto& [name, t] : buffers) f(t);
}

void Module::to(Device device) {
  NoGradGuard no_grad;
  for_each_tensor([&](const Tensor& t) { set_data(t, t.detach().to(device)); });
}

void Module::to(DType dtype) {
  NoGradGuard no_grad;
  for_each_tensor([&](const Tensor& t) {
    if (is_floating(t.dtype())) set_data(t, t.detach().to(dtype));
  });
}

void Module::zero_grad() {
  for (const auto& [name, t] : named_parameters()) t.set_grad(Tensor());
}

NamedTensors Module::state_dict() const {
  NamedTensors params, buffers;
  collect("", params, buffers, true);
  params.insert(params.end(), buffers.begin(), buffers.end());
  return params;
}

Module::LoadResult Module::load_state_dict(const NamedTensors& state, bool strict) {
  const NamedTensors own = state_dict();
  LoadResult result;
  std::set<std::string> seen;
  NoGradGuard no_grad;
  for (const auto& [name, value] : state) {
    // An explicit capture: clang 14 (the fuzz build) cannot capture a structured binding.
    const auto it = std::find_if(own.begin(), own.end(),
                                 [&name = name](const auto& e) { return e.first == name; });
    if (it == own.end()) {
      result.unexpected.push_back(name);
      continue;
    }
    KILN_CHECK(value.shape() == it->second.shape(),
               "load_state_dict: '{}' has shape {} in the state but {} in the module", name,
               value.shape(), it->second.shape());
    it->second.copy_(value);
    seen.insert(name);
  }
  for (const auto& [name, t] : own)
    if (!seen.count(name)) result.missing.push_back(name);
  KILN_CHECK(!strict || (result.missing.empty() && result.unexpected.empty()),
             "load_state_dict: missing {} and unexpected {}", result.missing, result.unexpected);
  notify_loaded();
  return result;
}

void Module::notify_loaded() {
  for (const auto& [name, child] : children_) child->notify_loaded();
  loaded();
}

}  // namespace kiln::nn
