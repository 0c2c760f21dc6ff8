// Factories: tensors filled with constants, ranges, host data or random numbers. Random
// factories draw from a Generator (core/generator.h): the same seed gives the same numbers on
// every machine and on both devices.
#pragma once

#include <cstdint>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"

namespace kiln {

Tensor zeros(const Shape& shape, TensorOptions options = {});
Tensor ones(const Shape& shape, TensorOptions options = {});
Tensor full(const Shape& shape, double value, TensorOptions options = {});
Tensor zeros_like(const Tensor& like);
Tensor ones_like(const Tensor& like);

// start, start + step, ... below end (a 1-D tensor).
Tensor arange(double start, double end, double step = 1.0, TensorOptions options = {});
Tensor arange(std::int64_t end, TensorOptions options = {});

// A tensor holding `values` in row-major order; their count must equal the shape's numel.
// The dtype follows T (float, double, int64_t, bf16); the device comes from options.
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device = Device::cpu());

// Uniform in [low, high), standard normal scaled to (mean, std); from gen or the default generator.
Tensor uniform(const Shape& shape, double low, double high, TensorOptions options = {},
               Generator* gen = nullptr);
Tensor rand(const Shape& shape, TensorOptions options = {}, Generator* gen = nullptr);
Tensor randn(const Shape& shape, TensorOptions options = {}, Generator* gen = nullptr);
Tensor normal(const Shape& shape, double mean, double std, TensorOptions options = {},
              Generator* gen = nullptr);

}  // namespace kiln
