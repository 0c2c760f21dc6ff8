#include "core/autocast.h"

#include "core/error.h"

namespace kiln {

namespace {

thread_local Precision current_precision = Precision::f32;

}  // namespace

Precision parse_precision(std::string_view name) {
  if (name == "f32") return Precision::f32;
  if (name == "bf16") return Precision::bf16;
  throw Error(fmt::format("precision: '{}' is not one of f32, bf16", name));
}

std::string_view precision_name(Precision precision) {
  return precision == Precision::bf16 ? "bf16" : "f32";
}

Autocast::Autocast(Precision precision) : previous_(current_precision) {
  current_precision = precision;
}

Autocast::~Autocast() { current_precision = previous_; }

Precision autocast_precision() { return current_precision; }

Tensor autocast_operand(const Tensor& t) {
  if (current_precision == Precision::bf16 && t.defined() && t.dtype() == DType::f32)
    return t.to(DType::bf16);
  return t;
}

DType autocast_result_dtype(DType result, DType operand_dtype) {
  const bool rounded =
      current_precision == Precision::bf16 && operand_dtype == DType::bf16 && result == DType::f32;
  return rounded ? DType::bf16 : result;
}

Tensor autocast_result(const Tensor& y, DType operand_dtype) {
  return y.to(autocast_result_dtype(y.dtype(), operand_dtype));
}

}  // namespace kiln
