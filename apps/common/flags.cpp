#include "apps/common/flags.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <system_error>
#include <type_traits>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "core/error.h"
#include "core/threads.h"

namespace kiln {

namespace {

bool in_range(double value, const FlagRange& r) {
  const bool above = r.min_open ? value > r.min : value >= r.min;
  const bool below = r.max_open ? value < r.max : value <= r.max;
  return above && below;
}

// The value as the user typed it: an empty one as '', so that the message shows it.
std::string shown(std::string_view text) {
  return text.empty() ? std::string("''") : std::string(text);
}

[[noreturn]] void refuse(std::string_view flag, std::string_view value, std::string_view source,
                         const FlagRange& range, bool integer) {
  fail("{} {}{}: expected {}", flag, shown(value),
       source.empty() ? std::string() : fmt::format(" (from {})", source),
       describe_range(range, integer));
}

// Parses all of text as T (decimal; a leading '+' is allowed), or nothing.
template <typename T>
std::optional<T> parse_all(std::string_view text) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty() || text.front() == '+') return std::nullopt;
  T value{};
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || stop != end) return std::nullopt;
  return value;
}

template <typename T>
T parse_integer(std::string_view flag, std::string_view text, const FlagRange& range) {
  const std::optional<T> value = parse_all<T>(text);
  if (!value || !in_range(static_cast<double>(*value), range)) refuse(flag, text, {}, range, true);
  return *value;
}

}  // namespace

FlagRange thread_flag_range(const char* zero) {
  return {.min = 0, .max = kMaxThreads, .zero = zero};
}

std::string describe_range(const FlagRange& r, bool integer) {
  const char* kind = integer ? "an integer" : "a number";
  std::string rule;
  if (std::isinf(r.max)) {
    rule = fmt::format("{} {} {}", kind, r.min_open ? ">" : ">=", r.min);
  } else {
    rule = fmt::format("{} in {}{}, {}{}", kind, r.min_open ? "(" : "[", r.min, r.max,
                       r.max_open ? ")" : "]");
  }
  if (r.zero != nullptr && in_range(0.0, r)) rule += fmt::format(" (0: {})", r.zero);
  return rule;
}

std::int64_t parse_int_flag(std::string_view flag, std::string_view text, const FlagRange& range) {
  return parse_integer<std::int64_t>(flag, text, range);
}

std::uint64_t parse_uint_flag(std::string_view flag, std::string_view text,
                              const FlagRange& range) {
  return parse_integer<std::uint64_t>(flag, text, range);
}

int parse_small_int_flag(std::string_view flag, std::string_view text, const FlagRange& range) {
  const std::int64_t value = parse_int_flag(flag, text, range);
  if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max())
    refuse(flag, text, {}, range, true);
  return static_cast<int>(value);
}

double parse_real_flag(std::string_view flag, std::string_view text, const FlagRange& range) {
  // from_chars reads "inf" and "nan" too, and reports 1e400 as out of range.
  const std::optional<double> value = parse_all<double>(text);
  if (!value || !std::isfinite(*value) || !in_range(*value, range))
    refuse(flag, text, {}, range, false);
  return *value;
}

void check_flag_value(std::string_view flag, double value, bool integer, const FlagRange& range,
                      std::string_view source) {
  if (std::isfinite(value) && in_range(value, range)) return;
  refuse(flag, fmt::format("{}", value), source, range, integer);
}

CLI::Option* add_path_flag(CLI::App& app, const std::string& flag, std::string& target,
                           const std::string& help) {
  CLI::Option* option = app.add_option_function<std::string>(
      flag,
      [flag, &target](const std::string& text) {
        if (text.empty())
          throw CLI::ValidationError(
              fmt::format("{} '': expected a path; leave the flag out for none", flag));
        target = text;
      },
      help);
  option->type_name("PATH");
  if (!target.empty()) option->default_str(target);
  return option;
}

template <typename T>
CLI::Option* add_number_flag(CLI::App& app, const std::string& flag, T& target,
                             const std::string& help, const FlagRange& range) {
  CLI::Option* option = app.add_option_function<std::string>(
      flag,
      [flag, &target, range](const std::string& text) {
        try {
          if constexpr (std::is_same_v<T, double>) {
            target = parse_real_flag(flag, text, range);
          } else if constexpr (std::is_same_v<T, std::uint64_t>) {
            target = parse_uint_flag(flag, text, range);
          } else if constexpr (std::is_same_v<T, int>) {
            target = parse_small_int_flag(flag, text, range);
          } else {
            target = parse_int_flag(flag, text, range);
          }
        } catch (const Error& e) {
          throw CLI::ValidationError(e.what());  // CLI11's usage error: message and status
        }
      },
      fmt::format("{}: {}", help, describe_range(range, !std::is_same_v<T, double>)));
  option->type_name(std::is_same_v<T, double> ? "FLOAT" : "INT");
  option->default_str(fmt::format("{}", target));
  return option;
}

template CLI::Option* add_number_flag(CLI::App&, const std::string&, std::int64_t&,
                                      const std::string&, const FlagRange&);
template CLI::Option* add_number_flag(CLI::App&, const std::string&, std::uint64_t&,
                                      const std::string&, const FlagRange&);
template CLI::Option* add_number_flag(CLI::App&, const std::string&, int&, const std::string&,
                                      const FlagRange&);
template CLI::Option* add_number_flag(CLI::App&, const std::string&, double&, const std::string&,
                                      const FlagRange&);

}  // namespace kiln
