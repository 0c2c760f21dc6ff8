#include "tests/differential/golden.h"

#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "tests/differential/interpret.h"

namespace kiln::differential {

namespace {

double tolerance_of(const std::string& dtype) {
  if (dtype == "f64") return 1e-9;
  if (dtype == "f32") return 1e-5;
  return 1.0 / 64;  // bf16: a few bf16 ulps, each op rounding its result
}

// An empty string when kiln's tensor matches the expected one, else what differs.
std::string mismatch(const Tensor& actual, const json& expected, double tol) {
  const Shape shape = expected.at("shape").get<Shape>();
  if (actual.shape() != shape)
    return fmt::format("shape {} where PyTorch has {}", actual.shape(), shape);
  const std::vector<double> e = json_values(expected.at("values"));
  const std::vector<double> a = actual.contiguous().to_vector<double>();
  double scale = 0.0;
  for (double v : e)
    if (std::isfinite(v)) scale = std::max(scale, std::fabs(v));
  for (std::size_t i = 0; i < e.size(); ++i) {
    const bool ok = std::isnan(e[i])   ? std::isnan(a[i])
                    : std::isinf(e[i]) ? a[i] == e[i]
                                       : std::fabs(a[i] - e[i]) <= tol * (std::fabs(e[i]) + scale);
    if (!ok)
      return fmt::format(
          "element {}: kiln {:.17g}, PyTorch {:.17g} (tolerance {:g} x ({:g} + {:g}))", i, a[i],
          e[i], tol, std::fabs(e[i]), scale);
  }
  return "";
}

std::string check_case(const json& c, const json& expect) {
  const Answers a = run_case(c);
  if (expect.value("raises", false)) {
    const int node = expect.at("error_node").get<int>();
    if (!a.error_node) return fmt::format("kiln did not raise (PyTorch raises at node {})", node);
    if (*a.error_node != node)
      return fmt::format("kiln raised at node {} instead of {}: {}", *a.error_node, node, a.error);
    return "";
  }
  if (a.error_node) return fmt::format("kiln raised at node {}: {}", *a.error_node, a.error);
  if (!a.backward_error.empty()) return "kiln's backward raised: " + a.backward_error;
  const double tol = tolerance_of(c.at("dtype").get<std::string>());
  for (const auto& [key, tensor] : expect.at("nodes").items()) {
    const std::size_t i = std::stoul(key);
    if (i >= a.nodes.size()) return fmt::format("no node {}", i);
    std::string why = mismatch(a.nodes[i], tensor, tol);
    if (!why.empty())
      return fmt::format("node {} ({}): {}", i, c["nodes"][i]["op"].get<std::string>(), why);
    if (tensor.contains("indices")) {
      const auto expected = tensor.at("indices").get<std::vector<std::int64_t>>();
      if (a.indices[i].contiguous().to_vector<std::int64_t>() != expected)
        return fmt::format("node {}: max's indices differ", i);
    }
  }
  const json& grads = expect.at("grads");
  for (std::size_t i = 0; i < grads.size(); ++i) {
    if (grads[i].is_null()) continue;
    if (i >= a.grads.size() || !a.grads[i].defined()) return fmt::format("no gradient of x{}", i);
    const std::string why = mismatch(a.grads[i], grads[i], tol);
    if (!why.empty()) return fmt::format("gradient of x{}: {}", i, why);
  }
  return "";
}

// The op table's rows: register_op({"name", binary_row("name", unary_row("name".
std::set<std::string> op_table(const std::string& dir) {
  std::set<std::string> names;
  const std::regex row(R"((register_op\(\s*\{|binary_row\(\s*|unary_row\(\s*)\"([a-z_]+)\")");
  for (const char* file : {"ops_core.cpp", "ops_fused.cpp"}) {
    std::ifstream in(dir + "/" + file);
    KILN_CHECK(in.good(), "differential: cannot read {}/{}", dir, file);
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    for (std::sregex_iterator it(s.begin(), s.end(), row), end; it != end; ++it)
      names.insert((*it)[2].str());
  }
  return names;
}

}  // namespace

int check_golden(const std::vector<std::string>& files, const std::string& op_table_dir) {
  std::map<std::string, std::pair<int, int>> per_family;  // passed, failed
  int failures = 0;
  for (const std::string& file : files) {
    std::ifstream in(file);
    KILN_CHECK(in.good(), "differential: cannot read {}", file);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      const json entry = json::parse(line);
      const json& c = entry.at("case");
      std::string why;
      try {
        why = check_case(c, entry.at("expect"));
      } catch (const std::exception& e) {
        why = std::string("the replay failed: ") + e.what();
      }
      auto& [passed, failed] = per_family[c.at("family").get<std::string>()];
      if (why.empty()) {
        ++passed;
      } else {
        ++failed;
        ++failures;
        std::cout << "FAILED " << c.at("id").get<std::string>() << " ("
                  << c.at("family").get<std::string>() << ", " << c.at("dtype").get<std::string>()
                  << "): " << why << "\n";
      }
    }
  }
  for (const auto& [family, counts] : per_family)
    std::cout << fmt::format("{:<24} {:>4} passed {:>3} failed\n", family, counts.first,
                             counts.second);
  for (const std::string& op : op_table(op_table_dir)) {
    if (per_family.count(op) == 0) {
      std::cout << "FAILED: op table row '" << op << "' has no case in the corpus\n";
      ++failures;
    }
  }
  return failures;
}

}  // namespace kiln::differential
