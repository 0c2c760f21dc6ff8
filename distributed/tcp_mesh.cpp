#include "distributed/tcp_mesh.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "distributed/bootstrap.h"

namespace kiln::dist {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::uint32_t kMagic = 0x6b696c6e;  // "kiln"
constexpr std::uint32_t kMaxPayload = 1 << 20;

// What a rank says first on every connection (network byte order).
struct Hello {
  std::uint32_t magic, rank, world_size, port;  // port: the sender's listening port
};
// Where rank r listens (network byte order).
struct Address {
  std::uint32_t ip, port;
};

int milliseconds_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, 1000));
}

// Waits until fd is ready for events; false at the deadline.
bool ready(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, milliseconds_until(deadline));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
    if (Clock::now() >= deadline) return false;
  }
}

bool write_all(int fd, const void* data, std::size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t sent = ::send(fd, p, n, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    p += sent;
    n -= static_cast<std::size_t>(sent);
  }
  return true;
}

// Reads n bytes before the deadline; false when the connection closes or the time is up.
bool read_exact(int fd, void* data, std::size_t n, Clock::time_point deadline) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    if (!ready(fd, POLLIN, deadline)) return false;
    const ssize_t got = ::recv(fd, p, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

void set_blocking(int fd, bool blocking) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, blocking ? flags & ~O_NONBLOCK : flags | O_NONBLOCK);
}

// Connects to address, retrying while nobody listens there yet; -1 at the deadline.
int connect_before(const sockaddr_in& address, Clock::time_point deadline) {
  while (Clock::now() < deadline) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    set_blocking(fd, false);
    const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address);
    bool connected = rc == 0;
    if (rc < 0 && errno == EINPROGRESS &&
        ready(fd, POLLOUT, std::min(deadline, Clock::now() + std::chrono::seconds(1)))) {
      int error = 0;
      socklen_t length = sizeof error;
      connected = ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0;
    }
    if (connected) {
      set_blocking(fd, true);
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return fd;
    }
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

// Accepts one connection; -1 at the deadline.
int accept_before(int listener, Clock::time_point deadline) {
  if (!ready(listener, POLLIN, deadline)) return -1;
  const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd >= 0) {
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return fd;
}

Hello hello(std::uint32_t rank, std::uint32_t world_size, std::uint32_t port) {
  return {htonl(kMagic), htonl(rank), htonl(world_size), htonl(port)};
}

std::string missing_ranks(const std::vector<int>& fds, int self) {
  std::string out;
  for (std::size_t p = 0; p < fds.size(); ++p)
    if (fds[p] < 0 && static_cast<int>(p) != self)
      out += (out.empty() ? "" : ", ") + std::to_string(p);
  return out;
}

}  // namespace

TcpMesh::TcpMesh(int rank, int world_size, const std::string& master_addr, int master_port,
                 const std::string& payload, double timeout_s)
    : rank_(rank),
      world_size_(world_size),
      timeout_s_(timeout_s),
      who_(fmt::format("tcp rank {} of {}", rank, world_size)),
      fd_(static_cast<std::size_t>(world_size), -1) {
  KILN_CHECK(world_size >= 1 && rank >= 0 && rank < world_size,
             "tcp: RANK {} is not a rank of WORLD_SIZE {}", rank, world_size);
  KILN_CHECK(master_port > 0 && master_port < 65536, "tcp: MASTER_PORT {} is not a TCP port",
             master_port);
  KILN_CHECK(payload.size() <= kMaxPayload, "tcp: a payload of {} bytes is too large",
             payload.size());
  try {
    if (rank == 0)
      rendezvous_as_root(master_port, payload);
    else
      rendezvous(master_addr, master_port);
  } catch (...) {
    for (int fd : fd_)
      if (fd >= 0) ::close(fd);
    if (listener_ >= 0) ::close(listener_);
    throw;
  }
  ::close(listener_);
  listener_ = -1;
}

TcpMesh::~TcpMesh() {
  for (int fd : fd_)
    if (fd >= 0) ::close(fd);
}

namespace {

int listen_on(int port, const std::string& who) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  KILN_CHECK(fd >= 0, "{}: setup: socket: {}", who, std::strerror(errno));
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(fd, 128) != 0) {
    const int error = errno;
    ::close(fd);
    fail("{}: setup: cannot listen on TCP port {}: {}{}", who, port, std::strerror(error),
         port != 0 ? " (is another job using MASTER_PORT?)" : "");
  }
  return fd;
}

}  // namespace

void TcpMesh::rendezvous_as_root(int port, const std::string& payload) {
  const Clock::time_point deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                        std::chrono::duration<double>(timeout_s_));
  listener_ = listen_on(port, who_);
  std::vector<Address> table(static_cast<std::size_t>(world_size_), Address{0, 0});
  for (int joined = 1; joined < world_size_; ++joined) {
    const int fd = accept_before(listener_, deadline);
    KILN_CHECK(fd >= 0, "{}: setup: rank(s) {} did not connect to port {} within {:g} s", who_,
               missing_ranks(fd_, rank_), port, timeout_s_);
    Hello h{};
    sockaddr_in peer{};
    socklen_t length = sizeof peer;
    const bool read = read_exact(fd, &h, sizeof h, deadline);
    ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length);
    if (!read || ntohl(h.magic) != kMagic) {
      ::close(fd);
      fail("{}: setup: a connection to port {} from {} is not a kiln rank", who_, port,
           inet_ntoa(peer.sin_addr));
    }
    const auto r = static_cast<int>(ntohl(h.rank));
    const auto n = static_cast<int>(ntohl(h.world_size));
    if (n != world_size_ || r <= 0 || r >= world_size_ || fd_[static_cast<std::size_t>(r)] >= 0) {
      ::close(fd);
      KILN_CHECK(n == world_size_, "{}: setup: rank {} has WORLD_SIZE {} and rank 0 has {}", who_,
                 r, n, world_size_);
      fail("{}: setup: two processes have RANK {} (or it is out of range)", who_, r);
    }
    fd_[static_cast<std::size_t>(r)] = fd;
    table[static_cast<std::size_t>(r)] = {peer.sin_addr.s_addr, h.port};
  }
  payload_ = payload;
  const std::uint32_t size = htonl(static_cast<std::uint32_t>(payload.size()));
  for (int p = 1; p < world_size_; ++p) {
    const int fd = fd_[static_cast<std::size_t>(p)];
    KILN_CHECK(write_all(fd, table.data(), table.size() * sizeof(Address)) &&
                   write_all(fd, &size, sizeof size) &&
                   write_all(fd, payload.data(), payload.size()),
               "{}: setup: rank {} closed its connection", who_, p);
  }
}

void TcpMesh::rendezvous(const std::string& master_addr, int port) {
  const Clock::time_point deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                        std::chrono::duration<double>(timeout_s_));
  listener_ = listen_on(0, who_);
  sockaddr_in mine{};
  socklen_t length = sizeof mine;
  ::getsockname(listener_, reinterpret_cast<sockaddr*>(&mine), &length);

  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(master_addr.c_str(), nullptr, &hints, &found);
  KILN_CHECK(rc == 0 && found != nullptr, "{}: setup: MASTER_ADDR '{}' does not resolve: {}", who_,
             master_addr, ::gai_strerror(rc));
  sockaddr_in root = *reinterpret_cast<const sockaddr_in*>(found->ai_addr);
  ::freeaddrinfo(found);
  root.sin_port = htons(static_cast<std::uint16_t>(port));

  const int fd0 = connect_before(root, deadline);
  KILN_CHECK(fd0 >= 0, "{}: setup: rank 0 did not answer at {}:{} within {:g} s", who_, master_addr,
             port, timeout_s_);
  fd_[0] = fd0;
  const Hello h = hello(static_cast<std::uint32_t>(rank_), static_cast<std::uint32_t>(world_size_),
                        ntohs(mine.sin_port));
  std::vector<Address> table(static_cast<std::size_t>(world_size_));
  std::uint32_t size = 0;
  KILN_CHECK(write_all(fd0, &h, sizeof h) &&
                 read_exact(fd0, table.data(), table.size() * sizeof(Address), deadline) &&
                 read_exact(fd0, &size, sizeof size, deadline) && ntohl(size) <= kMaxPayload,
             "{}: setup: rank 0 did not send the table of ranks within {:g} s (it waits for "
             "other ranks, or it closed the connection)",
             who_, timeout_s_);
  payload_.resize(ntohl(size));
  KILN_CHECK(read_exact(fd0, payload_.data(), payload_.size(), deadline),
             "{}: setup: rank 0 closed the connection", who_);

  // Connect to the ranks below, accept the ranks above.
  for (int p = 1; p < rank_; ++p) {
    const Address& a = table[static_cast<std::size_t>(p)];
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = a.ip;
    address.sin_port = htons(static_cast<std::uint16_t>(ntohl(a.port)));
    const int fd = connect_before(address, deadline);
    KILN_CHECK(fd >= 0, "{}: setup: rank {} did not answer at {}:{} within {:g} s", who_, p,
               inet_ntoa(address.sin_addr), ntohl(a.port), timeout_s_);
    fd_[static_cast<std::size_t>(p)] = fd;
    const Hello mine_hello =
        hello(static_cast<std::uint32_t>(rank_), static_cast<std::uint32_t>(world_size_), 0);
    KILN_CHECK(write_all(fd, &mine_hello, sizeof mine_hello), "{}: setup: rank {} closed", who_, p);
  }
  for (int joined = rank_ + 1; joined < world_size_; ++joined) {
    const int fd = accept_before(listener_, deadline);
    KILN_CHECK(fd >= 0, "{}: setup: rank(s) {} did not connect within {:g} s", who_,
               missing_ranks(fd_, rank_), timeout_s_);
    Hello from{};
    const bool read = read_exact(fd, &from, sizeof from, deadline);
    const auto r = static_cast<int>(ntohl(from.rank));
    if (!read || ntohl(from.magic) != kMagic || r <= rank_ || r >= world_size_ ||
        fd_[static_cast<std::size_t>(r)] >= 0) {
      ::close(fd);
      fail("{}: setup: an unexpected connection (not a kiln rank above {})", who_, rank_);
    }
    fd_[static_cast<std::size_t>(r)] = fd;
  }
}

void TcpMesh::send(int peer, const ControlMessage& message) {
  const int fd = fd_[static_cast<std::size_t>(peer)];
  // A failed write means the peer is gone; poll() reports its closed connection.
  if (fd >= 0) write_all(fd, &message, sizeof message);
}

std::optional<ControlEvent> TcpMesh::poll() {
  std::vector<pollfd> fds;
  std::vector<int> peers;
  for (int p = 0; p < world_size_; ++p) {
    if (fd_[static_cast<std::size_t>(p)] < 0) continue;
    fds.push_back({fd_[static_cast<std::size_t>(p)], POLLIN, 0});
    peers.push_back(p);
  }
  if (fds.empty() || ::poll(fds.data(), fds.size(), 0) <= 0) return std::nullopt;
  for (std::size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    const int p = peers[i];
    ControlEvent event{.peer = p, .closed = false, .message = {}};
    // Messages are 16 bytes written at once; a short read is a connection that closed.
    const ssize_t got = ::recv(fds[i].fd, &event.message, sizeof event.message, MSG_WAITALL);
    if (got == static_cast<ssize_t>(sizeof event.message)) return event;
    ::close(fds[i].fd);
    fd_[static_cast<std::size_t>(p)] = -1;
    event.closed = true;
    return event;
  }
  return std::nullopt;
}

}  // namespace kiln::dist

namespace kiln::dist {

namespace {

// A job of one rank: nobody to meet, no messages.
class Alone final : public Bootstrap, ControlChannel {
 public:
  explicit Alone(std::string payload) : payload_(std::move(payload)) {}
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  ControlChannel& control() override { return *this; }
  const std::string& payload() const override { return payload_; }
  void abort_job() override {}
  void finish() override {}
  void send(int, const ControlMessage&) override {}
  std::optional<ControlEvent> poll() override { return std::nullopt; }

 private:
  std::string payload_;
};

class TcpBootstrap final : public Bootstrap {
 public:
  TcpBootstrap(const Launch& launch, const std::string& addr, int port, const std::string& payload,
               double timeout_s)
      : rank_(launch.rank),
        world_size_(launch.world_size),
        mesh_(launch.rank, launch.world_size, addr, port, payload, timeout_s) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  ControlChannel& control() override { return mesh_; }
  const std::string& payload() const override { return mesh_.payload(); }
  // Closing this rank's connections (when the process ends) tells every peer.
  void abort_job() override {}
  void finish() override {}

 private:
  int rank_, world_size_;
  TcpMesh mesh_;
};

}  // namespace

std::unique_ptr<Bootstrap> tcp_bootstrap(const Launch& launch, double timeout_s,
                                         const std::function<std::string()>& make_payload) {
  if (launch.world_size == 1) return std::make_unique<Alone>(make_payload());
  const char* addr = std::getenv("MASTER_ADDR");
  const char* port = std::getenv("MASTER_PORT");
  KILN_CHECK(addr != nullptr && *addr != '\0' && port != nullptr && *port != '\0',
             "tcp: RANK and WORLD_SIZE are set but MASTER_ADDR or MASTER_PORT is not: set both, "
             "to rank 0's host and a free TCP port");
  char* end = nullptr;
  const long number = std::strtol(port, &end, 10);
  KILN_CHECK(*end == '\0' && number > 0 && number < 65536,
             "tcp: MASTER_PORT '{}' is not a TCP port number", port);
  return std::make_unique<TcpBootstrap>(launch, addr, static_cast<int>(number),
                                        launch.rank == 0 ? make_payload() : std::string(),
                                        timeout_s);
}

}  // namespace kiln::dist
