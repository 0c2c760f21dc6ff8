// The attention_maps program on a tiny checkpoint: one SVG per layer and head holding the model's
// attention probabilities (T^2 cells, rows summing to 1, future cells exactly 0), tokens escaped
// so every file is well-formed XML, and an index.html linking every map.
#include <catch2/catch.hpp>
#include <filesystem>
#include <regex>

#include "apps/common/attention_map.h"
#include "core/kiln.h"
#include "tests/harness/near.h"
#include "tests/lm/tiny_lm.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

const std::string kPython = "/usr/bin/python3";

// Tokens that need escaping, an unknown word ("zebra") and plain words: 9 tokens.
const std::string kText = "the <b> cat & \" 's @-@ zebra sat";
constexpr std::int64_t kT = 9;

struct Cell {
  std::int64_t q, k;
  double p;
};

std::vector<Cell> cells_of(const std::string& svg) {
  static const std::regex cell(R"re(data-q="(\d+)" data-k="(\d+)" data-p="([^"]+)")re");
  std::vector<Cell> cells;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), cell); it != std::sregex_iterator();
       ++it)
    cells.push_back({std::stoll((*it)[1]), std::stoll((*it)[2]), std::stod((*it)[3])});
  return cells;
}

ProgramRun attention_maps(const TempDir& dir, const std::string& text) {
  return run_program(kAttentionMaps,
                     {"--checkpoint", dir.file("tiny.safetensors"), "--text", text, "--out",
                      dir.file("maps"), "--threads", "2"},
                     dir);
}

}  // namespace

TEST_CASE("attention_maps writes one map per layer and head holding the model's attention") {
  TempDir dir;
  write_tiny_checkpoint(dir);
  const ProgramRun run = attention_maps(dir, kText);
  INFO("stderr: " << run.err);
  REQUIRE(run.exited);
  REQUIRE(run.code == 0);
  REQUIRE_THAT(run.err, Catch::Contains("'zebra'"));

  // The attention the model computes for the same tokens ("zebra" is <unk>, id 6).
  const auto model = tiny_model(tiny_config());
  const std::vector<std::int64_t> ids{1, 11, 2, 8, 9, 10, 7, 6, 3};
  std::vector<Tensor> attention;
  {
    NoGradGuard no_grad;
    model->forward(from_vector(ids, {1, kT}), nullptr, &attention);
  }

  const nn::TransformerConfig config = tiny_config();
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.file("maps"))) {
    (void)entry;
    ++files;
  }
  REQUIRE(files == static_cast<std::size_t>(config.layers * config.heads + 1));
  for (std::int64_t l = 0; l < config.layers; ++l) {
    const std::vector<float> A = attention[l].to_vector<float>();  // (h, T, T)
    for (std::int64_t h = 0; h < config.heads; ++h) {
      const std::string svg = read_text(dir.file("maps/" + attention_svg_name(l, h)));
      INFO("layer " << l << " head " << h);
      REQUIRE_THAT(svg, Catch::Contains(fmt::format("<title>layer {}, head {}", l, h)));
      REQUIRE_THAT(svg, Catch::Contains("&lt;b&gt;") && Catch::Contains("&amp;") &&
                            Catch::Contains("&quot;") && Catch::Contains("&apos;s") &&
                            Catch::Contains("@-@") && Catch::Contains("&lt;unk&gt;"));
      const std::vector<Cell> cells = cells_of(svg);
      REQUIRE(cells.size() == static_cast<std::size_t>(kT * kT));
      std::vector<double> row_sums(kT, 0.0);
      for (std::size_t c = 0; c < cells.size(); ++c) {
        const Cell& cell = cells[c];
        REQUIRE(cell.q * kT + cell.k == static_cast<std::int64_t>(c));  // each pair once
        if (cell.k > cell.q) REQUIRE(cell.p == 0.0);                    // masked: exactly 0
        REQUIRE(near(cell.p, A[h * kT * kT + c], 1e-5, 1e-7));
        row_sums[cell.q] += cell.p;
      }
      for (double sum : row_sums) REQUIRE(near(sum, 1.0, 0, 1e-4));
    }
  }
  const std::string index = read_text(dir.file("maps/index.html"));
  for (std::int64_t l = 0; l < config.layers; ++l)
    for (std::int64_t h = 0; h < config.heads; ++h)
      REQUIRE_THAT(index, Catch::Contains("href=\"" + attention_svg_name(l, h) + "\""));
}

TEST_CASE("attention_maps writes well-formed XML (parsed by Python's minidom)") {
  if (!std::filesystem::exists(kPython)) {
    std::puts("skipped: no /usr/bin/python3 to parse the SVGs");
    return;
  }
  TempDir dir;
  write_tiny_checkpoint(dir);
  REQUIRE(attention_maps(dir, kText).code == 0);
  std::vector<std::string> args{"-c",
                                "import sys, xml.dom.minidom\n"
                                "for f in sys.argv[1:]: xml.dom.minidom.parse(f)\n"
                                "print(len(sys.argv) - 1, 'parsed')"};
  for (const auto& entry : std::filesystem::directory_iterator(dir.file("maps")))
    args.push_back(entry.path().string());
  const ProgramRun parse = run_program(kPython, args, dir);
  INFO("python: " << parse.out << parse.err);
  REQUIRE(parse.exited);
  REQUIRE(parse.code == 0);
  REQUIRE_THAT(parse.out, Catch::Contains("5 parsed"));
}

TEST_CASE("errors/attention_maps: bad texts and folders exit 1 with a message") {
  TempDir dir;
  write_tiny_checkpoint(dir);
  const ProgramRun empty = attention_maps(dir, "   ");
  REQUIRE(empty.exited);
  REQUIRE(empty.code == 1);
  REQUIRE_THAT(empty.err, Catch::Contains("--text has no words"));
  const ProgramRun too_long =
      attention_maps(dir, "the cat sat on the mat and the dog ran to the house");
  REQUIRE(too_long.code == 1);
  REQUIRE_THAT(too_long.err, Catch::Contains("13 tokens") && Catch::Contains("max_seq_len is 12"));
  {
    std::FILE* file = std::fopen(dir.file("maps").c_str(), "w");  // a file where the folder goes
    std::fclose(file);
    const ProgramRun blocked = attention_maps(dir, "the cat");
    REQUIRE(blocked.code == 1);
    REQUIRE_THAT(blocked.err, Catch::Contains("--out"));
  }
  const ProgramRun missing = run_program(kAttentionMaps, {"--text", "the"}, dir);
  REQUIRE(missing.exited);
  REQUIRE(missing.code >= 1);
  REQUIRE(missing.code <= 127);
}
