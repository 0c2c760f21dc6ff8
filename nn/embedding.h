// Embedding: a (num, dim) table of vectors looked up by int64 ids.
#pragma once

#include "nn/module.h"

namespace kiln::nn {

class Embedding : public Module {
 public:
  // Initialised N(0, 1), as PyTorch's nn.Embedding.
  Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim);
  // ids (..) int64 -> (.., dim)
  Tensor forward(const Tensor& ids) const;

  Tensor weight;  // (num, dim)
};

}  // namespace kiln::nn
