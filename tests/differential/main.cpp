// kiln_differential: kiln's side of the differential test against PyTorch
// (docs/differential-testing.md).
//   kiln_differential generate --seed S --count N [--start I] [--families a,b] --out FILE
//       writes cases start .. start + N - 1 of seed S, each with kiln's answers ("kiln")
//   kiln_differential run --in FILE --out FILE
//       runs the cases of FILE (e.g. tools/differential.py's reduced ones) through kiln
//   kiln_differential check GOLDEN...
//       replays a committed corpus against PyTorch's answers (exit 1 on any mismatch)
//   kiln_differential families
//       lists the op families
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "tests/differential/generate.h"
#include "tests/differential/golden.h"
#include "tests/differential/interpret.h"

using namespace kiln;
using namespace kiln::differential;

namespace {

json with_answers(json c) {
  c["kiln"] = answers_json(run_case(c));
  return c;
}

std::vector<std::string> comma_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

int usage() {
  std::cerr << "usage: kiln_differential generate --seed S --count N [--start I] [--families a,b] "
               "--out FILE\n       kiln_differential run --in FILE --out FILE\n"
               "       kiln_differential check GOLDEN...\n       kiln_differential families\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string mode = argv[1];
  std::map<std::string, std::string> flags;
  std::vector<std::string> positional;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--", 0) == 0 && i + 1 < argc) {
      flags[arg.substr(2)] = argv[++i];
    } else {
      positional.push_back(arg);
    }
  }
  try {
    set_num_threads(1);
    if (mode == "families") {
      for (const std::string& f : families()) std::cout << f << "\n";
      return 0;
    }
    if (mode == "check") {
      if (positional.empty()) return usage();
      const int failures = check_golden(positional, KILN_TEST_SOURCE_DIR "/tests/core");
      std::cout << (failures == 0 ? "all cases match PyTorch's answers\n"
                                  : fmt::format("{} failures\n", failures));
      return failures == 0 ? 0 : 1;
    }
    if (!flags.count("out")) return usage();
    std::ofstream out(flags["out"]);
    if (mode == "generate") {
      if (!flags.count("seed") || !flags.count("count")) return usage();
      const std::uint64_t seed = std::stoull(flags["seed"]);
      const std::int64_t start = flags.count("start") ? std::stoll(flags["start"]) : 0;
      const std::int64_t count = std::stoll(flags["count"]);
      const std::vector<std::string> only = comma_list(flags["families"]);
      for (std::int64_t i = start; i < start + count; ++i)
        out << with_answers(generate_case(seed, i, only)).dump() << "\n";
    } else if (mode == "run") {
      std::ifstream in(flags["in"]);
      if (!in.good()) return usage();
      for (std::string line; std::getline(in, line);)
        if (!line.empty()) out << with_answers(json::parse(line)).dump() << "\n";
    } else {
      return usage();
    }
    out.close();
    if (!out) {
      std::cerr << "kiln_differential: writing " << flags["out"] << " failed\n";
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "kiln_differential: " << e.what() << "\n";
    return 1;
  }
}
