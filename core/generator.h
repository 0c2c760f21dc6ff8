// Generator: a seed and a position in Philox4x32-10's counter space (core/philox.h). Each random
// draw reserves the counters it reads, so consecutive draws never overlap and the state (seed,
// offset) can be saved in a checkpoint and restored exactly.
#pragma once

#include <cstdint>

namespace kiln {

class Generator {
 public:
  explicit Generator(std::uint64_t seed = 0) : seed_(seed) {}

  std::uint64_t seed() const { return seed_; }
  std::uint64_t offset() const { return offset_; }
  void set_state(std::uint64_t seed, std::uint64_t offset) {
    seed_ = seed;
    offset_ = offset;
  }
  // Reserves `counters` counters and returns the first one.
  std::uint64_t reserve(std::uint64_t counters) {
    const std::uint64_t first = offset_;
    offset_ += counters;
    return first;
  }

 private:
  std::uint64_t seed_;
  std::uint64_t offset_ = 0;
};

// The generator used when a factory or op is given none.
Generator& default_generator();
// Re-seeds the default generator (offset back to 0).
void manual_seed(std::uint64_t seed);

}  // namespace kiln
