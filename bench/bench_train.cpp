// bench_train: tokens/s of complete training steps (forward, backward, gradient clipping, Adam)
// for the default model, large-cpu, gpt2-small and tiny (a smoke test), on random token ids drawn
// with word frequencies (Zipf's law; the full softmax's speed does not depend on them, the adaptive
// softmax's does: --adaptive-softmax 2000,10000), on the CPU or a CUDA device (--device cuda). A
// step is the trainer's: the loss, the norm and the clip stay on the device (step_guard_), so on a
// GPU the host waits only at the end of each timed window, when it reads the loss; tokens/s is then
// the device's rate. On CUDA it also prints the peak device memory of tensors and the MFU (llm.c's
// 6·N + 6·L·T·d FLOPs per token over the GPU's dense bf16 peak: bench/mfu.h). Prints the median
// over several windows after a warm-up, the model arithmetic rate, the peak resident memory, the
// peak bytes of live tensors and the bytes the forward keeps alive for the backward (activations,
// the LM head's P', autocast's weight copies), and with --profile the share of the step per op
// family. --precision bf16 runs the forward under kiln::Autocast (bf16 products and activations,
// docs/mixed-precision.md); with --profile it ends with RESULT gemm <path> gflops <rate>, the
// step's GEMMs by path: f32, bf16-native (the VDPBF16PS kernel) or bf16-widen (KILN_GEMM=widen, or
// a CPU without AVX512_BF16).
// On CUDA, --profile prints the device's time per family instead, from CUDA events recorded at
// each switch of family and read once at the end (the host clock only says when kernels were
// queued); the events cost a record per switch, so take tokens/s from a run without it.
//
//   build/bench/bench_train --config default --threads 2 --profile
//   build/bench/bench_train --config default --precision bf16
//   OMP_WAIT_POLICY=passive build/bench/bench_train --cpu-time   # on a machine shared with others
//   build/bench/bench_train --device cuda --config gpt2-small --precision bf16
//   build/bench/bench_train --device cuda --config gpt2-small --precision bf16 --profile
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "bench/mfu.h"
#include "core/backend.h"
#include "core/cpu/blas_library.h"
#include "core/kiln.h"
#include "core/ops/optimizer_update.h"
#include "core/profiler.h"
#include "nn/transformer_lm.h"
#include "optim/adam.h"
#include "optim/clip.h"

using namespace kiln;

namespace {

using Clock = std::chrono::steady_clock;

struct BenchConfig {
  nn::TransformerConfig model;
  std::int64_t batch, seq_len;
};

BenchConfig config_named(const std::string& name) {
  BenchConfig c;
  c.model.vocab = 33278;
  c.model.dropout = 0.1;
  if (name == "default") {  // bench/torch_ref.py's defaults
    c.model.d_model = 256, c.model.heads = 4, c.model.layers = 2, c.model.ff = 1024;
    c.batch = 32, c.seq_len = 64;
  } else if (name == "large-cpu") {
    c.model.d_model = 512, c.model.heads = 8, c.model.layers = 4, c.model.ff = 2048;
    c.batch = 16, c.seq_len = 128;
  } else if (name == "gpt2-small") {  // GPT-2's 124M model, as llm.c trains it
    c.model.vocab = 50257;
    c.model.d_model = 768, c.model.heads = 12, c.model.layers = 12, c.model.ff = 3072;
    c.model.norm = nn::NormPlacement::pre, c.model.activation = nn::Activation::gelu;
    // Sinusoidal positions: kiln has no learned table (GPT-2 has one of 1024 x 768, 0.6% of N).
    c.batch = 8, c.seq_len = 1024;
  } else if (name == "tiny") {  // seconds on the CUDA emulator: a check that everything runs
    c.model.vocab = 97;
    c.model.d_model = 32, c.model.heads = 2, c.model.layers = 2, c.model.ff = 64;
    c.model.norm = nn::NormPlacement::pre, c.model.activation = nn::Activation::gelu;
    c.batch = 2, c.seq_len = 16;
  } else {
    fail("--config: '{}' is not default, large-cpu, gpt2-small or tiny", name);
  }
  c.model.max_seq_len = std::max<std::int64_t>(512, c.seq_len);
  return c;
}

// The share of tokens of each rank: Zipf's law, p(r) proportional to 1 / (r + 1), as word
// frequencies follow it (over 33,278 ranks the 2,000 most frequent take 74% of the tokens and the
// 10,000 most frequent 89%; WikiText-2's training text: 77% and 93%).
std::vector<double> zipf_shares(std::int64_t vocab) {
  std::vector<double> p(static_cast<std::size_t>(vocab));
  double total = 0;
  for (std::int64_t r = 0; r < vocab; ++r) total += p[r] = 1.0 / static_cast<double>(r + 1);
  for (double& x : p) x /= total;
  return p;
}

// The LM head's forward multiply-adds per token: d V for the full softmax; for the adaptive
// softmax d (c_0 + n) for the head plus, for a token of cluster i (its share of tokens under
// `shares`), d_i (d + s_i) (core/ops/adaptive_softmax.h).
double head_macs_per_token(const nn::TransformerConfig& m, const std::vector<double>& shares) {
  const double d = static_cast<double>(m.d_model);
  if (!m.adaptive()) return d * static_cast<double>(m.vocab);
  const std::vector<std::int64_t>& cut = m.adaptive_cutoffs;
  double macs = d * static_cast<double>(cut[0] + static_cast<std::int64_t>(cut.size()));
  for (std::size_t i = 0; i < cut.size(); ++i) {
    const std::int64_t end = i + 1 < cut.size() ? cut[i + 1] : m.vocab;
    double share = 0;
    for (std::int64_t r = cut[i]; r < end; ++r) share += shares[r];
    macs +=
        share * static_cast<double>(m.adaptive_width(i)) * (d + static_cast<double>(end - cut[i]));
  }
  return macs;
}

// Forward multiply-adds per token x 2, as PyTorch computes them (full T x T attention);
// a training step costs three times the forward.
double train_flops_per_token(const BenchConfig& c, const std::vector<double>& shares) {
  const auto& m = c.model;
  const double d = static_cast<double>(m.d_model), dh = static_cast<double>(m.d_head());
  const double qkv = 2 * d * (m.heads + 2 * m.kv()) * dh, out = 2 * d * d;
  const double ffn = 4 * d * m.ff, attention = 4 * static_cast<double>(c.seq_len) * d;
  const double head = 2 * head_macs_per_token(m, shares);
  return 3 * (m.layers * (qkv + out + ffn + attention) + head);
}

// The process's CPU seconds (every thread's).
double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_train: tokens/s of complete training steps"};
  std::string config_name = "default", precision_name = "f32";
  int threads = 2, warmup = 3, windows = 5, steps_per_window = 4;
  bool profile_steps = false;
  app.add_option("--config", config_name, "default or large-cpu")->capture_default_str();
  app.add_option("--threads", threads, "CPU threads")->capture_default_str();
  app.add_option("--warmup", warmup, "steps before timing")->capture_default_str();
  app.add_option("--windows", windows, "timed windows (the median is reported)")
      ->capture_default_str();
  app.add_option("--steps", steps_per_window, "steps per window")->capture_default_str();
  app.add_flag("--profile", profile_steps, "print the share of the step per op family");
  bool cpu_time = false;
  app.add_flag("--cpu-time", cpu_time,
               "time the windows by the process's CPU time per thread, not the wall clock (a "
               "machine shared with other work; set OMP_WAIT_POLICY=passive, and note that "
               "BLIS's threads spin whatever it says)");
  app.add_option("--precision", precision_name, "f32 or bf16 (the matrix products)")
      ->capture_default_str();
  std::string device_name = "cpu";
  app.add_option("--device", device_name, "cpu or cuda (cuda:N)")->capture_default_str();
  std::int64_t batch_override = 0;
  app.add_option("--batch", batch_override, "batch size (0: the config's)")->capture_default_str();
  std::string cutoffs = "none", ids_kind = "zipf";
  double adaptive_div = 4.0;
  app.add_option("--adaptive-softmax", cutoffs, "adaptive softmax cutoffs, e.g. 2000,10000")
      ->capture_default_str();
  app.add_option("--adaptive-div", adaptive_div, "adaptive softmax: cluster width divisor")
      ->capture_default_str();
  bool adaptive_input = false;
  app.add_flag("--adaptive-input", adaptive_input, "adaptive input sharing the clusters");
  app.add_option("--ids", ids_kind,
                 "token ids: zipf (word frequencies, rank = id) or uniform over the vocabulary")
      ->check(CLI::IsMember({"zipf", "uniform"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    set_num_threads(threads);
    const Precision precision = parse_precision(precision_name);
    BenchConfig c = config_named(config_name);
    if (batch_override > 0) c.batch = batch_override;
    c.model.adaptive_cutoffs = nn::parse_cutoffs(cutoffs);
    c.model.adaptive_div = adaptive_div;
    if (adaptive_input) c.model.input = nn::InputKind::adaptive;
    const Device device = Device::parse(device_name);
    KILN_CHECK(!(cpu_time && device.is_cuda()),
               "--cpu-time is for the CPU; leave it out with "
               "--device cuda");
    std::printf("%s\n", environment_summary().c_str());
    manual_seed(1);
    nn::TransformerLM model(c.model);
    model.to(device);
    model.train();
    Adam optimizer(model.named_parameters(), {.lr = 1e-3});
    const Tensor ledger = step_ledger(device);
    // Ids are ranks (the order stays the identity): id r has Zipf's share of the tokens.
    const std::vector<double> shares =
        ids_kind == "zipf" ? zipf_shares(c.model.vocab)
                           : std::vector<double>(c.model.vocab, 1.0 / c.model.vocab);
    const double flops = train_flops_per_token(c, shares);
    const double llmc_flops = bench::llmc_flops_per_token(model.num_parameters(), c.model.layers,
                                                          c.seq_len, c.model.d_model);
    std::string gpu_name;
    std::optional<double> peak_tflops;
    if (device.is_cuda()) {
      gpu_name = cuda_device_name(device.index);
      peak_tflops = bench::bf16_peak_tflops(gpu_name);
      std::printf(
          "device %s: %s | dense bf16 peak %s\n", device.str().c_str(), gpu_name.c_str(),
          peak_tflops ? fmt::format("{:.0f} TFLOP/s", *peak_tflops).c_str() : "unknown (MFU n/a)");
    }
    std::printf(
        "config %s: d_model %lld heads %lld layers %lld ff %lld T %lld B %lld | head %s | ids "
        "%s | %lld parameters | %.1f MFLOP per token (head %.2f M multiply-adds)\n",
        config_name.c_str(), static_cast<long long>(c.model.d_model),
        static_cast<long long>(c.model.heads), static_cast<long long>(c.model.layers),
        static_cast<long long>(c.model.ff), static_cast<long long>(c.seq_len),
        static_cast<long long>(c.batch),
        c.model.adaptive()
            ? fmt::format("adaptive {} div {} input {}", nn::cutoffs_text(c.model.adaptive_cutoffs),
                          c.model.adaptive_div, nn::name_of(c.model.input))
                  .c_str()
            : "full softmax",
        ids_kind.c_str(), static_cast<long long>(model.num_parameters()), flops * 1e-6,
        head_macs_per_token(c.model, shares) * 1e-6);

    Generator data(2);
    std::vector<double> cumulative(shares.size());
    std::partial_sum(shares.begin(), shares.end(), cumulative.begin());
    auto random_ids = [&] {
      const std::vector<float> u = rand({c.batch, c.seq_len}, {}, &data).to_vector<float>();
      std::vector<std::int64_t> ids(u.size());
      for (std::size_t i = 0; i < u.size(); ++i) {
        const auto at = std::lower_bound(cumulative.begin(), cumulative.end(), u[i]);
        ids[i] = std::min<std::int64_t>(at - cumulative.begin(), c.model.vocab - 1);
      }
      return from_vector(ids, {c.batch, c.seq_len}, device);
    };
    double last_loss = 0.0;
    std::size_t saved_bytes = 0;  // live tensor bytes the forward adds: what backward reads
    Backend& backend = backend_for(device);
    Tensor loss;
    // As lm::Trainer's step: the norm, the clip and the non-finite rule on the device.
    auto step = [&] {
      const Tensor inputs = random_ids(), targets = random_ids();
      optimizer.zero_grad();
      const std::size_t before = backend.bytes_in_use();
      {
        const Autocast mixed(precision);
        loss = model.loss(inputs, targets);
      }
      saved_bytes = backend.bytes_in_use() - before;
      loss.backward();
      step_guard_(ledger, loss.detach().view({1}),
                  grad_sums_of_squares(optimizer.parameters(), device),
                  {.clip = 1.0, .stop_on_nonfinite = false});
      optimizer.step(ledger);
    };
    // The host waits here only: the loss read ends the window (on a GPU, once its kernels ran).
    auto read_loss = [&] { last_loss = loss.item<double>(); };

    for (int i = 0; i < warmup; ++i) step();
    if (warmup > 0) read_loss();
    profile::enable(profile_steps);
    // On a GPU the host clock says when kernels were queued; CUDA events time the device.
    if (profile_steps) profile::time_device(backend.device_clock());
    std::vector<double> rates;
    double timed_seconds = 0.0;
    const auto now = [&] {
      return cpu_time ? process_cpu_seconds() / threads
                      : std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
    };
    for (int w = 0; w < windows; ++w) {
      const double start = now();
      const auto wall_start = Clock::now();
      for (int i = 0; i < steps_per_window; ++i) step();
      read_loss();
      const double s = now() - start;
      // The profile's times are the wall clock's: its shares are of the wall-clock window.
      timed_seconds += std::chrono::duration<double>(Clock::now() - wall_start).count();
      rates.push_back(static_cast<double>(steps_per_window * c.batch * c.seq_len) / s);
      std::printf("window %d: %.1f tokens/s (loss %.3f)\n", w + 1, rates.back(), last_loss);
    }
    std::sort(rates.begin(), rates.end());
    const double median = rates[rates.size() / 2];
    std::printf(
        "RESULT config %s precision %s threads %d train_tokens_per_sec %.1f ms_per_step %.1f "
        "model_gflops %.1f peak_rss_mb %.0f peak_tensor_mb %.0f saved_for_backward_mb %.0f\n",
        config_name.c_str(), precision_name.c_str(), threads, median,
        1e3 * c.batch * c.seq_len / median, median * flops * 1e-9, peak_rss_mb(),
        static_cast<double>(backend.peak_bytes_in_use()) / (1 << 20),
        static_cast<double>(saved_bytes) / (1 << 20));
    if (device.is_cuda()) {
      // peak_tensor_mb above is the device's: the most bytes of live tensors on the GPU.
      const double achieved_tflops = median * llmc_flops * 1e-12;
      const std::string mfu = peak_tflops
                                  ? fmt::format("{:.1f}%", 100.0 * achieved_tflops / *peak_tflops)
                                  : fmt::format("n/a (no bf16 peak known for '{}')", gpu_name);
      std::printf(
          "RESULT device %s gpu '%s' config %s precision %s tokens_per_sec %.1f ms_per_step %.2f "
          "peak_device_mb %.2f llmc_flops_per_token %.4g achieved_tflops %.2f MFU %s\n",
          device.str().c_str(), gpu_name.c_str(), config_name.c_str(), precision_name.c_str(),
          median, 1e3 * c.batch * c.seq_len / median,
          static_cast<double>(backend.peak_bytes_in_use()) / (1 << 20), llmc_flops, achieved_tflops,
          mfu.c_str());
    }
    const std::optional<profile::DeviceClock::Totals> device_totals =
        profile_steps ? profile::device_totals() : std::nullopt;
    profile::time_device(nullptr);  // its events go back while the CUDA runtime is up
    if (device_totals) {
      // The device's own time per family, between CUDA events recorded at each switch of family
      // (core/profiler.h); on the emulated device the emulator's host clock between records.
      double device_seconds = 0.0;
      for (double s : *device_totals) device_seconds += s;
      const double steps = windows * steps_per_window;
      std::printf("device time per family (CUDA events) over %d steps: %.2f ms/step\n",
                  windows * steps_per_window, 1e3 * device_seconds / steps);
      for (std::size_t f = 0; f < device_totals->size(); ++f) {
        if ((*device_totals)[f] <= 0.0) continue;
        std::printf("  %5.1f%%  %8.3f ms/step  %s\n", 100.0 * (*device_totals)[f] / device_seconds,
                    1e3 * (*device_totals)[f] / steps,
                    std::string(profile::name(static_cast<profile::Family>(f))).c_str());
      }
    } else if (profile_steps) {
      const auto totals = profile::totals();
      std::printf("profile over %d steps (%.2f s):\n", windows * steps_per_window, timed_seconds);
      for (std::size_t f = 0; f < totals.size(); ++f) {
        if (totals[f] <= 0.0) continue;
        std::printf("  %5.1f%%  %7.1f ms/step  %s\n", 100.0 * totals[f] / timed_seconds,
                    1e3 * totals[f] / (windows * steps_per_window),
                    std::string(profile::name(static_cast<profile::Family>(f))).c_str());
      }
      const profile::GemmTotals gemm = profile::gemm_totals();
      const double steps = windows * steps_per_window;
      std::printf(
          "GEMM kernels (in every family above): %.1f ms/step, %.1f%% of the step, "
          "%.1f GFLOP/s over %.0f calls/step; everything else %.1f ms/step (%.1f%%)\n",
          1e3 * gemm.seconds / steps, 100.0 * gemm.seconds / timed_seconds,
          gemm.flops / gemm.seconds * 1e-9, gemm.calls / steps,
          1e3 * (timed_seconds - gemm.seconds) / steps,
          100.0 * (timed_seconds - gemm.seconds) / timed_seconds);
      // The rate of the step's GEMMs by their path: this run's bf16 path (KILN_GEMM=widen or bf16
      // picks the other) or float32.
      std::printf("RESULT gemm %s gflops %.1f ms_per_step %.1f\n",
                  precision == Precision::bf16
                      ? (bf16_gemm() == Bf16Gemm::native ? "bf16-native" : "bf16-widen")
                      : "f32",
                  gemm.flops / gemm.seconds * 1e-9, 1e3 * gemm.seconds / steps);
      std::printf("GEMM shapes (m n k batch, op(A) op(B)), most time first:\n");
      for (const auto& [shape, totals] : profile::gemm_shapes()) {
        if (totals.seconds < 0.01 * gemm.seconds) break;
        std::printf("  %6lld %6lld %6lld %4lld  %s%s  %7.1f ms/step  %5.1f GFLOP/s\n",
                    static_cast<long long>(shape.m), static_cast<long long>(shape.n),
                    static_cast<long long>(shape.k), static_cast<long long>(shape.batch),
                    shape.trans_a ? "T" : "N", shape.trans_b ? "T" : "N",
                    1e3 * totals.seconds / steps, totals.flops / totals.seconds * 1e-9);
      }
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_train: %s\n", e.what());
    return 1;
  }
  return 0;
}
