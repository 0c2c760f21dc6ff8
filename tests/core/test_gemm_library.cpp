// The CPU GEMM goes through the BLAS libraries that are installed (core/cpu/blas_library.h): a
// fresh Debian machine with only the runtime packages must not silently fall back to Eigen.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>

#include "core/backend.h"
#include "core/cpu/blas_library.h"
#include "core/kiln.h"

using namespace kiln;

namespace {

// Whether dpkg says the Debian package is installed; false where there is no dpkg.
bool package_installed(const std::string& package) {
  const std::string command =
      "dpkg-query -W -f='${Status}' " + package + " 2>/dev/null | grep -q 'install ok installed'";
  return std::system(command.c_str()) == 0;
}

// Whether KILN_GEMM forces one float32 source; KILN_GEMM=bf16|widen chooses the path of bf16
// products only and leaves float32's sources to the rules.
bool forced_by_environment() {
  const char* forced = std::getenv("KILN_GEMM");
  const std::string value = forced != nullptr ? forced : "";
  return !value.empty() && value != "bf16" && value != "widen";
}

// C = A B for A (2 x 3) and B (3 x 2) through the library's cblas_sgemm, against the exact product.
void check_product(const BlasLibrary& blas) {
  const float a[] = {1, 2, 3, 4, 5, 6}, b[] = {7, 8, 9, 10, 11, 12};
  float c[4] = {-1, -1, -1, -1};
  constexpr int kRowMajor = 101, kNoTrans = 111;
  blas.sgemm(kRowMajor, kNoTrans, kNoTrans, 2, 2, 3, 1.0f, a, 3, b, 2, 0.0f, c, 2);
  CHECK(c[0] == 58);
  CHECK(c[1] == 64);
  CHECK(c[2] == 139);
  CHECK(c[3] == 154);
}

}  // namespace

TEST_CASE("every installed BLAS library loads and multiplies", "[gemm]") {
  if (std::string(KILN_TEST_BLAS) == "eigen") {
    std::puts("skipped: built with KILN_BLAS=eigen");
    return;
  }
  int checked = 0;
  for (const auto& [name, package] :
       {std::pair{"openblas", "libopenblas0-openmp"}, std::pair{"blis", "libblis4-openmp"}}) {
    if (!package_installed(package)) continue;
    INFO(package << " is installed, so kiln must load " << name);
    const BlasLibrary* blas = blas_library(name);
    REQUIRE(blas != nullptr);
    CHECK(blas->name == name);
    CHECK_FALSE(blas->kernels.empty());
    check_product(*blas);
    ++checked;
  }
  if (checked == 0) std::puts("skipped: neither libopenblas0-openmp nor libblis4-openmp installed");
}

TEST_CASE("the GEMM is not Eigen's when a BLAS library is installed", "[gemm]") {
  if (std::string(KILN_TEST_BLAS) == "eigen" || forced_by_environment()) {
    std::puts("skipped: built with KILN_BLAS=eigen or KILN_GEMM forces a source");
    return;
  }
  if (!package_installed("libopenblas0-openmp") && !package_installed("libblis4-openmp")) {
    std::puts("skipped: neither libopenblas0-openmp nor libblis4-openmp installed");
    return;
  }
  INFO("environment: " << environment_summary());
  REQUIRE(gemm_library() != nullptr);
  CHECK(cpu_gemm_source().find("eigen") == std::string::npos);
  // And the backend's GEMM gives the product through it.
  const Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = from_vector<float>({7, 8, 9, 10, 11, 12}, {3, 2});
  CHECK(matmul(a, b).to_vector<float>() == std::vector<float>{58, 64, 139, 154});
}

TEST_CASE("large narrow products go through BLIS on Zen 3, the rest through the default library",
          "[gemm]") {
  const BlasLibrary* fallback = gemm_library();
  const BlasLibrary* blis = blas_library("blis");
  const bool zen_blis = !forced_by_environment() && fallback != nullptr &&
                        fallback->name == "openblas" && blis != nullptr && blis->kernels == "zen3";
  INFO("environment: " << environment_summary());
  // The LM head's dE (n 256) and the QKV projection (n 768): BLIS with its zen3 kernels (its
  // older zen kernels measured slower than OpenBLAS on them: the default library there).
  for (const auto& [m, n, k] : {std::tuple{33278, 256, 2048}, std::tuple{2048, 768, 256}}) {
    INFO("m " << m << " n " << n << " k " << k);
    CHECK(gemm_library(m, n, k) == (zen_blis ? blis : fallback));
  }
  // Wide (the logits, n 33278), square (1024^3, n above 768) and small products: the default.
  for (const auto& [m, n, k] :
       {std::tuple{2048, 33278, 256}, std::tuple{1024, 1024, 1024}, std::tuple{64, 256, 64}}) {
    INFO("m " << m << " n " << n << " k " << k);
    CHECK(gemm_library(m, n, k) == fallback);
  }
  CHECK((cpu_gemm_source().find("for n <= 768") != std::string::npos) == zen_blis);
  // A product through the narrow path equals the one through the default library's CBLAS.
  Generator gen(4);
  const Tensor a = uniform({2048, 256}, -1, 1, {}, &gen), b = uniform({256, 256}, -1, 1, {}, &gen);
  const Tensor c = matmul(a, b);
  const Tensor reference = matmul(a.to(DType::f64), b.to(DType::f64));
  REQUIRE(c.dtype() == DType::f32);
  const std::vector<float> got = c.to_vector<float>();
  const std::vector<double> want = reference.to_vector<double>();
  for (std::size_t i = 0; i < got.size(); i += 997) REQUIRE(got[i] == Approx(want[i]).margin(1e-4));
  if (!zen_blis)
    std::puts("note: not a Zen 3 CPU with BLIS and OpenBLAS installed; checked the default");
}

TEST_CASE("KILN_GEMM refuses a value that names no GEMM path, naming the valid ones", "[gemm]") {
  const char* before = std::getenv("KILN_GEMM");
  const std::string saved = before != nullptr ? before : "";
  // Lower case only: BF16 is as unknown as avx512, and each silently chose Eigen before.
  for (const char* unknown : {"avx512", "BF16", "openblas "}) {
    ::setenv("KILN_GEMM", unknown, 1);
    INFO("KILN_GEMM=" << unknown);
    CHECK_THROWS_AS(gemm_environment(), Error);
    CHECK_THROWS_WITH(gemm_environment(),
                      std::string("KILN_GEMM=") + unknown +
                          ": not a GEMM path; the valid values are openblas, blis, eigen, packed "
                          "(one source for every float32 product) and bf16, widen (the path of "
                          "bf16 products), or unset");
  }
  for (const char* valid : {"openblas", "blis", "eigen", "packed", "bf16", "widen"}) {
    ::setenv("KILN_GEMM", valid, 1);
    CHECK(gemm_environment() == valid);
  }
  ::setenv("KILN_GEMM", "", 1);
  CHECK(gemm_environment().empty());
  ::unsetenv("KILN_GEMM");
  CHECK(gemm_environment().empty());
  if (before != nullptr) ::setenv("KILN_GEMM", saved.c_str(), 1);
}

// scripts/isa_check.sh runs the GEMM layouts under each KILN_GEMM source with this case beside
// them: a library that is missing would otherwise leave Eigen in its place, silently.
TEST_CASE("a KILN_GEMM that forces a source is the one the GEMM uses", "[gemm][gemm_source]") {
  if (!forced_by_environment()) {
    std::puts("skipped: KILN_GEMM does not force a float32 source");
    return;
  }
  const std::string forced = gemm_environment();
  INFO("KILN_GEMM=" << forced << "; the GEMM: " << cpu_gemm_source());
  const BlasLibrary* blas = gemm_library();
  if (forced == "openblas" || forced == "blis") {
    REQUIRE(blas != nullptr);
    CHECK(blas->name == forced);
  } else if (forced == "eigen") {
    CHECK(blas == nullptr);
  }
  CHECK(cpu_gemm_source().starts_with(forced == "eigen" ? "eigen;" : forced + " ("));
}
