#include "nn/embedding.h"

#include "core/ops/factories.h"
#include "core/ops/indexing.h"

namespace kiln::nn {

Embedding::Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim) {
  KILN_CHECK(num_embeddings > 0 && embedding_dim > 0,
             "Embedding: sizes must be positive, got {} x {}", num_embeddings, embedding_dim);
  weight = register_parameter("weight", randn({num_embeddings, embedding_dim}));
}

Tensor Embedding::forward(const Tensor& ids) const { return embedding(weight, ids); }

}  // namespace kiln::nn
