// The loss curve train_lm writes next to its checkpoint goes through core/output_file.h's
// AtomicFile like checkpoints do: a unique temporary name, so nothing at "<path>.tmp" (a stale
// file, a folder, another writer's temporary) stops or corrupts it.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

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
