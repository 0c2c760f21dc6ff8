// The backend interface: memory and the primitive kernels every op is built from. Ops (core/ops/)
// check arguments, compute shapes and call these; a backend only computes. backend_for(device)
// returns the CPU backend or the CUDA backend. A kernel never throws on valid arguments; the op
// that calls it has already checked them.
//
// Kernels are deterministic: for a fixed thread count (CPU) or launch configuration (CUDA) the
// same inputs give the same bits. Reductions use fixed partitions combined in index order; no
// floating-point atomics.
//
// The kernels come in families, and each family passes its arguments one way, so that a new
// kernel has a pattern to follow:
//   memory             pointers and byte counts, the destination first (as memcpy)
//   elementwise        TensorArg views, the output first, then the op's scalars
//   reductions         a ReduceArgs (dtype, the (outer, reduced, inner) view), then the buffers
//   row kernels        the kernel's own Args (dtype, rows, cols, its scalars), then the buffers
//   matrix products    one Args struct that holds the sizes, the scalars and every operand
//     and attention    (attention's backward adds an AttentionGradArgs of its gradients)
//   indexing           an IndexArgs (dtype, n ids, table rows, cols), then the buffers
//   random             dtype, the output, n, the distribution's parameters, Philox seed and offset
//   optimizer updates  dtype, n, the buffers, then the hyperparameters (core/optimizer_args.h)
// "Then the buffers": device pointers to contiguous data, inputs before outputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "core/device.h"
#include "core/dtype.h"
#include "core/optimizer_args.h"
#include "core/profiler.h"
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
  relu_backward,       // a unless y = relu(x) <= 0 (so a NaN x passes a)
  gelu_tanh_backward,  // a * gelu_tanh'(x)
  gelu_erf_backward,   // a * gelu_erf'(x)
  tanh_backward,       // a * (1 - y^2)
  sigmoid_backward,    // a * y * (1 - y)
};

// ---- Reductions

// Contiguous input viewed as (outer, reduced, inner): a reduction over the middle dim.
struct ReduceArgs {
  DType dtype = DType::f32;
  std::int64_t outer = 1, reduced = 0, inner = 1;
};

// ---- Row kernels: contiguous (rows, cols) inputs and outputs, one row at a time

// Softmax over the last dim of contiguous (rows, cols). With `causal`, row r is query position
// (r % query_len) + query_offset and sees keys 0..that position; the others get probability 0
// (log_softmax: -inf) and no gradient.
// bf16_values (only where Backend::kernels_read_bf16): x and y in the forward, the saved y in the
// backward, are bf16; dtype (float32) is the arithmetic's, dy's and dx's.
struct SoftmaxArgs {
  DType dtype = DType::f32;
  bool bf16_values = false;
  std::int64_t rows = 0, cols = 0;
  bool log = false;
  bool causal = false;
  std::int64_t query_len = 1, query_offset = 0;
};

// Layer normalisation of each row over its cols (eps is the forward's; the backward reads the
// saved mean and rstd instead). bf16_input (only where Backend::kernels_read_bf16): x is bf16
// in both; everything else is dtype (float32).
struct LayerNormArgs {
  DType dtype = DType::f32;
  bool bf16_input = false;
  std::int64_t rows = 0, cols = 0;
  double eps = 1e-5;
};

// Cross-entropy of each row of logits (rows, cols) against one int64 target per row; a row whose
// target is ignore_index counts nothing. scale multiplies the backward's dlogits. row_stride
// (cross_entropy_forward_exp only): elements from one row of logits to the next, 0 for cols.
// bf16_logits (cross_entropy_forward and _backward, only where Backend::kernels_read_bf16): the
// logits are bf16; the loss, logsumexp and dlogits dtype (float32).
struct CrossEntropyArgs {
  DType dtype = DType::f32;
  bool bf16_logits = false;
  std::int64_t rows = 0, cols = 0;
  std::int64_t ignore_index = -100;
  double scale = 1.0;
  std::int64_t row_stride = 0;
};

// ---- Matrix products and attention

// Row-major C = alpha * op(A) * op(B) + beta * C, `batch` times with the given element strides
// between consecutive matrices (0 repeats one matrix). op(X) is X or X^T. C and the arithmetic
// are `dtype`; so are A and B, unless bf16_operands: then A and B hold bfloat16 and dtype is
// float32 (bf16 products, exact in float32, summed in float32: mixed precision's GEMM). With
// bf16_operands, round_a (round_b) says that A (B) holds float32 instead, which the GEMM rounds
// to bf16 (to nearest even, as .to(DType::bf16)) as it reads it: a float32 weight is multiplied
// as bf16 without a bf16 copy of its own. `op` names the caller in errors.
//
// A linear layer's epilogue, for a single product (batch 1, beta 0): `bias` (or null) holds n
// values added to each row of the sums before C is stored, in C's dtype (cuBLASLt's rule: the
// bias has the output's type); bf16_result (with bf16_operands) makes C bf16, the float32 sums
// plus bias rounded to nearest even as they are stored, so that no float32 result is written and
// read again. C = bias + op(A) op(B) is then one pass over C instead of three
// (core/ops/linear.cpp).
struct GemmArgs {
  const char* op = "gemm";
  DType dtype = DType::f32;
  bool bf16_operands = false;
  bool round_a = false, round_b = false;
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
  const void* bias = nullptr;
  bool bf16_result = false;
};

// The rules of BLAS's argument checks (row-major CBLAS; cuBLAS's are the same), checked before
// any BLAS library, cuBLAS or kiln kernel sees a GEMM (both backends' gemm and the attention
// kernels' tile products call it): m, n, k, batch >= 0; each stored matrix's leading dimension
// at least max(1, its row length): lda >= max(1, trans_a ? m : k), ldb >= max(1, trans_b ? k : n),
// ldc >= max(1, n), even for an empty product; each of them at most 2^31 - 1 (the libraries'
// int); a batch's results apart (stride_c >= (m - 1) ldc + n) and its strides >= 0; a bias or
// bf16_result only on a single product (batch 1) with beta 0, bf16_result only with
// bf16_operands. A kiln::Error naming args.op and the arguments otherwise: an op that reads a
// tensor BLAS cannot describe copies it first (core/ops/gemm_operand.h).
void check_gemm(const GemmArgs& args);

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
  const char* op = "attention";  // the caller, for errors
  // q, k and v's dtype; out and logsumexp have it too, except with bf16 operands (CUDA only:
  // the tensor-core kernels of core/cuda/attention_mma.h), where out is out_dtype and logsumexp,
  // dout, dq, dk and dv are float32.
  DType dtype = DType::f32;
  DType out_dtype = DType::f32;
  std::int64_t batch = 0, heads = 0, kv_heads = 0, queries = 0, keys = 0, d = 0;
  double scale = 1.0;
  double dropout_p = 0.0;
  std::uint64_t seed = 0, offset = 0;
  HeadsArg q, k, v;  // (B, heads, queries, d), (B, kv_heads, keys, d) twice
  HeadsArg out;      // (B, heads, queries, d): Y
  // (B, heads, queries), contiguous: L = m + log(l) of each query's row of S, written by the
  // forward and read by the backward.
  void* logsumexp = nullptr;
};

// The gradients of attention_backward: dout is read (laid out as out); dq, dk and dv, laid out
// as they please and shaped as q, k and v, are written.
struct AttentionGradArgs {
  HeadsArg dout, dq, dk, dv;
};

// The attention kernels' argument rules, checked by both backends before a kernel runs (their
// tile products take the row stride as a GEMM's leading dimension): d in [1, kMaxAttentionHeadDim],
// heads a multiple of kv_heads >= 1, keys >= queries >= 0, and every operand's (and, given
// grads, every gradient's) strides >= 0 with rows at least d apart (row_stride >= d), at most
// 2^31 - 1. A kiln::Error naming args.op, the operand and its strides otherwise.
void check_attention(const AttentionArgs& args, const AttentionGradArgs* grads = nullptr);

// ---- Indexing

// Rows of a (table_rows, cols) table picked by n int64 ids; valid ids are in [0, table_rows).
struct IndexArgs {
  DType dtype = DType::f32;
  std::int64_t n = 0, table_rows = 0, cols = 0;
  std::string_view op = {};  // the op whose ids find_invalid_id checks, for a deferred error
  // find_invalid_id on class targets: ids equal to ignore_index are valid, and a deferred error
  // speaks of a target and classes.
  bool targets = false;
  std::int64_t ignore_index = 0;
};

// ---- Multi-tensor optimizer kernels (adam_update_many, sum_squares_many)

// One parameter of a multi-tensor Adam update: n contiguous elements in each array, and its own
// arguments (its group's lr and weight decay; every entry may differ).
struct AdamTensor {
  std::int64_t n = 0;
  void* param = nullptr;
  const void* grad = nullptr;
  void* exp_avg = nullptr;
  void* exp_avg_sq = nullptr;
  AdamArgs args;
};

// One input of sum_squares_many: n contiguous elements.
struct SquaresInput {
  std::int64_t n = 0;
  const void* data = nullptr;
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

  // Whether the kernels of mixed precision's activations take bf16 operands themselves and
  // convert them in registers: unary and binary (any operand, and out, bf16), dropout_apply
  // (dtype bf16: in and out), and the row kernels' bf16 flags (SoftmaxArgs::bf16_values,
  // LayerNormArgs::bf16_input, CrossEntropyArgs::bf16_logits). The CPU and CUDA backends' do;
  // where not, the ops widen bf16 to float32 scratch tensors first and round results back
  // (core/ops/op_utils.h, compute_copy), and the kernels never see bf16.
  virtual bool kernels_read_bf16() const { return false; }

  // Whether find_invalid_id checks on the device and reports at the next synchronisation (see
  // core/backend_kernels.h): ops then also keep their other data-dependent checks and counts on
  // the device (linear_cross_entropy's count of targets), so that a training step never waits.
  virtual bool checks_on_device() const { return false; }

  // A clock of the device's own time for the profiler (profile::time_device, core/profiler.h):
  // CUDA events on the backend's stream. Null for the CPU, whose host clock is its device's.
  virtual std::unique_ptr<profile::DeviceClock> device_clock() { return nullptr; }

  // Whether gemm rounds float32 operands of a bf16 product as it reads them (GemmArgs::round_a,
  // round_b) without a bf16 copy: the CPU's packed kernels do. Where not (cuBLAS reads bf16 but
  // cannot round), the ops hand it autocast's cached bf16 copies of the weights instead
  // (autocast_weight, core/autocast.h), made once per weight while autocast lasts, not once per
  // product.
  virtual bool gemm_rounds_operands() const { return false; }

  // ---- Kernels, one list for the interface and both backends (core/backend_kernels.h)
#define KILN_KERNEL(result, name, parameters) virtual result name parameters = 0;
#include "core/backend_kernels.h"
#undef KILN_KERNEL
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
