#include "apps/common/loss_curve.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include <fmt/format.h>

#include "apps/common/svg.h"
#include "core/error.h"
#include "core/io/output_file.h"

namespace kiln {

namespace {

// Canvas and plot area, in SVG user units.
constexpr double kWidth = 760, kHeight = 460;
constexpr double kLeft = 80, kRight = 150, kTop = 50, kBottom = 60;
constexpr double kPlotW = kWidth - kLeft - kRight, kPlotH = kHeight - kTop - kBottom;
constexpr const char* kTrainColor = "#1f77b4";
constexpr const char* kValidColor = "#d62728";

// A step of 1, 2 or 5 × 10^k that cuts span into at most about `ticks` intervals.
double nice_step(double span, int ticks) {
  const double raw = span / ticks;
  const double decade = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * decade >= raw) return m * decade;
  return 10.0 * decade;
}

// The y axis's horizontal lines, in decades of perplexity: `lines` lines from `first`, `step`
// apart (whole decades). One line per decade up to ten decades, as a curve of a run that learns
// needs; wider ranges (a diverged run's loss of 4e8 nats spans 1.8e8 decades) take a 1-2-5
// multiple of decades, so the SVG holds at most a dozen lines whatever the losses.
struct YGrid {
  double first = 0, step = 1;
  std::int64_t lines = 2;
};

YGrid y_grid(double lo, double hi) {
  // At least one decade, and at least a few billionths of the values themselves: near 1e300
  // decades, adding 1 leaves a double unchanged.
  const double span = std::max({hi - lo, 1.0, 1e-9 * std::max(std::abs(lo), std::abs(hi))});
  YGrid grid;
  grid.step = span <= 10 ? 1.0 : nice_step(span, 10);
  grid.first = std::floor(lo / grid.step) * grid.step;
  const double last = std::max(std::ceil(hi / grid.step) * grid.step, grid.first + grid.step);
  grid.lines = static_cast<std::int64_t>(std::llround((last - grid.first) / grid.step)) + 1;
  return grid;
}

// The label of the perplexity m × 10^d: "200", "1e+06"; beyond what a double holds, "10^d".
std::string ppl_label(double m, double d) {
  if (std::abs(d) < 300) return fmt::format("{:g}", m * std::pow(10.0, d));
  return fmt::format("10^{:g}", d);
}

}  // namespace

std::string loss_curve_svg(const lm::LossCurve& curve, std::string_view title) {
  // Data ranges: steps from 0, log10(perplexity) widened to whole grid steps.
  std::int64_t max_step = 1;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const auto* series : {&curve.train, &curve.valid}) {
    for (const lm::CurvePoint& p : *series) {
      if (!std::isfinite(p.loss)) continue;
      max_step = std::max(max_step, p.step);
      lo = std::min(lo, p.loss / std::log(10.0));
      hi = std::max(hi, p.loss / std::log(10.0));
    }
  }
  if (lo > hi) lo = 0, hi = 1;  // no points yet: an empty frame from 1 to 10
  const YGrid grid = y_grid(lo, hi);
  const double y0 = grid.first, y1 = grid.first + static_cast<double>(grid.lines - 1) * grid.step;
  const auto x_of = [&](double step) {
    return kLeft + kPlotW * step / static_cast<double>(max_step);
  };
  const auto y_of = [&](double log10_ppl) {
    return kTop + kPlotH * (1.0 - (log10_ppl - y0) / (y1 - y0));
  };

  std::string svg = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2:.1f}\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">{3}</text>\n",
      kWidth, kHeight, kLeft + kPlotW / 2, xml_escape(title));

  // Grid and tick labels: y at 1, 2, 5 × 10^k when the range spans at most two decades, else at
  // every grid step; x at a 1-2-5 step. Both loops count lines, never add to a double that a
  // huge value would leave unchanged.
  const bool fine = grid.step == 1 && grid.lines <= 3;
  for (std::int64_t i = 0; i < grid.lines; ++i) {
    const double d = y0 + static_cast<double>(i) * grid.step;
    for (double m : {1.0, 2.0, 5.0}) {
      if (m != 1.0 && !fine) continue;
      const double v = d + std::log10(m);
      if (v > y1 + 1e-9) continue;
      const double y = y_of(v);
      svg += fmt::format(
          "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n"
          "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
          kLeft, y, kLeft + kPlotW, y, kLeft - 6, y + 4, ppl_label(m, d));
    }
  }
  const double x_step = nice_step(static_cast<double>(max_step), 8);
  const auto x_lines = static_cast<std::int64_t>(static_cast<double>(max_step) / x_step + 1e-9);
  for (std::int64_t i = 0; i <= x_lines; ++i) {
    const double s = static_cast<double>(i) * x_step;
    const double x = x_of(s);
    svg += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{:g}</text>\n",
        x, kTop, x, kTop + kPlotH, x, kTop + kPlotH + 18, s);
  }
  svg += fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" "
      "stroke=\"black\"/>\n"
      "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">step</text>\n"
      "<text transform=\"translate(20 {:.1f}) rotate(-90)\" text-anchor=\"middle\">perplexity "
      "(log scale)</text>\n",
      kLeft, kTop, kPlotW, kPlotH, kLeft + kPlotW / 2, kHeight - 15, kTop + kPlotH / 2);

  // The series, then the legend.
  const auto series = [&](const std::vector<lm::CurvePoint>& points, const char* color, bool dots) {
    std::string polyline;
    for (const lm::CurvePoint& p : points) {
      if (!std::isfinite(p.loss)) continue;
      const double x = x_of(static_cast<double>(p.step)), y = y_of(p.loss / std::log(10.0));
      polyline += fmt::format("{:.1f},{:.1f} ", x, y);
      if (dots)
        svg +=
            fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", x, y, color);
    }
    if (!polyline.empty())
      svg += fmt::format(
          "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>\n", polyline,
          color);
  };
  series(curve.train, kTrainColor, false);
  series(curve.valid, kValidColor, true);
  const double lx = kLeft + kPlotW + 15;
  svg += fmt::format(
      "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"{3}\" "
      "stroke-width=\"2\"/>\n"
      "<text x=\"{4:.1f}\" y=\"{5:.1f}\">train</text>\n"
      "<line x1=\"{0:.1f}\" y1=\"{6:.1f}\" x2=\"{2:.1f}\" y2=\"{6:.1f}\" stroke=\"{7}\" "
      "stroke-width=\"2\"/>\n"
      "<text x=\"{4:.1f}\" y=\"{8:.1f}\">valid</text>\n"
      "</svg>\n",
      lx, kTop + 10, lx + 25, kTrainColor, lx + 32, kTop + 14, kTop + 30, kValidColor, kTop + 34);
  return svg;
}

void write_loss_curve(const std::string& path, const lm::LossCurve& curve, std::string_view title) {
  write_file_atomically(path, loss_curve_svg(curve, title), "loss curve");
}

std::string curve_path(const std::string& checkpoint_path) {
  std::filesystem::path p(checkpoint_path);
  p.replace_extension(".curve.svg");
  return p.string();
}

void LossCurveWriter::on_validation(const lm::Trainer& trainer, const lm::ValidationRecord&) {
  write(trainer);
}

void LossCurveWriter::on_save(const lm::Trainer& trainer, bool final) {
  if (final) write(trainer);
}

void LossCurveWriter::write(const lm::Trainer& trainer) const {
  // Rank 0 writes a data-parallel run's files; the other ranks hold the same curve.
  if (!trainer.options().save.empty() && trainer.rank() == 0)
    write_loss_curve(curve_path(trainer.options().save), trainer.state().curve, title_);
}

}  // namespace kiln
