// --precision bf16 through the programs: train_lm trains with bf16 matrix products (float32
// master weights), records the precision in its checkpoints, resumes a bf16 run bit for bit
// (taking the precision from the checkpoint), and notes an override; eval_ppl and generate use
// the checkpoint's precision by default, so eval_ppl reproduces train_lm's final perplexity.
// --precision auto, the default, resolves to what the CPU multiplies natively.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>

#include "core/io/safetensors.h"
#include "core/native_bf16.h"
#include "tests/apps/programs.h"

using namespace kiln;
using namespace kiln::testing;
using Catch::Contains;

namespace {

double loss_at(const RunResult& r, long step) {
  const std::optional<std::string> loss = logged_loss(r.lines(), step);
  REQUIRE(loss.has_value());
  return std::stod(*loss);
}

}  // namespace

TEST_CASE("a bf16 run resumed on another GEMM path says so in a note") {
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string flags = kTrainLm + " --data " + dir.path().string() + " " + kTinyFlags +
                            " --precision bf16 --eval-every 0 --log-every 5 --threads 2";
  // The checkpoint records the GEMMs the run used (the banner's gemm); KILN_GEMM=widen forces the
  // widening path of bf16 products, which differs from the default wherever the CPU has
  // AVX512_BF16, and always from a forced library.
  const RunResult first =
      run("KILN_GEMM=openblas " + flags + " --steps 5 --save " + dir.file("first.safetensors"));
  INFO(first.output);
  REQUIRE(first.status == 0);
  const SafetensorsFile saved = load_safetensors(dir.file("first.safetensors"));
  REQUIRE(saved.metadata.count("gemm") == 1);
  CHECK_THAT(saved.metadata.at("gemm"), Contains("bf16 widened to float32 (KILN_GEMM=openblas)"));
  CHECK_THAT(first.output, Contains("gemm " + saved.metadata.at("gemm") + " |"));
  const RunResult other = run("KILN_GEMM=widen " + flags + " --resume " +
                              dir.file("first.safetensors") + " --steps 10");
  INFO(other.output);
  REQUIRE(other.status == 0);
  CHECK_THAT(other.output, Contains("note: " + dir.file("first.safetensors") +
                                    " was trained with the CPU GEMMs '" +
                                    saved.metadata.at("gemm") + "' and this run uses '"));
  CHECK_THAT(other.output, Contains("bf16 widened to float32 (KILN_GEMM=widen)'"));
  const RunResult same = run("KILN_GEMM=openblas " + flags + " --resume " +
                             dir.file("first.safetensors") + " --steps 10");
  REQUIRE(same.status == 0);
  CHECK(same.output.find("CPU GEMMs") == std::string::npos);
}

TEST_CASE("train_lm --precision bf16 resumes bit for bit and stays near the float32 run") {
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  // Dropout and shuffled windows: the resume must restore every stream, as in float32.
  const std::string flags = kTrainLm + " --data " + dir.path().string() + " " + kTinyRun +
                            " --dropout 0.1 --shuffle --eval-every 10 --log-every 10 --threads 3";
  const RunResult whole =
      run(flags + " --precision bf16 --steps 20 --save " + dir.file("whole.safetensors"));
  INFO(whole.output);
  REQUIRE(whole.status == 0);
  CHECK_THAT(whole.output, Contains("| precision bf16 |"));
  const RunResult first =
      run(flags + " --precision bf16 --steps 10 --save " + dir.file("first.safetensors"));
  REQUIRE(first.status == 0);
  // No --precision: the resumed run takes the checkpoint's.
  const RunResult resumed = run(flags + " --resume " + dir.file("first.safetensors") +
                                " --steps 20 --save " + dir.file("resumed.safetensors"));
  INFO(resumed.output);
  REQUIRE(resumed.status == 0);
  CHECK_THAT(resumed.output, Contains("| precision bf16 |"));
  CHECK(resumed.output.find("note:") == std::string::npos);
  CHECK(logged_loss(resumed.lines(), 20) == logged_loss(whole.lines(), 20));
  CHECK(line_after(resumed.lines(), "valid ppl ") == line_after(whole.lines(), "valid ppl "));
  const SafetensorsFile a = load_safetensors(dir.file("whole.safetensors"));
  const SafetensorsFile b = load_safetensors(dir.file("resumed.safetensors"));
  check_same_tensors(a, b);
  CHECK(a.metadata.at("train") == b.metadata.at("train"));
  CHECK_THAT(a.metadata.at("train"), Contains("\"precision\":\"bf16\""));
  // The master weights are float32.
  for (const auto& [name, tensor] : a.tensors) {
    INFO(name);
    CHECK(tensor.dtype() == DType::f32);
  }

  // The same run in float32: near, not equal (the products' rounding differs).
  const RunResult f32 =
      run(flags + " --precision f32 --steps 20 --save " + dir.file("f32.safetensors"));
  REQUIRE(f32.status == 0);
  CHECK_THAT(f32.output, Contains("| precision f32 |"));
  for (long step : {10L, 20L}) {
    INFO("step " << step);
    CHECK(std::abs(loss_at(whole, step) - loss_at(f32, step)) <= 0.05);
  }
  // Not equal: the weights differ (the logged losses, four decimals, may meet).
  const SafetensorsFile f32_weights = load_safetensors(dir.file("f32.safetensors"));
  REQUIRE(f32_weights.tensors.size() == a.tensors.size());
  bool weights_differ = false;
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    const Tensor &x = a.tensors[i].second, &y = f32_weights.tensors[i].second;
    REQUIRE(x.shape() == y.shape());
    weights_differ = weights_differ || std::memcmp(x.raw_data(), y.raw_data(),
                                                   x.numel() * dtype_size(x.dtype())) != 0;
  }
  CHECK(weights_differ);

  // eval_ppl: the checkpoint's precision by default, train_lm's final perplexity to the digit.
  const RunResult eval = run(kEvalPpl + " --data " + dir.path().string() + " --checkpoint " +
                             dir.file("whole.best.safetensors"));
  INFO(eval.output);
  REQUIRE(eval.status == 0);
  CHECK_THAT(eval.output, Contains("| precision bf16"));
  CHECK(line_after(eval.lines(), "valid ppl ") == line_after(whole.lines(), "valid ppl "));
  const RunResult eval_f32 = run(kEvalPpl + " --data " + dir.path().string() + " --checkpoint " +
                                 dir.file("whole.best.safetensors") + " --precision f32");
  REQUIRE(eval_f32.status == 0);
  CHECK_THAT(eval_f32.output, Contains("| precision f32"));

  const RunResult text = run(kGenerate + " --checkpoint " + dir.file("whole.safetensors") +
                             " --prompt 'the big' --tokens 6 --seed 3");
  INFO(text.output);
  CHECK(text.status == 0);
}

TEST_CASE("train_lm: --precision on a resumed run overrides the checkpoint's, with a note") {
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string flags =
      kTrainLm + " --data " + dir.path().string() + " " + kTinyFlags + " --threads 1";
  REQUIRE(run(flags + " --precision bf16 --steps 4 --save " + dir.file("a.safetensors")).status ==
          0);
  const RunResult resumed = run(flags + " --resume " + dir.file("a.safetensors") +
                                " --precision f32 --steps 6 --save " + dir.file("b.safetensors"));
  INFO(resumed.output);
  REQUIRE(resumed.status == 0);
  CHECK_THAT(resumed.output, Contains("--precision \"f32\" overrides the checkpoint's \"bf16\""));
  CHECK_THAT(resumed.output, Contains("| precision f32 |"));
  const RunResult bad = run(flags + " --precision fp16 --steps 1");
  CHECK(bad.status != 0);
  CHECK_THAT(bad.output, Contains("--precision"));
}

TEST_CASE(
    "train_lm --precision auto, the default, picks bf16 where the CPU multiplies it natively") {
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string train = kTrainLm + " --data " + dir.path().string() + " " + kTinyRun +
                            " --eval-every 0 --threads 2 --steps 2";
  // The default resolves on this CPU: bf16 where its products take the AVX512_BF16 kernel, with
  // the reason in the banner; the checkpoint records what it resolved to, never "auto".
  const NativeBf16 products = native_bf16(Device::cpu());
  const std::string expected = products.native ? "bf16" : "f32";
  const RunResult native = run(train + " --save " + dir.file("auto.safetensors"));
  INFO(native.output);
  REQUIRE(native.status == 0);
  CHECK_THAT(native.output, Contains("precision " + expected + " (auto on cpu: " + products.why));
  CHECK_THAT(native.output, Contains("| precision " + expected + " |"));
  const SafetensorsFile saved = load_safetensors(dir.file("auto.safetensors"));
  CHECK_THAT(saved.metadata.at("train"), Contains("\"precision\":\"" + expected + "\""));

  // KILN_GEMM=widen sends bf16 products through float32, which auto never picks bf16 for: f32 on
  // every CPU, naming why.
  const RunResult widened = run("KILN_GEMM=widen " + train);
  INFO(widened.output);
  REQUIRE(widened.status == 0);
  CHECK_THAT(widened.output,
             Contains("precision f32 (auto on cpu: bf16 widened to float32 (KILN_GEMM=widen))"));

  // A resumed run keeps the checkpoint's precision (no auto line), even where auto would differ.
  const RunResult resumed =
      run("KILN_GEMM=widen " + train + " --steps 4 --resume " + dir.file("auto.safetensors"));
  INFO(resumed.output);
  REQUIRE(resumed.status == 0);
  CHECK(resumed.output.find("auto on cpu") == std::string::npos);
  CHECK_THAT(resumed.output, Contains("| precision " + expected + " |"));
}
