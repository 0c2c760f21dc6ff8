// The single-process communicator, launch detection and the choice of backend (no launcher).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <optional>
#include <string>

#include "core/kiln.h"
#include "distributed/communicator.h"

using namespace kiln;
using Catch::Matchers::Contains;

namespace {

// Sets environment variables for one test and restores them after it.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> values) {
    for (const auto& [name, value] : values) {
      const char* old = std::getenv(name);
      saved_.push_back({name, old ? std::optional<std::string>(old) : std::nullopt});
      if (value)
        setenv(name, value, 1);
      else
        unsetenv(name);
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, old] : saved_)
      if (old)
        setenv(name.c_str(), old->c_str(), 1);
      else
        unsetenv(name.c_str());
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// No launcher variables at all.
ScopedEnv alone() {
  return {{"OMPI_COMM_WORLD_RANK", nullptr},
          {"OMPI_COMM_WORLD_SIZE", nullptr},
          {"PMI_RANK", nullptr},
          {"PMI_SIZE", nullptr},
          {"RANK", nullptr},
          {"WORLD_SIZE", nullptr}};
}

}  // namespace

TEST_CASE("dist: a process started alone gets the single-process communicator") {
  const ScopedEnv env = alone();
  const auto comm = dist::make_communicator();
  CHECK(comm->backend() == "single");
  CHECK(comm->rank() == 0);
  CHECK(comm->world_size() == 1);
  CHECK(comm->device() == Device::cpu());
  CHECK(comm->describe() == "single rank 0 of 1");
}

TEST_CASE("dist: single-process collectives leave the values as they are") {
  const ScopedEnv env = alone();
  const auto comm = dist::make_communicator();
  const Tensor t = arange(6, {.dtype = DType::f32}).reshape({2, 3});
  const std::vector<float> before = t.to_vector<float>();
  comm->allreduce(t);
  comm->allreduce(t, dist::ReduceOp::max);
  comm->broadcast(t, 0);
  CHECK(t.to_vector<float>() == before);
  const Tensor all = comm->allgather(t);
  CHECK(all.shape() == Shape{1, 2, 3});
  CHECK(all.to_vector<float>() == before);
  std::vector<double> values{1.5, -2.0};
  comm->allreduce(std::span<double>(values));
  CHECK(values == std::vector<double>{1.5, -2.0});
  CHECK(comm->allgather(std::string_view("text")) == std::vector<std::string>{"text"});
  comm->check_same("config", "anything");
  comm->barrier();
}

TEST_CASE("dist: collectives reject bad arguments, naming the operation") {
  const ScopedEnv env = alone();
  const auto comm = dist::make_communicator();
  const Tensor t = zeros({4, 3});
  CHECK_THROWS_WITH(comm->allreduce(t.transpose(0, 1)),
                    Contains("allreduce") && Contains("contiguous"));
  CHECK_THROWS_WITH(comm->broadcast(t, 1), Contains("broadcast: root 1"));
  CHECK_THROWS_WITH(comm->allreduce(Tensor()), Contains("allreduce: the tensor is undefined"));
  const Tensor w = zeros({3}).requires_grad_();
  CHECK_THROWS_WITH(comm->broadcast(w, 0), Contains("NoGradGuard"));
  NoGradGuard no_grad;
  comm->broadcast(w, 0);
}

TEST_CASE("dist: launch detection reads mpirun's and torchrun's variables") {
  {
    const ScopedEnv env = alone();
    CHECK(dist::detect_launch().kind == dist::Launch::Kind::single);
  }
  {
    ScopedEnv base = alone();
    const ScopedEnv env{{"OMPI_COMM_WORLD_RANK", "2"},
                        {"OMPI_COMM_WORLD_SIZE", "3"},
                        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}};
    const dist::Launch l = dist::detect_launch();
    CHECK(l.kind == dist::Launch::Kind::mpirun);
    CHECK((l.rank == 2 && l.world_size == 3 && l.local_rank == 1));
  }
  {
    ScopedEnv base = alone();
    const ScopedEnv env{{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}};
    const dist::Launch l = dist::detect_launch();
    CHECK(l.kind == dist::Launch::Kind::torchrun);
    CHECK((l.rank == 1 && l.world_size == 4));
  }
}

TEST_CASE("dist: malformed launch variables are errors naming the variable") {
  ScopedEnv base = alone();
  {
    const ScopedEnv env{{"RANK", "one"}, {"WORLD_SIZE", "2"}};
    CHECK_THROWS_WITH(dist::detect_launch(), Contains("$RANK is 'one'"));
  }
  {
    const ScopedEnv env{{"RANK", "2"}, {"WORLD_SIZE", "2"}};
    CHECK_THROWS_WITH(dist::detect_launch(),
                      Contains("$RANK = 2 is not a rank of $WORLD_SIZE = 2"));
  }
  {
    const ScopedEnv env{{"RANK", "0"}, {"WORLD_SIZE", nullptr}};
    CHECK_THROWS_WITH(dist::detect_launch(), Contains("$RANK is set but $WORLD_SIZE is not"));
  }
}

TEST_CASE("dist: the backend choice is explained when it cannot be honoured") {
  ScopedEnv base = alone();
  CHECK_THROWS_WITH(dist::make_communicator({.backend = "gloo"}),
                    Contains("unknown backend 'gloo'"));
  {
    const ScopedEnv env{{"RANK", "0"}, {"WORLD_SIZE", "2"}};
    CHECK_THROWS_WITH(dist::make_communicator(), Contains("mpirun -np 2"));
    CHECK_THROWS_WITH(dist::make_communicator({.backend = "single"}),
                      Contains("backend 'single' in a job of 2 ranks"));
  }
  if (!dist::nccl_built())
    CHECK_THROWS_WITH(dist::make_communicator({.backend = "nccl"}), Contains("-DKILN_CUDA=ON"));
  else if (cuda_device_count() == 0)
    CHECK_THROWS_WITH(dist::make_communicator({.backend = "nccl"}),
                      Contains("nccl: local rank 0 needs GPU cuda:0 but this host has 0"));
  if (!dist::mpi_built())
    CHECK_THROWS_WITH(dist::make_communicator({.backend = "mpi"}), Contains("-DKILN_MPI=ON"));
}

TEST_CASE("dist: the collective timeout comes from KILN_DIST_TIMEOUT, else 300 s") {
  {
    const ScopedEnv env{{"KILN_DIST_TIMEOUT", nullptr}};
    CHECK(dist::default_timeout_s() == 300.0);
  }
  {
    const ScopedEnv env{{"KILN_DIST_TIMEOUT", "2.5"}};
    CHECK(dist::default_timeout_s() == 2.5);
  }
  {
    const ScopedEnv env{{"KILN_DIST_TIMEOUT", "-1"}};
    CHECK_THROWS_WITH(dist::default_timeout_s(), Contains("$KILN_DIST_TIMEOUT is '-1'"));
  }
  // The message states the whole rule: 1e9 is above 0, and was refused as "not above 0".
  for (const char* value : {"1e9", "0", "abc", "nan"}) {
    INFO(value);
    const ScopedEnv env{{"KILN_DIST_TIMEOUT", value}};
    CHECK_THROWS_WITH(dist::default_timeout_s(),
                      Contains(std::string("$KILN_DIST_TIMEOUT is '") + value +
                               "': expected a number of seconds above 0 and below 1e9"));
  }
}
