// TokenView: read-only random access to a stream of token ids stored 2, 4 or 8 bytes wide (a
// memory-mapped token shard's uint16 or uint32 ids, or a std::vector<std::int64_t>), so that
// batches and evaluation read a prepared dataset in place, never copying it. The view does not
// own the ids: whatever holds them must outlive it.
//
//   TokenView view(ids);                     // a std::vector<std::int64_t>
//   view[i];                                 // id i as std::int64_t
//   view.copy(begin, count, out);            // ids [begin, begin + count) into out
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace kiln {

class TokenView {
 public:
  TokenView() = default;
  TokenView(const std::vector<std::int64_t>& ids)  // NOLINT: a vector is a view of itself
      : data_(ids.data()), width_(8), size_(static_cast<std::int64_t>(ids.size())) {}
  // size ids of width bytes (2, 4 or 8; little-endian unsigned for 2 and 4) at data.
  TokenView(const void* data, int width, std::int64_t size)
      : data_(data), width_(width), size_(size) {}

  std::int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int width() const { return width_; }
  const void* data() const { return data_; }

  std::int64_t operator[](std::int64_t i) const {
    switch (width_) {
      case 2:
        return static_cast<const std::uint16_t*>(data_)[i];
      case 4:
        return static_cast<const std::uint32_t*>(data_)[i];
      default:
        return static_cast<const std::int64_t*>(data_)[i];
    }
  }

  // Ids [begin, begin + count) written to out as int64 (the caller keeps the range in bounds).
  void copy(std::int64_t begin, std::int64_t count, std::int64_t* out) const {
    switch (width_) {
      case 2:
        widen(static_cast<const std::uint16_t*>(data_) + begin, count, out);
        break;
      case 4:
        widen(static_cast<const std::uint32_t*>(data_) + begin, count, out);
        break;
      default:
        std::memcpy(out, static_cast<const std::int64_t*>(data_) + begin,
                    static_cast<std::size_t>(count) * sizeof(std::int64_t));
    }
  }

 private:
  template <typename T>
  static void widen(const T* in, std::int64_t count, std::int64_t* out) {
    for (std::int64_t i = 0; i < count; ++i) out[i] = in[i];
  }

  const void* data_ = nullptr;
  int width_ = 8;
  std::int64_t size_ = 0;
};

}  // namespace kiln
