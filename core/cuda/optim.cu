// Fused optimizer updates on CUDA: one pass over a parameter, its gradient and its state, with
// the formulas and the order of operations of core/cpu/optim.cpp (PyTorch's torch.optim rules,
// documented in optim/adam.h and optim/sgd.h). The scalars are computed once on the host, in
// double and then rounded, exactly as the CPU backend does. A guarded update reads its gradient
// scale and its go-ahead from the step ledger on the device (StepLedger, core/optimizer_args.h),
// which step_guard_kernel writes with the CPU's arithmetic (core/step_guard_math.h).
//
// Multi-tensor launches (PyTorch's multi_tensor_apply, apex): adam_update_many and
// sum_squares_many cut every tensor into chunks of at most kChunk elements and upload one table
// of (pointers, size) chunks per call with copy_from_host (no host wait); one block takes one
// chunk at a time. So a step makes the same launches for 2 parameters or 200:
//   adam_update_many   1 launch; each element goes through adam_element, as in adam_kernel, so
//                      the result is the per-tensor kernel's bit for bit
//   sum_squares_many   2 launches. The order of Σ x² of one tensor: each chunk of kChunk
//                      elements is summed by one block in float64, thread j adding elements
//                      j, j + 256, ... in increasing order, then block_reduce's butterfly; the
//                      chunks' partials are then added in chunk order by one thread per tensor
//                      and rounded once to the dtype. No atomics: the same bits on every run.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/cuda/block_reduce.cuh"
#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/launch.h"
#include "core/cuda/scratch.h"
#include "core/elementwise_math.h"
#include "core/step_guard_math.h"

namespace kiln {

namespace gpu {
namespace {

template <typename T>
struct AdamScalars {
  T step_size, sqrt_bc2, beta1, beta2, one_minus_beta1, one_minus_beta2, eps, wd, decay, scale;
  bool decoupled;
};

// The gradient scale of an update: the host's, or the ledger's when guarded. False when the
// ledger says to skip the update.
template <typename T>
__device__ inline bool guarded_scale(const double* guard, T& scale) {
  if (guard == nullptr) return true;
  if (guard[StepLedger::apply] == 0.0) return false;
  scale = static_cast<T>(guard[StepLedger::scale]);
  return true;
}

// The scalars of one Adam update, from its double-precision arguments as the CPU computes them.
template <typename T>
AdamScalars<T> adam_scalars(const AdamArgs& a) {
  const double bias_correction1 = 1.0 - std::pow(a.beta1, static_cast<double>(a.step));
  const double bias_correction2 = 1.0 - std::pow(a.beta2, static_cast<double>(a.step));
  return {static_cast<T>(a.lr / bias_correction1),
          static_cast<T>(std::sqrt(bias_correction2)),
          static_cast<T>(a.beta1),
          static_cast<T>(a.beta2),
          static_cast<T>(1.0 - a.beta1),
          static_cast<T>(1.0 - a.beta2),
          static_cast<T>(a.eps),
          static_cast<T>(a.weight_decay),
          static_cast<T>(1.0 - a.lr * a.weight_decay),
          static_cast<T>(a.grad_scale),
          a.decoupled_weight_decay};
}

// Element i of one Adam update: the single place of its arithmetic on CUDA, so that the
// per-tensor and the multi-tensor kernels give the same bits.
template <typename T>
__device__ inline void adam_element(std::int64_t i, T* p, const T* g, T* m, T* v,
                                    const AdamScalars<T>& s) {
  T gi = g[i] * s.scale;
  T pi = p[i];
  if (s.decoupled) {
    pi *= s.decay;
  } else {
    gi += s.wd * pi;
  }
  const T mi = s.beta1 * m[i] + s.one_minus_beta1 * gi;
  const T vi = s.beta2 * v[i] + s.one_minus_beta2 * gi * gi;
  const T denom = math::sqrt(vi) / s.sqrt_bc2 + s.eps;
  m[i] = mi;
  v[i] = vi;
  p[i] = pi - s.step_size * (mi / denom);
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    adam_kernel(std::int64_t n, T* p, const T* g, T* m, T* v, AdamScalars<T> s,
                const double* guard) {
  if (!guarded_scale(guard, s.scale)) return;
  for (std::int64_t i = thread_index(); i < n; i += thread_count()) adam_element(i, p, g, m, v, s);
}

// Elements per chunk of the multi-tensor kernels (PyTorch's multi_tensor_apply uses 65536).
constexpr std::int64_t kChunk = 65536;

// One parameter of a multi-tensor Adam update, in the uploaded table.
template <typename T>
struct AdamEntry {
  AdamScalars<T> s;
  const double* guard;
};

// Up to kChunk elements of one parameter, from element `begin`.
struct Chunk {
  std::int64_t entry, begin, n;
};

template <typename T>
struct AdamPointers {
  T* p;
  const T* g;
  T* m;
  T* v;
};

// One block per chunk at a time; an entry's guard may skip its chunks.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    adam_many_kernel(const Chunk* chunks, std::int64_t count, const AdamEntry<T>* entries,
                     const AdamPointers<T>* pointers) {
  for (std::int64_t c = blockIdx.x; c < count; c += gridDim.x) {
    const Chunk chunk = chunks[c];
    AdamScalars<T> s = entries[chunk.entry].s;
    if (!guarded_scale(entries[chunk.entry].guard, s.scale)) continue;
    const AdamPointers<T> a = pointers[chunk.entry];
    for (std::int64_t i = chunk.begin + threadIdx.x; i < chunk.begin + chunk.n; i += blockDim.x)
      adam_element(i, a.p, a.g, a.m, a.v, s);
  }
}

// partial[c] = Σ x² over chunk c in float64 (the order is in the header comment).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    squares_chunks(const Chunk* chunks, std::int64_t count, const T* const* inputs,
                   double* partial) {
  __shared__ double shared[kWarp];
  for (std::int64_t c = blockIdx.x; c < count; c += gridDim.x) {
    const Chunk chunk = chunks[c];
    const T* x = inputs[chunk.entry];
    double acc = 0.0;
    for (std::int64_t i = chunk.begin + threadIdx.x; i < chunk.begin + chunk.n; i += blockDim.x) {
      const double v = static_cast<double>(x[i]);
      acc += v * v;
    }
    acc = block_reduce(acc, SumOp{}, 0.0, shared);
    if (threadIdx.x == 0) partial[c] = acc;
  }
}

// out[t] = the partials of tensor t's chunks, first[t] to first[t + 1], added in order.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    squares_totals(const std::int64_t* first, std::int64_t tensors, const double* partial, T* out) {
  for (std::int64_t t = thread_index(); t < tensors; t += thread_count()) {
    double acc = 0.0;
    for (std::int64_t c = first[t]; c < first[t + 1]; ++c) acc += partial[c];
    out[t] = static_cast<T>(acc);
  }
}

// The chunks of tensors of sizes n[0], n[1], ...: empty tensors have none. first (n.size() + 1)
// receives the index of each tensor's first chunk and the total.
template <typename Sizes>
std::vector<Chunk> chunks_of(const Sizes& sizes, std::vector<std::int64_t>& first) {
  std::vector<Chunk> chunks;
  first.clear();
  std::int64_t entry = 0;
  for (const auto& t : sizes) {
    first.push_back(static_cast<std::int64_t>(chunks.size()));
    for (std::int64_t begin = 0; begin < t.n; begin += kChunk)
      chunks.push_back({entry, begin, t.n - begin < kChunk ? t.n - begin : kChunk});
    ++entry;
  }
  first.push_back(static_cast<std::int64_t>(chunks.size()));
  return chunks;
}

// Host arrays packed into one device buffer, uploaded with one copy that does not wait.
class Table {
 public:
  // Appends `values` (8-byte aligned) and returns their offset.
  template <typename V>
  std::size_t add(const std::vector<V>& values) {
    const std::size_t offset = (bytes_.size() + 7) / 8 * 8;
    bytes_.resize(offset + values.size() * sizeof(V));
    if (!values.empty())
      std::memcpy(bytes_.data() + offset, values.data(), values.size() * sizeof(V));
    return offset;
  }
  std::size_t size() const { return bytes_.size(); }
  const unsigned char* data() const { return bytes_.data(); }

 private:
  std::vector<unsigned char> bytes_;
};

template <typename T>
struct SgdScalars {
  T lr, momentum, one_minus_dampening, wd, scale;
  bool use_momentum, nesterov, first_step;
};

template <typename T>
__global__ void __launch_bounds__(kThreads)
    sgd_kernel(std::int64_t n, T* p, const T* g, T* buf, SgdScalars<T> s, const double* guard) {
  if (!guarded_scale(guard, s.scale)) return;
  for (std::int64_t i = thread_index(); i < n; i += thread_count()) {
    const T pi = p[i];
    T d = g[i] * s.scale + s.wd * pi;
    if (s.use_momentum) {
      const T b = s.first_step ? d : s.momentum * buf[i] + s.one_minus_dampening * d;
      buf[i] = b;
      d = s.nesterov ? d + s.momentum * b : b;
    }
    p[i] = pi - s.lr * d;
  }
}

// One thread: the ledger's sums are added in order, as on the host.
__global__ void step_guard_kernel(StepGuardArgs args, const double* losses, const double* sums,
                                  double* ledger) {
  if (blockIdx.x == 0 && threadIdx.x == 0) step_guard_math::update(args, losses, sums, ledger);
}

}  // namespace
}  // namespace gpu

void CudaBackend::adam_update(DType dtype, std::int64_t n, void* param, const void* grad,
                              void* exp_avg, void* exp_avg_sq, const AdamArgs& a) {
  if (n == 0) return;
  activate();
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const gpu::AdamScalars<T> s = gpu::adam_scalars<T>(a);
    KILN_LAUNCH(gpu::blocks_for(n), gpu::kThreads, stream_, gpu::adam_kernel<T>)
    (n, static_cast<T*>(param), static_cast<const T*>(grad), static_cast<T*>(exp_avg),
     static_cast<T*>(exp_avg_sq), s, a.guard);
    KILN_CUDA_CHECK_LAUNCH();
  });
}

void CudaBackend::adam_update_many(DType dtype, std::span<const AdamTensor> tensors) {
  std::vector<std::int64_t> first;
  const std::vector<gpu::Chunk> chunks = gpu::chunks_of(tensors, first);
  if (chunks.empty()) return;
  activate();
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    std::vector<gpu::AdamEntry<T>> entries;
    std::vector<gpu::AdamPointers<T>> pointers;
    for (const AdamTensor& t : tensors) {
      entries.push_back({gpu::adam_scalars<T>(t.args), t.args.guard});
      pointers.push_back({static_cast<T*>(t.param), static_cast<const T*>(t.grad),
                          static_cast<T*>(t.exp_avg), static_cast<T*>(t.exp_avg_sq)});
    }
    gpu::Table table;
    const std::size_t at_chunks = table.add(chunks), at_entries = table.add(entries),
                      at_pointers = table.add(pointers);
    const Scratch<unsigned char> device(*allocator_, static_cast<std::int64_t>(table.size()));
    copy_from_host(device.get(), table.data(), table.size());
    const auto count = static_cast<std::int64_t>(chunks.size());
    KILN_LAUNCH(gpu::blocks_for(count, 1), gpu::kThreads, stream_, gpu::adam_many_kernel<T>)
    (reinterpret_cast<const gpu::Chunk*>(device.get() + at_chunks), count,
     reinterpret_cast<const gpu::AdamEntry<T>*>(device.get() + at_entries),
     reinterpret_cast<const gpu::AdamPointers<T>*>(device.get() + at_pointers));
    KILN_CUDA_CHECK_LAUNCH();
  });
}

void CudaBackend::sum_squares_many(DType dtype, std::span<const SquaresInput> tensors, void* out) {
  if (tensors.empty()) return;
  std::vector<std::int64_t> first;
  const std::vector<gpu::Chunk> chunks = gpu::chunks_of(tensors, first);
  activate();
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    std::vector<const T*> inputs;
    for (const SquaresInput& t : tensors) inputs.push_back(static_cast<const T*>(t.data));
    gpu::Table table;
    const std::size_t at_chunks = table.add(chunks), at_inputs = table.add(inputs),
                      at_first = table.add(first);
    const Scratch<unsigned char> device(*allocator_, static_cast<std::int64_t>(table.size()));
    copy_from_host(device.get(), table.data(), table.size());
    const auto count = static_cast<std::int64_t>(chunks.size());
    const Scratch<double> partial(*allocator_, count > 0 ? count : 1);
    KILN_LAUNCH(gpu::blocks_for(count, 1), gpu::kThreads, stream_, gpu::squares_chunks<T>)
    (reinterpret_cast<const gpu::Chunk*>(device.get() + at_chunks), count,
     reinterpret_cast<const T* const*>(device.get() + at_inputs), partial.get());
    KILN_CUDA_CHECK_LAUNCH();
    const auto n = static_cast<std::int64_t>(tensors.size());
    KILN_LAUNCH(gpu::blocks_for(n), gpu::kThreads, stream_, gpu::squares_totals<T>)
    (reinterpret_cast<const std::int64_t*>(device.get() + at_first), n, partial.get(),
     static_cast<T*>(out));
    KILN_CUDA_CHECK_LAUNCH();
  });
}

void CudaBackend::sgd_update(DType dtype, std::int64_t n, void* param, const void* grad,
                             void* momentum_buffer, const SgdArgs& a) {
  if (n == 0) return;
  activate();
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const gpu::SgdScalars<T> s{static_cast<T>(a.lr),
                               static_cast<T>(a.momentum),
                               static_cast<T>(1.0 - a.dampening),
                               static_cast<T>(a.weight_decay),
                               static_cast<T>(a.grad_scale),
                               a.momentum != 0.0,
                               a.nesterov,
                               a.first_step};
    KILN_LAUNCH(gpu::blocks_for(n), gpu::kThreads, stream_, gpu::sgd_kernel<T>)
    (n, static_cast<T*>(param), static_cast<const T*>(grad), static_cast<T*>(momentum_buffer), s,
     a.guard);
    KILN_CUDA_CHECK_LAUNCH();
  });
}

void CudaBackend::step_guard(const StepGuardArgs& args, const double* losses, const double* sums,
                             double* ledger) {
  activate();
  KILN_LAUNCH(1, 1, stream_, gpu::step_guard_kernel)(args, losses, sums, ledger);
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace kiln
