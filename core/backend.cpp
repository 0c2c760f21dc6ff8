#include "core/backend.h"

#include "core/cpu/cpu_backend.h"

namespace kiln {

Backend& backend_for(Device device) {
  if (device.is_cpu()) return cpu_backend();
  return cuda_backend(device.index);
}

}  // namespace kiln
