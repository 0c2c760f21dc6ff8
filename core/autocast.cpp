#include "core/autocast.h"

#include <cstdint>
#include <map>
#include <utility>

#include "core/error.h"
#include "core/storage.h"

namespace kiln {

namespace {

thread_local Precision current_precision = Precision::f32;

// A cached bf16 copy: the weight it was made from (held, so that its storage cannot be freed and
// another weight take its address while the entry lives) and the version it was made at.
struct CastEntry {
  Tensor weight;
  std::uint64_t version = 0;
  Tensor copy;
};

// Keyed by the weight's storage and offset: views of one storage at one offset with another
// shape are told apart by the shape and strides check in autocast_weight.
thread_local std::map<std::pair<const Storage*, std::int64_t>, CastEntry> cast_cache;
thread_local std::int64_t casts_made = 0;
thread_local int cache_holders = 0;  // live AutocastWeightCache objects

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

Autocast::~Autocast() {
  current_precision = previous_;
  if (current_precision != Precision::bf16 && cache_holders == 0) cast_cache.clear();
}

AutocastWeightCache::AutocastWeightCache() { ++cache_holders; }

AutocastWeightCache::~AutocastWeightCache() {
  if (--cache_holders == 0 && current_precision != Precision::bf16) cast_cache.clear();
}

Precision autocast_precision() { return current_precision; }

Tensor autocast_operand(const Tensor& t) {
  if (current_precision == Precision::bf16 && t.defined() && t.dtype() == DType::f32)
    return t.to(DType::bf16);
  return t;
}

Tensor autocast_weight(const Tensor& weight) {
  KILN_CHECK(weight.defined() && weight.dtype() == DType::f32,
             "autocast_weight: expected a float32 weight, got {}",
             weight.defined() ? dtype_name(weight.dtype()) : "an undefined tensor");
  if (current_precision != Precision::bf16) return weight.detach().to(DType::bf16);
  CastEntry& entry = cast_cache[{weight.storage().get(), weight.offset()}];
  const bool fresh = entry.copy.defined() && entry.version == weight.version() &&
                     entry.weight.shape() == weight.shape() &&
                     entry.weight.strides() == weight.strides();
  if (!fresh) {
    entry = CastEntry{weight.detach(), weight.version(), weight.detach().to(DType::bf16)};
    ++casts_made;
  }
  return entry.copy;
}

std::int64_t autocast_weight_casts() { return casts_made; }

DType autocast_result_dtype(DType result, DType operand_dtype) {
  const bool rounded =
      current_precision == Precision::bf16 && operand_dtype == DType::bf16 && result == DType::f32;
  return rounded ? DType::bf16 : result;
}

Tensor autocast_result(const Tensor& y, DType operand_dtype) {
  return y.to(autocast_result_dtype(y.dtype(), operand_dtype));
}

}  // namespace kiln
