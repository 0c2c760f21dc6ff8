#include "nn/language_model.h"

namespace kiln::nn {

Device LanguageModel::device() const {
  const std::vector<Tensor> params = parameters();
  return params.empty() ? Device::cpu() : params.front().device();
}

}  // namespace kiln::nn
