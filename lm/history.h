// A training run's loss history: train and validation losses against the step, kept in the
// training state (lm/train_state.h) so that a resumed run's log, metrics and loss curve continue
// the uninterrupted run's.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::lm {

struct CurvePoint {
  std::int64_t step;
  double loss;  // nats per token
};

struct LossCurve {
  std::vector<CurvePoint> train, valid;
};

}  // namespace kiln::lm
