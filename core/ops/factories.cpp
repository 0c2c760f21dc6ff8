#include "core/ops/factories.h"

#include <cmath>

#include "core/ops/op_utils.h"
#include "core/profiler.h"

namespace kiln {

Tensor zeros(const Shape& shape, TensorOptions options) { return full(shape, 0.0, options); }
Tensor ones(const Shape& shape, TensorOptions options) { return full(shape, 1.0, options); }
Tensor zeros_like(const Tensor& like) { return zeros(like.shape(), {like.dtype(), like.device()}); }
Tensor ones_like(const Tensor& like) { return ones(like.shape(), {like.dtype(), like.device()}); }

Tensor full(const Shape& shape, double value, TensorOptions options) {
  profile::Scope scope(profile::Family::other);
  Tensor out = empty(shape, options);
  backend_of(out).fill(arg_of(out), value);
  return out;
}

Tensor arange(double start, double end, double step, TensorOptions options) {
  KILN_CHECK(step != 0.0 && std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
             "arange: invalid range start {} end {} step {}", start, end, step);
  const double count = std::ceil((end - start) / step);
  Tensor out = empty({count > 0 ? static_cast<std::int64_t>(count) : 0}, options);
  if (out.numel() > 0) backend_of(out).arange(arg_of(out), start, step);
  return out;
}

Tensor arange(std::int64_t end, TensorOptions options) {
  return arange(0.0, static_cast<double>(end), 1.0, options);
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device) {
  KILN_CHECK(static_cast<std::int64_t>(values.size()) == numel_of(shape),
             "from_vector: {} values do not fill shape {} ({} elements)", values.size(), shape,
             numel_of(shape));
  Tensor out = empty(shape, {DTypeOf<T>::value, device});
  if (!values.empty())
    backend_of(out).copy_from_host(out.raw_data(), values.data(), values.size() * sizeof(T));
  return out;
}
template Tensor from_vector(const std::vector<float>&, const Shape&, Device);
template Tensor from_vector(const std::vector<double>&, const Shape&, Device);
template Tensor from_vector(const std::vector<std::int64_t>&, const Shape&, Device);
template Tensor from_vector(const std::vector<bf16>&, const Shape&, Device);

namespace {
Generator& pick(Generator* gen) { return gen != nullptr ? *gen : default_generator(); }
}  // namespace

Tensor uniform(const Shape& shape, double low, double high, TensorOptions options, Generator* gen) {
  KILN_CHECK(is_floating(options.dtype), "uniform: needs a float dtype, got {}", options.dtype);
  check_computable("uniform", options.dtype);
  KILN_CHECK(low <= high, "uniform: low {} is above high {}", low, high);
  Tensor out = empty(shape, options);
  const std::int64_t per_counter = options.dtype == DType::f32 ? 4 : 2;
  const std::uint64_t offset = pick(gen).reserve((out.numel() + per_counter - 1) / per_counter);
  backend_of(out).random_uniform(options.dtype, out.raw_data(), out.numel(), low, high,
                                 pick(gen).seed(), offset);
  return out;
}

Tensor rand(const Shape& shape, TensorOptions options, Generator* gen) {
  return uniform(shape, 0.0, 1.0, options, gen);
}

Tensor normal(const Shape& shape, double mean, double std, TensorOptions options, Generator* gen) {
  KILN_CHECK(is_floating(options.dtype), "normal: needs a float dtype, got {}", options.dtype);
  check_computable("normal", options.dtype);
  KILN_CHECK(std >= 0.0, "normal: std must be non-negative, got {}", std);
  Tensor out = empty(shape, options);
  const std::uint64_t offset = pick(gen).reserve((out.numel() + 1) / 2);
  backend_of(out).random_normal(options.dtype, out.raw_data(), out.numel(), mean, std,
                                pick(gen).seed(), offset);
  return out;
}

Tensor randn(const Shape& shape, TensorOptions options, Generator* gen) {
  return normal(shape, 0.0, 1.0, options, gen);
}

}  // namespace kiln
