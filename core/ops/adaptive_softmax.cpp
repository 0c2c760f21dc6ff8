#include "core/ops/adaptive_softmax.h"

#include "core/autocast.h"
#include "core/ops/elementwise.h"
#include "core/ops/factories.h"
#include "core/ops/indexing.h"
#include "core/ops/join.h"
#include "core/ops/linear.h"
#include "core/ops/linear_cross_entropy.h"
#include "core/ops/matmul.h"
#include "core/ops/op_utils.h"
#include "core/ops/softmax.h"
#include "core/profiler.h"

namespace kiln {

namespace {

// Errors unless the weights fit together and with x (N, d); returns c_0, the shortlist's size.
std::int64_t check_weights(const char* op, const Tensor& x, const AdaptiveSoftmaxWeights& w) {
  KILN_CHECK(x.defined() && x.dim() == 2, "{}: x must be (N, d), got {}", op,
             x.defined() ? x.shape() : Shape{});
  const std::int64_t d = x.size(1), clusters = static_cast<std::int64_t>(w.projections.size());
  KILN_CHECK(w.outputs.size() == w.projections.size(),
             "{}: {} cluster projections but {} cluster outputs", op, w.projections.size(),
             w.outputs.size());
  KILN_CHECK(
      w.head.defined() && w.head.dim() == 2 && w.head.size(1) == d && w.head.size(0) > clusters,
      "{}: head {} must be (shortlist + {} clusters, {}) with a shortlist of one or more", op,
      w.head.defined() ? w.head.shape() : Shape{}, clusters, d);
  for (std::int64_t i = 0; i < clusters; ++i) {
    const Tensor &p = w.projections[i], &o = w.outputs[i];
    KILN_CHECK(p.defined() && o.defined() && p.dim() == 2 && o.dim() == 2 && p.size(1) == d &&
                   o.size(1) == p.size(0) && p.size(0) > 0 && o.size(0) > 0,
               "{}: cluster {}: projection {} and output {} must be (d_i, {}) and (s_i, d_i)", op,
               i, p.defined() ? p.shape() : Shape{}, o.defined() ? o.shape() : Shape{}, d);
  }
  return w.head.size(0) - clusters;
}

// x P_i^T in the dtype x's products read: bf16 for bf16 x or under an Autocast to bf16 (a bf16
// linear outside autocast sums into a float32 result), so that its product with O_i takes
// operands of one dtype, as PyTorch's bf16 Linear rounds its result.
Tensor reduce(const Tensor& x, const Tensor& projection) {
  const Tensor reduced = linear(x, projection);
  const bool bf16 = x.dtype() == DType::bf16 ||
                    (x.dtype() == DType::f32 && autocast_precision() == Precision::bf16);
  return bf16 && reduced.dtype() != DType::bf16 ? reduced.to(DType::bf16) : reduced;
}

}  // namespace

std::int64_t AdaptiveSoftmaxWeights::classes() const {
  std::int64_t v = head.size(0) - static_cast<std::int64_t>(projections.size());
  for (const Tensor& o : outputs) v += o.size(0);
  return v;
}

Tensor adaptive_softmax_loss(const Tensor& x, const AdaptiveSoftmaxWeights& weights,
                             const Tensor& targets, std::int64_t ignore_index) {
  constexpr const char* kOp = "adaptive_softmax_loss";
  profile::Scope scope(profile::Family::vocabulary);
  const std::int64_t shortlist = check_weights(kOp, x, weights);
  check_ids_operand(kOp, "targets", targets, x.device());
  KILN_CHECK(targets.shape() == Shape{x.size(0)}, "{}: targets must have shape [{}], got {}", kOp,
             x.size(0), targets.shape());
  const std::int64_t rows = x.size(0), classes = weights.classes();
  const std::size_t clusters = weights.projections.size();
  // The head's own ignore mark: a user's ignore_index may be a rank in [0, V) and so equal a
  // cluster's head column c_0 + i, which would drop that cluster's rows from the head term.
  constexpr std::int64_t kHeadIgnored = -1;

  // Each row's head target (its rank, or c_0 + i for a rank in cluster i) and, per cluster, its
  // rows and their ranks within the cluster: read on the host.
  const std::vector<std::int64_t> ranks =
      targets.to(Device::cpu()).contiguous().to_vector<std::int64_t>();
  std::vector<std::int64_t> first(clusters + 1, shortlist);  // c_0, c_1, ..., c_n
  for (std::size_t i = 0; i < clusters; ++i) first[i + 1] = first[i] + weights.outputs[i].size(0);
  std::vector<std::int64_t> head_targets(rows);
  std::vector<std::vector<std::int64_t>> cluster_rows(clusters), cluster_targets(clusters);
  std::int64_t counted = 0;
  for (std::int64_t row = 0; row < rows; ++row) {
    const std::int64_t r = ranks[row];
    if (r == ignore_index) {
      head_targets[row] = kHeadIgnored;
      continue;
    }
    KILN_CHECK(r >= 0 && r < classes, "{}: target {} at row {} is outside [0, {})", kOp, r, row,
               classes);
    ++counted;
    if (r < shortlist) {
      head_targets[row] = r;
      continue;
    }
    std::size_t i = 0;
    while (r >= first[i + 1]) ++i;
    head_targets[row] = shortlist + static_cast<std::int64_t>(i);
    cluster_rows[i].push_back(row);
    cluster_targets[i].push_back(r - first[i]);
  }
  KILN_CHECK(counted > 0, "{}: every one of the {} targets is ignore_index ({})", kOp, rows,
             ignore_index);

  Tensor loss = linear_cross_entropy(x, weights.head, from_vector(head_targets, {rows}, x.device()),
                                     kHeadIgnored);
  for (std::size_t i = 0; i < clusters; ++i) {
    const std::int64_t n = static_cast<std::int64_t>(cluster_rows[i].size());
    if (n == 0) continue;
    const Tensor picked = index_select(x, 0, from_vector(cluster_rows[i], {n}, x.device()));
    const Tensor reduced = reduce(picked, weights.projections[i]);  // x P_i^T: (n_i, d_i)
    const Tensor cluster_loss = linear_cross_entropy(
        reduced, weights.outputs[i], from_vector(cluster_targets[i], {n}, x.device()));
    loss = loss + cluster_loss * (static_cast<double>(n) / static_cast<double>(counted));
  }
  return loss;
}

Tensor adaptive_log_softmax(const Tensor& x, const AdaptiveSoftmaxWeights& weights) {
  constexpr const char* kOp = "adaptive_log_softmax";
  profile::Scope scope(profile::Family::vocabulary);
  const std::int64_t shortlist = check_weights(kOp, x, weights);
  // The head's and clusters' logits stay float32 under autocast, as TransformerLM::logits': the
  // operands are cast (bf16 under autocast) before the products run with float32 results.
  const Tensor x_operand = autocast_operand(x), head_operand = autocast_operand(weights.head);
  Tensor head;
  {
    const Autocast float32_result(Precision::f32);
    head = log_softmax(matmul(x_operand, head_operand.t()));
  }
  std::vector<Tensor> parts{head.narrow(1, 0, shortlist)};
  for (std::size_t i = 0; i < weights.projections.size(); ++i) {
    const Tensor reduced = autocast_operand(reduce(x_operand, weights.projections[i]));
    const Tensor output_operand = autocast_operand(weights.outputs[i]);
    Tensor logits;
    {
      const Autocast float32_result(Precision::f32);
      logits = matmul(reduced, output_operand.t());
    }
    const std::int64_t column = shortlist + static_cast<std::int64_t>(i);
    parts.push_back(log_softmax(logits) + head.narrow(1, column, 1));
  }
  return cat(parts, 1);
}

}  // namespace kiln
