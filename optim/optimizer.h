// Optimizer: the base of kiln's optimizers (optim/sgd.h, optim/adam.h). It holds named parameters
// in groups, each group with its own learning rate and weight decay, plus per-parameter state
// (momentum buffers, Adam moments), and updates every parameter that has a gradient with fused ops
// (sgd_update_ per parameter, adam_update_many_ for all at once: core/ops/optimizer_update.h) on
// the parameters' device, under NoGradGuard. optim knows only tensors: a model hands over its
// named_parameters().
//
//   AdamW opt(weight_decay_groups(model.named_parameters(), 0.1), {.lr = 3e-4});
//   for (std::int64_t s = opt.step_count(); s < steps; ++s) {
//     opt.set_lr(schedule.lr(s, decay_steps));
//     opt.zero_grad();
//     loss(model, batch).backward();
//     const double norm = grad_norm(opt.parameters());  // optim/clip.h
//     opt.step(clip_scale(norm, 1.0));                  // clipping fused into the update
//   }
//
// Groups. set_lr(lr) moves every group together: a group built with its own lr keeps its ratio to
// the optimizer's base lr (the options' lr), so a schedule drives all groups at once.
//
// State. All state tensors are allocated (zeros) when the optimizer is built, so state_dict()
// always holds the same names, "<param name>.<state>" (exp_avg, exp_avg_sq, momentum_buffer), and
// a checkpoint can be validated name by name. The step count (the number of step() calls) is the
// one number of state besides them; Adam's bias correction uses it. A parameter without a gradient
// at some step is skipped (parameter and state untouched); kiln's state keeps no per-parameter
// step count, so such a parameter is later bias-corrected with the optimizer's step count (PyTorch
// counts per parameter; the two agree whenever every parameter gets a gradient at every step).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace kiln {

// A group of parameters; an unset lr or weight_decay takes the optimizer options' value.
struct ParamGroup {
  NamedTensors params;
  std::optional<double> lr;
  std::optional<double> weight_decay;
};

// The usual AdamW grouping: {decay group (weight_decay), no-decay group (0)}, parameters in their
// given order. No decay for: tensors of rank <= 1 (biases, LayerNorm gains and shifts), and any
// tensor whose name has a part (split at '.' and '_') that contains "norm" or "emb" (embedding,
// tok_emb, layernorm) or is "ln" optionally followed by digits (ln, ln1, ln_f): LayerNorm and
// embedding weights. "ln" must be a whole part so that names like "kiln" or "gain" do not match.
std::vector<ParamGroup> weight_decay_groups(const NamedTensors& params, double weight_decay);
// The rule above for one parameter.
bool decays(const std::string& name, const Tensor& param);

// What state_dict() returns and load_state_dict() takes.
struct OptimizerState {
  std::int64_t step = 0;  // step() calls so far
  NamedTensors tensors;   // "<param name>.<state name>", in parameter order
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Updates every parameter that has a gradient; the gradient is multiplied by grad_scale first
  // (pass clip_scale(norm, max_norm) to clip without a separate pass over the gradients).
  void step(double grad_scale = 1.0);
  // The same update with its gradient scale and go-ahead on the device: `guard` is a step ledger
  // (core/ops/optimizer_update.h step_guard_) on the parameters' device, so neither the clip nor
  // the non-finite rule waits for the host. The step is counted; a caller that later reads from
  // the ledger that the update was skipped takes the count back with uncount_step().
  void step(const Tensor& guard);
  // Takes back the count of the last step (a guarded step the device skipped), so that Adam's
  // bias correction counts applied updates only, as when a skipped step never calls step().
  void uncount_step();
  // Sets every parameter's gradient to undefined (the next backward allocates it afresh).
  void zero_grad();

  double lr() const { return lr_; }  // the base learning rate
  // Sets the base lr; group g's lr becomes lr × (g's lr / base lr at construction).
  void set_lr(double lr);
  std::size_t num_groups() const { return groups_.size(); }
  double group_lr(std::size_t group) const;
  double group_weight_decay(std::size_t group) const;
  std::int64_t step_count() const { return step_; }
  const std::string& name() const { return name_; }  // "SGD", "Adam", "AdamW"

  // Every parameter, groups in order (for grad_norm / clip_grad_norm).
  std::vector<Tensor> parameters() const;

  // The step count and the state tensors. The tensors alias the live state: clone them to keep a
  // snapshot that later steps do not change.
  OptimizerState state_dict() const;
  // Copies `state` into this optimizer's state. Every expected name must be present with this
  // optimizer's shape and dtype (any device), and no other name: otherwise a kiln::Error lists
  // what is missing, unexpected or mismatched, and nothing is changed.
  void load_state_dict(const OptimizerState& state);

 protected:
  struct Param {
    std::string name;
    Tensor tensor;
    std::vector<Tensor> state;  // one per state name, same shape, dtype and device as tensor
  };
  struct Group {
    std::vector<Param> params;
    double lr = 0.0;
    double lr_ratio = 1.0;  // lr / base lr, kept by set_lr
    double weight_decay = 0.0;
  };

  // `name` prefixes every error; state_names name each parameter's state tensors. Groups with an
  // unset lr/weight_decay take lr/weight_decay.
  Optimizer(std::string name, std::vector<ParamGroup> groups, double lr, double weight_decay,
            std::vector<std::string> state_names);

  // A parameter that has a gradient at this step, its group and its contiguous gradient.
  struct Pending {
    Param* param;
    const Group* group;
    Tensor grad;
  };

  // The fused updates of every parameter that has a gradient, in parameter order (ops of
  // core/ops/optimizer_update.h, which bump the versions of each parameter and its state);
  // step_count() is already this step's number. A defined `guard` replaces grad_scale on the
  // device (core/ops/optimizer_update.h). All at once, so that a multi-tensor op may take them
  // in a fixed number of launches (Adam).
  virtual void update(std::span<const Pending> pending, double grad_scale, const Tensor& guard) = 0;

  // Errors naming the optimizer unless value is finite and lo <= value (< hi when hi_open, else
  // <= hi); derived classes check their own options with it.
  static void check_range(std::string_view optimizer, std::string_view what, double value,
                          double lo, double hi, bool hi_open = false);

 private:
  std::string name_;
  std::vector<std::string> state_names_;
  std::vector<Group> groups_;
  double lr_ = 0.0;
  std::int64_t step_ = 0;

  void step_with(double grad_scale, const Tensor& guard);
};

}  // namespace kiln
