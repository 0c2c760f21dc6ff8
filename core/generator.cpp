#include "core/generator.h"

namespace kiln {

Generator& default_generator() {
  static Generator generator(0);
  return generator;
}

void manual_seed(std::uint64_t seed) { default_generator().set_state(seed, 0); }

}  // namespace kiln
