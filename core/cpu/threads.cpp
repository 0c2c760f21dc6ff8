// The CPU backend's threads (core/threads.h): OpenMP's team, which every CPU kernel's parallel
// loop uses, and the GEMM libraries' own thread pools, kept at the same count.
#include <omp.h>

#include "core/cpu/blas_library.h"
#include "core/error.h"
#include "core/threads.h"

namespace kiln {

void set_num_threads(int threads) {
  KILN_CHECK(threads >= 1 && threads <= kMaxThreads,
             "set_num_threads: {} threads is outside [1, {}], the counts kiln runs", threads,
             kMaxThreads);
  omp_set_num_threads(threads);
  set_blas_threads(threads);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace kiln
