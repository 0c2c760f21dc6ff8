// Dropout as a module: active in training mode, the identity in eval mode.
#pragma once

#include "core/generator.h"
#include "nn/module.h"

namespace kiln::nn {

class Dropout : public Module {
 public:
  // Masks come from `gen` (the default generator when null), which must outlive the module.
  explicit Dropout(double p, Generator* gen = nullptr);
  Tensor forward(const Tensor& x) const;

  double p;

 private:
  Generator* gen_;
};

}  // namespace kiln::nn
