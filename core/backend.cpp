#include "core/backend.h"

#include "core/cpu/cpu_backend.h"

namespace kiln {

void Backend::cross_entropy_forward_with_grad(DType dtype, std::int64_t rows, std::int64_t cols,
                                              void* logits, const std::int64_t* targets,
                                              std::int64_t ignore_index, void* loss,
                                              void* logsumexp) {
  cross_entropy_forward(dtype, rows, cols, logits, targets, ignore_index, loss, logsumexp);
  // The backward kernel reads each logit before writing its gradient, so it can run in place.
  const std::size_t size = dtype_size(dtype);
  void* one = allocate(size);
  const double one_f64 = 1.0;
  const float one_f32 = 1.0f;
  copy_from_host(one, dtype == DType::f64 ? static_cast<const void*>(&one_f64) : &one_f32, size);
  cross_entropy_backward(dtype, rows, cols, logits, targets, ignore_index, logsumexp, one, 1.0,
                         logits);
  deallocate(one, size);
}

Backend& backend_for(Device device) {
  if (device.is_cpu()) return cpu_backend();
  return cuda_backend(device.index);
}

}  // namespace kiln
