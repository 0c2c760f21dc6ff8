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
// out): the communication a training step of that model adds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "core/kiln.h"
#include "dist/communicator.h"
#include "dist/gradient_sync.h"
#include "nn/transformer_lm.h"

using namespace kiln;

namespace {

using Clock = std::chrono::steady_clock;

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
  std::nth_element(times.begin(), times.begin() + iterations / 2, times.end());
  return times[static_cast<std::size_t>(iterations / 2)];
}

nn::TransformerConfig model_named(const std::string& name) {
  nn::TransformerConfig c;
  c.vocab = 33278;
  if (name == "large-cpu") c.d_model = 512, c.heads = 8, c.layers = 4, c.ff = 2048;
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_dp: allreduce bandwidth and gradient-sync time per world size"};
  std::vector<std::int64_t> sizes{4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
  int iterations = 10, threads = 1;
  std::string backend = "auto", device = "cpu";
  app.add_option("--bytes", sizes, "message sizes in bytes (float32)");
  app.add_option("--iterations", iterations, "timed calls per size")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "CPU threads per rank")->check(CLI::PositiveNumber);
  app.add_option("--backend", backend, "auto, single, mpi or nccl");
  app.add_option("--device", device, "cpu or cuda (nccl uses cuda:<local rank>)");
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
    return 0;
  } catch (const Error& e) {
    fmt::print(stderr, "bench_dp: error: {}\n", e.what());
    return 1;
  }
}
