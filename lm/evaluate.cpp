#include "lm/evaluate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <span>

#include <fmt/format.h>

#include "core/autograd.h"
#include "core/checked.h"
#include "core/ops/factories.h"

namespace kiln::lm {

namespace {

// Targets that cross_entropy leaves out: context a sliding window does not score.
constexpr std::int64_t kNotScored = -100;

// Restores a module's training mode when evaluation ends, however it ends.
class EvalModeGuard {
 public:
  explicit EvalModeGuard(nn::Module& module)
      : module_(module), was_training_(module.is_training()) {
    module_.eval();
  }
  ~EvalModeGuard() { module_.train(was_training_); }
  EvalModeGuard(const EvalModeGuard&) = delete;
  EvalModeGuard& operator=(const EvalModeGuard&) = delete;

 private:
  nn::Module& module_;
  bool was_training_;
};

// The windows of one forward pass: `windows` windows of t rows starting S rows apart from row
// `begin`, each scoring its last n targets per column.
struct Forward {
  std::int64_t begin, windows, t, n;
};

// Window k takes input rows [k·S, end) with end = min(k·S + T, R − 1) and scores the targets
// after the previous window's end. With S = T these are torch_ref.py's get_batch windows.
// Windows are independent (no state crosses them), so consecutive windows of the same shape run
// as one forward of about kRowsPerForward rows: the same sums, in larger, faster GEMMs.
std::vector<Forward> plan_forwards(std::int64_t B, std::int64_t T, std::int64_t S, std::int64_t R) {
  constexpr std::int64_t kRowsPerForward = 2048;
  const std::int64_t group = std::max<std::int64_t>(
      1, kRowsPerForward / checked_mul(B, T, "evaluate: batch size x window length"));
  std::vector<Forward> forwards;
  for (std::int64_t begin = 0, scored_end = 0; scored_end < R - 1; begin += S) {
    const std::int64_t end = std::min(begin + T, R - 1);
    const std::int64_t t = end - begin, n = end - scored_end;
    Forward* last = forwards.empty() ? nullptr : &forwards.back();
    if (last != nullptr && last->windows < group && last->t == t && last->n == n) {
      ++last->windows;
    } else {
      forwards.push_back({.begin = begin, .windows = 1, .t = t, .n = n});
    }
    scored_end = end;
  }
  return forwards;
}

}  // namespace

EvalResult evaluate(nn::LanguageModel& model, const std::vector<std::int64_t>& tokens,
                    const EvalOptions& options) {
  return evaluate(model, TokenView(tokens), options);
}

TextMeasures text_measures(double loss, const SplitTokens& split) {
  const double total = loss * static_cast<double>(split.ids.size());  // nats over the split
  TextMeasures m;
  m.nats_per_token = loss;
  m.ppl_per_token = std::exp(loss);
  m.bits_per_byte = split.text_bytes > 0
                        ? total / std::log(2.0) / static_cast<double>(split.text_bytes)
                        : std::nan("");
  m.ppl_per_word =
      split.words > 0 ? std::exp(total / static_cast<double>(split.words)) : std::nan("");
  return m;
}

EvalResult evaluate(nn::LanguageModel& model, TokenView tokens, const EvalOptions& options) {
  const std::int64_t B = options.batch_size, T = options.seq_len;
  const std::int64_t S = options.stride == 0 ? T : options.stride;
  const std::int64_t N = tokens.size();
  KILN_CHECK(B >= 1, "evaluate: batch size must be positive, got {}", B);
  KILN_CHECK(T >= 1, "evaluate: window length must be positive, got {}", T);
  KILN_CHECK(S >= 1 && S <= T, "evaluate: stride {} must be in [1, {}] (the window length)", S, T);
  KILN_CHECK(N / 2 >= B,  // N >= 2 B, without overflowing 2 B
             "evaluate: {} tokens are too few for batch size {} (each column needs an input and a "
             "target)",
             N, B);
  const std::int64_t R = N / B;  // rows; column b is tokens [b·R, (b+1)·R)
  const Device device = model.device();
  const int rank = options.communicator ? options.communicator->rank() : 0;
  const int ranks = options.communicator ? options.communicator->world_size() : 1;
  const auto start = std::chrono::steady_clock::now();

  EvalModeGuard eval_mode(model);
  NoGradGuard no_grad;
  const Autocast mixed(options.precision);
  const std::vector<Forward> forwards = plan_forwards(B, T, S, R);
  // Each forward's summed loss, computed by the rank it is dealt to (round robin) and 0 on the
  // others, so that the rank-ordered sum over ranks is that value exactly (x + 0 = x).
  std::vector<double> loss_sums(forwards.size(), 0.0);
  EvalResult result;
  std::size_t computed = forwards.size();     // a cancelled evaluation has the first ones
  std::vector<std::int64_t> inputs, targets;  // (windows · B, t) each
  std::vector<std::int64_t> column(static_cast<std::size_t>(T + 1));
  for (std::size_t f = static_cast<std::size_t>(rank); f < forwards.size();
       f += static_cast<std::size_t>(ranks)) {
    // Ranks finish together (the collective below), so only a lone process is cancelled.
    if (ranks == 1 && options.cancelled && options.cancelled()) {
      result.complete = false;
      computed = f;
      break;
    }
    const Forward& forward = forwards[f];
    const std::int64_t rows = forward.windows * B, t = forward.t, n = forward.n;
    inputs.clear();
    targets.clear();
    for (std::int64_t w = 0; w < forward.windows; ++w) {
      const std::int64_t begin = forward.begin + w * S;
      for (std::int64_t b = 0; b < B; ++b) {
        tokens.copy(b * R + begin, t + 1, column.data());  // rows begin..begin+t of column b
        for (std::int64_t j = 0; j < t; ++j) {
          inputs.push_back(column[j]);
          targets.push_back(j >= t - n ? column[j + 1] : kNotScored);
        }
      }
    }
    const Tensor loss = model.loss(from_vector(inputs, {rows, t}, device),
                                   from_vector(targets, {rows, t}, device), kNotScored);
    loss_sums[f] = loss.item<double>() * static_cast<double>(rows * n);  // mean → sum
  }
  if (ranks > 1) options.communicator->allreduce(std::span<double>(loss_sums));
  // Summed in forward order on every rank: the bits of one process, whatever the world size.
  double loss_sum = 0.0;
  for (std::size_t f = 0; f < computed; ++f) {
    loss_sum += loss_sums[f];
    result.tokens += forwards[f].windows * B * forwards[f].n;
  }
  result.loss = result.tokens > 0 ? loss_sum / static_cast<double>(result.tokens) : 0.0;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::string format_ppl(double loss) { return fmt::format("{:.2f}", std::exp(loss)); }

bool has_perplexity(double loss) { return std::isfinite(std::exp(loss)); }

}  // namespace kiln::lm
