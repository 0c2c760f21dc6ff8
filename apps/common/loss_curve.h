// LossCurve: train and validation perplexity against step, drawn as a standalone SVG (hand-written,
// no dependencies): a log-scale y axis, labelled axes, a title and a legend. train_lm refreshes
// it next to its checkpoint at every validation; open it in any browser.
//
//   lm::LossCurve curve;
//   curve.train.push_back({100, 5.61});   // step, loss in nats per token
//   write_loss_curve(curve_path("runs/lm.safetensors"), curve, "train_lm");  // runs/lm.curve.svg
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lm/trainer.h"

namespace kiln {

// The SVG document (well-formed XML; title is escaped). Non-finite points are left out; the
// grid has at most a dozen lines on each axis whatever the losses (one per decade of perplexity
// up to ten decades), so the document's size is that of its points.
std::string loss_curve_svg(const lm::LossCurve& curve, std::string_view title);

// Writes loss_curve_svg to path through a temporary file renamed over it, so a reader never sees
// half a file.
void write_loss_curve(const std::string& path, const lm::LossCurve& curve, std::string_view title);

// The curve's path for a checkpoint path: the extension replaced by ".curve.svg"
// (runs/lm.safetensors → runs/lm.curve.svg).
std::string curve_path(const std::string& checkpoint_path);

// Redraws a run's curve beside its checkpoint (curve_path(options.save)) at every validation and
// at the final save: an observer of lm::Trainer (nothing without a save path; on rank 0 only).
class LossCurveWriter : public lm::TrainObserver {
 public:
  explicit LossCurveWriter(std::string title) : title_(std::move(title)) {}
  void on_validation(const lm::Trainer& trainer, const lm::ValidationRecord&) override;
  void on_save(const lm::Trainer& trainer, bool final) override;

 private:
  void write(const lm::Trainer& trainer) const;
  std::string title_;
};

}  // namespace kiln
