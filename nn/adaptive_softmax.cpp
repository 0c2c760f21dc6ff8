#include "nn/adaptive_softmax.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>

#include "core/autograd.h"
#include "core/ops/factories.h"
#include "core/ops/indexing.h"
#include "core/ops/join.h"
#include "core/ops/matmul.h"
#include "nn/config.h"
#include "nn/init.h"

namespace kiln::nn {

namespace {

// One cluster's two products, registered as clusters.<i> so the names read clusters.0.projection.
struct Cluster : Module {
  Cluster(std::int64_t words, std::int64_t width, std::int64_t d_model) {
    projection = register_parameter("projection", uniform_fan_in({width, d_model}, d_model));
    output = register_parameter("output", uniform_fan_in({words, width}, width));
  }
  Tensor projection, output;
};

// What an ignored target becomes among ranks: no rank is negative, while a caller's
// ignore_index may be a vocabulary id and so equal another word's rank.
constexpr std::int64_t kIgnoredRank = -1;

struct Clusters : Module {
  explicit Clusters(const std::vector<std::shared_ptr<Cluster>>& list) {
    for (std::size_t i = 0; i < list.size(); ++i) register_module(std::to_string(i), list[i]);
  }
};

}  // namespace

AdaptiveSoftmax::AdaptiveSoftmax(std::int64_t vocab, std::int64_t d_model,
                                 const std::vector<std::int64_t>& cutoffs, double div_value,
                                 std::shared_ptr<Embedding> tied)
    : tied_(std::move(tied)) {
  KILN_CHECK(!cutoffs.empty(), "AdaptiveSoftmax: no cutoffs (vocab {})", vocab);
  for (std::size_t i = 0; i < cutoffs.size(); ++i)
    KILN_CHECK(cutoffs[i] > (i == 0 ? 0 : cutoffs[i - 1]) && cutoffs[i] < vocab,
               "AdaptiveSoftmax: cutoffs must increase from above 0 to below vocab {}, got {}",
               vocab, cutoffs);
  KILN_CHECK(!tied_ || tied_->weight.shape() == Shape({vocab, d_model}),
             "AdaptiveSoftmax: the tied embedding is {}, not ({}, {})", tied_->weight.shape(),
             vocab, d_model);
  shortlist_size_ = cutoffs[0];
  const std::int64_t clusters = static_cast<std::int64_t>(cutoffs.size());
  if (!tied_) {
    NoGradGuard no_grad;
    shortlist = register_parameter("shortlist", uniform({shortlist_size_, d_model}, -0.1, 0.1));
  }
  cluster_logits =
      register_parameter("cluster_logits", uniform_fan_in({clusters, d_model}, d_model));
  std::vector<std::shared_ptr<Cluster>> list;
  for (std::size_t i = 0; i < cutoffs.size(); ++i) {
    const std::int64_t end = i + 1 < cutoffs.size() ? cutoffs[i + 1] : vocab;
    const std::int64_t width = adaptive_cluster_width(d_model, div_value, i);
    KILN_CHECK(width >= 1, "AdaptiveSoftmax: cluster {} would be {} wide (d_model {}, div {})", i,
               width, d_model, div_value);
    list.push_back(std::make_shared<Cluster>(end - cutoffs[i], width, d_model));
    projections.push_back(list.back()->projection);
    outputs.push_back(list.back()->output);
  }
  register_module("clusters", std::make_shared<Clusters>(list));
  order = register_buffer("order", arange(vocab, {DType::i64}));
  rank_ = register_buffer("rank", arange(vocab, {DType::i64}), false);
  rank_of_.resize(static_cast<std::size_t>(vocab));
  std::iota(rank_of_.begin(), rank_of_.end(), 0);
}

std::vector<std::int64_t> AdaptiveSoftmax::frequency_order(
    const std::vector<std::int64_t>& counts) {
  std::vector<std::int64_t> ids(counts.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(),
                   [&](std::int64_t a, std::int64_t b) { return counts[a] > counts[b]; });
  return ids;
}

void AdaptiveSoftmax::set_order(const std::vector<std::int64_t>& new_order) {
  const std::int64_t vocab = order.size(0);
  KILN_CHECK(static_cast<std::int64_t>(new_order.size()) == vocab,
             "AdaptiveSoftmax: an order of {} words for a vocabulary of {}", new_order.size(),
             vocab);
  std::vector<std::int64_t> rank(new_order.size(), -1);
  for (std::size_t r = 0; r < new_order.size(); ++r) {
    const std::int64_t id = new_order[r];
    KILN_CHECK(id >= 0 && id < vocab && rank[id] < 0,
               "AdaptiveSoftmax: the order is not a permutation of [0, {}): id {} at rank {}",
               vocab, id, r);
    rank[id] = static_cast<std::int64_t>(r);
  }
  NoGradGuard no_grad;
  order.copy_(from_vector(new_order, {vocab}, order.device()));
  rank_.copy_(from_vector(rank, {vocab}, rank_.device()));
  rank_of_ = std::move(rank);
}

void AdaptiveSoftmax::loaded() { set_order(order.to(Device::cpu()).to_vector<std::int64_t>()); }

AdaptiveSoftmaxWeights AdaptiveSoftmax::weights() const {
  const Tensor rows =
      tied_ ? index_select(tied_->weight, 0, order.narrow(0, 0, shortlist_size_)) : shortlist;
  return {cat({rows, cluster_logits}, 0), projections, outputs};
}

Tensor AdaptiveSoftmax::ranks(const Tensor& ids, std::int64_t ignore_index) const {
  KILN_CHECK(ids.dtype() == DType::i64, "AdaptiveSoftmax: ids must be int64, got {} {}",
             ids.dtype(), ids.shape());
  const std::int64_t vocab = order.size(0);
  std::vector<std::int64_t> ranks = ids.to(Device::cpu()).contiguous().to_vector<std::int64_t>();
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    std::int64_t& id = ranks[i];
    if (id == ignore_index) {
      id = kIgnoredRank;
      continue;
    }
    KILN_CHECK(id >= 0 && id < vocab, "AdaptiveSoftmax: id {} at position {} is outside [0, {})",
               id, i, vocab);
    id = rank_of_[static_cast<std::size_t>(id)];
  }
  return from_vector(ranks, ids.shape(), ids.device());
}

Tensor AdaptiveSoftmax::loss(const Tensor& x, const Tensor& targets,
                             std::int64_t ignore_index) const {
  KILN_CHECK(targets.dim() == 1, "AdaptiveSoftmax: targets must be 1-D, got {}", targets.shape());
  return adaptive_softmax_loss(x, weights(), ranks(targets, ignore_index), kIgnoredRank);
}

Tensor AdaptiveSoftmax::log_prob(const Tensor& x) const {
  Shape shape = x.shape();
  const std::int64_t d = shape.back();
  const Tensor ranked = adaptive_log_softmax(x.reshape({-1, d}), weights());  // (N, vocab) ranks
  shape.back() = order.size(0);
  return index_select(ranked, 1, rank_).reshape(shape);  // column id = rank_[id] of ranked
}

Tensor AdaptiveSoftmax::embed(const Tensor& ids) const {
  KILN_CHECK(!tied_,
             "AdaptiveSoftmax: embed is adaptive input's; this module is tied to an "
             "embedding");
  // The input vector of every word in rank order, (vocab, d): the shortlist, then each cluster's
  // output_i P_i, in the shortlist's dtype (under bf16 autocast the product is bf16; the table,
  // like an embedding, stays float32). Then each id's row of it, by rank.
  std::vector<Tensor> parts{shortlist};
  for (std::size_t i = 0; i < outputs.size(); ++i)
    parts.push_back(matmul(outputs[i], projections[i]).to(shortlist.dtype()));
  return embedding(cat(parts, 0), ranks(ids, std::numeric_limits<std::int64_t>::min()));
}

}  // namespace kiln::nn
