// The Communicator base: argument checks, staging between devices, segmenting, the host-value
// and text collectives, launch detection and the choice of backend.
#include "distributed/communicator.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/build_info.h"
#include "core/error.h"
#include "core/storage.h"
#include "distributed/backends.h"

namespace kiln::dist {

namespace {

// Elements per call into a backend: MPI counts are ints, and NCCL's staging stays bounded.
constexpr std::int64_t kMaxSegment = std::int64_t{1} << 28;

std::optional<int> int_from_env(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  KILN_CHECK(errno == 0 && *end == '\0' && value >= 0 && value <= INT_MAX,
             "launch: ${} is '{}', not a rank or size (a non-negative integer)", name, text);
  return static_cast<int>(value);
}

Buffer buffer_of(const Tensor& t, const char* op) {
  KILN_CHECK(t.defined(), "{}: the tensor is undefined", op);
  KILN_CHECK(t.is_contiguous(), "{}: the tensor of shape {} must be contiguous (strides {})", op,
             t.shape(), t.strides());
  return {t.raw_data(), t.numel(), t.dtype(), t.device()};
}

void check_writable(const Tensor& t, const char* op) {
  KILN_CHECK(!t.requires_grad() || !grad_mode_enabled(),
             "{}: the tensor of shape {} requires grad; write into it under NoGradGuard", op,
             t.shape());
}

std::size_t bytes_of(const Buffer& b) {
  return static_cast<std::size_t>(b.count) * dtype_size(b.dtype);
}

Buffer piece(const Buffer& b, std::int64_t offset, std::int64_t count) {
  return {static_cast<char*>(b.data) + offset * static_cast<std::int64_t>(dtype_size(b.dtype)),
          count, b.dtype, b.device};
}

// Bytes as int64 words (the collectives' smallest dtype), zero-padded.
std::vector<std::int64_t> words_of(std::string_view bytes, std::size_t words) {
  std::vector<std::int64_t> out(words, 0);
  if (!bytes.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

// The text's `line`th line (0-based), for check_same's message.
std::string_view line_of(std::string_view text, std::size_t line) {
  for (std::size_t i = 0; i < line; ++i) {
    const std::size_t end = text.find('\n');
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
  }
  return text.substr(0, text.find('\n'));
}

}  // namespace

// Memory on the backend's device for a buffer that lives elsewhere: copied in before the
// collective and out after it.
class Communicator::Staged {
 public:
  Staged(const Buffer& user, Device native, bool copy_in) : user_(user) {
    if (user.device == native) {
      buffer_ = user;
      return;
    }
    KILN_CHECK(user.device.is_cpu() || native.is_cpu(),
               "dist: a tensor on {} cannot take part in a collective of a communicator on {}",
               user.device, native);
    storage_ = std::make_unique<Storage>(bytes_of(user), native);
    buffer_ = {storage_->data(), user.count, user.dtype, native};
    if (copy_in) copy(buffer_, user_);
  }
  const Buffer& buffer() const { return buffer_; }
  void copy_out() {
    if (storage_) copy(user_, buffer_);
  }

 private:
  static void copy(const Buffer& to, const Buffer& from) {
    if (from.device.is_cpu())
      backend_for(to.device).copy_from_host(to.data, from.data, bytes_of(to));
    else
      backend_for(from.device).copy_to_host(to.data, from.data, bytes_of(to));
  }
  Buffer user_, buffer_;
  std::unique_ptr<Storage> storage_;
};

Communicator::Communicator(std::string backend, int rank, int world_size, int local_rank,
                           Device device, Device native_device, double timeout_s)
    : backend_(std::move(backend)),
      rank_(rank),
      world_size_(world_size),
      local_rank_(local_rank),
      device_(device),
      native_device_(native_device),
      timeout_s_(timeout_s) {}

std::string Communicator::describe() const {
  return fmt::format("{} rank {} of {}", backend_, rank_, world_size_);
}

void Communicator::check_root(int root, const char* op) const {
  KILN_CHECK(root >= 0 && root < world_size_, "{}: root {} is not a rank of this job (world {})",
             op, root, world_size_);
}

// ---- Raw buffers

void Communicator::allreduce(const Buffer& buffer, ReduceOp op, SumOrder order) {
  KILN_CHECK(buffer.count >= 0 && (buffer.count == 0 || buffer.data != nullptr),
             "allreduce: {} elements at {}", buffer.count, buffer.data);
  KILN_CHECK(!is_storage_only(buffer.dtype), "allreduce: {} is not supported yet", buffer.dtype);
  if (world_size_ == 1) return;
  Staged staged(buffer, native_device_, true);
  for (std::int64_t at = 0; at < buffer.count; at += kMaxSegment)
    allreduce_native(piece(staged.buffer(), at, std::min(kMaxSegment, buffer.count - at)), op,
                     is_floating(buffer.dtype) ? order : SumOrder::library);
  staged.copy_out();
}

void Communicator::broadcast(const Buffer& buffer, int root) {
  KILN_CHECK(buffer.count >= 0 && (buffer.count == 0 || buffer.data != nullptr),
             "broadcast: {} elements at {}", buffer.count, buffer.data);
  check_root(root, "broadcast");
  if (world_size_ == 1) return;
  Staged staged(buffer, native_device_, rank_ == root);
  for (std::int64_t at = 0; at < buffer.count; at += kMaxSegment)
    broadcast_native(piece(staged.buffer(), at, std::min(kMaxSegment, buffer.count - at)), root);
  staged.copy_out();
}

void Communicator::allgather(const Buffer& in, const Buffer& out) {
  KILN_CHECK(in.count >= 0 && (in.count == 0 || (in.data != nullptr && out.data != nullptr)),
             "allgather: {} elements at {}", in.count, in.data);
  KILN_CHECK(out.count == in.count * world_size_ && out.dtype == in.dtype,
             "allgather: the output holds {} {} elements, not world size {} x {} {}", out.count,
             out.dtype, world_size_, in.count, in.dtype);
  KILN_CHECK(in.count <= kMaxSegment,
             "allgather: {} elements per rank is more than the {} a call takes; gather pieces",
             in.count, kMaxSegment);
  if (world_size_ == 1) {
    if (in.count > 0 && in.data != out.data) {
      Staged to(out, in.device, false);
      backend_for(in.device).copy(TensorArg{to.buffer().data, in.dtype, {in.count}, {1}},
                                  TensorArg{in.data, in.dtype, {in.count}, {1}});
      to.copy_out();
    }
    return;
  }
  Staged staged_in(in, native_device_, true);
  Staged staged_out(out, native_device_, false);
  allgather_native(staged_in.buffer(), staged_out.buffer());
  staged_out.copy_out();
}

// ---- Tensors

void Communicator::allreduce(const Tensor& t, ReduceOp op, SumOrder order) {
  const Buffer b = buffer_of(t, "allreduce");
  check_writable(t, "allreduce");
  allreduce(b, op, order);
  t.storage()->bump_version();
}

void Communicator::broadcast(const Tensor& t, int root) {
  const Buffer b = buffer_of(t, "broadcast");
  check_writable(t, "broadcast");
  broadcast(b, root);
  t.storage()->bump_version();
}

Tensor Communicator::allgather(const Tensor& t) {
  const Buffer in = buffer_of(t, "allgather");
  Shape shape = t.shape();
  shape.insert(shape.begin(), world_size_);
  Tensor out = empty(shape, {t.dtype(), t.device()});
  allgather(in, {out.raw_data(), out.numel(), out.dtype(), out.device()});
  return out;
}

// ---- Host values

void Communicator::allreduce(std::span<float> values, ReduceOp op, SumOrder order) {
  allreduce(Buffer{values.data(), static_cast<std::int64_t>(values.size()), DType::f32}, op, order);
}

void Communicator::allreduce(std::span<double> values, ReduceOp op, SumOrder order) {
  allreduce(Buffer{values.data(), static_cast<std::int64_t>(values.size()), DType::f64}, op, order);
}

void Communicator::allreduce(std::span<std::int64_t> values, ReduceOp op) {
  allreduce(Buffer{values.data(), static_cast<std::int64_t>(values.size()), DType::i64}, op,
            SumOrder::library);
}

void Communicator::broadcast(std::span<std::byte> bytes, int root) {
  std::vector<std::int64_t> words =
      words_of({reinterpret_cast<const char*>(bytes.data()), bytes.size()}, (bytes.size() + 7) / 8);
  broadcast(Buffer{words.data(), static_cast<std::int64_t>(words.size()), DType::i64}, root);
  if (!bytes.empty()) std::memcpy(bytes.data(), words.data(), bytes.size());
}

std::vector<std::string> Communicator::allgather(std::string_view text) {
  std::int64_t length = static_cast<std::int64_t>(text.size());
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(world_size_));
  allgather(Buffer{&length, 1, DType::i64}, Buffer{lengths.data(), world_size_, DType::i64});
  const std::int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  const auto words = static_cast<std::size_t>((longest + 7) / 8);
  std::vector<std::int64_t> mine = words_of(text, words);
  std::vector<std::int64_t> all(words * static_cast<std::size_t>(world_size_));
  allgather(Buffer{mine.data(), static_cast<std::int64_t>(words), DType::i64},
            Buffer{all.data(), static_cast<std::int64_t>(all.size()), DType::i64});
  std::vector<std::string> texts;
  for (int r = 0; r < world_size_; ++r)
    texts.emplace_back(reinterpret_cast<const char*>(all.data() + r * words),
                       static_cast<std::size_t>(lengths[static_cast<std::size_t>(r)]));
  return texts;
}

void Communicator::check_same(std::string_view what, std::string_view text,
                              std::string_view remedy) {
  if (world_size_ == 1) return;
  const std::vector<std::string> texts = allgather(text);
  for (int r = 1; r < world_size_; ++r) {
    const std::string& other = texts[static_cast<std::size_t>(r)];
    if (other == texts[0]) continue;
    const auto [a, b] = std::mismatch(texts[0].begin(), texts[0].end(), other.begin(), other.end());
    const auto line = static_cast<std::size_t>(std::count(texts[0].begin(), a, '\n'));
    fail("{}: {} differs between ranks: rank {} has '{}' where rank 0 has '{}' (line {}); {}",
         describe(), what, r, line_of(other, line), line_of(texts[0], line), line + 1, remedy);
  }
}

// ---- Launch and the choice of backend

Launch detect_launch() {
  Launch launch;
  const auto read = [&](Launch::Kind kind, const char* rank, const char* size, const char* local) {
    const std::optional<int> r = int_from_env(rank), n = int_from_env(size);
    if (!r && !n) return false;
    KILN_CHECK(r && n, "launch: ${} is set but ${} is not", r ? rank : size, r ? size : rank);
    KILN_CHECK(*n >= 1 && *r < *n, "launch: ${} = {} is not a rank of ${} = {}", rank, *r, size,
               *n);
    launch = {kind, *r, *n, int_from_env(local).value_or(0)};
    return true;
  };
  if (read(Launch::Kind::mpirun, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
           "OMPI_COMM_WORLD_LOCAL_RANK") ||
      read(Launch::Kind::mpirun, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID") ||
      read(Launch::Kind::torchrun, "RANK", "WORLD_SIZE", "LOCAL_RANK"))
    return launch;
  return launch;
}

double default_timeout_s() {
  const char* text = std::getenv("KILN_DIST_TIMEOUT");
  if (text == nullptr || *text == '\0') return 300.0;
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  // Below 10^9 s (31 years): the deadline is a steady_clock time point, which overflows past
  // about 292 years of nanoseconds.
  KILN_CHECK(*end == '\0' && seconds > 0 && seconds < 1e9,
             "$KILN_DIST_TIMEOUT is '{}': expected a number of seconds above 0 and below 1e9 (31 "
             "years)",
             text);
  return seconds;
}

std::unique_ptr<Communicator> make_communicator(const Options& options) {
  const Launch launch = detect_launch();
  const double timeout = options.timeout_s > 0 ? options.timeout_s : default_timeout_s();
  std::string backend = options.backend;
  if (backend == "auto") {
    if (launch.world_size == 1 && launch.kind != Launch::Kind::mpirun)
      backend = "single";
    else if (options.device.is_cuda())
      backend = "nccl";
    else if (launch.kind == Launch::Kind::mpirun)
      backend = "mpi";
    else
      fail(
          "dist: RANK/WORLD_SIZE (torchrun-style) start the NCCL backend, which needs --device "
          "cuda; for CPU ranks launch with mpirun -np {}",
          launch.world_size);
  }
  std::unique_ptr<Communicator> comm;
  if (backend == "single") {
    KILN_CHECK(launch.world_size == 1,
               "dist: backend 'single' in a job of {} ranks: every rank would train alone; use "
               "mpi or nccl",
               launch.world_size);
    comm = make_single_process(options.device, timeout);
  } else if (backend == "mpi") {
    comm = make_mpi(launch, options.device, timeout);
  } else if (backend == "nccl") {
    comm = make_nccl(launch, timeout);
  } else {
    fail("dist: unknown backend '{}' (expected auto, single, mpi or nccl)", backend);
  }
  // Ranks started from different builds would compute different things.
  const BuildInfo& build = build_info();
  comm->check_same("the kiln build",
                   fmt::format("version {}\ngit {}\nflags {}\ncuda {}", build.version, build.git,
                               build.flags, build.cuda));
  return comm;
}

}  // namespace kiln::dist
