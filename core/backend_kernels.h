// The backend's kernels, declared once: Backend (core/backend.h) expands this list into pure
// virtual functions, CpuBackend (core/cpu/cpu_backend.h) and CudaBackend (core/cuda/cuda_backend.h)
// into their overrides. A new kernel is one line here and its two implementations.
//
// Each entry is KILN_KERNEL(result, name, (parameters)); the includer defines KILN_KERNEL. The
// argument structs and the families' conventions are in core/backend.h.
// Included once per expansion, on purpose: no #pragma once.

// ---- Elementwise (out and every operand share out.sizes)
KILN_KERNEL(void, fill, (const TensorArg& out, double value))
// out (contiguous, 1-D)[i] = start + i * step.
KILN_KERNEL(void, arange, (const TensorArg& out, double start, double step))
// out = in, converting dtype if they differ.
KILN_KERNEL(void, copy, (const TensorArg& out, const TensorArg& in))
KILN_KERNEL(void, unary, (UnaryOp op, const TensorArg& out, const TensorArg& in, double scalar))
KILN_KERNEL(void, binary,
            (BinaryOp op, const TensorArg& out, const TensorArg& a, const TensorArg& b))
// out = cond != 0 ? a : b (cond of any dtype).
KILN_KERNEL(void, where,
            (const TensorArg& out, const TensorArg& cond, const TensorArg& a, const TensorArg& b))

// ---- Reductions (ReduceArgs)
// out (outer, inner) = sum over the reduced dim.
KILN_KERNEL(void, sum, (const ReduceArgs& args, const void* in, void* out))
// values/indices (outer, inner) = max over the reduced dim and its first index.
KILN_KERNEL(void, max,
            (const ReduceArgs& args, const void* in, void* values, std::int64_t* indices))
// out (1 value, the input's dtype) = sum of squares of all outer * reduced * inner elements.
KILN_KERNEL(void, sum_squares, (const ReduceArgs& args, const void* in, void* out))

// ---- Row kernels (SoftmaxArgs, LayerNormArgs, CrossEntropyArgs)
// y may be x (in place).
KILN_KERNEL(void, softmax_forward, (const SoftmaxArgs& args, const void* x, void* y))
// dx = softmax'(x)^T dy, from the saved output y; dx may be dy (in place).
KILN_KERNEL(void, softmax_backward,
            (const SoftmaxArgs& args, const void* y, const void* dy, void* dx))
// y = (x - mean) * rstd * gamma + beta per row; mean and rstd (rows) saved for backward.
KILN_KERNEL(void, layer_norm_forward,
            (const LayerNormArgs& args, const void* x, const void* gamma, const void* beta, void* y,
             void* mean, void* rstd))
// dx (rows, cols), dgamma and dbeta (cols) from x, gamma, the saved mean/rstd and dy.
KILN_KERNEL(void, layer_norm_backward,
            (const LayerNormArgs& args, const void* x, const void* gamma, const void* mean,
             const void* rstd, const void* dy, void* dx, void* dgamma, void* dbeta))
// Per row: loss = logsumexp(logits) - logits[target] (0 where target == ignore_index), and
// the row's max m and log_sum = log(sum exp(logits - m)) saved for backward as row_stats[2 r]
// and row_stats[2 r + 1] (2 rows values). Targets are valid ids or ignore_index.
KILN_KERNEL(void, cross_entropy_forward,
            (const CrossEntropyArgs& args, const void* logits, const std::int64_t* targets,
             void* loss, void* row_stats))
// dlogits = (softmax(logits) - onehot(target)) * (*grad_loss) * scale; 0 on ignored rows; the
// softmax as exp((logits - m) - log_sum), accurate however large the logits (exp(logits - lse)
// with lse rounded to the dtype lost eps |lse|). grad_loss points at one element on the device.
KILN_KERNEL(void, cross_entropy_backward,
            (const CrossEntropyArgs& args, const void* logits, const std::int64_t* targets,
             const void* row_stats, const void* grad_loss, void* dlogits))

// As cross_entropy_forward, and then overwrites each row of logits in place with
// exp(logits - shift), for a per-row shift of the backend's choosing, and sets row_scale so that
// softmax(logits)[r] = logits'[r] * row_scale[r]; ignored rows become 0 with row_scale 0. The
// softmax without a normalising pass over the (rows, cols) logits: the tied LM head folds
// row_scale into its small operands instead (core/ops/linear_cross_entropy.h).
KILN_KERNEL(void, cross_entropy_forward_exp,
            (const CrossEntropyArgs& args, void* logits, const std::int64_t* targets, void* loss,
             void* logsumexp, void* row_scale))

// ---- Matrix products and attention (GemmArgs, AttentionArgs; attention's d at most
// kMaxAttentionHeadDim)
KILN_KERNEL(void, gemm, (const GemmArgs& args))
// Writes out and logsumexp.
KILN_KERNEL(void, attention_forward, (const AttentionArgs& args))
// grads.dq, dk, dv from the forward's out and logsumexp and grads.dout: every element of dq,
// dk and dv is written. Recomputes S and A tile by tile; a kv head's dk and dv sum its query
// heads in head order (no atomics).
KILN_KERNEL(void, attention_backward, (const AttentionArgs& args, const AttentionGradArgs& grads))

// ---- Indexing (IndexArgs)
// Index of the first id outside [0, table_rows), or -1 when all are valid (reads n, table_rows,
// op). A backend may instead check on its device and return -1 at once, so that no step waits for
// the answer (CUDA): its next synchronisation then raises the kiln::Error, naming op, the id, its
// position and table_rows, and gather_rows / scatter_add_rows read an invalid id until then as a
// row of zeros / a row to skip.
KILN_KERNEL(std::int64_t, find_invalid_id, (const IndexArgs& args, const std::int64_t* ids))
// out[i, :] = table[ids[i], :] for i < n.
KILN_KERNEL(void, gather_rows,
            (const IndexArgs& args, const void* table, const std::int64_t* ids, void* out))
// table_grad[ids[i], :] += grad[i, :], partitioned over table rows, adding each row's
// contributions in the order of i (deterministic, no atomics).
KILN_KERNEL(void, scatter_add_rows,
            (const IndexArgs& args, const void* grad, const std::int64_t* ids, void* table_grad))

// ---- Randomness (Philox4x32-10, core/philox.h): n contiguous elements
KILN_KERNEL(void, random_uniform,
            (DType dtype, void* out, std::int64_t n, double low, double high, std::uint64_t seed,
             std::uint64_t offset))
KILN_KERNEL(void, random_normal,
            (DType dtype, void* out, std::int64_t n, double mean, double std, std::uint64_t seed,
             std::uint64_t offset))
// mask[i] = 1/(1-p) where the element is kept, 0 where it is dropped.
KILN_KERNEL(void, dropout_mask,
            (DType dtype, void* mask, std::int64_t n, double p, std::uint64_t seed,
             std::uint64_t offset))
// out[i] = in[i] * mask[i] with the mask dropout_mask draws, in one pass and without the mask
// in memory (dropout's forward and backward). in and out do not overlap.
KILN_KERNEL(void, dropout_apply,
            (DType dtype, void* out, const void* in, std::int64_t n, double p, std::uint64_t seed,
             std::uint64_t offset))

// ---- Optimizer updates (contiguous, n elements)
KILN_KERNEL(void, adam_update,
            (DType dtype, std::int64_t n, void* param, const void* grad, void* exp_avg,
             void* exp_avg_sq, const AdamArgs& args))
KILN_KERNEL(void, sgd_update,
            (DType dtype, std::int64_t n, void* param, const void* grad, void* momentum_buffer,
             const SgdArgs& args))
// adam_update on every entry of `tensors` (one dtype), each with its own args, results equal to
// adam_update's bit for bit. A backend may update them all at once: CUDA makes one launch over
// a device table of chunks, however many tensors (PyTorch's multi_tensor_apply).
KILN_KERNEL(void, adam_update_many, (DType dtype, std::span<const AdamTensor> tensors))
// out[i] (tensors.size() values of `dtype`) = Σ x² over tensors[i], summed in float64 and
// rounded once (0 for an empty tensor). CPU: sum_squares on each; CUDA: two launches however
// many tensors, deterministic (core/cuda/optim.cu states the order).
KILN_KERNEL(void, sum_squares_many, (DType dtype, std::span<const SquaresInput> tensors, void* out))
// The step ledger (StepLedger, core/optimizer_args.h) from the step's window losses and the
// gradients' sums of squares (float64), in one thread and in order, as the host would add them.
KILN_KERNEL(void, step_guard,
            (const StepGuardArgs& args, const double* losses, const double* sums, double* ledger))
