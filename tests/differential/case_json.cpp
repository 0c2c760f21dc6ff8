#include "tests/differential/case_json.h"

#include <cmath>

namespace kiln::differential {

std::string short_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::bf16:
      return "bf16";
    case DType::i64:
      return "i64";
  }
  return "?";
}

DType dtype_named(const std::string& name) {
  for (DType d : {DType::f32, DType::f64, DType::bf16, DType::i64})
    if (short_name(d) == name) return d;
  fail("differential: unknown dtype '{}'", name);
}

json value_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

double json_value(const json& v) {
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "nan") return std::nan("");
    if (s == "inf") return INFINITY;
    if (s == "-inf") return -INFINITY;
    fail("differential: '{}' is not a value", s);
  }
  return v.get<double>();
}

json tensor_json(const Tensor& t) {
  json values = json::array();
  if (t.dtype() == DType::i64) {
    for (std::int64_t v : t.contiguous().to_vector<std::int64_t>()) values.push_back(v);
  } else {
    for (double v : t.contiguous().to_vector<double>()) values.push_back(value_json(v));
  }
  return {{"shape", t.shape()}, {"dtype", short_name(t.dtype())}, {"values", values}};
}

std::vector<double> json_values(const json& values) {
  std::vector<double> out;
  out.reserve(values.size());
  for (const json& v : values) out.push_back(json_value(v));
  return out;
}

Tensor upstream_weights(const Shape& shape, DType dtype) {
  const std::int64_t n = numel_of(shape);
  std::vector<double> w(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) w[i] = static_cast<double>((7 * i) % 9 - 4) / 4.0;
  return from_vector(w, shape).to(dtype);
}

}  // namespace kiln::differential
