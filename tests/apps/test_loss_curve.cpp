// The loss curve train_lm writes next to its checkpoint goes through core/output_file.h's
// AtomicFile like checkpoints do: a unique temporary name, so nothing at "<path>.tmp" (a stale
// file, a folder, another writer's temporary) stops or corrupts it. Its grid is bounded whatever
// the losses (issue 43).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "apps/common/loss_curve.h"

using namespace kiln;

TEST_CASE("write_loss_curve writes the SVG whole past a folder at its old temporary name",
          "[loss_curve]") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kiln-curve-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "lm.curve.svg.tmp");
  const std::string path = (dir / "lm.curve.svg").string();
  lm::LossCurve curve;
  curve.train = {{1, 9.0}, {2, 8.0}};
  curve.valid = {{2, 8.5}};
  write_loss_curve(path, curve, "test");
  std::ifstream in(path, std::ios::binary);
  const std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(written == loss_curve_svg(curve, "test"));
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir)) ++entries;
  CHECK(entries == 2);  // the curve and the folder: no temporary left
  std::filesystem::remove_all(dir);
}

namespace {

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("the loss curve's grid is bounded whatever the losses", "[loss_curve]") {
  // Before, one grid line per decade of perplexity: a diverged run's validation loss of 4.26e8
  // nats asked for 1.85e8 lines (std::bad_alloc, the run's state lost), --lr 10 wrote 4,409
  // lines (525 KB), and a history of 1e308 and -1e308 looped forever, adding 1 to 4e307.
  const double max = std::numeric_limits<double>::max();
  const std::vector<std::vector<lm::CurvePoint>> histories = {
      {{10, 425976433.89}, {20, 4.1}},
      {{10, 10153.0}, {20, 8.0}},
      {{1, 1e308}, {2, -1e308}},
      {{1, max}, {2, -max}, {3, max}},
      {{1, 1e308}},
      {{1, -1e300}, {5, 1e-300}},
      {{1, std::nan("")}, {2, std::numeric_limits<double>::infinity()}, {3, 5.0}},
      {{std::numeric_limits<std::int64_t>::max(), 3.0}, {-5, 2.0}},
  };
  for (const auto& history : histories) {
    lm::LossCurve curve;
    curve.train = history;
    curve.valid = history;
    INFO("first point " << history.front().step << ", " << history.front().loss);
    const std::string svg = loss_curve_svg(curve, "test");
    // Every grid line but the two axes' frame: at most a dozen per axis.
    CHECK(count_of(svg, "stroke=\"#ddd\"") <= 26);
    CHECK(svg.size() < 16 * 1024);
    CHECK(svg.find("nan") == std::string::npos);
    CHECK(svg.find("inf") == std::string::npos);
    CHECK(svg.rfind("</svg>\n") == svg.size() - 7);
  }
}

TEST_CASE("the loss curve keeps one grid line per decade for a run that learns", "[loss_curve]") {
  lm::LossCurve curve;
  curve.train = {{3, std::log(30000.0)}, {7, std::log(200.0)}};  // 2.3 to 4.5 decades
  const std::string svg = loss_curve_svg(curve, "test");
  for (const char* label : {">100<", ">1000<", ">10000<", ">100000<"})
    CHECK(count_of(svg, label) == 1);
  CHECK(count_of(svg, ">200<") == 0);  // 1-2-5 lines only within two decades
  curve.train = {{3, std::log(300.0)}, {7, std::log(150.0)}};
  const std::string fine = loss_curve_svg(curve, "test");
  for (const char* label : {">100<", ">200<", ">500<", ">1000<"}) CHECK(count_of(fine, label) == 1);
}
