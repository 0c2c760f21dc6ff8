// Numeric flags: one rule and one message for every number the example programs take on their
// command line (or from a checkpoint's saved settings).
//
//   app.add_option... → add_number_flag(app, "--steps", o.steps, "stop at step N",
//                                       {.min = 0, .zero = "no limit"});
//
// A value is decimal text: an integer flag takes digits with an optional sign ("42", "-1"); a
// real flag also takes a fraction and an exponent ("3e-4", ".5"). It must be finite and inside
// the flag's range. Anything else (an empty value, "abc", "0x10", "1e400", "nan", a number
// outside the range) is refused with one message that names the flag, shows the value and states
// the rule, including what 0 means where 0 is allowed:
//
//   --steps '': expected an integer >= 0 (0: no limit)
//   --beta2 1: expected a number in [0, 1)
//   --threads 100000: expected an integer in [0, 1024] (0: every core)
//
// Huge values that are in range (--steps 10^18) are taken at their word; whatever they size is
// checked where it is sized (core/checked.h, the memory checks of nn/transformer_layout.h).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace kiln {

// The values a numeric flag accepts: [min, max], either end open for real flags, and what 0
// means when it is accepted (shown in the message; nullptr: nothing to say).
struct FlagRange {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_open = false;
  bool max_open = false;
  const char* zero = nullptr;
};

// --threads of every program: 0 (what the program does by default, `zero`) to kMaxThreads
// (core/threads.h), so that no count reaches OpenMP that it cannot run.
FlagRange thread_flag_range(const char* zero);

// "an integer >= 0 (0: no limit)", "a number in [0, 1)": the rule as the messages state it.
std::string describe_range(const FlagRange& range, bool integer);

// The value of `text` for `flag`, or a kiln::Error "<flag> <text>: expected <rule>".
std::int64_t parse_int_flag(std::string_view flag, std::string_view text, const FlagRange& range);
std::uint64_t parse_uint_flag(std::string_view flag, std::string_view text, const FlagRange& range);
int parse_small_int_flag(std::string_view flag, std::string_view text, const FlagRange& range);
double parse_real_flag(std::string_view flag, std::string_view text, const FlagRange& range);

// Checks a value that did not come from the command line (a checkpoint's saved setting): the
// same rule, the message adding "(from <source>)". No source: the message of a flag.
void check_flag_value(std::string_view flag, double value, bool integer, const FlagRange& range,
                      std::string_view source = {});

// Registers `flag`, a flag that names a file or folder, on app: its value goes to `target`. An
// empty value is refused as a usage error ("--save '': expected a path; leave the flag out for
// none"): '' is what an unset shell variable gives, and taking it for the flag left out once
// trained a fresh model over a run given as --resume "$RUN".
CLI::Option* add_path_flag(CLI::App& app, const std::string& flag, std::string& target,
                           const std::string& help);

// Registers `flag` on app, parsed by the rule above into `target` (std::int64_t, std::uint64_t,
// int or double), its current value shown as the default in --help. A refused value ends the
// parse with CLI11's usage-error status and the message above.
template <typename T>
CLI::Option* add_number_flag(CLI::App& app, const std::string& flag, T& target,
                             const std::string& help, const FlagRange& range);

}  // namespace kiln
