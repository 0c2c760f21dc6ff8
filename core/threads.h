// The number of CPU threads kiln's kernels use (OpenMP). Results are deterministic for a fixed
// count; most kernels give the same bits for any count.
#pragma once

namespace kiln {

void set_num_threads(int threads);
int num_threads();

}  // namespace kiln
