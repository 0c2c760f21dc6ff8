#include "distributed/gradient_sync.h"

#include "core/autograd.h"
#include "core/error.h"

namespace kiln::dist {

GradientSync::GradientSync(Communicator& comm, std::span<const Tensor> params,
                           std::int64_t bucket_bytes)
    : comm_(comm), params_(params.begin(), params.end()) {
  KILN_CHECK(bucket_bytes > 0, "GradientSync: bucket_bytes must be positive, got {}", bucket_bytes);
  // Consecutive parameters of one dtype and device share a bucket until it holds bucket_bytes.
  std::int64_t filled = 0;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    KILN_CHECK(p.defined() && is_floating(p.dtype()),
               "GradientSync: parameter {} is undefined or not floating-point", i);
    const std::int64_t bytes = p.numel() * static_cast<std::int64_t>(dtype_size(p.dtype()));
    const bool fits = !buckets_.empty() && filled + bytes <= bucket_bytes &&
                      params_[buckets_.back().params.front()].dtype() == p.dtype() &&
                      params_[buckets_.back().params.front()].device() == p.device();
    if (!fits) {
      buckets_.emplace_back();
      filled = 0;
    }
    Bucket& b = buckets_.back();
    b.offsets.push_back(filled / static_cast<std::int64_t>(dtype_size(p.dtype())));
    b.params.push_back(i);
    filled += bytes;
  }
  for (Bucket& b : buckets_) {
    const Tensor& last = params_[b.params.back()];
    b.flat = empty({b.offsets.back() + last.numel()}, {last.dtype(), last.device()});
  }
}

void GradientSync::allreduce(bool contributes) {
  if (comm_.world_size() == 1) return;  // the gradients are the sum already: no copies
  NoGradGuard no_grad;
  // Which parameters have a gradient on some rank (max of 0/1 flags: exact).
  std::vector<std::int64_t> present(params_.size());
  for (std::size_t i = 0; i < params_.size(); ++i)
    present[i] = contributes && params_[i].grad().defined() ? 1 : 0;
  comm_.allreduce(std::span<std::int64_t>(present), ReduceOp::max);

  for (const Bucket& b : buckets_) {
    for (std::size_t k = 0; k < b.params.size(); ++k) {
      const Tensor& p = params_[b.params[k]];
      const Tensor region = b.flat.narrow(0, b.offsets[k], p.numel());
      if (contributes && p.grad().defined())
        region.copy_(p.grad().reshape({-1}));
      else
        region.fill_(-0.0);  // adds nothing, exactly
    }
    comm_.allreduce(b.flat);
    for (std::size_t k = 0; k < b.params.size(); ++k) {
      const Tensor& p = params_[b.params[k]];
      if (!present[b.params[k]]) continue;
      const Tensor sum = b.flat.narrow(0, b.offsets[k], p.numel()).view(p.shape());
      if (p.grad().defined() && p.grad().is_contiguous())
        p.grad().copy_(sum);
      else
        p.set_grad(sum.clone());
    }
  }
}

}  // namespace kiln::dist
