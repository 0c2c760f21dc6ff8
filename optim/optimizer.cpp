// The Optimizer base: groups, the step loop, zero_grad, learning rates and state save/load.
#include "optim/optimizer.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>

#include "core/autograd.h"
#include "core/ops/factories.h"
#include "core/profiler.h"
#include "core/storage.h"

namespace kiln {

namespace {

// "ln" followed only by digits: ln, ln1, ln2.
bool is_ln_part(std::string_view part) {
  return part.size() >= 2 && part.substr(0, 2) == "ln" &&
         std::all_of(part.begin() + 2, part.end(),
                     [](unsigned char c) { return std::isdigit(c) != 0; });
}

// At most `limit` entries joined by ", ", then how many were left out.
std::string join_capped(const std::vector<std::string>& items, std::size_t limit = 10) {
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < limit; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > limit) out += fmt::format(" and {} more", items.size() - limit);
  return out;
}

}  // namespace

bool decays(const std::string& name, const Tensor& param) {
  if (param.dim() <= 1) return false;
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::size_t begin = 0;
  while (begin <= lower.size()) {
    const std::size_t end = std::min(lower.find_first_of("._", begin), lower.size());
    const std::string_view part = std::string_view(lower).substr(begin, end - begin);
    if (part.find("norm") != std::string_view::npos || part.find("emb") != std::string_view::npos ||
        is_ln_part(part))
      return false;
    begin = end + 1;
  }
  return true;
}

std::vector<ParamGroup> weight_decay_groups(const NamedTensors& params, double weight_decay) {
  ParamGroup decay{.params = {}, .lr = std::nullopt, .weight_decay = weight_decay};
  ParamGroup no_decay{.params = {}, .lr = std::nullopt, .weight_decay = 0.0};
  for (const auto& [name, tensor] : params) {
    KILN_CHECK(tensor.defined(), "weight_decay_groups: parameter '{}' is undefined", name);
    (decays(name, tensor) ? decay : no_decay).params.emplace_back(name, tensor);
  }
  return {std::move(decay), std::move(no_decay)};
}

void Optimizer::check_range(std::string_view optimizer, std::string_view what, double value,
                            double lo, double hi, bool hi_open) {
  const bool ok = std::isfinite(value) && value >= lo && (hi_open ? value < hi : value <= hi);
  if (std::isinf(hi))
    KILN_CHECK(ok, "{}: invalid {} {} (expected a finite value >= {})", optimizer, what, value, lo);
  else
    KILN_CHECK(ok, "{}: invalid {} {} (expected {} <= {} {} {})", optimizer, what, value, lo, what,
               hi_open ? "<" : "<=", hi);
}

Optimizer::Optimizer(std::string name, std::vector<ParamGroup> groups, double lr,
                     double weight_decay, std::vector<std::string> state_names)
    : name_(std::move(name)), state_names_(std::move(state_names)), lr_(lr) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  check_range(name_, "lr", lr, 0.0, inf);
  check_range(name_, "weight_decay", weight_decay, 0.0, inf);
  std::map<std::string, std::string> seen;         // name -> where it was first seen
  std::map<const Storage*, std::string> storages;  // storage -> the name of its parameter
  std::size_t total = 0;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    ParamGroup& in = groups[g];
    Group group;
    group.lr = in.lr.value_or(lr);
    group.weight_decay = in.weight_decay.value_or(weight_decay);
    check_range(name_, fmt::format("lr of group {}", g), group.lr, 0.0, inf);
    check_range(name_, fmt::format("weight_decay of group {}", g), group.weight_decay, 0.0, inf);
    if (in.lr) {
      KILN_CHECK(lr > 0.0 || group.lr == 0.0,
                 "{}: group {} has its own lr {} but the base lr is 0, so set_lr could not keep "
                 "their ratio; give the optimizer a non-zero lr",
                 name_, g, group.lr);
      group.lr_ratio = lr > 0.0 ? group.lr / lr : 0.0;
    }
    for (auto& [pname, tensor] : in.params) {
      KILN_CHECK(!pname.empty(), "{}: a parameter in group {} has an empty name", name_, g);
      KILN_CHECK(tensor.defined(), "{}: parameter '{}' is undefined", name_, pname);
      KILN_CHECK(is_floating(tensor.dtype()), "{}: parameter '{}' has dtype {}, not a float", name_,
                 pname, tensor.dtype());
      KILN_CHECK(tensor.is_contiguous(),
                 "{}: parameter '{}' (shape {}) is not contiguous; the fused update needs "
                 "contiguous parameters",
                 name_, pname, tensor.shape());
      KILN_CHECK(seen.emplace(pname, fmt::format("group {}", g)).second,
                 "{}: parameter name '{}' appears twice (in {} and group {})", name_, pname,
                 seen[pname], g);
      const auto [first, fresh] = storages.emplace(tensor.storage().get(), pname);
      KILN_CHECK(fresh,
                 "{}: parameters '{}' and '{}' share storage (the same tensor twice, or views of "
                 "one); each would be updated twice",
                 name_, first->second, pname);
      Param param{.name = pname, .tensor = tensor, .state = {}};
      for (std::size_t s = 0; s < state_names_.size(); ++s)
        param.state.push_back(
            zeros(tensor.shape(), {.dtype = tensor.dtype(), .device = tensor.device()}));
      group.params.push_back(std::move(param));
      ++total;
    }
    groups_.push_back(std::move(group));
  }
  KILN_CHECK(total > 0, "{}: got no parameters to optimize", name_);
}

void Optimizer::step(double grad_scale) {
  KILN_CHECK(std::isfinite(grad_scale) && grad_scale >= 0.0,
             "{}: step: grad_scale {} is not a finite non-negative number (a NaN or infinite "
             "gradient norm? check the loss)",
             name_, grad_scale);
  step_with(grad_scale, Tensor());
}

void Optimizer::step(const Tensor& guard) {
  KILN_CHECK(guard.defined(), "{}: step: the guard (a step ledger) is undefined", name_);
  step_with(1.0, guard);
}

void Optimizer::uncount_step() {
  KILN_CHECK(step_ > 0, "{}: uncount_step: no step to take back", name_);
  --step_;
}

void Optimizer::step_with(double grad_scale, const Tensor& guard) {
  profile::Scope scope(profile::Family::optimizer);
  NoGradGuard no_grad;
  ++step_;
  std::vector<Pending> pending;
  for (Group& group : groups_) {
    for (Param& p : group.params) {
      const Tensor grad = p.tensor.grad();
      if (grad.defined()) pending.push_back({&p, &group, grad.contiguous()});
    }
  }
  update(pending, grad_scale, guard);  // bumps the parameters' and their state's versions
}

void Optimizer::zero_grad() {
  for (const Group& group : groups_)
    for (const Param& p : group.params)
      if (p.tensor.grad().defined()) p.tensor.set_grad(Tensor());
}

void Optimizer::set_lr(double lr) {
  check_range(name_, "lr", lr, 0.0, std::numeric_limits<double>::infinity());
  lr_ = lr;
  for (Group& group : groups_) group.lr = lr * group.lr_ratio;
}

double Optimizer::group_lr(std::size_t group) const {
  KILN_CHECK(group < groups_.size(), "{}: no group {} (there are {})", name_, group,
             groups_.size());
  return groups_[group].lr;
}

double Optimizer::group_weight_decay(std::size_t group) const {
  KILN_CHECK(group < groups_.size(), "{}: no group {} (there are {})", name_, group,
             groups_.size());
  return groups_[group].weight_decay;
}

std::vector<Tensor> Optimizer::parameters() const {
  std::vector<Tensor> out;
  for (const Group& group : groups_)
    for (const Param& p : group.params) out.push_back(p.tensor);
  return out;
}

OptimizerState Optimizer::state_dict() const {
  OptimizerState out{.step = step_, .tensors = {}};
  for (const Group& group : groups_)
    for (const Param& p : group.params)
      for (std::size_t s = 0; s < state_names_.size(); ++s)
        out.tensors.emplace_back(p.name + "." + state_names_[s], p.state[s]);
  return out;
}

void Optimizer::load_state_dict(const OptimizerState& state) {
  KILN_CHECK(state.step >= 0, "{}: load_state_dict: step {} is negative", name_, state.step);
  std::map<std::string, const Tensor*> given;
  std::vector<std::string> duplicated, missing, unexpected, mismatched;
  for (const auto& [name, tensor] : state.tensors)
    if (!given.emplace(name, &tensor).second) duplicated.push_back(name);
  // Check everything first so that a failed load changes nothing.
  std::vector<std::pair<const Tensor*, const Tensor*>> copies;  // (destination, source)
  for (const Group& group : groups_) {
    for (const Param& p : group.params) {
      for (std::size_t s = 0; s < state_names_.size(); ++s) {
        const std::string name = p.name + "." + state_names_[s];
        const auto it = given.find(name);
        if (it == given.end()) {
          missing.push_back(name);
          continue;
        }
        const Tensor& src = *it->second;
        const Tensor& dst = p.state[s];
        if (!src.defined() || src.shape() != dst.shape() || src.dtype() != dst.dtype()) {
          mismatched.push_back(src.defined()
                                   ? fmt::format("{} ({} {}, expected {} {})", name, src.dtype(),
                                                 src.shape(), dst.dtype(), dst.shape())
                                   : fmt::format("{} (undefined)", name));
        }
        copies.emplace_back(&dst, &src);
        given.erase(it);
      }
    }
  }
  for (const auto& entry : given) unexpected.push_back(entry.first);
  std::string problems;
  const auto add = [&](std::string_view what, const std::vector<std::string>& names) {
    if (!names.empty())
      problems += fmt::format("{}{}: {}", problems.empty() ? "" : "; ", what, join_capped(names));
  };
  add("missing", missing);
  add("unexpected", unexpected);
  add("mismatched", mismatched);
  add("duplicated", duplicated);
  KILN_CHECK(problems.empty(), "{}: load_state_dict: {}", name_, problems);
  NoGradGuard no_grad;
  for (const auto& [dst, src] : copies) dst->copy_(*src);
  step_ = state.step;
}

}  // namespace kiln
