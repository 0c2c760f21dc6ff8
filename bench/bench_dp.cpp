// bench_dp: the communication of data-parallel training. Run under a launcher, one process per
// rank, e.g.
//
//   mpirun -np 2 --bind-to none build/bench/bench_dp
//
// For each message size it times the allreduce of float32 in rank order (SumOrder::rank: what
// training uses, bit for bit equal to --grad-accum) and in the library's order (MPI_Allreduce),
// and prints the time (the slowest rank's, median over the iterations), the algorithm bandwidth
// (bytes / time) and the bus bandwidth (× 2 (N - 1) / N, the bytes each rank's links carry in
// a bandwidth-optimal allreduce, as nccl-tests report it). Then it times GradientSync over the
// parameters of the default model and of large-cpu (every bucket copied in, reduced, copied
// out): the communication a training step of that model adds. Last, the training step itself
// (--step-model, default: the default model, B 32 × T 64): --global-windows windows per step,
// world size ÷ that many per rank, each rank's forward and backward, GradientSync, clipping
// and AdamW, as lm::Trainer runs them. Compare world sizes with the same global batch and cores:
//
//   build/bench/bench_dp --threads 2 --global-windows 2                   # 1 process × 2 threads
//   mpirun -np 2 --bind-to none build/bench/bench_dp --threads 1 --global-windows 2
//
// It prints the step time (median of the slowest rank's), tokens/s, and the share of the step
// spent in GradientSync once every rank has finished its backward pass (a barrier first): the
// most that overlapping the sum with the backward pass could save.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "core/kiln.h"
#include "distributed/communicator.h"
#include "distributed/gradient_sync.h"
#include "nn/transformer_lm.h"
#include "optim/adam.h"
#include "optim/clip.h"

using namespace kiln;

namespace {

using Clock = std::chrono::steady_clock;

// The middle value (the upper one of an even count).
double median(std::vector<double> values) {
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

// The median over `iterations` of the slowest rank's time for f(), after one warm-up call.
template <typename F>
double median_seconds(dist::Communicator& comm, int iterations, F&& f) {
  f();
  std::vector<double> times;
  for (int i = 0; i < iterations; ++i) {
    comm.barrier();
    const Clock::time_point start = Clock::now();
    f();
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    comm.allreduce(std::span<double>(&seconds, 1), dist::ReduceOp::max);
    times.push_back(seconds);
  }
  return median(std::move(times));
}

nn::TransformerConfig model_named(const std::string& name) {
  nn::TransformerConfig c;
  c.vocab = 33278;
  if (name == "large-cpu") c.d_model = 512, c.heads = 8, c.layers = 4, c.ff = 2048;
  return c;
}

// Random token windows (B, T + 1): the data does not change the step's cost.
Tensor random_windows(std::int64_t count, std::int64_t B, std::int64_t T, std::int64_t vocab,
                      Device device) {
  std::vector<std::int64_t> ids(static_cast<std::size_t>(count * B * (T + 1)));
  std::uint64_t state = 42;
  for (std::int64_t& id : ids) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    id = static_cast<std::int64_t>((state >> 33) % static_cast<std::uint64_t>(vocab));
  }
  return from_vector(ids, {count, B, T + 1}, device);
}

struct StepTimes {
  double step = 0, sync = 0;  // seconds: the median step, and the median sync within it
};

// `steps` training steps (after one warm-up step) of `windows` windows on this rank.
StepTimes time_steps(dist::Communicator& comm, const std::string& name, std::int64_t windows,
                     std::int64_t global_windows, std::int64_t B, std::int64_t T, int steps) {
  manual_seed(1);
  nn::TransformerLM model(model_named(name));
  model.to(comm.device());
  model.train();
  AdamW optimizer(model.named_parameters(), {.lr = 1e-3, .weight_decay = 0.01});
  dist::GradientSync sync(comm, optimizer.parameters());
  const Tensor data = random_windows(windows, B, T, model.config().vocab, comm.device());
  const double scale = 1.0 / static_cast<double>(global_windows);
  std::vector<double> step_times, sync_times;
  for (int i = 0; i <= steps; ++i) {
    comm.barrier();
    const Clock::time_point start = Clock::now();
    optimizer.zero_grad();
    for (std::int64_t w = 0; w < windows; ++w) {
      const Tensor window = data.select(0, w);
      const Tensor inputs = window.narrow(1, 0, T).contiguous();
      const Tensor targets = window.narrow(1, 1, T).contiguous();
      (model.loss(inputs, targets) * scale).backward();
    }
    // The sum alone, not the wait for a slower rank's backward (the barrier takes that).
    comm.barrier();
    const Clock::time_point synced_from = Clock::now();
    sync.allreduce();
    const Clock::time_point synced = Clock::now();
    optimizer.step(clip_scale(grad_norm(optimizer.parameters()), 1.0));
    std::array<double, 2> seconds = {std::chrono::duration<double>(Clock::now() - start).count(),
                                     std::chrono::duration<double>(synced - synced_from).count()};
    comm.allreduce(std::span<double>(seconds), dist::ReduceOp::max);
    if (i == 0) continue;  // warm-up: first-touch allocations, the optimizer's state
    step_times.push_back(seconds[0]);
    sync_times.push_back(seconds[1]);
  }
  return {.step = median(step_times), .sync = median(sync_times)};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_dp: allreduce bandwidth and gradient-sync time per world size"};
  std::vector<std::int64_t> sizes{4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
  int iterations = 10, threads = 1;
  std::string backend = "auto", device = "cpu", step_model = "default";
  std::int64_t global_windows = 2, batch_size = 32, seq_len = 64;
  int steps = 5;
  app.add_option("--bytes", sizes, "message sizes in bytes (float32)");
  app.add_option("--iterations", iterations, "timed calls per size")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "CPU threads per rank")->check(CLI::PositiveNumber);
  app.add_option("--backend", backend, "auto, single, mpi or nccl");
  app.add_option("--device", device, "cpu or cuda (nccl uses cuda:<local rank>)");
  app.add_option("--step-model", step_model,
                 "the model of the step timing: default, large-cpu "
                 "or none");
  app.add_option("--global-windows", global_windows, "windows per training step, all ranks")
      ->check(CLI::PositiveNumber);
  app.add_option("--batch-size", batch_size, "B of a window")->check(CLI::PositiveNumber);
  app.add_option("--seq-len", seq_len, "T of a window")->check(CLI::PositiveNumber);
  app.add_option("--steps", steps, "timed training steps")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  try {
    set_num_threads(threads);
    const auto comm =
        dist::make_communicator({.backend = backend, .device = Device::parse(device)});
    const int world = comm->world_size();
    const double bus = world > 1 ? 2.0 * (world - 1) / world : 1.0;
    const auto print = [&](std::string_view line) {
      if (comm->rank() == 0) fmt::print("{}\n", line);
    };
    print(fmt::format("bench_dp: {} backend, {} ranks x {} threads, tensors on {}", comm->backend(),
                      world, threads, comm->device()));
    print(fmt::format("{:>10} {:>8} {:>10} {:>12} {:>12}", "bytes", "order", "time ms",
                      "algbw GB/s", "busbw GB/s"));
    for (const std::int64_t bytes : sizes) {
      const Tensor t = ones({bytes / 4}, {.device = comm->device()});
      for (const auto order : {dist::SumOrder::rank, dist::SumOrder::library}) {
        const double s = median_seconds(*comm, iterations,
                                        [&] { comm->allreduce(t, dist::ReduceOp::sum, order); });
        print(fmt::format("{:>10} {:>8} {:>10.3f} {:>12.2f} {:>12.2f}", bytes,
                          order == dist::SumOrder::rank ? "rank" : "library", s * 1e3,
                          static_cast<double>(bytes) / s / 1e9,
                          static_cast<double>(bytes) / s / 1e9 * bus));
      }
    }
    for (const std::string name : {"default", "large-cpu"}) {
      manual_seed(1);
      nn::TransformerLM model(model_named(name));
      model.to(comm->device());
      std::vector<Tensor> params;
      for (const auto& [path, p] : model.named_parameters()) {
        p.set_grad(ones_like(p));
        params.push_back(p);
      }
      dist::GradientSync sync(*comm, params);
      const double s = median_seconds(*comm, iterations, [&] { sync.allreduce(); });
      print(fmt::format(
          "GradientSync {}: {} parameters ({:.1f} MB float32) in {} buckets: {:.2f} ms", name,
          model.num_parameters(), static_cast<double>(model.num_parameters()) * 4 / 1e6,
          sync.num_buckets(), s * 1e3));
    }
    if (step_model == "none") return 0;
    KILN_CHECK(step_model == "default" || step_model == "large-cpu",
               "--step-model: '{}' is not default, large-cpu or none", step_model);
    KILN_CHECK(global_windows % world == 0,
               "--global-windows {} does not divide by the {} ranks: every rank takes the same "
               "number of windows",
               global_windows, world);
    const StepTimes t = time_steps(*comm, step_model, global_windows / world, global_windows,
                                   batch_size, seq_len, steps);
    const double tokens = static_cast<double>(global_windows * batch_size * seq_len);
    print(
        fmt::format("training step, {} model, {} windows of B {} x T {} over {} ranks x {} "
                    "threads: {:.1f} ms, {:.0f} tokens/s, GradientSync {:.1f} ms ({:.1f}% of the "
                    "step)",
                    step_model, global_windows, batch_size, seq_len, world, threads, t.step * 1e3,
                    tokens / t.step, t.sync * 1e3, 100.0 * t.sync / t.step));
    return 0;
  } catch (const Error& e) {
    fmt::print(stderr, "bench_dp: error: {}\n", e.what());
    return 1;
  }
}
