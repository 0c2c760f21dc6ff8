// AdaptiveSoftmax: a language model's output layer over a word vocabulary in which frequent words
// pay for a small head and rare ones for reduced-width clusters (core/ops/adaptive_softmax.h has
// the equations; docs/adaptive-softmax.md the costs). The distribution is exact and normalized.
//
// Words are ranked by training frequency inside the module: `order` (a buffer, saved) lists the
// vocabulary id of each rank, so the vocabulary, the corpus and every file outside keep their
// order. Cutoffs c_0 < ... < c_{n-1} are ranks: the shortlist is ranks [0, c_0), cluster i ranks
// [c_i, c_{i+1}) (c_n = vocab), of width d_i = d_model / div^(i+1).
//
// Tied as TransformerLM's output is tied: the head's shortlist rows are the input embedding's rows
// of the shortlist words (E[order[r]]), followed by one learned row per cluster. With adaptive
// input (Baevski & Auli 2019) the module is the input layer too: there is no (vocab, d_model)
// embedding; a word of rank r < c_0 is shortlist[r], one of cluster i is output_i[r - c_i] P_i,
// the same tensors as the output's (fairseq's tied adaptive input and projections).
//
// The tensors, as a PyTorch model rebuilds them (nn.AdaptiveLogSoftmaxWithLoss over ranks):
//   adaptive.shortlist                (c_0, d)      adaptive input only
//   adaptive.cluster_logits           (n, d)        head.weight = cat(shortlist, cluster_logits),
//                                                   shortlist = embedding.weight[order[:c_0]]
//   adaptive.clusters.<i>.projection  (d_i, d)      tail[i][0].weight
//   adaptive.clusters.<i>.output      (s_i, d_i)    tail[i][1].weight
//   adaptive.order                    (vocab) int64 rank -> vocabulary id
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/ops/adaptive_softmax.h"
#include "nn/embedding.h"
#include "nn/module.h"

namespace kiln::nn {

class AdaptiveSoftmax : public Module {
 public:
  // cutoffs increasing in (0, vocab); tied: the embedding whose rows are the shortlist's, or
  // nullptr for adaptive input (the module then owns the shortlist). The order starts as the
  // identity (set_order). Weights as PyTorch's Linear layers of their shapes; the shortlist
  // U(-0.1, 0.1) as TransformerLM's embedding.
  AdaptiveSoftmax(std::int64_t vocab, std::int64_t d_model,
                  const std::vector<std::int64_t>& cutoffs, double div_value,
                  std::shared_ptr<Embedding> tied);

  // Mean negative log-likelihood of targets (N) vocabulary ids (or ignore_index) given x (N, d).
  Tensor loss(const Tensor& x, const Tensor& targets, std::int64_t ignore_index = -100) const;

  // log p of every word, x (..., d) -> (..., vocab) in vocabulary order.
  Tensor log_prob(const Tensor& x) const;

  // Adaptive input: ids (...) int64 -> (..., d). Only without a tied embedding.
  Tensor embed(const Tensor& ids) const;

  // The frequency order: order[r] is the vocabulary id of rank r (a permutation of [0, vocab)).
  void set_order(const std::vector<std::int64_t>& order);

  // The vocabulary ids by descending count, ties by ascending id (counts[id] per word).
  static std::vector<std::int64_t> frequency_order(const std::vector<std::int64_t>& counts);

  Tensor shortlist;       // (c_0, d), adaptive input only
  Tensor cluster_logits;  // (n, d)
  std::vector<Tensor> projections, outputs;
  Tensor order;  // (vocab) int64

 protected:
  void loaded() override;

 private:
  AdaptiveSoftmaxWeights weights() const;
  // The ranks of vocabulary ids (any shape; ignore_index becomes -1), read and mapped on the host.
  Tensor ranks(const Tensor& ids, std::int64_t ignore_index) const;
  std::shared_ptr<Embedding> tied_;
  std::int64_t shortlist_size_;
  std::vector<std::int64_t> rank_of_;  // vocabulary id -> rank, on the host
  Tensor rank_;                        // the same on the module's device (a buffer, not saved)
};

}  // namespace kiln::nn
