// The backend interface: memory and the primitive kernels every op is built from. Ops (core/ops/)
// check arguments, compute shapes and call these; a backend only computes. backend_for(device)
// returns the CPU backend or the CUDA backend. A kernel never throws on valid arguments; the op
// that calls it has already checked them.
//
// Kernels are deterministic: for a fixed thread count (CPU) or launch configuration (CUDA) the
// same inputs give the same bits. Reductions use fixed partitions combined in index order; no
// floating-point atomics.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/device.h"
#include "core/dtype.h"
#include "core/optimizer_args.h"
#include "core/shape.h"

namespace kiln {

// A raw strided view of a tensor for a kernel: the first element, the dtype, and sizes/strides in
// elements. For elementwise kernels every operand has the output's sizes; a broadcast operand
// has stride 0 along the stretched dims.
struct TensorArg {
  void* data = nullptr;
  DType dtype = DType::f32;
  Shape sizes;
  Shape strides;
};

enum class UnaryOp : std::uint8_t {
  neg,
  exp,
  log,
  sqrt,
  tanh,
  sigmoid,
  relu,
  gelu_tanh,
  gelu_erf,
  pow_scalar,   // x^s
  add_scalar,   // x + s
  mul_scalar,   // x * s
  rsub_scalar,  // s - x
  rdiv_scalar,  // s / x
  div_scalar,   // x / s
};

enum class BinaryOp : std::uint8_t {
  add,
  sub,
  mul,
  div,
  eq,
  ne,
  lt,
  le,
  gt,
  ge,  // 1 where true, 0 where false, in the inputs' dtype
  // Backward of activations: (a = upstream gradient, b = the saved input x or output y).
  relu_backward,       // a * (x > 0)
  gelu_tanh_backward,  // a * gelu_tanh'(x)
  gelu_erf_backward,   // a * gelu_erf'(x)
  tanh_backward,       // a * (1 - y^2)
  sigmoid_backward,    // a * y * (1 - y)
};

// Row-major C = alpha * op(A) * op(B) + beta * C, `batch` times with the given element strides
// between consecutive matrices (0 repeats one matrix). op(X) is X or X^T.
struct GemmArgs {
  DType dtype = DType::f32;
  bool trans_a = false, trans_b = false;
  std::int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  std::int64_t lda = 0;
  const void* b = nullptr;
  std::int64_t ldb = 0;
  void* c = nullptr;
  std::int64_t ldc = 0;
  double alpha = 1.0, beta = 0.0;
  std::int64_t batch = 1;
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

// Softmax over the last dim of contiguous (rows, cols). With `causal`, row r is query position
// (r % query_len) + query_offset and sees keys 0..that position; the others get probability 0
// (log_softmax: -inf) and no gradient.
struct SoftmaxArgs {
  DType dtype = DType::f32;
  std::int64_t rows = 0, cols = 0;
  bool log = false;
  bool causal = false;
  std::int64_t query_len = 1, query_offset = 0;
};

// One attention operand, (B, heads, T, d) inside a larger buffer with each row of d contiguous:
// element (b, i, t, c) is at data + b batch_stride + i head_stride + t row_stride + c (strides
// in elements). A head of a fused QKV projection (B, T, W) has strides (T W, d, W); a
// contiguous (B, heads, T, d) tensor has (heads T d, T d, d).
struct HeadsArg {
  void* data = nullptr;
  std::int64_t batch_stride = 0, head_stride = 0, row_stride = 0;
};

// Causal attention computed tile by tile with an online softmax (core/ops/attention.h):
//   S = scale Q K^T,  A = softmax(S) over the keys j <= t + (keys - queries) of query t (the
//   queries are the last `queries` of the `keys` positions),  Y = (A * Z) V,
// query head i reading kv head i kv_heads / heads, Z the dropout mask of philox::attention_keep
// scaled by 1 / (1 - p) (none when dropout_p is 0). No (queries, keys) matrix is stored.
// The largest head size the attention kernels take (the CUDA kernels keep tiles of it in
// static shared memory); ops check it.
constexpr std::int64_t kMaxAttentionHeadDim = 256;

struct AttentionArgs {
  DType dtype = DType::f32;
  std::int64_t batch = 0, heads = 0, kv_heads = 0, queries = 0, keys = 0, d = 0;
  double scale = 1.0;
  double dropout_p = 0.0;
  std::uint64_t seed = 0, offset = 0;
  HeadsArg q, k, v;  // (B, heads, queries, d), (B, kv_heads, keys, d) twice
  HeadsArg out;      // (B, heads, queries, d): Y
};

class Backend {
 public:
  virtual ~Backend() = default;

  // ---- Memory
  virtual void* allocate(std::size_t nbytes) = 0;
  virtual void deallocate(void* ptr, std::size_t nbytes) = 0;
  virtual void copy_from_host(void* dst, const void* src, std::size_t nbytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, std::size_t nbytes) = 0;
  // Bytes held for tensors now and at most since start (CPU: live tensor bytes).
  virtual std::size_t bytes_in_use() const = 0;
  virtual std::size_t peak_bytes_in_use() const = 0;

  // ---- Elementwise (out and every operand share out.sizes)
  virtual void fill(const TensorArg& out, double value) = 0;
  virtual void arange(const TensorArg& out, double start, double step) = 0;  // out contiguous 1-D
  // out = in, converting dtype if they differ.
  virtual void copy(const TensorArg& out, const TensorArg& in) = 0;
  virtual void unary(UnaryOp op, const TensorArg& out, const TensorArg& in, double scalar) = 0;
  virtual void binary(BinaryOp op, const TensorArg& out, const TensorArg& a,
                      const TensorArg& b) = 0;
  // out = cond != 0 ? a : b (cond of any dtype).
  virtual void where(const TensorArg& out, const TensorArg& cond, const TensorArg& a,
                     const TensorArg& b) = 0;

  // ---- Reductions over contiguous input viewed as (outer, reduced, inner)
  // out (outer, inner) = sum over the reduced dim.
  virtual void sum(DType dtype, const void* in, void* out, std::int64_t outer, std::int64_t reduced,
                   std::int64_t inner) = 0;
  // values/indices (outer, inner) = max over the reduced dim and its first index.
  virtual void max(DType dtype, const void* in, void* values, std::int64_t* indices,
                   std::int64_t outer, std::int64_t reduced, std::int64_t inner) = 0;
  // out (1 value, the input's dtype) = sum of squares of n contiguous elements.
  virtual void sum_squares(DType dtype, const void* in, std::int64_t n, void* out) = 0;

  // ---- Matrix products
  virtual void gemm(const GemmArgs& args) = 0;

  // ---- Fused rows (contiguous (rows, cols) inputs and outputs)
  // y may be x (in place).
  virtual void softmax_forward(const SoftmaxArgs& args, const void* x, void* y) = 0;
  // dx = softmax'(x)^T dy, from the saved output y; dx may be dy (in place).
  virtual void softmax_backward(const SoftmaxArgs& args, const void* y, const void* dy,
                                void* dx) = 0;
  // y = (x - mean) * rstd * gamma + beta per row; mean and rstd (rows) saved for backward.
  virtual void layer_norm_forward(DType dtype, std::int64_t rows, std::int64_t cols, double eps,
                                  const void* x, const void* gamma, const void* beta, void* y,
                                  void* mean, void* rstd) = 0;
  // dx (rows, cols), dgamma and dbeta (cols) from x, gamma, the saved mean/rstd and dy.
  virtual void layer_norm_backward(DType dtype, std::int64_t rows, std::int64_t cols, const void* x,
                                   const void* gamma, const void* mean, const void* rstd,
                                   const void* dy, void* dx, void* dgamma, void* dbeta) = 0;
  // Per row: loss = logsumexp(logits) - logits[target] (0 where target == ignore_index) and the
  // logsumexp, saved for backward. Targets are valid ids or ignore_index.
  virtual void cross_entropy_forward(DType dtype, std::int64_t rows, std::int64_t cols,
                                     const void* logits, const std::int64_t* targets,
                                     std::int64_t ignore_index, void* loss, void* logsumexp) = 0;
  // dlogits = (softmax(logits) - onehot(target)) * (*grad_loss) * scale; 0 on ignored rows.
  // grad_loss points at one element on the device.
  virtual void cross_entropy_backward(DType dtype, std::int64_t rows, std::int64_t cols,
                                      const void* logits, const std::int64_t* targets,
                                      std::int64_t ignore_index, const void* logsumexp,
                                      const void* grad_loss, double scale, void* dlogits) = 0;

  // As cross_entropy_forward, and then overwrites each row of logits in place with
  // exp(logits - shift), for a per-row shift of the backend's choosing, and sets row_scale so that
  // softmax(logits)[r] = logits'[r] * row_scale[r]; ignored rows become 0 with row_scale 0. The
  // softmax without a normalising pass over the (rows, cols) logits: the tied LM head folds
  // row_scale into its small operands instead (core/ops/linear_cross_entropy.h).
  virtual void cross_entropy_forward_exp(DType dtype, std::int64_t rows, std::int64_t cols,
                                         void* logits, const std::int64_t* targets,
                                         std::int64_t ignore_index, void* loss, void* logsumexp,
                                         void* row_scale) = 0;

  // ---- Attention (AttentionArgs above; d at most kMaxAttentionHeadDim)
  // Writes out and logsumexp (B, heads, queries), L = m + log(l) of each query's row of S.
  virtual void attention_forward(const AttentionArgs& args, void* logsumexp) = 0;
  // dq, dk, dv (layouts of their own, shaped as q, k, v) from the forward's out and logsumexp
  // and dout (laid out as out): every element of dq, dk and dv is written. Recomputes S and A
  // tile by tile; a kv head's dk and dv sum its query heads in head order (no atomics).
  virtual void attention_backward(const AttentionArgs& args, const void* logsumexp,
                                  const HeadsArg& dout, const HeadsArg& dq, const HeadsArg& dk,
                                  const HeadsArg& dv) = 0;

  // ---- Indexing
  // Index of the first id outside [0, limit), or -1 when all are valid.
  virtual std::int64_t find_invalid_id(const std::int64_t* ids, std::int64_t n,
                                       std::int64_t limit) = 0;
  // out[i, :] = table[ids[i], :] for i < n; table (table_rows, cols).
  virtual void gather_rows(DType dtype, const void* table, std::int64_t cols,
                           const std::int64_t* ids, std::int64_t n, void* out) = 0;
  // table_grad[ids[i], :] += grad[i, :], partitioned over table rows, adding each row's
  // contributions in the order of i (deterministic, no atomics).
  virtual void scatter_add_rows(DType dtype, const void* grad, const std::int64_t* ids,
                                std::int64_t n, std::int64_t cols, void* table_grad,
                                std::int64_t table_rows) = 0;

  // ---- Randomness (Philox4x32-10, core/philox.h): n contiguous elements
  virtual void random_uniform(DType dtype, void* out, std::int64_t n, double low, double high,
                              std::uint64_t seed, std::uint64_t offset) = 0;
  virtual void random_normal(DType dtype, void* out, std::int64_t n, double mean, double std,
                             std::uint64_t seed, std::uint64_t offset) = 0;
  // mask[i] = 1/(1-p) where the element is kept, 0 where it is dropped.
  virtual void dropout_mask(DType dtype, void* mask, std::int64_t n, double p, std::uint64_t seed,
                            std::uint64_t offset) = 0;

  // ---- Optimizer updates (contiguous, n elements)
  virtual void adam_update(DType dtype, std::int64_t n, void* param, const void* grad,
                           void* exp_avg, void* exp_avg_sq, const AdamArgs& args) = 0;
  virtual void sgd_update(DType dtype, std::int64_t n, void* param, const void* grad,
                          void* momentum_buffer, const SgdArgs& args) = 0;
};

// The backend for a device: the CPU backend, or the CUDA backend when kiln was built with CUDA
// and the device exists (a kiln::Error otherwise).
Backend& backend_for(Device device);

// The CUDA backend for device index, or an error naming the reason (no CUDA in this build, no
// such device). Implemented by core/cuda/ when CUDA is built, by core/no_cuda.cpp otherwise.
Backend& cuda_backend(int index);

// The CPU backend's GEMM libraries, for environment summaries: "openblas (Haswell kernels)",
// "blis (zen3 kernels)" or "eigen", with "+ blis (zen3 kernels) for n <= 768" when large narrow
// products go through BLIS. Implemented by core/cpu/blas_library.cpp, so that core/environment.cpp
// needs no header of the CPU backend's.
std::string cpu_gemm_source();

}  // namespace kiln
