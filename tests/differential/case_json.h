// The differential test's JSON (docs/differential-testing.md): tensors as {"shape", "dtype",
// "values"} with NaN and infinities as the strings "nan", "inf" and "-inf" (JSON has no
// literal for them), dtypes by short name, and the upstream weights every case's gradient uses.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/kiln.h"

namespace kiln::differential {

using json = nlohmann::json;

// "f32", "f64", "bf16", "i64".
std::string short_name(DType dtype);
DType dtype_named(const std::string& name);

// A value as JSON: a number, or "nan", "inf", "-inf". -0 stays -0.0.
json value_json(double v);
double json_value(const json& v);

// {"shape": [...], "dtype": "f32", "values": [...]} (values in row-major order).
json tensor_json(const Tensor& t);
std::vector<double> json_values(const json& values);

// The weights w of L = sum(w * y) for a result y of `shape`: w_i = ((7 i) mod 9 - 4) / 4 in
// row-major order, exact in every dtype; tools/differential.py makes the same.
Tensor upstream_weights(const Shape& shape, DType dtype);

}  // namespace kiln::differential
