#include "distributed/watchdog.h"

#include <sched.h>

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"

namespace kiln::dist {

namespace {

// How long a roll call waits for answers: ranks that wait in a collective answer within
// milliseconds, so a few seconds tell a hung rank from a busy one.
constexpr double kRollCallSeconds = 5.0;

std::string rank_list(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i)
    out += (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") + std::to_string(ranks[i]);
  return out;
}

}  // namespace

const char* activity_name(Activity activity) {
  switch (activity) {
    case Activity::allreduce:
      return "allreduce";
    case Activity::broadcast:
      return "broadcast";
    case Activity::allgather:
      return "allgather";
    case Activity::barrier:
      return "barrier";
    case Activity::setup:
      return "setup";
    case Activity::shutdown:
      return "shutdown";
  }
  return "?";
}

Watchdog::Watchdog(std::string who, int rank, int world_size, double timeout_s,
                   ControlChannel& control, std::function<void()> on_failure)
    : who_(std::move(who)),
      rank_(rank),
      world_size_(world_size),
      timeout_s_(timeout_s),
      control_(control),
      on_failure_(std::move(on_failure)),
      left_(static_cast<std::size_t>(world_size)),
      closed_(static_cast<std::size_t>(world_size), false),
      gave_up_(static_cast<std::size_t>(world_size)),
      answers_(static_cast<std::size_t>(world_size)) {}

void Watchdog::begin(Activity activity) {
  KILN_CHECK(!failed_, "{}: {}: the communicator failed earlier ({})", who_,
             activity_name(activity), failure_);
  activity_ = activity;
  deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(timeout_s_));
}

std::string Watchdog::current() const {
  return fmt::format("{} (collective #{})", activity_name(activity_), seq_ + 1);
}

void Watchdog::pause(Clock::time_point since) {
  // Yield for the first second: MPI moves data only inside MPI_Test, so a transfer streams only
  // while the waiting rank keeps polling, and yielding leaves the core to a rank that computes.
  // After that (a peer is busy: validation, a checkpoint) sleep, longer and longer up to 2 ms.
  const double waited = std::chrono::duration<double>(Clock::now() - since).count();
  if (waited < 1.0) {
    sched_yield();
  } else {
    const double sleep = std::min(2e-3, 1e-4 * waited);
    std::this_thread::sleep_for(std::chrono::duration<double>(sleep));
  }
}

void Watchdog::wait(const std::function<bool()>& done) {
  const Clock::time_point start = Clock::now();
  while (!done()) {
    drain();
    if (Clock::now() > deadline_) roll_call();
    pause(start);
  }
}

void Watchdog::drain() {
  while (const std::optional<ControlEvent> event = control_.poll()) handle(*event);
}

std::string Watchdog::gave_up(int peer) const {
  const std::uint64_t culprit = *gave_up_[static_cast<std::size_t>(peer)];
  if (culprit == ControlMessage::kNobody)
    return fmt::format("rank {} gave up on it (see rank {}'s message)", peer, peer);
  if (culprit == static_cast<std::uint64_t>(peer))
    return fmt::format("rank {} failed (see rank {}'s message)", peer, peer);
  if (culprit == static_cast<std::uint64_t>(rank_))
    return fmt::format("rank {} stopped because of this rank", peer);
  return fmt::format("rank {} stopped because of rank {}", peer, culprit);
}

void Watchdog::handle(const ControlEvent& event) {
  const int p = event.peer;
  const auto peer = static_cast<std::size_t>(p);
  const bool ending = activity_ == Activity::shutdown;
  // During a roll call every event is only recorded; roll_call() reports them together.
  if (event.closed) {
    closed_[peer] = true;
    // A peer closes after leaving; before that, or before it took part in this collective, its
    // process ended or died.
    if (collecting_ || (left_[peer] && (ending || *left_[peer] > seq_))) return;
    fail(fmt::format("{}: the connection to rank {} closed: its process ended or died", current(),
                     p),
         p);
  }
  const ControlMessage& m = event.message;
  switch (m.kind) {
    case ControlMessage::Kind::leaving:
      left_[peer] = m.seq;
      // A peer that completed this collective before leaving has sent its part already.
      if (!collecting_ && !ending && m.seq <= seq_)
        fail(
            fmt::format("{}: rank {} left the job after {} collectives (its program ended) without "
                        "joining this one",
                        current(), p, m.seq),
            p);
      return;
    case ControlMessage::Kind::roll_call:
      control_.send(p, {ControlMessage::Kind::answer, activity_, seq_});
      return;
    case ControlMessage::Kind::answer:
      if (collecting_) answers_[peer] = m;
      return;
    case ControlMessage::Kind::failed:
      gave_up_[peer] = m.seq;
      if (!collecting_)
        fail(fmt::format("{}: {}", current(), gave_up(p)),
             m.seq == ControlMessage::kNobody ? -1 : static_cast<int>(m.seq));
      return;
  }
}

void Watchdog::roll_call() {
  collecting_ = true;
  std::fill(answers_.begin(), answers_.end(), std::nullopt);
  const auto gone = [&](int p) {
    const auto i = static_cast<std::size_t>(p);
    return left_[i] || closed_[i] || gave_up_[i];
  };
  for (int p = 0; p < world_size_; ++p)
    if (p != rank_ && !gone(p))
      control_.send(p, {ControlMessage::Kind::roll_call, activity_, seq_});
  const double window = std::min(timeout_s_, kRollCallSeconds);
  const Clock::time_point start = Clock::now();
  const auto all_answered = [&] {
    for (int p = 0; p < world_size_; ++p)
      if (p != rank_ && !gone(p) && !answers_[static_cast<std::size_t>(p)]) return false;
    return true;
  };
  while (!all_answered() && std::chrono::duration<double>(Clock::now() - start).count() < window) {
    drain();
    pause(start);
  }
  collecting_ = false;

  // What each peer is doing, the silent ones first; the first one at fault is blamed.
  std::vector<int> silent, late;
  std::vector<std::string> elsewhere;
  int culprit = -1;
  const auto same_collective = [](const ControlMessage& a, const ControlMessage& b) {
    return a.seq == b.seq && a.activity == b.activity;
  };
  const ControlMessage here{ControlMessage::Kind::answer, activity_, seq_};
  // How many ranks (this one included) answered that they wait where `m` says.
  const auto waiting_in = [&](const ControlMessage& m) {
    int count = same_collective(m, here) ? 1 : 0;
    for (const std::optional<ControlMessage>& a : answers_)
      if (a && same_collective(*a, m)) ++count;
    return count;
  };
  const int with_this_rank = waiting_in(here);
  bool out_of_step = false;
  for (int p = 0; p < world_size_; ++p) {
    const auto i = static_cast<std::size_t>(p);
    const std::optional<ControlMessage>& a = answers_[i];
    if (p == rank_ || (a && same_collective(*a, here))) continue;
    if (a && a->seq < seq_) {
      // Still completing a collective this rank has completed: it runs behind (an overloaded
      // machine, a short timeout), the same program as this one.
      late.push_back(p);
      elsewhere.push_back(fmt::format(
          "rank {} is still completing {} (collective #{}), which this rank has completed: it "
          "runs late, not another program",
          p, activity_name(a->activity), a->seq + 1));
    } else if (a) {
      elsewhere.push_back(fmt::format("rank {} waits in {} (collective #{}) instead", p,
                                      activity_name(a->activity), a->seq + 1));
      // More ranks wait in the peer's collective than in this one: this rank diverged.
      out_of_step = out_of_step || waiting_in(*a) > with_this_rank;
    } else if (left_[i]) {
      elsewhere.push_back(fmt::format("rank {} left the job after {} collectives", p, *left_[i]));
    } else if (gave_up_[i]) {
      elsewhere.push_back(gave_up(p));
    } else if (closed_[i]) {
      elsewhere.push_back(
          fmt::format("rank {}'s connection closed (its process ended or died)", p));
    } else {
      silent.push_back(p);
      continue;
    }
    if (culprit < 0) culprit = p;
  }
  std::string why;
  if (!silent.empty()) {
    culprit = silent.front();
    why = fmt::format(
        "{} did not join it and did not answer a roll call within {:g} s (hung, or its process "
        "died)",
        rank_list(silent), window);
  }
  for (const std::string& e : elsewhere) why += (why.empty() ? "" : "; ") + e;
  if (silent.empty() && out_of_step) {
    culprit = rank_;
    why += ": this rank is the one out of step";
  }
  if (!late.empty() && late.size() + 1 == static_cast<std::size_t>(world_size_))
    why +=
        fmt::format(" (raise KILN_DIST_TIMEOUT, now {:g} s, if ranks are this slow)", timeout_s_);
  if (why.empty())
    why = fmt::format(
        "every rank is in it, so the transfer is slow or the network stalls: raise "
        "KILN_DIST_TIMEOUT (now {:g} s)",
        timeout_s_);
  fail(fmt::format("{} did not complete within {:g} s: {}", current(), timeout_s_, why), culprit);
}

void Watchdog::leave() {
  begin(Activity::shutdown);
  for (int p = 0; p < world_size_; ++p)
    if (p != rank_) control_.send(p, {ControlMessage::Kind::leaving, Activity::shutdown, seq_});
  const Clock::time_point start = Clock::now();
  const auto everyone_left = [&] {
    for (int p = 0; p < world_size_; ++p)
      if (p != rank_ && !left_[static_cast<std::size_t>(p)]) return false;
    return true;
  };
  while (!everyone_left()) {
    drain();
    if (Clock::now() > deadline_) roll_call();
    pause(start);
  }
  for (int p = 0; p < world_size_; ++p) {
    const std::optional<std::uint64_t>& done = left_[static_cast<std::size_t>(p)];
    if (p != rank_ && *done != seq_)
      fail(fmt::format(
               "shutdown: rank {} ended after {} collectives and this rank after {}: the ranks did "
               "not run the same collectives",
               p, *done, seq_),
           p);
  }
}

void Watchdog::notify_failure(int culprit) {
  const std::uint64_t blamed =
      culprit < 0 ? ControlMessage::kNobody : static_cast<std::uint64_t>(culprit);
  for (int p = 0; p < world_size_; ++p) {
    if (p == rank_ || closed_[static_cast<std::size_t>(p)]) continue;
    try {
      control_.send(p, {ControlMessage::Kind::failed, activity_, blamed});
    } catch (const Error&) {
      // The peer is unreachable; it will hear of the failure from the launcher or its timeout.
    }
  }
}

void Watchdog::mark_failed() {
  if (failed_) return;
  failed_ = true;
  failure_ = "this rank's program ended with an error";
  notify_failure(rank_);
  if (on_failure_) on_failure_();
}

void Watchdog::fail(const std::string& message, int culprit) {
  const std::string full = fmt::format("{}: {}", who_, message);
  if (!failed_) {
    failed_ = true;
    failure_ = message;
    notify_failure(culprit);
    if (on_failure_) on_failure_();
  }
  throw Error(full);
}

}  // namespace kiln::dist
