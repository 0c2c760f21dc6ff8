// The step ledger's arithmetic (StepLedger, core/optimizer_args.h), written once for the CPU
// backend and the CUDA kernel: the numbers the trainer used to compute on the host, in the same
// order and in double precision, so that a CPU run reads the same bits as before and a CUDA run
// the same bits as the CPU.
//
//   loss  = (Σᵢ lossᵢ) / windows                    (the windows in order, from 0.0)
//   norm  = √(Σⱼ sumⱼ)                              (the gradients in parameter order, from 0.0)
//   scale = min(1, clip / (norm + 1e-6))            (optim/clip.h; 1 without clip or for a NaN)
//   apply = loss and norm finite, and no earlier non-finite step when stop_on_nonfinite
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"
#include "core/optimizer_args.h"

namespace kiln::step_guard_math {

// x − x is 0 for every finite x and NaN for ±inf and NaN (IEEE; kiln builds without fast math).
KILN_HOST_DEVICE inline bool finite(double x) { return x - x == 0.0; }

KILN_HOST_DEVICE inline void update(const StepGuardArgs& args, const double* losses,
                                    const double* sums, double* ledger) {
  namespace slot = StepLedger;
  double loss_sum = 0.0;
  for (std::int64_t i = 0; i < args.windows; ++i) loss_sum += losses[i];
  const double loss = loss_sum / static_cast<double>(args.windows);
  double total = 0.0;
  for (std::int64_t j = 0; j < args.sums; ++j) total += sums[j];
  const double norm = sqrt(total);
  double scale = 1.0;
  if (args.clip > 0.0) {
    const double ratio = args.clip / (norm + 1e-6);
    scale = ratio < 1.0 ? ratio : 1.0;  // std::min(1.0, ratio): 1 for a NaN ratio
  }
  const bool ok = finite(loss) && finite(norm);
  ledger[slot::loss] = loss;
  ledger[slot::norm] = norm;
  ledger[slot::scale] = scale;
  if (ok) {
    ledger[slot::interval_loss] += loss;
    ledger[slot::interval_finite] += 1.0;
  } else if (ledger[slot::first_bad] == 0.0) {
    ledger[slot::first_bad] = static_cast<double>(args.step);
    ledger[slot::bad_loss] = loss;
    ledger[slot::bad_norm] = norm;
  }
  const bool stopped = args.stop_on_nonfinite && ledger[slot::first_bad] != 0.0;
  ledger[slot::apply] = ok && !stopped ? 1.0 : 0.0;
}

}  // namespace kiln::step_guard_math
