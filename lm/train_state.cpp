#include "lm/train_state.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/backend.h"
#include "core/build_info.h"
#include "core/threads.h"

namespace kiln::lm {

namespace {

using nlohmann::json;

// Doubles travel as strings in round-trip form ("{}"), which also covers inf (a best loss before
// the first validation) that JSON numbers cannot hold.
std::string double_text(double x) { return fmt::format("{}", x); }

// The JSON of a metadata entry; a text that does not parse is named with the parser's reason
// (a number like 1e400 is not "not a JSON object").
json parse_entry(const std::string& text, const Checkpoint& ckpt, const std::string& key) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail("checkpoint {}: metadata '{}' is not valid JSON ({}): {}", ckpt.path, key, e.what(),
         text.substr(0, 200));
  }
}

// Reads a checkpoint entry; errors name the file and the key.
class Entries {
 public:
  explicit Entries(const Checkpoint& ckpt) : ckpt_(ckpt) {}

  const std::string& text(const std::string& key) const {
    const auto it = ckpt_.metadata.find(key);
    KILN_CHECK(it != ckpt_.metadata.end(),
               "checkpoint {}: metadata has no '{}' (not a training checkpoint?)", ckpt_.path, key);
    return it->second;
  }
  json object(const std::string& key) const {
    json j = parse_entry(text(key), ckpt_, key);
    KILN_CHECK(j.is_object(), "checkpoint {}: metadata '{}' is not a JSON object: {}", ckpt_.path,
               key, text(key).substr(0, 200));
    return j;
  }
  // An integer entry in [lo, hi].
  template <typename T>
  T integer(const std::string& key, T lo = std::numeric_limits<T>::min(),
            T hi = std::numeric_limits<T>::max()) const {
    return field<T>(parse_entry(text(key), ckpt_, key), key, "", lo, hi);
  }
  // Field `name` of an entry's object (the entry itself when name is ""). An integer is read as
  // 64 bits and must lie in [lo, hi]: nlohmann's get<int> would turn 4294967297 into 1.
  template <typename T>
  T field(const json& j, const std::string& key, const char* name,
          T lo = std::numeric_limits<T>::lowest(), T hi = std::numeric_limits<T>::max()) const {
    const json& v = *name ? (j.contains(name) ? j[name] : json()) : j;
    const std::string where = fmt::format("checkpoint {}: metadata '{}'{}{}", ckpt_.path, key,
                                          *name ? " field " : "", name);
    if constexpr (std::is_same_v<T, double>) {
      if (v.is_string()) {
        const std::string& s = v.get_ref<const std::string&>();
        char* end = nullptr;
        const double x = std::strtod(s.c_str(), &end);
        if (!s.empty() && *end == '\0') return x;
      }
    } else if (v.is_number_integer()) {
      // As signed or unsigned 64 bits, whichever holds it, then checked against [lo, hi].
      const auto in_range = [&](auto x) {
        return std::cmp_greater_equal(x, lo) && std::cmp_less_equal(x, hi);
      };
      const bool fits = v.is_number_unsigned() ? in_range(v.get<std::uint64_t>())
                                               : in_range(v.get<std::int64_t>());
      KILN_CHECK(fits, "{} is {}, not an integer in [{}, {}]", where, v.dump(), lo, hi);
      return v.is_number_unsigned() ? static_cast<T>(v.get<std::uint64_t>())
                                    : static_cast<T>(v.get<std::int64_t>());
    }
    fail("{} is missing or malformed", where);
  }

 private:
  const Checkpoint& ckpt_;
};

json curve_json(const std::vector<CurvePoint>& points) {
  json out = json::array();
  for (const CurvePoint& p : points) out.push_back({p.step, p.loss});
  return out;
}

std::vector<CurvePoint> curve_points(const json& j, const Checkpoint& ckpt) {
  KILN_CHECK(j.is_array(), "checkpoint {}: metadata 'history' has malformed curve points",
             ckpt.path);
  std::vector<CurvePoint> points;
  for (const json& p : j) {
    KILN_CHECK(p.is_array() && p.size() == 2 && p[0].is_number_integer() && p[1].is_number(),
               "checkpoint {}: metadata 'history' has a malformed curve point (a {})", ckpt.path,
               p.type_name());
    points.push_back({p[0].get<std::int64_t>(), p[1].get<double>()});
  }
  return points;
}

Metadata provenance(std::int64_t step, int threads, const Metadata& settings) {
  Metadata m = settings;
  m["step"] = std::to_string(step);
  m["threads"] = std::to_string(threads);
  m["gemm"] = cpu_gemm_source();
  m["git"] = build_info().git;
  return m;
}

}  // namespace

void save_training_checkpoint(const std::string& path, const nn::LanguageModel& model,
                              const Tokenizer& tokenizer, const Optimizer& optimizer,
                              const TrainState& s, const Metadata& settings) {
  Metadata m = provenance(s.step, s.threads, settings);
  m["decay_steps"] = std::to_string(s.decay_steps);
  m["world_size"] = std::to_string(s.world_size);
  m["rng"] = (s.dropout_keyed
                  ? json{{"dropout", {{"seed", s.dropout_seed}, {"keyed", true}}}}
                  : json{{"dropout", {{"seed", s.dropout_seed}, {"offset", s.dropout_offset}}}})
                 .dump();
  json position = {{"epoch", s.position.epoch},
                   {"index", s.position.index},
                   {"windows", s.windows},
                   {"shuffle_seed", s.shuffle_seed}};
  for (const auto& [name, value] : {std::pair{"batch_size", s.batch_size},
                                    {"seq_len", s.seq_len},
                                    {"step_windows", s.step_windows}})
    if (value > 0) position[name] = value;  // 0: not known to the writer
  m["data_position"] = position.dump();
  const OptimizerState opt = optimizer.state_dict();
  m["optimizer"] = json{{"name", optimizer.name()}, {"step", opt.step}}.dump();
  m["schedule"] = json{{"lr", double_text(s.schedule.lr)},
                       {"best_loss", double_text(s.schedule.best_loss)},
                       {"bad_evals", s.schedule.bad_evals}}
                      .dump();
  m["history"] = json{{"elapsed_s", double_text(s.elapsed_s)},
                      {"best_step", s.best_step},
                      {"train", curve_json(s.curve.train)},
                      {"valid", curve_json(s.curve.valid)}}
                     .dump();
  write_checkpoint(path, model, tokenizer, opt.tensors, std::move(m));
}

TrainState read_train_state(const Checkpoint& ckpt) {
  const Entries e(ckpt);
  TrainState s;
  constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
  s.step = e.integer<std::int64_t>("step", 0);
  s.decay_steps = e.integer<std::int64_t>("decay_steps", 0);
  s.threads = e.integer<int>("threads", 1, kMaxThreads);
  s.world_size = ckpt.metadata.count("world_size") ? e.integer<int>("world_size", 1) : 1;
  const json rng = e.object("rng");
  KILN_CHECK(rng.contains("dropout"), "checkpoint {}: metadata 'rng' has no 'dropout'", ckpt.path);
  s.dropout_seed = e.field<std::uint64_t>(rng["dropout"], "rng", "seed");
  s.dropout_keyed = !rng["dropout"].contains("offset");
  if (!s.dropout_keyed) s.dropout_offset = e.field<std::uint64_t>(rng["dropout"], "rng", "offset");
  const json position = e.object("data_position");
  s.position.epoch = e.field<std::int64_t>(position, "data_position", "epoch");
  s.position.index = e.field<std::int64_t>(position, "data_position", "index");
  s.windows = e.field<std::int64_t>(position, "data_position", "windows");
  s.shuffle_seed = e.field<std::uint64_t>(position, "data_position", "shuffle_seed");
  // The window layout and the step's windows, recorded since issue 43. Before, the windows per
  // step follow from train_lm's saved --grad-accum and the ranks, where the file has them.
  const auto recorded = [&](const char* name) {
    return position.contains(name)
               ? e.field<std::int64_t>(position, "data_position", name, 1, kInt64Max)
               : 0;
  };
  s.batch_size = recorded("batch_size");
  s.seq_len = recorded("seq_len");
  s.step_windows = recorded("step_windows");
  if (s.step_windows == 0 && ckpt.metadata.count("train")) {
    const json train = json::parse(ckpt.metadata.at("train"), nullptr, false);
    if (train.is_object() && train.contains("grad_accum") &&
        train["grad_accum"].is_number_integer()) {
      const std::int64_t grad_accum =
          e.field<std::int64_t>(train, "train", "grad_accum", 1, kInt64Max);
      KILN_CHECK(grad_accum <= kInt64Max / s.world_size,
                 "checkpoint {}: its --grad-accum {} times its {} ranks overflows int64", ckpt.path,
                 grad_accum, s.world_size);
      s.step_windows = grad_accum * s.world_size;
    }
  }
  const json schedule = e.object("schedule");
  s.schedule.lr = e.field<double>(schedule, "schedule", "lr");
  s.schedule.best_loss = e.field<double>(schedule, "schedule", "best_loss");
  s.schedule.bad_evals = e.field<std::int64_t>(schedule, "schedule", "bad_evals");
  const json history = e.object("history");
  s.elapsed_s = e.field<double>(history, "history", "elapsed_s");
  s.best_step = e.field<std::int64_t>(history, "history", "best_step");
  s.curve.train = curve_points(history.value("train", json()), ckpt);
  s.curve.valid = curve_points(history.value("valid", json()), ckpt);
  // The state drives indexing (the data position picks windows) and arithmetic: every value is
  // checked against what a run can have written.
  KILN_CHECK(s.windows >= 1 && s.position.epoch >= 0 && s.position.epoch <= 0xFFFFFFFF &&
                 s.position.index >= 0 && s.position.index < s.windows,
             "checkpoint {}: data position (epoch {}, window {}) is outside the {} windows of an "
             "epoch (a corrupt or edited checkpoint)",
             ckpt.path, s.position.epoch, s.position.index, s.windows);
  KILN_CHECK(s.best_step >= -1 && s.best_step <= s.step,
             "checkpoint {}: the best step {} is not a step of the run (0 to {}, or -1)", ckpt.path,
             s.best_step, s.step);
  KILN_CHECK(std::isfinite(s.schedule.lr) && s.schedule.lr >= 0 && s.schedule.bad_evals >= 0 &&
                 !std::isnan(s.schedule.best_loss),
             "checkpoint {}: metadata 'schedule' holds lr {}, best_loss {}, bad_evals {}: not a "
             "schedule's state",
             ckpt.path, s.schedule.lr, s.schedule.best_loss, s.schedule.bad_evals);
  KILN_CHECK(std::isfinite(s.elapsed_s) && s.elapsed_s >= 0,
             "checkpoint {}: metadata 'history' has elapsed_s {}", ckpt.path, s.elapsed_s);
  return s;
}

OptimizerState read_optimizer_state(const Checkpoint& ckpt, std::string_view optimizer_name) {
  const Entries e(ckpt);
  const json saved = e.object("optimizer");
  KILN_CHECK(saved.contains("name") && saved["name"].is_string() &&
                 saved["name"].get<std::string>() == optimizer_name,
             "checkpoint {}: its optimizer state is {}'s, but the run's optimizer is {}", ckpt.path,
             saved.contains("name") ? saved["name"].dump() : "nobody", optimizer_name);
  // The optimizer steps at most once per training step (a skipped step does not step it); a
  // count beyond that (2^63 - 1) would overflow Adam's bias correction into a NaN loss.
  const std::int64_t run_step = e.integer<std::int64_t>("step", 0);
  return {e.field<std::int64_t>(saved, "optimizer", "step", 0, run_step), ckpt.optimizer};
}

std::optional<double> saved_valid_loss(const Checkpoint& ckpt) {
  const auto it = ckpt.metadata.find("valid_loss");
  if (it == ckpt.metadata.end()) return std::nullopt;
  char* end = nullptr;
  const double loss = std::strtod(it->second.c_str(), &end);
  KILN_CHECK(!it->second.empty() && *end == '\0' && !std::isnan(loss),
             "checkpoint {}: metadata 'valid_loss' is '{}', not a loss", ckpt.path, it->second);
  return loss;
}

void save_best_weights(const std::string& path, const nn::LanguageModel& model,
                       const Tokenizer& tokenizer, std::int64_t step, double valid_loss,
                       int threads, const Metadata& settings) {
  Metadata m = provenance(step, threads, settings);
  m["valid_loss"] = double_text(valid_loss);
  write_checkpoint(path, model, tokenizer, {}, std::move(m));
}

int checkpoint_threads(const Checkpoint& ckpt) {
  const auto it = ckpt.metadata.find("threads");
  if (it == ckpt.metadata.end()) return 0;
  int threads = 0;
  const std::string& text = it->second;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), threads);
  KILN_CHECK(error == std::errc() && end == text.data() + text.size() && threads >= 1 &&
                 threads <= kMaxThreads,
             "checkpoint {}: metadata 'threads' is '{}', not a thread count in [1, {}] (give "
             "--threads to run with another count)",
             ckpt.path, text, kMaxThreads);
  return threads;
}

}  // namespace kiln::lm
