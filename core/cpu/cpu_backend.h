// The CPU backend: Eigen (or OpenBLAS) GEMM, OpenMP loops with fixed partitions. Its kernels
// live in one file per family beside this header (memory, elementwise, reduce, gemm, rows,
// indexing, random, optim).
#pragma once

#include <atomic>

#include "core/backend.h"

namespace kiln {

class CpuBackend final : public Backend {
 public:
  void* allocate(std::size_t nbytes) override;
  void deallocate(void* ptr, std::size_t nbytes) override;
  void copy_from_host(void* dst, const void* src, std::size_t nbytes) override;
  void copy_to_host(void* dst, const void* src, std::size_t nbytes) override;
  std::size_t bytes_in_use() const override { return bytes_in_use_.load(); }
  std::size_t peak_bytes_in_use() const override { return peak_bytes_.load(); }
  // Restarts the peak at the bytes in use now (benchmarks and tests measure one region's peak).
  void reset_peak_bytes_in_use() { peak_bytes_.store(bytes_in_use_.load()); }

  void fill(const TensorArg& out, double value) override;
  void arange(const TensorArg& out, double start, double step) override;
  void copy(const TensorArg& out, const TensorArg& in) override;
  void unary(UnaryOp op, const TensorArg& out, const TensorArg& in, double scalar) override;
  void binary(BinaryOp op, const TensorArg& out, const TensorArg& a, const TensorArg& b) override;
  void where(const TensorArg& out, const TensorArg& cond, const TensorArg& a,
             const TensorArg& b) override;

  void sum(const ReduceArgs& args, const void* in, void* out) override;
  void max(const ReduceArgs& args, const void* in, void* values, std::int64_t* indices) override;
  void sum_squares(const ReduceArgs& args, const void* in, void* out) override;

  void softmax_forward(const SoftmaxArgs& args, const void* x, void* y) override;
  void softmax_backward(const SoftmaxArgs& args, const void* y, const void* dy, void* dx) override;
  void layer_norm_forward(const LayerNormArgs& args, const void* x, const void* gamma,
                          const void* beta, void* y, void* mean, void* rstd) override;
  void layer_norm_backward(const LayerNormArgs& args, const void* x, const void* gamma,
                           const void* mean, const void* rstd, const void* dy, void* dx,
                           void* dgamma, void* dbeta) override;
  void cross_entropy_forward(const CrossEntropyArgs& args, const void* logits,
                             const std::int64_t* targets, void* loss, void* logsumexp) override;
  void cross_entropy_backward(const CrossEntropyArgs& args, const void* logits,
                              const std::int64_t* targets, const void* logsumexp,
                              const void* grad_loss, void* dlogits) override;
  void cross_entropy_forward_exp(const CrossEntropyArgs& args, void* logits,
                                 const std::int64_t* targets, void* loss, void* logsumexp,
                                 void* row_scale) override;

  void gemm(const GemmArgs& args) override;
  void attention_forward(const AttentionArgs& args) override;
  void attention_backward(const AttentionArgs& args, const AttentionGradArgs& grads) override;

  std::int64_t find_invalid_id(const IndexArgs& args, const std::int64_t* ids) override;
  void gather_rows(const IndexArgs& args, const void* table, const std::int64_t* ids,
                   void* out) override;
  void scatter_add_rows(const IndexArgs& args, const void* grad, const std::int64_t* ids,
                        void* table_grad) override;

  void random_uniform(DType dtype, void* out, std::int64_t n, double low, double high,
                      std::uint64_t seed, std::uint64_t offset) override;
  void random_normal(DType dtype, void* out, std::int64_t n, double mean, double std,
                     std::uint64_t seed, std::uint64_t offset) override;
  void dropout_mask(DType dtype, void* mask, std::int64_t n, double p, std::uint64_t seed,
                    std::uint64_t offset) override;
  void dropout_apply(DType dtype, void* out, const void* in, std::int64_t n, double p,
                     std::uint64_t seed, std::uint64_t offset) override;

  void adam_update(DType dtype, std::int64_t n, void* param, const void* grad, void* exp_avg,
                   void* exp_avg_sq, const AdamArgs& args) override;
  void sgd_update(DType dtype, std::int64_t n, void* param, const void* grad, void* momentum_buffer,
                  const SgdArgs& args) override;

 private:
  std::atomic<std::size_t> bytes_in_use_{0};
  std::atomic<std::size_t> peak_bytes_{0};
};

CpuBackend& cpu_backend();

}  // namespace kiln
